// meshtp bench layer — step time of a GPT block stack on each mesh: a table plus JSON lines.
//
//   mpirun -np 4 meshtp bench layer --hidden 1024 --heads 16 --seq 512 --batch 2
//       --layers 1 --mesh all --chunks 1,2
//
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
#include "core/error.hpp"
#include "core/parse.hpp"
#include "train/chrome_trace.hpp"

namespace meshtp::cli {
namespace {

struct BenchLayerArgs {
  std::int64_t hidden = 1024, heads = 16, seq = 512, batch = 2;
  int layers = 1;
  std::string mesh = "all";
  std::string chunks = "1";
  bool sequence_parallel = false;
  int progress_splits = 4;
  double seconds = 2.0;
  bool no_check = false, json = false;
  std::string trace;  // Chrome trace of one extra step (one mesh, one chunk count)
};

std::vector<std::vector<int>> meshes_of(const std::string& text, int world_size) {
  if (text != "all") return {parse_mesh_shape(text)};
  std::vector<std::vector<int>> out;
  for (int d1 = world_size; d1 >= 1; --d1) {
    if (world_size % d1 == 0) out.push_back({d1, world_size / d1});
  }
  return out;
}

void run_bench_layer(const BenchLayerArgs& a) {
  const int N = world().size();
  const auto meshes = meshes_of(a.mesh, N);
  const auto chunk_list = parse_positive_ints(a.chunks, "--chunks");
  MESHTP_CHECK(a.seconds > 0 && a.seconds <= 600, "--seconds={} must be in (0, 600]", a.seconds);
  MESHTP_CHECK(a.trace.empty() || (meshes.size() == 1 && chunk_list.size() == 1),
               "--trace records one case: give one --mesh and one --chunks value");
  std::ostream& os = out();
  if (!a.json) {
    os << fmt::format(
        "GPT block stack: L={} b={} s={} h={} a={} on {} ranks{}; {:.3f} GFLOP per step\n",
        a.layers, a.batch, a.seq, a.hidden, a.heads, N,
        a.sequence_parallel ? ", sequence parallel" : "",
        a.layers * bench::layer_flops(a.batch, a.seq, a.hidden) / 1e9);
    os << fmt::format("{:>6} {:>6} {:>5} {:>9} {:>9} {:>9} {:>9} {:>6} {:>12} {:>10} {:>6} "
                      "{:>9}\n",
                      "mesh", "chunks", "iters", "fwd ms", "bwd ms", "step ms", "wait ms", "wait%",
                      "TFLOP/s/rank", "BLAS GF/s", "ratio", "check");
  }
  for (const auto& shape : meshes) {
    for (const int chunks : chunk_list) {
      bench::LayerBenchOptions o;
      o.config = {.block = {.batch = a.batch,
                            .seq = a.seq,
                            .hidden = a.hidden,
                            .heads = a.heads,
                            .chunks = chunks,
                            .sequence_parallel = a.sequence_parallel,
                            .progress_splits = a.progress_splits},
                  .layers = a.layers};
      o.target_seconds = a.seconds;
      o.check = !a.no_check;
      o.trace = !a.trace.empty();
      const std::string name = format_mesh_shape(shape);
      if (a.mesh == "all") {
        // A sweep lists the meshes this model cannot use instead of stopping at them; the
        // verdict depends on shapes only, so every rank skips alike.
        try {
          model::validate(o.config, shape);
        } catch (const Error& e) {
          if (!a.json) os << fmt::format("{:>6} {:>6}  skipped: {}\n", name, chunks, e.what());
          continue;
        }
      }
      const mesh::DeviceMesh mesh(world(), shape);
      const bench::LayerBenchSample s = bench::run_layer_bench(mesh, o);
      if (o.trace) train::write_chrome_trace(a.trace, world(), s.trace_origin_s);
      if (a.json) {
        os << nlohmann::json{{"bench", "layer"},
                             {"mesh", shape},
                             {"chunks", chunks},
                             {"sequence_parallel", a.sequence_parallel},
                             {"layers", a.layers},
                             {"batch", a.batch},
                             {"seq", a.seq},
                             {"hidden", a.hidden},
                             {"heads", a.heads},
                             {"iterations", s.iterations},
                             {"forward_s", s.forward_s},
                             {"backward_s", s.backward_s},
                             {"step_s", s.step_s},
                             {"comm_wait_s", s.comm_wait_s},
                             {"flops", s.flops},
                             {"tflops_per_rank", s.tflops_per_rank},
                             {"blas_gflops", s.blas_gflops},
                             {"ratio_to_blas", s.ratio_to_blas},
                             {"check_error", s.check_error}}
                  .dump()
           << '\n';
      } else {
        os << fmt::format("{:>6} {:>6} {:>5} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>5.1f}% "
                          "{:>12.4f} {:>10.2f} {:>6.3f} {:>9}\n",
                          name, chunks, s.iterations, s.forward_s * 1e3, s.backward_s * 1e3,
                          s.step_s * 1e3, s.comm_wait_s * 1e3,
                          100.0 * s.comm_wait_s / s.step_s, s.tflops_per_rank, s.blas_gflops,
                          s.ratio_to_blas,
                          s.check_error < 0 ? std::string("-")
                                            : fmt::format("{:.1e}", s.check_error));
      }
      os.flush();
    }
  }
}

}  // namespace

void add_bench_layer_command(CLI::App& app) {
  CLI::App* bench = app.get_subcommand("bench");  // registered by add_bench_command
  auto args = std::make_shared<BenchLayerArgs>();
  CLI::App* c = bench->add_subcommand(
      "layer", "GPT block stack step time per mesh: forward, backward, comm wait, TFLOP/s");
  c->add_option("--hidden", args->hidden, "Hidden size h (default 1024)");
  c->add_option("--heads", args->heads, "Attention heads a (default 16)");
  c->add_option("--seq", args->seq, "Sequence length s (default 512)");
  c->add_option("--batch", args->batch, "Batch b (default 2)");
  c->add_option("--layers", args->layers, "Blocks L (default 1)");
  c->add_option("--mesh", args->mesh, "d1xd2, or all: every mesh of the ranks (default all)");
  c->add_option("--chunks", args->chunks, "Batch chunks c, or a list like 1,2,4 (default 1)");
  c->add_flag("--sequence-parallel", args->sequence_parallel,
              "Sequence parallelism (meshes Nx1 only)");
  c->add_option("--progress-splits", args->progress_splits,
                "GeMM panels between MPI progress pokes (default 4; 1 = no pokes)");
  c->add_option("--seconds", args->seconds, "Target timed seconds per case (default 2)");
  c->add_flag("--no-check", args->no_check, "Skip the comparison with the serial reference");
  c->add_flag("--json", args->json, "Print one JSON object per case");
  c->add_option("--trace", args->trace,
                "Write a Chrome trace (Perfetto) of one extra step to this file");
  c->callback([args] { run_bench_layer(*args); });
}

}  // namespace meshtp::cli
