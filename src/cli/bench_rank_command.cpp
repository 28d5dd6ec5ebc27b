// meshtp bench rank — one rank of a big layout on the one device at hand: rank R's share of a
// training step run alone (bench/rank_profile.hpp: no peer, every collective counted and
// skipped), its measured compute time and memory beside the planner's for that rank.
//
//   meshtp bench rank --model small --mesh 8x1 --rank 0 --json
//   meshtp bench rank --model small --dp 2 --pp 2 --microbatches 2 --mesh 2x1 --rank 5
//                     --topology local.json
//   meshtp bench rank --model small --plan plan.json --rank 3
//
// One process: it needs no mpirun whatever the layout's size. --device cuda is refused until
// the tensor-parallel layers run on the CUDA backend (cli/device_flags.hpp).
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <nlohmann/json.hpp>

#include "bench/rank_profile.hpp"
#include "cli/commands.hpp"
#include "cli/cuda_run.hpp"
#include "cli/device_flags.hpp"
#include "cli/layout_flags.hpp"
#include "core/error.hpp"
#include "core/parse.hpp"
#include "core/precision.hpp"
#include "plan/presets.hpp"
#include "tensor/memory.hpp"
#include "train/byte_corpus.hpp"

namespace meshtp::cli {
namespace {

struct BenchRankArgs {
  ModelFlags shape{"small"};
  LayoutFlags layout;
  DeviceFlags device;  // an alone world: --collectives only checked
  std::string data = train::kDefaultCorpus;
  std::string topology;  // prices the compute and the skipped communication
  std::string precision = "fp32";
  int rank = 0;
  int steps = 3, warmup = 1;
  bool json = false;
};

constexpr double kGiB = kBytesPerGiB;

void run_bench_rank(const BenchRankArgs& a) {
  a.device.check();
  plan::ModelSpec spec = a.shape.runtime_model(ModelFlags::Experts::kAllowed);
  // Trained and priced in it (bf16: GeMM operands, and the blocks' saved GeMM inputs, in bf16).
  spec.precision = parse_precision(a.precision, "--precision");
  (void)compute_element(spec.precision);  // throws for fp16, which no device trains in
  // The layout's own size: a plan file's, or the spelled-out layout's on --mesh.
  int ranks = 0;
  if (a.layout.from_file()) {
    ranks = layout::load_plan(a.layout.plan_file).ranks();
  } else {
    MESHTP_CHECK(!a.layout.mesh.empty() && !a.layout.planned() && !a.layout.sweep(),
                 "bench rank needs the layout: --plan FILE or --mesh d1xd2 (with --dp, --pp, "
                 "…){}",
                 a.layout.mesh.empty() ? "" : fmt::format(", not --mesh {}", a.layout.mesh));
    ranks = a.layout.build(mesh_2d("--mesh", a.layout.mesh)).ranks();
  }
  bench::RankBenchOptions o{.model = spec,
                            .layout = a.layout.resolve(ranks, "the layout", &spec),
                            .data = a.data};
  o.rank = a.rank;
  o.steps = a.steps;
  o.warmup_steps = a.warmup;
  if (!a.topology.empty()) o.topology = plan::load_topology(a.topology);
  // One process plays one rank: its device is the host, or this process's GPU.
  const RunDevice device = open_run_device(world(), a.device);
  o.backend = device.backend;
  o.device_memory_bytes =
      device.device_bytes_per_rank >= 0 ? device.device_bytes_per_rank : available_memory_bytes();
  const bench::RankBenchResult r = bench::run_rank_bench(o);
  const layout::Plan& plan = o.layout;

  const double measured_gib = r.measured_memory_bytes / kGiB;
  const double predicted_gib = r.predicted_memory.total_gib();
  std::ostream& os = out();
  if (a.json) {
    nlohmann::json skipped = nlohmann::json::array();
    for (const bench::SkippedCollective& s : r.skipped) {
      skipped.push_back({{"collective", layout::name(s.kind)},
                         {"launches_per_step", s.launches_per_step},
                         {"bytes_per_step", s.bytes_per_step}});
    }
    nlohmann::json predicted{{"memory_gib", predicted_gib},
                             {"memory", plan::to_json(r.predicted_memory)},
                             {"compute_s", nullptr}};
    if (r.priced) {
      const plan::LayoutParts parts = plan::parts(*r.priced);
      predicted["compute_s"] = r.predicted_compute_s;
      predicted["skipped_s"] = {{"tp_comm_s", parts.tp_comm_s}, {"bubble_s", parts.bubble_s},
                                {"p2p_s", parts.p2p_s},         {"dp_s", parts.dp_s}};
      predicted["t_step_s"] = r.priced->t_step_s;
    }
    os << nlohmann::json{{"bench", "rank"},
                         {"model", spec.name},
                         {"plan", layout::to_json(plan)},
                         {"rank", r.rank},
                         {"ranks", r.ranks},
                         {"pipeline_rank", r.pipeline_rank},
                         {"device", a.device.device},
                         {"precision", name(spec.precision)},
                         {"collectives", device.cuda ? "alone, host-staged" : "alone"},
                         {"steps", r.run.steps},
                         {"measured",
                          {{"compute_s", r.measured_compute_s},
                           {"step_s", r.run.step_s},
                           {"memory_gib", measured_gib},
                           {"max_rss_gib", static_cast<double>(r.run.max_rss_bytes) / kGiB}}},
                         {"predicted", predicted},
                         {"memory_ratio", predicted_gib / measured_gib},
                         {"compute_ratio",
                          r.priced ? nlohmann::json(r.predicted_compute_s / r.measured_compute_s)
                                   : nlohmann::json(nullptr)},
                         {"skipped", skipped}}
              .dump()
       << '\n';
    return;
  }
  os << fmt::format(
      "rank {} of {} (pipeline rank {}) of '{}' (L={} h={} heads={} b={} s={}, {}), {}; {} "
      "timed steps after {} warm-up on {}, collectives alone (counted, not moved)\n",
      r.rank, r.ranks, r.pipeline_rank, spec.name, spec.layers, spec.hidden, spec.heads, spec.batch,
      spec.seq, name(spec.precision), fmt::streamed(plan), r.run.steps, a.warmup, a.device.device);
  os << fmt::format("{:<22} {:>12} {:>12} {:>8}\n", "", "measured", "predicted", "ratio");
  os << fmt::format("{:<22} {:>12.4f} {:>12.4f} {:>8.3f}\n", "memory (GiB)", measured_gib,
                    predicted_gib, predicted_gib / measured_gib);
  if (r.priced) {
    os << fmt::format("{:<22} {:>12.2f} {:>12.2f} {:>8.3f}\n", "compute (ms/step)",
                      r.measured_compute_s * 1e3, r.predicted_compute_s * 1e3,
                      r.predicted_compute_s / r.measured_compute_s);
    const plan::LayoutParts parts = plan::parts(*r.priced);
    os << fmt::format(
        "skipped, as {} prices it (ms/step): tensor-parallel comm {:.2f}, bubble {:.2f}, "
        "pipeline transfers {:.2f}, gradient reduction {:.2f}; whole step {:.2f}\n",
        a.topology, parts.tp_comm_s * 1e3, parts.bubble_s * 1e3, parts.p2p_s * 1e3,
        parts.dp_s * 1e3, r.priced->t_step_s * 1e3);
  } else {
    os << fmt::format("{:<22} {:>12.2f} {:>12} {:>8}\n", "compute (ms/step)",
                      r.measured_compute_s * 1e3, "-", "-");
    os << "(--topology FILE prices the compute and the skipped communication)\n";
  }
  for (const bench::SkippedCollective& s : r.skipped) {
    os << fmt::format("skipped {:<15} {:>8.1f} launches {:>12.3f} MB per step\n",
                      layout::name(s.kind), s.launches_per_step, s.bytes_per_step / 1e6);
  }
}

}  // namespace

void add_bench_rank_command(CLI::App& app) {
  CLI::App* bench = app.get_subcommand("bench");  // registered by add_bench_command
  auto args = std::make_shared<BenchRankArgs>();
  CLI::App* c = bench->add_subcommand(
      "rank", "One rank of a layout alone (collectives counted, not moved): measured compute "
              "and memory beside the planner's");
  args->shape.add_to(c, ModelFlags::kBatch | ModelFlags::kSeq | ModelFlags::kMoeForceBalance,
                     "Model preset (tiny, small, …) or JSON file");
  args->layout.add_to(c, LayoutFlags::kReplicas | LayoutFlags::kPipeline |
                                 LayoutFlags::kExperts);
  c->add_option("--rank", args->rank, "Which rank of the layout to run")->capture_default_str();
  args->device.add_to(c);
  c->add_option("--topology", args->topology,
                "Topology preset or file (e.g. calibrate's) that prices the rank's compute and "
                "the skipped communication");
  c->add_option("--data", args->data, "Text file or directory to train on")->capture_default_str();
  c->add_option("--precision", args->precision,
                "fp32, or bf16 mixed precision (as train); the prediction prices the same")
      ->capture_default_str();
  c->add_option("--steps", args->steps, "Timed steps")->capture_default_str();
  c->add_option("--warmup", args->warmup, "Untimed warm-up steps")->capture_default_str();
  c->add_flag("--json", args->json, "Print one JSON object");
  c->callback([args] { run_bench_rank(*args); });
}

}  // namespace meshtp::cli
