// meshtp bench layer — step time of a GPT block stack on each mesh: a table plus JSON lines.
//
//   mpirun -np 4 meshtp bench layer --hidden 1024 --heads 16 --seq 512 --batch 2
//       --layers 1 --mesh all --chunks 1,2 [--strategy meshslice --slices 2 …]
//   mpirun -np 4 meshtp bench layer … --plan plan.json
//
// The layout flags (cli/layout_flags.hpp) pick the stack; --plan takes one layout from a
// plan file (its mesh; --mesh and --chunks then conflict).
// Columns: fwd / bwd / step ms = medians over steps of the max over ranks; wait ms = time
// spent waiting on communication per step (max over ranks) and its share of the step;
// TFLOP/s per rank from 72·b·s·h² + 12·b·s²·h FLOPs per layer; BLAS GF/s = one rank's
// cblas_sgemm on the block's linear shapes, timed between the steps on every rank at once, and
// ratio = TFLOP/s per rank over it (bench/blas_reference.hpp); check = the small-stack
// comparison with the serial reference run before timing. `--mesh all` sweeps every (d1, d2)
// with d1·d2 = ranks; a mesh the model does not divide is listed as skipped, with the reason.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "bench/layer.hpp"
#include "cli/commands.hpp"
#include "cli/cuda_run.hpp"
#include "cli/device_flags.hpp"
#include "cli/layout_flags.hpp"
#include "core/error.hpp"
#include "core/parse.hpp"
#include "core/simulation.hpp"
#include "train/chrome_trace.hpp"

