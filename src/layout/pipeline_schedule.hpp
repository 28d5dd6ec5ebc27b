// Pipeline schedules as data: for each of the p pipeline ranks, the ordered list of
// (microbatch, stage, forward/backward) operations it runs. One generator per schedule, one
// interpreter (the runtime's, and simulate() here) — so a schedule is printed, tested and
// priced without running it.
//
//   p ranks, m microbatches, v model chunks per rank (virtual stages; 1 unless interleaved)
//   stage   the global model stage 0 … v·p−1; chunk k of rank r is stage k·p + r
//           (Megatron-LM's interleaved assignment, Narayanan et al. 2021 §2.2)
//   F(i, s) needs F(i, s−1);  B(i, s) needs F(i, s) and B(i, s+1)
//
//   gpipe        every forward, then every backward (Huang et al. 2019)
//   1f1b         p−r−1 warm-up forwards on rank r, then one forward / one backward
//                alternately, then the remaining backwards (PipeDream-Flush): at most p−r
//                microbatches' activations alive instead of m
//   interleaved  1f1b over v chunks per rank, microbatches in groups of p (m % p = 0)
//
// Bubble (idle share of a rank's time, uniform stages, free transfers):
//   gpipe, 1f1b   (p−1)/(m+p−1)          interleaved  (p−1)/(v·m+p−1)
//
// Worked example, 1f1b, p = 2, m = 3:
//   rank 0: F0 F1 B0 F2 B1 B2          rank 1: F0 B0 F1 B1 F2 B2
//   with t_F = 1, t_B = 2 each rank is busy 9 of 12 units: bubble 3/12 = (p−1)/(m+p−1) = 1/4.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "layout/vocabulary.hpp"

namespace meshtp::layout {

struct PipeOp {
  bool forward = true;
  int microbatch = 0;
  int stage = 0;  // global stage: chunk·p + rank
  bool operator==(const PipeOp&) const = default;
};

struct PipelineSchedule {
  Schedule kind = Schedule::kGpipe;
  int ranks = 1;           // p
  int microbatches = 1;    // m
  int virtual_stages = 1;  // v
  std::vector<std::vector<PipeOp>> ops{};  // per rank, in order

  int stages() const { return ranks * virtual_stages; }
  int rank_of(int stage) const { return stage % ranks; }
};

// Throws meshtp::Error naming the values: p, m, v ≥ 1; 1f1b and interleaved need m ≥ p
// ("1f1b needs at least as many microbatches as stages: microbatches=2 < pp=4");
// interleaved needs v ≥ 2 and m % p = 0; gpipe and 1f1b take v = 1.
PipelineSchedule make_schedule(Schedule kind, int ranks, int microbatches, int virtual_stages = 1);

// (p−1)/(m+p−1), or (p−1)/(v·m+p−1) for interleaved.
double bubble_fraction(Schedule kind, int ranks, int microbatches, int virtual_stages = 1);

struct ScheduleTiming {
  double makespan = 0;
  double bubble = 0;             // 1 − busy/makespan, averaged over ranks
  int max_in_flight = 0;         // most microbatch-stages forwarded, not yet backwarded, on a rank
  // When each rank's last backward of each of its chunks ended, at [rank·v + chunk]: where a
  // chunk's gradients are final (the data-parallel reduction's buckets start there).
  std::vector<double> final_backward_end{};
};
// Runs the schedule as the runtime does (train/pipeline_run.cpp: every receive posted up
// front, sends non-blocking, an op waits only for its own input), every forward of one
// stage taking t_forward and every backward t_backward (a rank's chunk: 1/v of its layers).
// An output for another rank arrives t_transfer after it is sent; a rank's link to each
// neighbour carries one transfer at a time (queued in send order). Throws if it deadlocks.
ScheduleTiming simulate(const PipelineSchedule& schedule, double t_forward, double t_backward,
                        double t_transfer = 0);

// What the transfers add to the makespan: simulate with t_transfer less simulate without.
// Only the transfers no other op hides count. With uniform stages and transfers shorter than
// a forward (t_transfer ≤ t_forward), of the 2·v·(m+p−1) boundary crossings on a rank's
// path this many are exposed (measured with this function, tests/layout):
//   gpipe        2(p−1)                       the fill and the drain
//   interleaved  2(v·p−1)                     once through every stage and back; the warm-up's
//                                             extra forwards hide the steady state's
//   1f1b         2(p−2) + 2m(p−1)/p           the steady state alternates F and B across
//                                             neighbours with no slack: each pair of ranks
//                                             waits for the other's transfers
// Longer transfers are exposed more (they outlast the work that hides them).
double exposed_transfer_s(const PipelineSchedule& schedule, double t_forward, double t_backward,
                          double t_transfer);

// One line per rank: "rank 0: F0.0 F1.0 B0.0 …" (microbatch.stage).
std::ostream& operator<<(std::ostream& os, const PipelineSchedule& schedule);

}  // namespace meshtp::layout
