// meshtp bench gemm2d — the 2D GeMM algorithms against 1D TP, ScaLAPACK psgemm and one
// rank's BLAS on the same problem: a table (or JSON lines with --json).
//
//   mpirun -np 4 meshtp bench gemm2d --m 4096 --n 4096 --k 1024 --mesh 2x2 --algo all
//
// Columns: time = median over iterations of the max over ranks; GF/s per rank; MB/rank and
// sync = the cost model's bytes sent and synchronised steps per rank; gemm = local GeMM time
// inside the call; exposed = time − gemm (communication not hidden behind computation);
// vs psgemm and vs 1 rank = speedups (their time / this time; > 1 is faster).
//
// --device cuda: the 2D cases and 1D TP on the CUDA backend through the CUDA plugin
// (cuda_run.hpp), over host-staged or NCCL groups (device_flags.hpp), each checked against the
// host's Collective result and timed up to the backend's synchronize(); no psgemm or 1-rank
// BLAS row, and no gemm ms (the GPU's work is asynchronous).
#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "bench/gemm2d.hpp"
#include "cli/commands.hpp"
#include "cli/cuda_run.hpp"
#include "cli/device_flags.hpp"
#include "cli/layout_flags.hpp"
#include "core/error.hpp"
#include "core/parse.hpp"

namespace meshtp::cli {
namespace {

using layout::Algorithm;

struct BenchGemm2dArgs {
  std::int64_t m = 2048, n = 2048, k = 2048;
  std::string mesh;
  std::string algo = "all";
  std::string dataflow = "os";
  std::string slices = "1,2,4,8";
  std::string progress_splits = "4";
  double seconds = 1.0;
  bool no_scalapack = false, no_1d = false, no_single = false, json = false;
  DeviceFlags device;
};

std::vector<Algorithm> parse_algos(const std::string& text) {
  constexpr auto kAll = layout::all<Algorithm>();
  if (text == "all") return {kAll.begin(), kAll.end()};
  std::vector<Algorithm> algos;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    algos.push_back(layout::parse_algorithm(text.substr(begin, end - begin)));
    begin = end + 1;
  }
  return algos;
}

std::string cell(double v, const char* format, double scale = 1.0) {
  return std::isnan(v) ? std::string("-") : fmt::format(fmt::runtime(format), v * scale);
}

std::string args_chunks(const bench::Gemm2dBenchOptions& o) {
  std::string text;
  for (const int p : o.progress_splits) text += (text.empty() ? "" : ",") + std::to_string(p);
  return text;
}

void print_table(const bench::Gemm2dBenchOptions& o, const std::vector<bench::Gemm2dSample>& xs,
                 const std::vector<std::string>& notes) {
  std::ostream& os = out();
  const char* math = o.dataflow == layout::Dataflow::kOS   ? "C = A·B"
                     : o.dataflow == layout::Dataflow::kLS ? "C = A·Bᵀ"
                                                           : "C = Aᵀ·B";
  os << fmt::format(
      "bench gemm2d: {} {}, m={} n={} k={}, mesh {}x{} ({} ranks), "
      "progress_splits={}; median of the max over ranks\n",
      layout::name(o.dataflow), math, o.shape.m, o.shape.n, o.shape.k, o.nr, o.nc, o.nr * o.nc,
      args_chunks(o));
  for (const auto& note : notes) os << "note: " << note << '\n';
  double t_psgemm = NAN, t_single = NAN;
  for (const auto& x : xs) {
    if (x.kind == bench::Gemm2dCaseKind::kScalapack) t_psgemm = x.median_seconds;
    if (x.kind == bench::Gemm2dCaseKind::kSingleRank) t_single = x.median_seconds;
  }
  os << fmt::format("{:<18} {:>5} {:>9} {:>9} {:>8} {:>5} {:>9} {:>9} {:>9} {:>9} {:>8}\n", "case",
                    "iters", "time ms", "GF/s/rk", "MB/rank", "sync", "gemm ms", "exposed",
                    "vs psgemm", "vs 1 rank", "rel err");
  for (const auto& x : xs) {
    const double exposed = x.median_seconds - x.gemm_seconds;
    const bool single = x.kind == bench::Gemm2dCaseKind::kSingleRank;
    os << fmt::format("{:<18} {:>5} {:>9} {:>9} {:>8} {:>5} {:>9} {:>9} {:>9} {:>9} {:>8}\n",
                      x.name, x.iterations, cell(x.median_seconds, "{:.1f}", 1e3),
                      cell(x.gflops_per_rank, "{:.2f}"), cell(x.bytes_per_rank, "{:.2f}", 1e-6),
                      single || x.kind == bench::Gemm2dCaseKind::kScalapack
                          ? std::string("-")
                          : std::to_string(x.sync_steps),
                      single ? std::string("-") : cell(x.gemm_seconds, "{:.1f}", 1e3),
                      single ? std::string("-") : cell(exposed, "{:.1f}", 1e3),
                      cell(t_psgemm / x.median_seconds, "{:.2f}"),
                      cell(t_single / x.median_seconds, "{:.2f}"), cell(x.error, "{:.1e}"));
  }
}

void print_json(const bench::Gemm2dBenchOptions& o, const std::vector<bench::Gemm2dSample>& xs) {
  const auto num = [](double v) { return std::isnan(v) ? nlohmann::json() : nlohmann::json(v); };
  for (const auto& x : xs) {
    nlohmann::json line{{"bench", "gemm2d"},
                        {"case", x.name},
                        {"m", o.shape.m},
                        {"n", o.shape.n},
                        {"k", o.shape.k},
                        {"mesh", {o.nr, o.nc}},
                        {"dataflow", layout::name(o.dataflow)},
                        {"iterations", x.iterations},
                        {"median_s", x.median_seconds},
                        {"gflops_per_rank", x.gflops_per_rank},
                        {"gemm_s", num(x.gemm_seconds)},
                        {"bytes_per_rank", num(x.bytes_per_rank)},
                        {"sync_steps", x.sync_steps},
                        {"rel_error", num(x.error)}};
    if (x.kind == bench::Gemm2dCaseKind::kAlgorithm || x.kind == bench::Gemm2dCaseKind::kOneD) {
      line["algo"] = layout::name(x.options.algo);
      line["slices"] = x.options.params.slices;
      line["progress_splits"] = x.options.progress_splits;
    }
    out() << line.dump() << '\n';
  }
}

void run_bench_gemm2d(const BenchGemm2dArgs& args) {
  args.device.check();  // before any GPU is opened
  const bool cuda = args.device.device == "cuda";
  const std::array<int, 2> shape = mesh_2d("--mesh", args.mesh);
  MESHTP_CHECK(args.seconds > 0 && args.seconds <= 600, "--seconds={} must be in (0, 600]",
               args.seconds);
  bench::Gemm2dBenchOptions o;
  o.shape = {.m = args.m, .n = args.n, .k = args.k};
  o.nr = shape[0];
  o.nc = shape[1];
  o.dataflow = layout::parse_dataflow(args.dataflow);
  o.algos = parse_algos(args.algo);
  o.slices = parse_positive_ints(args.slices, "--slices");
  o.progress_splits = parse_positive_ints(args.progress_splits, "--progress-splits");
  o.with_scalapack = !args.no_scalapack && !cuda;
  o.with_1d = !args.no_1d;
  o.with_single_rank = !args.no_single && !cuda;
  o.target_seconds = args.seconds;
  MESHTP_CHECK(o.nr * o.nc == world().size(), "mesh {}x{} has {} ranks but the world has {}", o.nr,
               o.nc, o.nr * o.nc, world().size());
  auto notes = bench::plan_gemm2d_bench(o);  // validates every case, on every rank
  std::vector<bench::Gemm2dSample> samples;
  if (cuda) {
    CudaRun run = open_cuda_run(world(), args.device);
    if (!args.json) out() << "device " << run.header << '\n';
    notes.push_back(
        "on cuda: no ScaLAPACK psgemm or 1-rank BLAS row; gemm ms not measured (the GPU's "
        "work is asynchronous); every case checked against the host's collective result");
    samples = bench::run_gemm2d_bench(
        world(), o, bench::Gemm2dBenchDevice{&*run.group, &run.device->backend()});
  } else {
    samples = bench::run_gemm2d_bench(world(), o);
  }
  if (args.json) {
    print_json(o, samples);
  } else {
    print_table(o, samples, notes);
  }
}

}  // namespace

