// 2D GeMM benchmark: the five algorithms of parallel::gemm2d on one problem and mesh, next
// to 1D tensor parallelism, ScaLAPACK's psgemm on the same grid, and one rank's BLAS GeMM.
//
// Method. Everything is validated before anything runs (parallel::validate per case, so
// every rank agrees). Each rank generates its own blocks from the counter-based RNG. Each
// case runs once untimed and its C is compared with the baseline's C (psgemm's; gemm2d
// Collective when ScaLAPACK is off): the same blocks on the same ranks, so element-wise.
// Then timed rounds, interleaved (each round runs every case once, so load from other
// processes hits all cases alike); a sample is one run between barriers, max over ranks; a
// case reports its median sample. Per case also: the local-GeMM time inside the call (median over
// iterations, max over ranks) and `exposed comm` = time − GeMM time, the communication the
// algorithm failed to hide; bytes per rank and sync steps come from parallel::gemm2d_traffic.
//
//   1D TP        the same dataflow with Collective on a 1 × P mesh: OS = Megatron column-
//                parallel (all-gather the input), LS = row-parallel (reduce-scatter the
//                output), RS = the weight-gradient product. Validated by checksum (its
//                blocks live on a different layout).
//   single rank  meshtp::gemm of the whole problem on rank 0 while the others sleep (not
//                spinning in MPI), the reference for speedups: ideal = P on P idle cores.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "device/backend.hpp"
#include "parallel/gemm2d/gemm2d.hpp"

namespace meshtp::bench {

struct Gemm2dBenchOptions {
  parallel::Gemm2dShape shape{.m = 2048, .n = 2048, .k = 2048};
  int nr = 1, nc = 1;
  layout::Dataflow dataflow = layout::Dataflow::kOS;
  std::vector<layout::Algorithm> algos;     // in this order; Cannon dropped if not square
  std::vector<int> slices{1, 2, 4, 8};      // MeshSlice and SUMMA: one case per valid S
  std::vector<int> progress_splits{4};      // overlapping algorithms: one case per value
  bool with_1d = true;
  bool with_scalapack = true;
  bool with_single_rank = true;
  double target_seconds = 1.0;  // per case: rounds = target / the slowest case's time
  int min_iterations = 5;
  int max_iterations = 50;
};

enum class Gemm2dCaseKind { kAlgorithm, kOneD, kScalapack, kSingleRank };

struct Gemm2dSample {
  std::string name;  // "meshslice S=4", "1D TP 1x4", "ScaLAPACK psgemm", "BLAS 1 rank"
  Gemm2dCaseKind kind = Gemm2dCaseKind::kAlgorithm;
  parallel::Gemm2dOptions options;  // kAlgorithm and kOneD
  int iterations = 0;
  double median_seconds = 0.0;  // max over ranks, median over iterations
  double gflops_per_rank = 0.0;
  double gemm_seconds = 0.0;    // local GeMM time inside the call (NaN when unknown)
  double bytes_per_rank = 0.0;  // cost model (NaN when unknown)
  int sync_steps = 0;
  double error = 0.0;  // max relative error against the baseline (NaN: not checked)
};

// Cases the options ask for that cannot run here, as human-readable notes (e.g. "cannon:
// needs a square mesh"); the other cases run. Throws if nothing valid remains or the
// problem itself does not divide on the mesh. Pure: call on every rank.
std::vector<std::string> plan_gemm2d_bench(const Gemm2dBenchOptions& options);

// Runs every valid case. Collective over `world` (size nr·nc). The samples are identical on
// every rank.
std::vector<Gemm2dSample> run_gemm2d_bench(const comm::Communicator& world,
                                           const Gemm2dBenchOptions& options);

// The same on a device (`meshtp bench gemm2d --device cuda`): the 2D cases and 1D TP run on
// `backend`'s memory over `group`, a device-memory group (host-staged or NCCL) over the same
// ranks as `world`, in the same order. Each is checked as on the host, against the 2D
// Collective algorithm run on the host (CPU backend over `world`); each sample ends with
// backend.synchronize() before the clock stops. No ScaLAPACK or 1-rank BLAS case (the caller
// turns them off); the local-GeMM time is not measured (NaN): the GPU's work is asynchronous.
struct Gemm2dBenchDevice {
  const comm::Communicator* group = nullptr;
  device::Backend* backend = nullptr;
};
std::vector<Gemm2dSample> run_gemm2d_bench(const comm::Communicator& world,
                                           const Gemm2dBenchOptions& options,
                                           const Gemm2dBenchDevice& device);

bool scalapack_available();

}  // namespace meshtp::bench
