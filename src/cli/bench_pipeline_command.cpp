// meshtp bench pipeline — the pipeline interpreter (train/pipeline_run.hpp) running a schedule
// (layout/pipeline_schedule.hpp) over every rank of the job, each stage's work a fixed GeMM
// load (forward: `layers` GeMMs [rows, h]·[h, h]; backward: twice that), activations of
// rows·h floats sent point to point. Per microbatch count: the measured bubble (1 − busy /
// step, the step ending with its last rank; mean over ranks, median over repeats) beside the
// formula (p−1)/(m+p−1), or (p−1)/(v·m+p−1) interleaved.
//
//   mpirun -np 4 meshtp bench pipeline --schedule 1f1b --microbatches 4,8,16
//
// Oversubscribed ranks share cores: a waiting rank then lends its core to a computing one,
// and the measured bubble means little. Run with one rank per core — or with `--work sleep`:
// each stage's work is then a sleep of --forward-ms (backward twice that), which holds no
// core, so p stages on fewer cores still measure the schedule and the interpreter (waits,
// non-blocking transfers, their order) as p devices would run them:
//
//   mpirun -np 4 meshtp bench pipeline --work sleep --forward-ms 20 --microbatches 4,8,16
//
// (20 ms stages keep the scheduler's wake-up latency, a few ms on a loaded machine, small.)
#include <fmt/format.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/parse.hpp"
#include "core/stats.hpp"
#include "layout/pipeline_schedule.hpp"
#include "tensor/gemm.hpp"
#include "train/pipeline_run.hpp"

namespace meshtp::cli {
namespace {

struct BenchPipelineArgs {
  std::string schedule = "1f1b";
  std::string microbatches = "4,8,16";
  int virtual_stages = 1;
  int rows = 256;
  int hidden = 256;
  int layers = 2;
  int repeats = 3;
  std::string work = "gemm";
  double forward_ms = 20.0;
  bool json = false;
};

void run_bench_pipeline(const BenchPipelineArgs& a) {
  const layout::Schedule kind = layout::parse_schedule(a.schedule);
  MESHTP_CHECK(a.rows > 0 && a.hidden > 0 && a.layers > 0 && a.repeats > 0,
               "--rows={}, --hidden={}, --layers={} and --repeats={} must be positive", a.rows,
               a.hidden, a.layers, a.repeats);
  MESHTP_CHECK(a.work == "gemm" || a.work == "sleep", "--work={} must be gemm or sleep", a.work);
  MESHTP_CHECK(a.forward_ms > 0, "--forward-ms={} must be positive", a.forward_ms);
  const bool sleep = a.work == "sleep";
  const comm::Communicator& group = world();
  const int p = group.size(), v = a.virtual_stages;
  Tensor w({a.hidden, a.hidden}, 0.001f), x({a.rows, a.hidden}, 1.0f), y({a.rows, a.hidden});
  const auto work = [&](int times) {  // times = 1 forward, 2 backward
    if (sleep) {
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(times * a.forward_ms));
      return;
    }
    for (int k = 0; k < times * a.layers; ++k) {
      gemm(x.matrix(), Trans::kNo, w.matrix(), Trans::kNo, y.matrix());
    }
  };
  train::PipelineStages stages{
      .message_floats = static_cast<std::int64_t>(a.rows) * a.hidden,
      .forward = [&](int, int, std::span<const float>, std::span<float>) { work(1); },
      .backward = [&](int, int, std::span<const float>, std::span<float>) { work(2); }};
  std::ostream& os = out();
  if (!a.json) {
    os << fmt::format(
              "pipeline {} on {} ranks, {} virtual stage(s); stage work {}, twice "
              "that backward\n",
              kind, p, v,
              sleep ? fmt::format("a sleep of {} ms forward", a.forward_ms)
                    : fmt::format("{} GeMM(s) {}x{}x{} forward", a.layers, a.rows, a.hidden,
                                  a.hidden))
       << "microbatches   step ms   bubble measured   formula   measured/formula\n";
  }
  for (const int m : parse_positive_ints(a.microbatches, "--microbatches")) {
    const layout::PipelineSchedule schedule = layout::make_schedule(kind, p, m, v);
    std::vector<double> bubbles, seconds;
    for (int r = 0; r < a.repeats + 1; ++r) {  // the first is a warm-up
      const train::PipelineRunStats st = train::run_pipeline(schedule, group, stages);
      // The step ends when its last rank does (the first stage's last backward); a rank that
      // finishes early (the last stage, (p−1) backwards early) idles until then, as the
      // formula counts it: bubble_r = 1 − busy_r / step, the mean over ranks.
      double step = st.seconds;
      group.all_reduce(std::span<double>(&step, 1), comm::ReduceOp::kMax);
      double bubble = 1.0 - st.busy_seconds / step;
      group.all_reduce(std::span<double>(&bubble, 1));
      if (r > 0) {
        bubbles.push_back(bubble / p);
        seconds.push_back(step);
      }
    }
    const double measured = median(bubbles), formula = layout::bubble_fraction(kind, p, m, v);
    if (a.json) {
      os << nlohmann::json{{"schedule", std::string(layout::name(kind))},
                           {"pp", p},
                           {"virtual_stages", v},
                           {"microbatches", m},
                           {"work", a.work},
                           {"step_s", median(seconds)},
                           {"bubble", measured},
                           {"bubble_formula", formula},
                           {"measured_over_formula", formula > 0 ? measured / formula : 0.0}}
                .dump()
         << '\n';
    } else {
      os << fmt::format("{:>12}   {:>7.1f}   {:>15.3f}   {:>7.3f}   {:>16}\n", m,
                        median(seconds) * 1e3, measured, formula,
                        formula > 0 ? fmt::format("{:.2f}", measured / formula) : "-");
    }
  }
}

}  // namespace

void add_bench_pipeline_command(CLI::App& app) {
  CLI::App* bench = app.get_subcommand("bench");  // registered by add_bench_command
  auto args = std::make_shared<BenchPipelineArgs>();
  CLI::App* c = bench->add_subcommand(
      "pipeline", "Pipeline schedule on every rank: measured bubble vs (p−1)/(m+p−1)");
  c->add_option("--schedule", args->schedule, "gpipe, 1f1b or interleaved")->capture_default_str();
  c->add_option("--microbatches", args->microbatches, "Comma-separated microbatch counts")
      ->capture_default_str();
  c->add_option("--virtual-stages", args->virtual_stages, "Model chunks per rank (interleaved)")
      ->capture_default_str();
  c->add_option("--rows", args->rows, "Rows of a microbatch's activation")->capture_default_str();
  c->add_option("--hidden", args->hidden, "Hidden size")->capture_default_str();
  c->add_option("--layers", args->layers, "GeMMs per stage forward")->capture_default_str();
  c->add_option("--repeats", args->repeats, "Timed runs per count (median)")->capture_default_str();
  c->add_option("--work", args->work, "Stage work: gemm (compute) or sleep (holds no core)")
      ->capture_default_str();
  c->add_option("--forward-ms", args->forward_ms, "--work sleep: a stage's forward, ms")
      ->capture_default_str();
  c->add_flag("--json", args->json, "One JSON object per microbatch count");
  c->callback([args] { run_bench_pipeline(*args); });
}

}  // namespace meshtp::cli