void add_bench_gemm2d_command(CLI::App& app) {
  CLI::App* bench = app.get_subcommand("bench");  // registered by add_bench_command
  auto args = std::make_shared<BenchGemm2dArgs>();
  CLI::App* g = bench->add_subcommand(
      "gemm2d", "2D GeMM algorithms vs 1D TP, ScaLAPACK psgemm and one rank's BLAS");
  g->add_option("--m", args->m, "Rows of C (default 2048)");
  g->add_option("--n", args->n, "Columns of C (default 2048)");
  g->add_option("--k", args->k, "Contraction dim (default 2048)");
  g->add_option("--mesh", args->mesh, "Mesh RxC; R·C must equal the number of ranks")->required();
  g->add_option("--algo", args->algo,
                "all, or a comma list of cannon, summa, collective, wang, meshslice");
  g->add_option("--dataflow", args->dataflow, "os | ls | rs (default os)");
  g->add_option("--slices", args->slices,
                "Slice counts S, comma list: MeshSlice's slices, SUMMA's panels per lcm(Nr,Nc) "
                "block (default 1,2,4,8; invalid ones skipped)");
  g->add_option("--progress-splits", args->progress_splits,
                "Row bands per partial GeMM with MPI progress pokes between, comma list: one "
                "case per value for the overlapping algorithms (default 4)");
  g->add_option("--seconds", args->seconds, "Target time per case (default 1)");
  g->add_flag("--no-scalapack", args->no_scalapack, "Skip the ScaLAPACK psgemm baseline");
  g->add_flag("--no-1d", args->no_1d, "Skip 1D tensor parallelism");
  g->add_flag("--no-single", args->no_single, "Skip the single-rank BLAS reference");
  g->add_flag("--json", args->json, "Print one JSON object per case");
  args->device.add_to(g);
  g->callback([args] { run_bench_gemm2d(*args); });
}

}  // namespace meshtp::cli
