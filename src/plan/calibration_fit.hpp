// Calibration fit (MeshSlice §3.2, Eq. 5): measured collective times → the ring parameters
// that Topology::calibration holds and mesh_links() prices collectives with. Pure: numbers
// in, numbers out; `meshtp calibrate` does the measuring.
//
// The model, per group shape (P ranks `stride` apart) and collective. `bytes` is the buffer
// the user hands over (bench/collectives.hpp): all_reduce the whole buffer, all_gather the
// gathered output, reduce_scatter the input. In a ring every step moves one shard:
//
//   T(bytes) = t_launch + n·(l_sync + bytes_per_step / bw)
//   bytes_per_step = bytes / P
//   n = P−1 for all_gather and reduce_scatter,  2(P−1) for all_reduce (reduce-scatter, then
//       all-gather)
//
// which is mesh_links' ring_collective_time(ring, P, shard = bytes/P) and
// ring_all_reduce_time(ring, P, bytes) term for term: a calibrated group prices exactly what
// was measured (fitted_time() below calls those functions, and a test checks it).
//
// send/recv (nccl-tests' sendrecv_perf: every rank sends `bytes` to rank+1 and receives as
// many from rank−1, all at once) is one step of that ring with the whole buffer as its
// shard: n = 1, bytes_per_step = bytes, T = t_launch + l_sync + bytes/bw. Its fit describes
// the ring's link (bw = the B' the collectives' fits should also find); the planner's
// calibration holds no send/recv entry, so fit_calibration() does not take it.
//
// Bus bandwidth (nccl-tests, doc/PERFORMANCE.md): busbw = (bytes/T)·f with f = 2(P−1)/P for
// all_reduce, (P−1)/P for all_gather and reduce_scatter, 1 for broadcast and send/recv. For
// the ring model T → n·bytes_per_step/bw at large sizes, and n·bytes_per_step/bytes = f in
// every case, so busbw → bw: a fit's bw is the busbw it predicts for the largest messages.
//
// Stage 1, per (group, collective): T is a line in x = n·bytes/P,
//   T = a + x/bw,   a = t_launch + n·l_sync.
// a and 1/bw by weighted least squares minimising Σ((T̂ᵢ − Tᵢ)/Tᵢ)²: relative residuals, so
// the 8 KiB samples weigh as much as the 64 MiB ones (plain least squares lets the largest
// sizes decide everything, and the latency can come out negative). A negative a is refit
// through the origin (a = 0). Quality: R² of T and the largest |T̂ᵢ − Tᵢ|/Tᵢ.
//
// Stage 2, splitting a into t_launch and l_sync. Only their sum enters T for one step count
// n, so with a single n they are not separately identifiable. Our rule, per collective:
//   - groups with ≥ 2 distinct n (e.g. 4 ranks, meshes 4x1 and 2x2: all_gather n = 3 and
//     n = 1): the launch cost is software (the MPI call, algorithm selection), the same for
//     every group, so fit aᵍ = t_launch + nᵍ·λ by least squares over the groups, clamp
//     t_launch to [0, min aᵍ], and give each group the rest per step:
//     l_syncᵍ = (aᵍ − t_launch)/nᵍ (every group keeps its own intercept exactly);
//   - one distinct n: t_launch = 0, l_sync = a/n. Every ring step pays the synchronisation;
//     this is the conservative choice for algorithms with more steps than the ring (SUMMA's
//     pipelined broadcast, Cannon's shifts), the only ones the split affects.
// Either way the split never changes the predicted time of a calibrated collective.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "layout/gemm2d_traffic.hpp"
#include "layout/vocabulary.hpp"
#include "plan/topology.hpp"

