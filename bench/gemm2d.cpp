#include "bench/gemm2d.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

#include "core/error.hpp"
#include "core/stats.hpp"
#include "mesh/device_mesh.hpp"
#include "tensor/gemm.hpp"
#include "tensor/random.hpp"
#ifdef MESHTP_HAVE_SCALAPACK
#include "bench/scalapack_gemm.hpp"
#endif

namespace meshtp::bench {
namespace {

using parallel::Dataflow;
using parallel::Gemm2dAlgo;
using parallel::Gemm2dOptions;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr std::uint64_t kSeedA = 21, kSeedB = 22;
// fp32 sums over k ≤ a few thousand terms in different orders stay well inside this.
constexpr double kTolerance = 1e-4;

struct Case {
  std::string name;
  Gemm2dOptions options;
};

std::string case_name(const Gemm2dOptions& o) {
  std::string name(to_string(o.algo));
  if (o.algo == Gemm2dAlgo::kMeshSlice || (o.algo == Gemm2dAlgo::kSumma && o.slices > 1)) {
    name += " S=" + std::to_string(o.slices);
  }
  return name;
}

// The 2D cases that validate, plus notes on the ones that do not.
std::vector<Case> algorithm_cases(const Gemm2dBenchOptions& o, std::vector<std::string>& notes) {
  std::vector<Case> cases;
  for (const Gemm2dAlgo algo : o.algos) {
    std::vector<int> slice_counts{algo == Gemm2dAlgo::kSumma ? o.summa_slices : 1};
    if (algo == Gemm2dAlgo::kMeshSlice) slice_counts = o.slices;
    for (const int s : slice_counts) {
      const Gemm2dOptions opt{
          .algo = algo, .dataflow = o.dataflow, .slices = s, .progress_chunks = o.progress_chunks};
      try {
        parallel::validate(o.nr, o.nc, o.shape, opt);
        cases.push_back({case_name(opt), opt});
      } catch (const Error& e) {
        notes.push_back(case_name(opt) + " skipped: " + e.what());
      }
    }
  }
  return cases;
}

Tensor random_block(const Shape& global, int nr, int nc, int i, int j, std::uint64_t seed) {
  const std::int64_t rows = global[0] / nr, cols = global[1] / nc;
  Tensor t({rows, cols});
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::uint64_t row0 = static_cast<std::uint64_t>((i * rows + r) * global[1] + j * cols);
    for (std::int64_t c = 0; c < cols; ++c) t[r * cols + c] = uniform_at(seed, row0 + c);
  }
  return t;
}

double all_max(const comm::Communicator& world, double v) {
  world.all_reduce(std::span<double>(&v, 1), comm::ReduceOp::kMax);
  return v;
}

// Max relative error of this rank's block against the baseline's, over all ranks.
double block_error(const comm::Communicator& world, const Tensor& c, const Tensor& want) {
  double v[2] = {max_abs_diff(c.values(), want.values()), 0.0};
  for (const float x : want.values()) v[1] = std::max(v[1], static_cast<double>(std::fabs(x)));
  world.all_reduce(std::span<double>(v, 2), comm::ReduceOp::kMax);
  return v[1] > 0 ? v[0] / v[1] : v[0];
}

// Σc, Σ|c|, Σc² over the whole distributed C: layout-independent, for the 1D check.
std::array<double, 3> checksums(const comm::Communicator& world, const Tensor& c) {
  std::array<double, 3> s{};
  for (const float x : c.values()) {
    s[0] += x;
    s[1] += std::fabs(x);
    s[2] += static_cast<double>(x) * x;
  }
  world.all_reduce(std::span<double>(s), comm::ReduceOp::kSum);
  return s;
}

struct Timing {
  int iterations = 0;
  double median_seconds = 0.0;
  double gemm_seconds = kNaN;
};

// run() once to size the loop, then `iterations` samples between barriers, max over ranks.
// gemm_clock(), if given, returns this rank's cumulative local-GeMM seconds.
template <typename Run>
Timing time_case(const comm::Communicator& world, const Gemm2dBenchOptions& o, Run run,
                 const parallel::Gemm2dWorkspace* ws) {
  world.barrier();
  double start = now_seconds();
  run();
  const double once = all_max(world, now_seconds() - start);
  Timing t;
  t.iterations = std::clamp(static_cast<int>(o.target_seconds / std::max(once, 1e-9)),
                            o.min_iterations, o.max_iterations);
  std::vector<double> samples, gemm;
  for (int it = 0; it < t.iterations; ++it) {
    const double gemm_before = ws ? ws->stats.gemm_seconds : 0.0;
    world.barrier();
    start = now_seconds();
    run();
    const double local = now_seconds() - start;
    if (ws) gemm.push_back(ws->stats.gemm_seconds - gemm_before);
    samples.push_back(all_max(world, local));
  }
  t.median_seconds = median(samples);
  if (ws) t.gemm_seconds = all_max(world, median(gemm));
  return t;
}

// Whole-problem GeMM on rank 0; the other ranks sleep in a polled ibarrier so they leave
// the core alone. Returns rank 0's median, on every rank.
Timing time_single_rank(const comm::Communicator& world, const Gemm2dBenchOptions& o) {
  Timing t;
  double result[2] = {0.0, 0.0};
  if (world.rank() == 0) {
    const auto& s = o.shape;
    const Tensor a = uniform_tensor(parallel::global_a_shape(o.dataflow, s), kSeedA);
    const Tensor b = uniform_tensor(parallel::global_b_shape(o.dataflow, s), kSeedB);
    Tensor c({s.m, s.n});
    const Trans ta = o.dataflow == Dataflow::kRS ? Trans::kYes : Trans::kNo;
    const Trans tb = o.dataflow == Dataflow::kLS ? Trans::kYes : Trans::kNo;
    const auto run = [&] { gemm(a.matrix(), ta, b.matrix(), tb, c.matrix()); };
    double start = now_seconds();
    run();
    const double once = now_seconds() - start;
    const int iterations = std::clamp(static_cast<int>(o.target_seconds / std::max(once, 1e-9)),
                                      o.min_iterations, o.max_iterations);
    std::vector<double> samples;
    for (int it = 0; it < iterations; ++it) {
      start = now_seconds();
      run();
      samples.push_back(now_seconds() - start);
    }
    result[0] = iterations;
    result[1] = median(samples);
    world.ibarrier().wait();
  } else {
    comm::Request done = world.ibarrier();
    while (!done.test()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  world.broadcast(std::span<double>(result, 2), 0);
  t.iterations = static_cast<int>(result[0]);
  t.median_seconds = result[1];
  return t;
}

}  // namespace

bool scalapack_available() {
#ifdef MESHTP_HAVE_SCALAPACK
  return true;
#else
  return false;
#endif
}

std::vector<std::string> plan_gemm2d_bench(const Gemm2dBenchOptions& o) {
  // The problem itself must divide on the mesh (Collective has no extra constraints).
  parallel::validate(o.nr, o.nc, o.shape,
                     {.algo = Gemm2dAlgo::kCollective, .dataflow = o.dataflow});
  std::vector<std::string> notes;
  const auto cases = algorithm_cases(o, notes);
  MESHTP_CHECK(!cases.empty(), "bench gemm2d: no requested algorithm runs here ({})",
               notes.empty() ? "none requested" : notes.front());
  if (o.with_1d) {
    try {
      parallel::validate(1, o.nr * o.nc, o.shape,
                         {.algo = Gemm2dAlgo::kCollective, .dataflow = o.dataflow});
    } catch (const Error& e) {
      notes.push_back(std::string("1D TP skipped: ") + e.what());
    }
  }
  if (o.with_scalapack && !scalapack_available()) {
    notes.push_back("ScaLAPACK psgemm skipped: meshtp was built without ScaLAPACK");
  }
  return notes;
}

std::vector<Gemm2dSample> run_gemm2d_bench(const comm::Communicator& world,
                                           const Gemm2dBenchOptions& o) {
  MESHTP_CHECK(world.size() == o.nr * o.nc, "mesh {}x{} has {} ranks but the world has {}", o.nr,
               o.nc, o.nr * o.nc, world.size());
  std::vector<std::string> notes;
  const std::vector<Case> cases = algorithm_cases(o, notes);
  const mesh::DeviceMesh mesh(world, {o.nr, o.nc});
  const int i = mesh.coord(0), j = mesh.coord(1), p = o.nr * o.nc;
  const auto& s = o.shape;
  const Tensor a = random_block(parallel::global_a_shape(o.dataflow, s), o.nr, o.nc, i, j, kSeedA);
  const Tensor b = random_block(parallel::global_b_shape(o.dataflow, s), o.nr, o.nc, i, j, kSeedB);
  Tensor c({s.m / o.nr, s.n / o.nc});
  Tensor baseline;  // C from psgemm, or from gemm2d Collective
  const double flops_per_rank = 2.0 * static_cast<double>(s.m) * s.n * s.k / p;
  std::vector<Gemm2dSample> samples;

  if (o.with_single_rank) {
    const Timing t = time_single_rank(world, o);
    Gemm2dSample x;
    x.name = "BLAS 1 rank";
    x.kind = Gemm2dCaseKind::kSingleRank;
    x.iterations = t.iterations;
    x.median_seconds = t.median_seconds;
    x.gflops_per_rank = flops_per_rank * p / t.median_seconds / 1e9;
    x.gemm_seconds = t.median_seconds;
    x.bytes_per_rank = 0.0;
    x.error = kNaN;
    samples.push_back(x);
  }
#ifdef MESHTP_HAVE_SCALAPACK
  if (o.with_scalapack) {
    const ScalapackGemm psgemm(o.nr, o.nc, s, o.dataflow);
    baseline = Tensor(c.shape());
    psgemm.run(a.data(), b.data(), baseline.data());
    const Timing t = time_case(
        world, o, [&] { psgemm.run(a.data(), b.data(), c.data()); }, nullptr);
    Gemm2dSample x;
    x.name = "ScaLAPACK psgemm";
    x.kind = Gemm2dCaseKind::kScalapack;
    x.iterations = t.iterations;
    x.median_seconds = t.median_seconds;
    x.gflops_per_rank = flops_per_rank / t.median_seconds / 1e9;
    x.gemm_seconds = kNaN;
    x.bytes_per_rank = kNaN;
    x.error = kNaN;
    samples.push_back(x);
  }
#endif
  parallel::Gemm2dWorkspace ws;
  if (baseline.empty()) {
    baseline = Tensor(c.shape());
    parallel::gemm2d(mesh, a.matrix(), b.matrix(), baseline.matrix(),
                     {.algo = Gemm2dAlgo::kCollective, .dataflow = o.dataflow}, ws);
  }
  if (o.with_1d) {
    bool valid = true;
    const Gemm2dOptions opt{.algo = Gemm2dAlgo::kCollective, .dataflow = o.dataflow};
    try {
      parallel::validate(1, p, s, opt);
    } catch (const Error&) {
      valid = false;  // reported by plan_gemm2d_bench
    }
    if (valid) {
      const mesh::DeviceMesh line(world, {1, p});
      const Tensor a1 =
          random_block(parallel::global_a_shape(o.dataflow, s), 1, p, 0, world.rank(), kSeedA);
      const Tensor b1 =
          random_block(parallel::global_b_shape(o.dataflow, s), 1, p, 0, world.rank(), kSeedB);
      Tensor c1({s.m, s.n / p});
      parallel::Gemm2dWorkspace ws1;
      const auto run = [&] {
        parallel::gemm2d(line, a1.matrix(), b1.matrix(), c1.matrix(), opt, ws1);
      };
      run();
      const auto got = checksums(world, c1), want = checksums(world, baseline);
      const Timing t = time_case(world, o, run, &ws1);
      const parallel::Gemm2dCost cost = parallel::gemm2d_cost(1, p, s, opt);
      Gemm2dSample x;
      x.name = "1D TP 1x" + std::to_string(p);
      x.kind = Gemm2dCaseKind::kOneD;
      x.options = opt;
      x.iterations = t.iterations;
      x.median_seconds = t.median_seconds;
      x.gflops_per_rank = flops_per_rank / t.median_seconds / 1e9;
      x.gemm_seconds = t.gemm_seconds;
      x.bytes_per_rank = cost.bytes();
      x.sync_steps = cost.sync_steps;
      x.error =
          std::max(std::fabs(got[0] - want[0]) / want[1], std::fabs(got[2] - want[2]) / want[2]);
      MESHTP_CHECK(x.error <= kTolerance,
                   "bench gemm2d: 1D TP checksums differ from the baseline by {:.3g}", x.error);
      samples.push_back(x);
    }
  }
  for (const Case& k : cases) {
    const auto run = [&] {
      parallel::gemm2d(mesh, a.matrix(), b.matrix(), c.matrix(), k.options, ws);
    };
    c.fill(std::nanf(""));
    run();
    const double err = block_error(world, c, baseline);
    MESHTP_CHECK(err <= kTolerance,
                 "bench gemm2d: {} differs from the baseline by {:.3g} (relative)", k.name, err);
    const Timing t = time_case(world, o, run, &ws);
    const parallel::Gemm2dCost cost = parallel::gemm2d_cost(o.nr, o.nc, s, k.options);
    Gemm2dSample x;
    x.name = k.name;
    x.kind = Gemm2dCaseKind::kAlgorithm;
    x.options = k.options;
    x.iterations = t.iterations;
    x.median_seconds = t.median_seconds;
    x.gflops_per_rank = flops_per_rank / t.median_seconds / 1e9;
    x.gemm_seconds = t.gemm_seconds;
    x.bytes_per_rank = cost.bytes();
    x.sync_steps = cost.sync_steps;
    x.error = err;
    samples.push_back(x);
  }
  return samples;
}

}  // namespace meshtp::bench
