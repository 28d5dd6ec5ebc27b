// meshtp bench train — where a training step's time goes, phase by phase, and how close the
// whole step comes to BLAS speed: the real training loop (meshtp train's) on this job's ranks
// for a few warm-up and timed steps, profiled from its trace spans (bench/train_profile.hpp).
//
//   mpirun -np 2 meshtp bench train --model small --mesh 2x1 --steps 10
//   mpirun -np 4 meshtp bench train --model small --plan plan.json
//
// Table: per phase, ms per step (median over timed steps of the max over ranks) and its
// share of the step; then the step, its model GFLOP/s per rank, one rank's BLAS GFLOP/s on
// the model's linear shapes (timed between the steps, every rank at once) and their ratio.
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <nlohmann/json.hpp>

#include "bench/train_profile.hpp"
#include "cli/commands.hpp"
#include "cli/cuda_run.hpp"
#include "cli/device_flags.hpp"
#include "cli/layout_flags.hpp"
#include "core/error.hpp"
#include "core/parse.hpp"
#include "ops/kernels.hpp"
#include "plan/presets.hpp"
#include "train/byte_corpus.hpp"

namespace meshtp::cli {
namespace {

struct BenchTrainArgs {
  ModelFlags shape{"small"};
  LayoutFlags layout;
  DeviceFlags device;
  std::string data = train::kDefaultCorpus;
  std::string precision = "fp32";
  int steps = 10, warmup = 2;
  bool json = false;
};

void run_bench_train(const BenchTrainArgs& a) {
  a.device.check();
  const plan::ModelSpec spec = a.shape.runtime_model(
      ModelFlags::Experts::kAllowed, ModelFlags::Layers::kFamily);
  bench::TrainBenchOptions o;
  train::TrainConfig& c = o.config;
  c.model = {.shape = spec, .layout = a.layout.resolve(world().size(), "the world", &spec)};
  const layout::Plan& plan = c.model.layout;
  c.data = a.data;
  c.precision = parse_precision(a.precision, "--precision");
  o.steps = a.steps;
  o.warmup_steps = a.warmup;
  const RunDevice device = open_run_device(world(), a.device);
  c.model.backend = device.backend;
  const bench::TrainBenchResult r = bench::run_train_bench(*device.group, o);

  std::ostream& os = out();
  if (a.json) {
    nlohmann::json phases;
    for (std::size_t k = 0; k < bench::kPhaseCount; ++k) {
      phases[bench::to_string(static_cast<bench::Phase>(k))] = r.phases[k];
    }
    os << nlohmann::json{{"bench", "train"},
                         {"model", spec.name},
                         {"ranks", r.ranks},
                         {"dp", plan.dp},
                         {"tp", plan.mesh},
                         {"plan", layout::to_json(plan)},
                         {"precision", name(c.precision)},
                         {"device", device.header},
                         {"batch", spec.batch},
                         {"seq", spec.seq},
                         {"steps", r.steps},
                         {"phases_s", phases},
                         {"step_s", r.step_s},
                         {"flops_per_rank", r.flops_per_rank},
                         {"gflops_per_rank", r.gflops_per_rank},
                         {"blas_gflops", r.blas_gflops},
                         {"baseline", device.cuda ? "the backend's GeMM" : "cblas"},
                         {"ratio_to_blas", r.ratio_to_blas},
                         {"kernels", kernels::fast().name},
                         {"losses", r.losses}}
              .dump()
       << '\n';
    return;
  }
  os << fmt::format(
      "training step of '{}' (L={} h={} heads={} b={} s={}) on {} ranks, {}; {} "
      "timed steps after {} warm-up; elementwise kernels '{}'; {}\n",
      spec.name, spec.layers, spec.hidden, spec.heads, spec.batch, spec.seq, r.ranks,
      fmt::streamed(plan), r.steps, o.warmup_steps, kernels::fast().name,
      train::describe_precision(c.precision));
  os << "device " << device.header << '\n';
  os << fmt::format("{:<16} {:>10} {:>7}\n", "phase", "ms/step", "share");
  for (std::size_t k = 0; k < bench::kPhaseCount; ++k) {
    os << fmt::format("{:<16} {:>10.2f} {:>6.1f}%\n", bench::to_string(static_cast<bench::Phase>(k)),
                      r.phases[k] * 1e3, 100.0 * r.phases[k] / r.step_s);
  }
  os << fmt::format("{:<16} {:>10.2f}   (phases: median over steps of the max over ranks each)\n",
                    "step", r.step_s * 1e3);
  os << fmt::format("model {:.2f} GFLOP/s per rank; BLAS on the model's linear shapes {:.2f} "
                    "GFLOP/s per rank (same run); ratio to BLAS {:.3f}\n",
                    r.gflops_per_rank, r.blas_gflops, r.ratio_to_blas);
  os << fmt::format("loss {:.4f} (step 1) → {:.4f} (step {})\n", r.losses.front(), r.losses.back(),
                    r.losses.size());
}

}  // namespace

void add_bench_train_command(CLI::App& app) {
  CLI::App* bench = app.get_subcommand("bench");  // registered by add_bench_command
  auto args = std::make_shared<BenchTrainArgs>();
  CLI::App* c = bench->add_subcommand(
      "train", "Training step per phase (GeMM, attention, elementwise, comm wait, optimizer, "
               "data) and its ratio to BLAS");
  args->shape.add_to(c, ModelFlags::kBatch | ModelFlags::kSeq | ModelFlags::kMoeForceBalance,
                     "Model preset (tiny, small, …) or JSON file");
  args->layout.add_to(c, LayoutFlags::kReplicas | LayoutFlags::kTpAlias |
                                 LayoutFlags::kExperts);
  args->device.add_to(c);
  c->add_option("--data", args->data, "Text file or directory to train on")->capture_default_str();
  c->add_option("--precision", args->precision, "fp32, or bf16 mixed precision (as train)")
      ->capture_default_str();
  c->add_option("--steps", args->steps, "Timed steps")->capture_default_str();
  c->add_option("--warmup", args->warmup, "Untimed warm-up steps")->capture_default_str();
  c->add_flag("--json", args->json, "Print one JSON object");
  c->callback([args] { run_bench_train(*args); });
}

}  // namespace meshtp::cli