namespace meshtp::cli {
namespace {

struct BenchLayerArgs {
  BenchLayerArgs() {  // the defaults: one block of h=1024, a=16, s=512, b=2, on every mesh
    shape.hidden = 1024;
    shape.heads = 16;
    shape.seq = 512;
    shape.batch = 2;
    shape.layers = 1;
    layout.mesh = "all";
  }
  ModelFlags shape;
  std::string chunks = "1";
  LayoutFlags layout;
  const CLI::Option* chunks_option = nullptr;  // excluded by --plan, like the layout flags
  double seconds = 2.0;
  bool no_check = false, json = false;
  std::string trace;  // Chrome trace of one extra step (one mesh, one chunk count)
  DeviceFlags device;
};

// A case to run: a mesh and chunk count, and its layout (or why the model cannot use it).
struct LayerCase {
  std::vector<int> mesh;
  int chunks = 1;
  layout::Plan plan{};
  std::string skipped{};
};

// --plan's layout, or the flags' on each mesh × chunk count. A sweep (--mesh all) lists the
// layouts this model cannot use instead of stopping at them; the verdict depends on shapes
// only, so every rank skips alike.
std::vector<LayerCase> cases_of(const BenchLayerArgs& a, const model::GptConfig& shape) {
  if (a.layout.from_file()) {
    MESHTP_CHECK(a.chunks_option->count() == 0,
                 "--chunks conflicts with --plan {}: the plan names the layout",
                 a.layout.plan_file);
    const layout::Plan plan = a.layout.resolve(world().size());
    return {{.mesh = {plan.mesh[0], plan.mesh[1]}, .chunks = plan.chunks, .plan = plan}};
  }
  std::vector<LayerCase> out;
  for (const auto& [d1, d2] : a.layout.meshes(world().size())) {
    for (const int chunks : parse_positive_ints(a.chunks, "--chunks")) {
      LayerCase c{.mesh = {d1, d2}, .chunks = chunks};
      try {
        LayoutFlags flags = a.layout;
        flags.chunks = chunks;
        c.plan = flags.build({d1, d2});
        model::GptConfig config = shape;
        config.layout = c.plan;
        model::validate(config, c.mesh);
      } catch (const Error& e) {
        if (!a.layout.sweep()) throw;
        c.skipped = e.what();
      }
      out.push_back(c);
    }
  }
  return out;
}

void run_bench_layer(const BenchLayerArgs& a) {
  a.device.check();
  const int N = world().size();
  const model::GptConfig shape_config{.shape = {.batch = a.shape.batch,
                                                .seq = a.shape.seq,
                                                .hidden = a.shape.hidden,
                                                .heads = a.shape.heads,
                                                .layers = a.shape.layers,
                                                .vocab = model::kByteVocab}};
  const std::vector<LayerCase> cases = cases_of(a, shape_config);
  MESHTP_CHECK(a.seconds > 0 && a.seconds <= 600, "--seconds={} must be in (0, 600]", a.seconds);
  MESHTP_CHECK(a.trace.empty() || cases.size() == 1,
               "--trace records one case: give one --mesh and one --chunks value");
  const RunDevice device = open_run_device(world(), a.device);
  std::ostream& os = out();
  if (!a.json) {
    os << "device " << device.header << '\n';
    os << fmt::format(
        "GPT block stack: L={} b={} s={} h={} a={} on {} ranks{}; {:.3f} GFLOP per step\n",
        a.shape.layers, a.shape.batch, a.shape.seq, a.shape.hidden, a.shape.heads, N,
        a.layout.sequence_parallel ? ", sequence parallel" : "",
        static_cast<double>(a.shape.layers) *
            layout::ModelShape{.batch = a.shape.batch,
                               .seq = a.shape.seq,
                               .hidden = a.shape.hidden,
                               .heads = a.shape.heads}
                .layer_flops() /
            1e9);
    os << fmt::format(
        "{:>6} {:>6} {:>5} {:>9} {:>9} {:>9} {:>9} {:>6} {:>12} {:>10} {:>6} "
        "{:>9}\n",
        "mesh", "chunks", "iters", "fwd ms", "bwd ms", "step ms", "wait ms", "wait%",
        "TFLOP/s/rank", "BLAS GF/s", "ratio", "check");
  }
  for (const LayerCase& k : cases) {
    {
      const std::vector<int>& shape = k.mesh;
      const int chunks = k.chunks;
      const layout::Plan& plan = k.plan;
      const std::string name = format_mesh_shape(shape);
      if (!k.skipped.empty()) {
        if (!a.json) os << fmt::format("{:>6} {:>6}  skipped: {}\n", name, chunks, k.skipped);
        continue;
      }
      bench::LayerBenchOptions o;
      o.config = shape_config;
      o.config.layout = plan;
      o.config.backend = device.backend;
      o.target_seconds = a.seconds;
      o.check = !a.no_check;
      o.trace = !a.trace.empty();
      const mesh::DeviceMesh mesh(*device.group, shape);
      const bench::LayerBenchSample s = bench::run_layer_bench(mesh, o);
      if (o.trace) train::write_chrome_trace(a.trace, world(), s.trace_origin_s);
      if (a.json) {
        os << nlohmann::json{{"bench", "layer"},
                             {"mesh", shape},
                             {"chunks", chunks},
                             {"sequence_parallel", plan.sequence_parallel},
                             {"plan", layout::to_json(plan)},
                             {"layers", a.shape.layers},
                             {"batch", a.shape.batch},
                             {"seq", a.shape.seq},
                             {"hidden", a.shape.hidden},
                             {"heads", a.shape.heads},
                             {"iterations", s.iterations},
                             {"forward_s", s.forward_s},
                             {"backward_s", s.backward_s},
                             {"step_s", s.step_s},
                             {"comm_wait_s", s.comm_wait_s},
                             {"flops", s.flops},
                             {"tflops_per_rank", s.tflops_per_rank},
                             {"blas_gflops", s.blas_gflops},
                             {"baseline", device.cuda ? "the backend's GeMM" : "cblas"},
                             {"device", device.header},
                             {"ratio_to_blas", s.ratio_to_blas},
                             {"check_error", s.check_error}}
                  .dump()
           << '\n';
      } else {
        os << fmt::format(
            "{:>6} {:>6} {:>5} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>5.1f}% "
            "{:>12.4f} {:>10.2f} {:>6.3f} {:>9}\n",
            name, chunks, s.iterations, s.forward_s * 1e3, s.backward_s * 1e3, s.step_s * 1e3,
            s.comm_wait_s * 1e3, 100.0 * s.comm_wait_s / s.step_s, s.tflops_per_rank, s.blas_gflops,
            s.ratio_to_blas,
            simhooks::values_meaningless() ? std::string("skipped")
            : s.check_error < 0            ? std::string("-")
                                           : fmt::format("{:.1e}", s.check_error));
      }
      os.flush();
    }
  }
  if (!a.json && simhooks::values_meaningless()) {
    os << "check skipped: simulated devices in charged mode compute nothing (values are "
          "meaningless; run with MESHTP_SIM_MODE=values to check them)\n";
  }
}

}  // namespace

void add_bench_layer_command(CLI::App& app) {
  CLI::App* bench = app.get_subcommand("bench");  // registered by add_bench_command
  auto args = std::make_shared<BenchLayerArgs>();
  CLI::App* c = bench->add_subcommand(
      "layer", "GPT block stack step time per mesh: forward, backward, comm wait, TFLOP/s");
  args->shape.add_to(c, ~0u);
  args->layout.add_to(c, LayoutFlags::kMeshAll | LayoutFlags::kNoChunks);
  args->device.add_to(c);
  args->chunks_option =
      c->add_option("--chunks", args->chunks, "Batch chunks c, or a list like 1,2,4 (default 1)");
  c->add_option("--seconds", args->seconds, "Target timed seconds per case (default 2)");
  c->add_flag("--no-check", args->no_check, "Skip the comparison with the serial reference");
  c->add_flag("--json", args->json, "Print one JSON object per case");
  c->add_option("--trace", args->trace,
                "Write a Chrome trace (Perfetto) of one extra step to this file");
  c->callback([args] { run_bench_layer(*args); });
}

}  // namespace meshtp::cli