namespace meshtp::plan {

// The collectives calibration fits (the ring collectives the cost models price).
using layout::CollectiveKind;
inline constexpr CollectiveKind kFitCollectives[] = {
    CollectiveKind::kAllReduce, CollectiveKind::kAllGather, CollectiveKind::kReduceScatter};

// n: ring steps of the collective on P ranks (P−1, 2(P−1) for all_reduce, 1 for send/recv).
int ring_steps(CollectiveKind c, int p);
// What one rank sends per ring step: bytes/P, or bytes for send/recv.
double bytes_per_step(CollectiveKind c, int p, double bytes);
// nccl-tests' bus bandwidth factor f above (0 for P < 2).
double bus_factor(CollectiveKind c, int p);

// One measurement: `bytes` as above, `seconds` the measured time.
struct TimingSample {
  std::int64_t bytes = 0;
  double seconds = 0;
};

// Every measurement of one collective on one group shape.
struct CollectiveSeries {
  int size = 0;    // P
  int stride = 1;  // rank distance between group members
  CollectiveKind collective = CollectiveKind::kAllReduce;
  std::vector<TimingSample> samples;
};

// Stage 1: T = intercept + slope·x with x = n·bytes/P.
struct LineFit {
  double intercept_s = 0;       // a = t_launch + n·l_sync
  double seconds_per_byte = 0;  // 1/bw
  bool through_origin = false;  // the free fit gave a < 0
};
// Throws meshtp::Error for degenerate input: P < 2, fewer than 2 distinct sizes, a size or
// time that is not positive and finite, or a time that does not grow with size.
LineFit fit_ring_line(const CollectiveSeries& series);

// How well the final fit explains one series.
struct FitQuality {
  int size = 0, stride = 1;
  CollectiveKind collective = CollectiveKind::kAllReduce;
  int samples = 0;
  double r_squared = 0;         // 1 − SS_res/SS_tot of T
  double max_rel_residual = 0;  // max |T̂ᵢ − Tᵢ| / Tᵢ
  bool through_origin = false;
  bool split_identified = false;  // t_launch came from ≥ 2 distinct step counts
};

struct CalibrationFit {
  std::vector<GroupCalibration> groups;  // in order of first appearance in the input
  std::vector<FitQuality> quality;       // one per input series, input order
};

// The slot of `group` that holds collective c's fit; throws for a collective calibration
// does not fit (send/recv, broadcast).
std::optional<CollectiveFit>& fit_slot(GroupCalibration& group, CollectiveKind c);
const std::optional<CollectiveFit>& fit_slot(const GroupCalibration& group, CollectiveKind c);

// The median time of every size of `series`, ascending: what CollectiveFit::measured holds.
std::vector<MeasuredTime> measured_times(const CollectiveSeries& series);

// Both stages over every series. Throws meshtp::Error (naming the group and collective) for
// degenerate input or a (size, stride, collective) that appears twice.
CalibrationFit fit_calibration(std::span<const CollectiveSeries> series);

// The time the planner predicts for `bytes` with `fit` (mesh_links' ring functions), s.
// Also for send/recv: one ring step, T = t_launch + l_sync + bytes/bw.
double fitted_time(const CollectiveFit& fit, CollectiveKind c, int p, double bytes);

// The runtime's host time per 2D GeMM step (Topology::calibration.step_overhead_us).
// `meshtp calibrate` runs one MeshSlice 2D GeMM at several slice counts S on the ranks and
// prices each with everything else it has fitted (gemm2d_estimate without the overhead):
// the measured collectives at the slices' sizes, the measured GeMM rate. What the price
// misses grows with the steps:
//   measured(S) − predicted(S) = a + h·steps(S)     (steps: the local GeMM calls)
// h by least squares over the slice counts (clamped to ≥ 0: a runtime step costs no less
// than nothing), a what the price misses once per GeMM (the prologue's and epilogue's error).
struct StepSample {
  layout::Gemm2dParams params{};  // the MeshSlice run's slice count S (params.slices)
  std::int64_t steps = 1;  // local GeMM calls of the 2D GeMM at this S
  double measured_s = 0;   // one 2D GeMM, median of the max over ranks
  double predicted_s = 0;  // gemm2d_estimate with no step overhead
};
struct StepOverheadFit {
  double step_s = 0;       // h
  double intercept_s = 0;  // a
  double r_squared = 0;    // of the residual against the steps (1 when it is a line)
};
// Throws meshtp::Error for fewer than 2 distinct step counts or a time that is not positive
// and finite.
StepOverheadFit fit_step_overhead(std::span<const StepSample> samples);

// How much two mesh dims' collectives slow each other (topology.hpp, MeshSharing):
// (both − max(dim0, dim1)) / min(dim0, dim1), clamped to [0, 1] (a pair faster than its
// slower member, as two TCP rings that fill each other's gaps, is 0: not modelled). Throws
// for a time that is not positive and finite.
double dim_sharing(double both_s, double dim0_s, double dim1_s);

// x to 4 significant digits: what a topology file holds of a fit (the file is for people
// too, and the measurements are noisier than that).
double round4(double x);
// Every fitted number of the groups to 4 significant digits.
void round_fits(std::vector<GroupCalibration>& groups);

}  // namespace meshtp::plan
