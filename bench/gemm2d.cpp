#include "bench/gemm2d.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
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

using layout::Algorithm;
using layout::Dataflow;
using parallel::Gemm2dOptions;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr std::uint64_t kSeedA = 21, kSeedB = 22;
// fp32 sums over k ≤ a few thousand terms in different orders stay well inside this.
constexpr double kTolerance = 1e-4;

struct AlgorithmCase {
  std::string name;
  Gemm2dOptions options;
};

// Collective and 1D TP multiply once, after the communication: no pokes to vary.
bool overlaps(Algorithm algo) { return algo != Algorithm::kCollective; }

std::string case_name(const Gemm2dOptions& o, bool show_chunks) {
  std::string name(layout::name(o.algo));
  if (o.algo == Algorithm::kMeshSlice || o.algo == Algorithm::kSumma) {
    name += " S=" + std::to_string(o.params.slices);
  }
  if (show_chunks && overlaps(o.algo)) name += " p=" + std::to_string(o.progress_splits);
  return name;
}

// The 2D cases that validate, plus notes on the ones that do not. One case per slice count
// (MeshSlice and SUMMA) and per progress_splits value (algorithms that overlap).
std::vector<AlgorithmCase> algorithm_cases(const Gemm2dBenchOptions& o,
                                           std::vector<std::string>& notes) {
  std::vector<AlgorithmCase> cases;
  const bool show_chunks = o.progress_splits.size() > 1;
  for (const Algorithm algo : o.algos) {
    const bool sliced = algo == Algorithm::kMeshSlice || algo == Algorithm::kSumma;
    const std::vector<int> slice_counts = sliced ? o.slices : std::vector<int>{1};
    std::vector<int> chunk_counts{o.progress_splits.front()};
    if (overlaps(algo)) chunk_counts = o.progress_splits;
    for (const int s : slice_counts) {
      for (const int p : chunk_counts) {
        const Gemm2dOptions opt{
            .algo = algo, .dataflow = o.dataflow, .params = {.slices = s}, .progress_splits = p};
        try {
          parallel::validate(o.nr, o.nc, o.shape, opt);
          cases.push_back({case_name(opt, show_chunks), opt});
        } catch (const Error& e) {
          notes.push_back(case_name(opt, show_chunks) + " skipped: " + e.what());
          break;  // the same verdict for every p
        }
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

// One row of the table while it is being measured.
struct BenchCase {
  Gemm2dSample sample;
  std::function<void()> run;
  std::function<void()> finish;  // after run, inside the timed region (a device's synchronize)
  const parallel::Gemm2dWorkspace* ws = nullptr;  // where its local-GeMM time accumulates
  std::vector<double> times, gemm;
};

// Times every case in interleaved rounds (round r runs case 0, 1, 2, … once each), so load
// from other processes hits all cases alike. One sample = barrier, run, max over ranks.
void time_cases(const comm::Communicator& world, const Gemm2dBenchOptions& o,
                std::vector<BenchCase>& cases) {
  const auto sample = [&](BenchCase& c, bool keep) {
    const double gemm_before = c.ws ? c.ws->stats.gemm_seconds : 0.0;
    world.barrier();
    const double start = now_seconds();
    c.run();
    if (c.finish) c.finish();
    const double local = now_seconds() - start;
    const double t = all_max(world, local);
    if (keep) {
      c.times.push_back(t);
      if (c.ws) c.gemm.push_back(c.ws->stats.gemm_seconds - gemm_before);
    }
    return t;
  };
  double slowest = 0.0;
  for (auto& c : cases) slowest = std::max(slowest, sample(c, false));  // warm-up
  const int rounds = std::clamp(static_cast<int>(o.target_seconds / std::max(slowest, 1e-9)),
                                o.min_iterations, o.max_iterations);
  for (int r = 0; r < rounds; ++r) {
    for (auto& c : cases) sample(c, true);
  }
  const double flops = 2.0 * static_cast<double>(o.shape.m) * o.shape.n * o.shape.k;
  for (auto& c : cases) {
    Gemm2dSample& x = c.sample;
    x.iterations = rounds;
    x.median_seconds = median(c.times);
    const int ranks = x.kind == Gemm2dCaseKind::kSingleRank ? 1 : o.nr * o.nc;
    x.gflops_per_rank = flops / ranks / x.median_seconds / 1e9;
    if (c.ws) x.gemm_seconds = all_max(world, median(c.gemm));
    if (x.kind == Gemm2dCaseKind::kSingleRank) x.gemm_seconds = x.median_seconds;
  }
}

// The whole problem on rank 0 while the other ranks sleep in a polled ibarrier (leaving
// the cores alone instead of spinning in MPI).
std::function<void()> single_rank_run(const comm::Communicator& world, const Gemm2dBenchOptions& o,
                                      std::vector<Tensor>& storage) {
  const bool root = world.rank() == 0;
  if (root) {
    const auto& s = o.shape;
    storage.push_back(uniform_tensor(parallel::global_a_shape(o.dataflow, s), kSeedA));
    storage.push_back(uniform_tensor(parallel::global_b_shape(o.dataflow, s), kSeedB));
    storage.push_back(Tensor({s.m, s.n}));
  }
  const Trans ta = o.dataflow == Dataflow::kRS ? Trans::kYes : Trans::kNo;
  const Trans tb = o.dataflow == Dataflow::kLS ? Trans::kYes : Trans::kNo;
  return [&world, &storage, root, ta, tb] {
    if (root) {
      gemm(storage[0].matrix(), ta, storage[1].matrix(), tb, storage[2].matrix());
      world.ibarrier().wait();
    } else {
      comm::Request done = world.ibarrier();
      while (!done.test()) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  };
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
  parallel::validate(o.nr, o.nc, o.shape, {.algo = Algorithm::kCollective, .dataflow = o.dataflow});
  std::vector<std::string> notes;
  const auto cases = algorithm_cases(o, notes);
  MESHTP_CHECK(!o.progress_splits.empty() && !o.slices.empty(),
               "bench gemm2d: empty --slices or --progress-splits list");
  MESHTP_CHECK(!cases.empty(), "bench gemm2d: no requested algorithm runs here ({})",
               notes.empty() ? "none requested" : notes.front());
  if (o.with_1d) {
    try {
      parallel::validate(1, o.nr * o.nc, o.shape,
                         {.algo = Algorithm::kCollective, .dataflow = o.dataflow});
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
  return run_gemm2d_bench(world, o, Gemm2dBenchDevice{});
}

std::vector<Gemm2dSample> run_gemm2d_bench(const comm::Communicator& world,
                                           const Gemm2dBenchOptions& o,
                                           const Gemm2dBenchDevice& device) {
  const bool on_device = device.backend != nullptr;
  MESHTP_CHECK(!on_device || (device.group != nullptr && device.group->size() == world.size()),
               "bench gemm2d: the device group must hold the world's ranks");
  MESHTP_CHECK(!on_device || (!o.with_scalapack && !o.with_single_rank),
               "bench gemm2d: on a device there is no ScaLAPACK or 1-rank BLAS case");
  // A host block on the device (or the host block itself), and the device's C back to the host.
  const auto to_device = [&](const Tensor& t) {
    device::Array array = device.backend->alloc(t.numel(), Element::kF32);
    device.backend->upload(array, t.values());
    return array;
  };
  const auto from_device = [&](const device::Array& array, Tensor& t) {
    const std::vector<float> got = device.backend->download(array);
    std::copy(got.begin(), got.end(), t.values().begin());
  };
  const std::function<void()> finish = on_device ? std::function<void()>([&device] {
    device.backend->synchronize();
  }) : std::function<void()>();
  MESHTP_CHECK(world.size() == o.nr * o.nc, "mesh {}x{} has {} ranks but the world has {}", o.nr,
               o.nc, o.nr * o.nc, world.size());
  std::vector<std::string> notes;
  const std::vector<AlgorithmCase> algorithm_list = algorithm_cases(o, notes);
  const mesh::DeviceMesh mesh(world, {o.nr, o.nc});
  const int i = mesh.coord(0), j = mesh.coord(1), p = o.nr * o.nc;
  const auto& s = o.shape;
  const Shape a_shape = parallel::global_a_shape(o.dataflow, s);
  const Shape b_shape = parallel::global_b_shape(o.dataflow, s);
  const Tensor a = random_block(a_shape, o.nr, o.nc, i, j, kSeedA);
  const Tensor b = random_block(b_shape, o.nr, o.nc, i, j, kSeedB);
  Tensor c({s.m / o.nr, s.n / o.nc});
  Tensor baseline;  // C from psgemm, or from gemm2d Collective
  parallel::Gemm2dWorkspace ws;
  std::vector<BenchCase> cases;
  const auto add_case = [&](std::string name, Gemm2dCaseKind kind) -> BenchCase& {
    BenchCase& x = cases.emplace_back();
    x.sample.name = std::move(name);
    x.sample.kind = kind;
    x.sample.gemm_seconds = kNaN;
    x.sample.bytes_per_rank = kNaN;
    x.sample.error = kNaN;
    return x;
  };

  std::vector<Tensor> single_storage;
  if (o.with_single_rank) {
    BenchCase& x = add_case("BLAS 1 rank", Gemm2dCaseKind::kSingleRank);
    x.run = single_rank_run(world, o, single_storage);
    x.sample.bytes_per_rank = 0.0;
  }
#ifdef MESHTP_HAVE_SCALAPACK
  std::optional<ScalapackGemm> psgemm;
  if (o.with_scalapack) {
    psgemm.emplace(o.nr, o.nc, s, o.dataflow);
    baseline = Tensor(c.shape());
    psgemm->run(a.data(), b.data(), baseline.data());
    BenchCase& x = add_case("ScaLAPACK psgemm", Gemm2dCaseKind::kScalapack);
    x.run = [&] { psgemm->run(a.data(), b.data(), c.data()); };
  }
#endif
  if (baseline.empty()) {
    baseline = Tensor(c.shape());
    parallel::gemm2d(mesh, a.matrix(), b.matrix(), baseline.matrix(),
                     {.algo = Algorithm::kCollective, .dataflow = o.dataflow}, ws);
  }

  // 1D TP: the same problem on a 1 × P mesh, its own blocks and workspace.
  const Gemm2dOptions one_d{.algo = Algorithm::kCollective, .dataflow = o.dataflow};
  bool with_1d = o.with_1d;
  try {
    parallel::validate(1, p, s, one_d);
  } catch (const Error&) {
    with_1d = false;  // reported by plan_gemm2d_bench
  }
  std::optional<mesh::DeviceMesh> line;
  Tensor a1, b1, c1;
  device::Array a1_dev, b1_dev, c1_dev;
  std::optional<parallel::Gemm2dWorkspace> ws1;
  if (with_1d) {
    line.emplace(on_device ? *device.group : world, std::vector<int>{1, p});
    a1 = random_block(a_shape, 1, p, 0, world.rank(), kSeedA);
    b1 = random_block(b_shape, 1, p, 0, world.rank(), kSeedB);
    c1 = Tensor({s.m, s.n / p});
    BenchCase& x = add_case("1D TP 1x" + std::to_string(p), Gemm2dCaseKind::kOneD);
    if (on_device) {
      ws1.emplace(*device.backend);
      a1_dev = to_device(a1);
      b1_dev = to_device(b1);
      c1_dev = device.backend->alloc(c1.numel(), Element::kF32);
      x.run = [&] {
        parallel::gemm2d(*line, a1_dev.view(a1.dim(0), a1.dim(1)),
                         b1_dev.view(b1.dim(0), b1.dim(1)), c1_dev.view(c1.dim(0), c1.dim(1)),
                         one_d, *ws1);
      };
      x.finish = finish;
      x.run();
      from_device(c1_dev, c1);
    } else {
      ws1.emplace();
      x.run = [&] { parallel::gemm2d(*line, a1.matrix(), b1.matrix(), c1.matrix(), one_d, *ws1); };
      x.ws = &*ws1;
      x.run();
    }
    const auto got = checksums(world, c1), want = checksums(world, baseline);
    x.sample.error =
        std::max(std::fabs(got[0] - want[0]) / want[1], std::fabs(got[2] - want[2]) / want[2]);
    MESHTP_CHECK(x.sample.error <= kTolerance,
                 "bench gemm2d: 1D TP checksums differ from the baseline by {:.3g}",
                 x.sample.error);
    const layout::Gemm2dTraffic cost = parallel::gemm2d_traffic(1, p, s, one_d);
    x.sample.options = one_d;
    x.sample.bytes_per_rank = cost.bytes_per_rank();
    x.sample.sync_steps = cost.steps();
  }

  // On a device: the blocks uploaded once, the mesh over the device group.
  std::optional<mesh::DeviceMesh> device_mesh;
  std::optional<parallel::Gemm2dWorkspace> device_ws;
  device::Array a_dev, b_dev, c_dev;
  if (on_device && !algorithm_list.empty()) {
    device_mesh.emplace(*device.group, std::vector<int>{o.nr, o.nc});
    device_ws.emplace(*device.backend);
    a_dev = to_device(a);
    b_dev = to_device(b);
    c_dev = device.backend->alloc(c.numel(), Element::kF32);
  }
  for (const AlgorithmCase& k : algorithm_list) {
    BenchCase& x = add_case(k.name, Gemm2dCaseKind::kAlgorithm);
    const Gemm2dOptions options = k.options;
    c.fill(std::nanf(""));
    if (on_device) {
      x.run = [&, options] {
        parallel::gemm2d(*device_mesh, a_dev.view(a.dim(0), a.dim(1)),
                         b_dev.view(b.dim(0), b.dim(1)), c_dev.view(c.dim(0), c.dim(1)), options,
                         *device_ws);
      };
      x.finish = finish;
      device.backend->upload(c_dev, c.values());  // NaN: a block left unwritten shows
      x.run();
      from_device(c_dev, c);
    } else {
      x.run = [&, options] {
        parallel::gemm2d(mesh, a.matrix(), b.matrix(), c.matrix(), options, ws);
      };
      x.ws = &ws;
      x.run();
    }
    x.sample.error = block_error(world, c, baseline);
    MESHTP_CHECK(x.sample.error <= kTolerance,
                 "bench gemm2d: {} differs from the baseline by {:.3g} (relative)", k.name,
                 x.sample.error);
    const layout::Gemm2dTraffic cost = parallel::gemm2d_traffic(o.nr, o.nc, s, options);
    x.sample.options = options;
    x.sample.bytes_per_rank = cost.bytes_per_rank();
    x.sample.sync_steps = cost.steps();
  }

  time_cases(world, o, cases);
  std::vector<Gemm2dSample> samples;
  for (const auto& x : cases) samples.push_back(x.sample);
  return samples;
}

}  // namespace meshtp::bench
