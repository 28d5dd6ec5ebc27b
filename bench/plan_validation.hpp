// What `meshtp bench plan` measures, returned as data (the CLI prints it): the planner's top
// candidates that the runtime can run, each run for real and its planned collectives
// replayed, against the planner's prediction (plan/validation.hpp says what each comparison
// isolates).
//
// Per candidate, in `rounds` round-robin rounds of seconds/rounds each; every number is the
// median over rounds, so load that drifts on a shared machine hits every candidate alike:
//   the real run   bench::run_layer_bench: validated against the serial reference (first
//                  round), warmed up, median over steps of the max over ranks of the step
//                  (forward + backward) and of the time blocked in communication.
//   the replay     every collective the planner charges (plan::planned_collectives), timed
//                  through bench::time_collective on the candidate's mesh dim with all of its
//                  groups active, × its count per step. The 2D GeMM strategies pipeline their
//                  collectives with the GeMMs: no replay.
#pragma once

#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "plan/planner.hpp"
#include "plan/validation.hpp"

namespace meshtp::bench {

// The first `top` candidates of `result` (planner order) that are feasible and whose shapes
// the block stack accepts; the others before them as "label: reason". Pure: the same on
// every rank.
struct RunnableCandidates {
  std::vector<plan::Candidate> chosen;
  std::vector<std::string> skipped;
};
RunnableCandidates runnable_candidates(const plan::PlanRequest& request,
                                       const plan::PlanResult& result, int top,
                                       int progress_splits);

struct PlanValidationOptions {
  double seconds = 3.0;  // timed seconds per candidate, over all rounds
  int rounds = 3;
  int progress_splits = 4;  // GeMM panels between MPI progress pokes (the runtime's default)
  bool check = true;        // compare each candidate with the serial reference
};

// One row per candidate (same order), collective over `world` (request.devices ranks).
std::vector<plan::ValidationRow> validate_candidates(const comm::Communicator& world,
                                                     const plan::PlanRequest& request,
                                                     const std::vector<plan::Candidate>& chosen,
                                                     const PlanValidationOptions& options);

}  // namespace meshtp::bench
