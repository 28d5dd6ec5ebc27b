// One rank's share of a (dp, pp, cp, d1, d2) layout: its pipeline stages' models (model::Gpt,
// one per virtual stage), their data parallelism (train/zero.hpp), and the step's forward and
// backward over m microbatches run by the pipeline interpreter (train/pipeline_run.hpp).
//
//   world    dp × pp × cp × d1 × d2 ranks, row-major: the order [tp, cp, pp, dp] innermost
//            first (Megatron-Core's and the Llama 3 paper's): rank (r_dp, r_pp, r_cp, i, j)
//   groups   tp mesh (d1, d2)  the ranks sharing (r_dp, r_pp, r_cp)
//            cp group          the ranks sharing (r_dp, r_pp, i, j): context parallelism, the
//                              attention core's ring / all-to-all (model/block.hpp)
//            pp group          the ranks sharing (r_dp, r_cp, i, j): stage s+1 receives stage
//                              s's block of the residual stream from the same (r_cp, i, j)
//            dp·cp group       the ranks sharing (r_pp, i, j): gradient reduction, ZeRO —
//                              context parallelism's ranks hold the same parameters and see
//                              other tokens, so their gradients are summed as the replicas'
//                              (Megatron-Core's data-parallel group "with context
//                              parallelism", which its distributed optimizer shards over too)
//            tie group         pp ranks 0 and pp−1 of a pp group: the tied embedding
//   stages   S = pp·v; this rank holds stages k·pp + r_pp for chunks k < v, each L/S blocks
//
//   per step (global batch B, replica rows B/dp, microbatch rows b = B/(dp·m); each cp rank
//   of a replica runs b·s/cp tokens of each microbatch, its zigzag share):
//     run the schedule: F(i, s) = stage s's forward of microbatch i, B(i, s) its backward
//                       with dloss = 1/(dp·cp·m), so the gradients sum to the batch mean's
//     tie               ∂wte from stage 0 (embedding) + ∂wte from stage S−1 (head)
//     reduce            each chunk's DataParallel over dp·cp, buckets started as their blocks
//                       finish (ZeRO ≥ 2: after every microbatch's, into sharded accumulators)
//     loss              Σ_i loss_i on the last stage, summed over pp and dp·cp, / (dp·cp·m):
//                       every cp rank's loss is the mean of as many tokens
//
// Activations: a stage keeps only the input of each microbatch in flight (what it received,
// or its tokens), and re-runs F(i, s) before B(i, s) unless F(i, s) was its last forward —
// the boundary rematerialisation of GPipe (Huang et al. 2019, §2.2): exact (a forward is
// deterministic), and in 1F1B's steady state (F(i) then B(i) on the last stage) free.
// The bubble of each schedule is layout/pipeline_schedule.hpp's.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "comm/communicator.hpp"
#include "layout/pipeline_schedule.hpp"
#include "mesh/device_mesh.hpp"
#include "model/gpt.hpp"
#include "train/adamw.hpp"
#include "train/checkpoint.hpp"
#include "train/zero.hpp"

namespace meshtp::train {

// How a plan splits the world and the model, for printing: the rank order and the groups,
// then which ranks hold which stage's layers. E.g. dp 1 × pp 2 × tp 2x1 of 4 layers:
//   "world rank = ((r_dp·2 + r_pp)·2 + i)·1 + j: tp groups of 2 consecutive ranks, pipeline
//    groups of 2 (stride 2), data-parallel groups of 1 (stride 4)"
// (with cp > 1 the cp coordinate between r_pp and i, and its groups).
//   "stage 0: layers 0–1 + embedding on pipeline rank 0 (ranks 0–1); stage 1: …"
std::vector<std::string> describe_layout(const layout::Plan& plan, int layers);

class PipelineModel {
 public:
  // config.batch: the global batch. Collective over `world` (size = plan.ranks()).
  PipelineModel(const comm::Communicator& world, const model::GptConfig& config, int zero,
                const AdamWConfig& adamw);
  PipelineModel(const PipelineModel&) = delete;
  PipelineModel& operator=(const PipelineModel&) = delete;

  int chunks() const { return static_cast<int>(gpts_.size()); }
  model::Gpt& chunk(int k) { return *gpts_.at(static_cast<std::size_t>(k)); }
  DataParallel& data_parallel(int k) { return *dps_.at(static_cast<std::size_t>(k)); }
  int dp_rank() const { return mesh_.coord(0); }
  // The dp·cp ranks whose gradients are summed (and ZeRO shards over); this rank's place in
  // them (0: the replica whose TP ranks write a checkpoint).
  const comm::Communicator& dp_group() const { return replicas_.comm(); }
  int replica_rank() const { return replicas_.rank(); }
  // 0 on the ranks that gather a checkpoint's tensors (train/checkpoint.hpp's dp_rank):
  // replica 0's cp rank 0 — or every cp rank of replica 0 where a mixture of experts folds
  // over tp·cp (the experts' gather spans them).
  int checkpoint_gather_rank() const { return fold_experts_ ? dp_rank() : replica_rank(); }
  std::int64_t replica_rows() const { return rows_; }  // B/dp
  std::int64_t global_parameters() const;               // every element once (collective)

  void init(std::uint64_t seed);
  // tokens/targets: this replica's B/dp rows. Gradients of the whole batch, reduced over dp
  // (DataParallel::finish done). Returns the global batch's mean loss, identical everywhere.
  double forward_backward(std::span<const std::int32_t> tokens,
                          std::span<const std::int32_t> targets);
  // The global mean loss of a batch, forward only (the same schedule, no-op backwards).
  double loss(std::span<const std::int32_t> tokens, std::span<const std::int32_t> targets);

  // Checkpoints (train/checkpoint.hpp): every chunk with its whole AdamW state (under ZeRO
  // gathered over dp: collective); checkpoint_done() drops those temporaries again.
  ModelParts checkpoint_parts(bool saving);
  void checkpoint_done(bool saving);
  const comm::Communicator& pipeline_group() const { return mesh_.dim_comm(1); }

  double grad_norm(const comm::Communicator& world) const;  // over every chunk
  void clip(double norm, double max_norm);
  void step(float lr);

 private:
  double run(std::span<const std::int32_t> tokens, std::span<const std::int32_t> targets,
             bool train);
  void sum_tied_embedding();

  mesh::DeviceMesh mesh_;  // (dp, pp, cp, d1, d2)
  mesh::DeviceMesh tp_mesh_;
  mesh::DeviceMesh replicas_;  // (dp, cp): the gradient group
  // (cp, d1, d2): a mixture of experts' folding group under context parallelism
  // (GptConfig::fold_group); its experts' gradients reduce over dp alone (mesh_.dim_comm(0)).
  mesh::DeviceMesh fold_;
  bool fold_experts_ = false;  // cp > 1 and a mixture of experts
  comm::Communicator tie_;  // pp ranks 0 and pp−1 (others: a group of their own)
  layout::PipelineSchedule schedule_;
  std::int64_t rows_ = 0, microbatch_rows_ = 0, seq_ = 0;
  std::vector<std::unique_ptr<model::Gpt>> gpts_;
  std::vector<std::unique_ptr<DataParallel>> dps_;
  device::Array scratch_out_;  // a re-run forward's output (already sent), in the backend
};

}  // namespace meshtp::train
