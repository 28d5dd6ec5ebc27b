// One rank of a big layout on the one device at hand (`meshtp bench rank`): rank R's share of
// a training step — its pipeline stage's layers, its tensor-parallel shard, its microbatches,
// its ZeRO part — run by the real training loop on an alone world (comm/communicator.hpp
// TransportKind::kAlone: no peer; every collective validated and counted, none moved), the
// way Megatron-LM's --fake-process-group and torchtitan's fake backend profile one rank.
//
//   measured   compute_s   median step minus its data and communication-wait phases
//                          (bench/train_profile.hpp; alone, the wait is ~0)
//              memory      the tensor high-water mark over the steps (what the planner's
//                          memory model counts: plan/memory.hpp rank_memory, kRuntime head)
//   predicted  memory      rank_memory(model, layout, R's pipeline rank): needs no topology
//              compute_s   with a topology: evaluate_layout's compute and optimizer parts
//                          (plan/layout_search.hpp parts()), everything a rank does alone
//   skipped                the traffic the alone collectives counted per step (launches and
//                          bytes by collective kind) and, with a topology, the planner's price
//                          of it: TP communication, pipeline transfers and bubble, gradient
//                          reduction, apart from the compute
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench/train_profile.hpp"
#include "layout/vocabulary.hpp"
#include "plan/layout_search.hpp"
#include "plan/memory.hpp"
#include "plan/model_spec.hpp"
#include "plan/topology.hpp"

namespace meshtp::bench {

struct RankBenchOptions {
  plan::ModelSpec model{};  // the whole job's model (its batch: the global batch; its
                            // precision the run's: fp32 or bf16)
  layout::Plan layout{};    // the whole job's layout
  std::string data{};       // the text to train on (train::TrainConfig::data)
  int rank = 0;               // which rank of the layout this process plays
  int warmup_steps = 1;
  int steps = 3;  // timed
  std::optional<plan::Topology> topology{};  // for the predicted compute and skipped price
  // The device's memory in bytes: a rank whose predicted memory exceeds it is refused before
  // it runs (0: not checked).
  double device_memory_bytes = 0;
  // Where the rank computes (a GPU's backend: its groups are host-staged over the alone
  // world); null: the CPU.
  device::Backend* backend = nullptr;
};

struct SkippedCollective {
  layout::CollectiveKind kind = layout::CollectiveKind::kNone;
  double launches_per_step = 0;
  double bytes_per_step = 0;  // message bytes (comm/communicator.hpp TrafficCount)
};

struct RankBenchResult {
  int rank = 0, ranks = 1, pipeline_rank = 0;
  TrainBenchResult run;  // the alone run's phases, step time and memory
  double measured_compute_s = 0;
  double measured_memory_bytes = 0;
  plan::MemoryEstimate predicted_memory;
  std::optional<plan::LayoutCandidate> priced;  // with a topology
  double predicted_compute_s = 0;               // with a topology
  std::vector<SkippedCollective> skipped;
};

// Throws meshtp::Error naming the value for a rank outside the layout, a layout the trainer
// rejects, or a rank that does not fit the device.
RankBenchResult run_rank_bench(const RankBenchOptions& options);

}  // namespace meshtp::bench
