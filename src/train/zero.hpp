// Data parallelism over the dp group of a (dp, pp, d1, d2) layout, with the ZeRO stages of
// Rajbhandari et al. 2020 (ZeRO §5.1–5.2): gradients summed over the replicas, the AdamW
// update, and which of the optimizer state and the gradients each replica keeps.
//
//   bucket b    the parameters of block b (b < L), then one bucket of the rest (embeddings,
//               final LayerNorm; under sequence parallelism the blocks' LayerNorm parameters,
//               final only after the last block): S_b floats of this rank's TP shards, packed
//   part        ⌈S_b/dp⌉ floats: replica r owns [r·part, (r+1)·part) ∩ [0, S_b) of bucket b
//
//   stage 0     iall_reduce(bucket) as block b's backward finishes; every replica updates
//               everything (AdamW moments 2·S per rank)
//   stage 1     the same all_reduce; replica r updates only its part (moments 2·S/dp), then
//               all_gather of the updated parts restores every replica's parameters
//   stage 2     ireduce_scatter instead: replica r receives only its part, summed (half the
//               all-reduce's volume: (dp−1)/dp·S instead of 2·(dp−1)/dp·S); then as stage 1.
//               The gradient accumulators are sharded too (ZeRO §5.2): a block's gradient
//               exists whole only while that block's backward runs. Right before it, fresh
//               zeroed tensors are bound; right after, they are packed into a send buffer
//               (freed, the pack added to this replica's accumulated part: Σ_q buf_q[r] +
//               acc_r = acc_r + this microbatch's sum) and reduce-scattered into the part.
//               One reduction in flight: block b's waits for block b+1's, so it overlaps one
//               block's backward; the last one is waited when the backward returns. With m
//               microbatches that is m reduce-scatters per step (DeepSpeed's ZeRO-2 does the
//               same), against stage 0–1's single all-reduce of whole accumulators.
//   stage 3     as stage 2, and block b's parameters too live only as replica r's part
//               (ZeRO §5.3): right before block b runs (forward, or backward with its
//               recomputation) every other block's whole copy is freed, b's parts are
//               all-gathered (the prefetch's buffer, or now) into freshly allocated
//               tensors, and the next block's gather is started (prefetch: b+1 forward, b−1
//               backward) into a buffer freed once it is copied. The update touches only
//               the part (no all-gather after it); the embeddings and final LayerNorm (the
//               last bucket) stay whole, as in 2.
//
//   per step:   per microbatch: backward → start(b) per finished block (stage ≥ 2; stages
//               0–1 only on the last microbatch) → backward_done() → … → start_last() →
//               finish() → grad_norm() → clip() → step(lr) (stage 1: all_gather of every
//               bucket, all started before any wait; stage 2: the blocks' one after another,
//               two in flight; stage 3: of the last bucket)
//
//   memory (stage ≥ 2, a block of G floats per rank, parts ⌈G/dp⌉): persistent gradient
//               state G/dp per block; transient at most one block's gradient and its send
//               buffer (2·G, during block b's pack), stage 3 also one block's parameters
//               whole and the next block's gather buffer (plan/memory.cpp counts these).
//
// Worked example, dp = 2, bucket of S = 5 floats [g0 … g4]: part = 3; replica 0 owns
// [0, 3), replica 1 owns [3, 5) (its last slot is padding, never read). Stage 2's
// reduce_scatter sends 2·3 floats and hands replica 1 [g3+g3', g4+g4', pad]. The next
// microbatch's [h0 … h4]: replica 1 adds its part into slots 3–5 of its own send buffer,
// [h0, h1, h2, h3+g3+g3', h4+g4+g4', 0], and receives [g3+g3'+h3+h3', g4+g4'+h4+h4', pad].
//
// A mixture of experts folded over tp·cp (context parallelism, model/block.hpp): its expert
// weights differ between the cp ranks, so each block's expert weights form a bucket of their
// own (after the blocks', before the last), reduced and — stage ≥ 1 — sharded over the
// expert-data-parallel group (the dp replicas), parts ⌈S/dp⌉; the rest over dp·cp. Started,
// waited, gathered and prefetched with their block (as Megatron-Core keeps separate
// expert-data-parallel buffers: docs/references.md).
//
// The global gradient norm counts every element once: Σ over owned parts of g²/r_tp (r_tp:
// TP ranks holding a copy), summed over the world — for stage 0, Σ over everything of
// g²/(r_tp·dp). Checkpoints stay layout-free: the moments are all-gathered into whole TP
// shards before a save and this replica's part is kept after a load.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "comm/communicator.hpp"
#include "model/gpt.hpp"
#include "train/adamw.hpp"

namespace meshtp::train {

class DataParallel {
 public:
  // zero: 0–3. Stage 3 hooks itself into gpt (Gpt::set_before_layer).
  // expert_dp: a mixture of experts folded over tp·cp (model/block.hpp): the ranks holding
  // the same expert shard (the dp replicas), over which the expert weights' buckets reduce
  // and shard instead of dp_group; null: every parameter over dp_group.
  DataParallel(model::Gpt& gpt, const comm::Communicator& dp_group, int zero,
               const AdamWConfig& adamw, const comm::Communicator* expert_dp = nullptr);
  // The model's parameters were written whole (init): stage 3 keeps this replica's part of
  // every block's and frees the rest. Other stages: nothing.
  void parameters_written();
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  int zero() const { return zero_; }
  // Starts block b's reductions (its gradients are final; its expert bucket's too);
  // start_last(): the rest.
  // Stage ≥ 2 reduces every microbatch's gradient (call start for each microbatch's blocks);
  // stages 0–1 only the last microbatch's, once accumulated.
  bool reduces_every_microbatch() const { return zero_ >= 2; }
  void start(int bucket);
  void start_last();
  // Stage ≥ 2: a backward returned — waits its last block's reduction (frees the buffer).
  void backward_done();
  // Waits for every reduction; stage 0 writes the sums back into the model's gradients.
  void finish();
  // ‖g‖ over the global gradient, identical on every rank of `world`. Collective.
  double grad_norm(const comm::Communicator& world) const;
  void clip(double norm, double max_norm);
  // AdamW (stage ≥ 1: own parts, then all_gather), and the model told its values changed.
  void step(float lr);

  // Checkpoints (train/checkpoint_dir.hpp) read and write whole AdamW state. Stage 0 hands
  // its optimizer; stage ≥ 1 a temporary one, filled from the replicas' parts before a save
  // (collective over dp) and split into them after a load, then dropped.
  AdamW& optimizer_to_save();
  void saved();
  AdamW& optimizer_to_load();
  void loaded();
  // Floats of optimizer state (moments) this rank holds.
  std::int64_t optimizer_floats() const;
  // Floats of gradient state this rank holds between backwards: the model's accumulators
  // (stage ≥ 2: the last bucket's only), the summed parts and the buckets' buffers.
  std::int64_t gradient_floats() const;

 private:
  struct Bucket;
  void update(float lr);  // step's AdamW and, stage ≥ 1, the updated parts' all_gather
  // with_grads false: every gradient slot points at its value (checkpoint scratch: the
  // moments' shapes only; stage ≥ 2 holds no whole block gradients).
  std::vector<ParamRef> refs(int dp_factor, bool with_grads = true) const;
  bool transient(int bucket) const;  // stage ≥ 2 and a block's bucket: gradient sharded
  void wait_reduction(int bucket);   // stage ≥ 2: the reduce-scatter done, buffer freed
  void start_bucket(int bucket);
  int expert_bucket(int layer) const;  // block layer's expert bucket, or -1
  // Stage 3: a bucket's parameters whole in the model (all-gathered), or freed;
  // materialize_layer: the block's buckets, then Gpt::rebind.
  void materialize(int bucket);
  void materialize_layer(int layer);
  void start_gather(Bucket& b);  // stage 3: b's parameters into b.gathered
  void release(int bucket);
  void before_layer(int layer, bool backward);
  bool sharded(int bucket) const;  // stage 3 and a block's bucket
  void export_moments(AdamW& whole);  // collective over dp
  void import_moments(AdamW& whole);

  device::Array zeroed(std::int64_t count) const;  // fp32, of the model's backend

  model::Gpt& gpt_;
  device::Backend& be_;  // the model's: buckets, parts and moments live there
  const comm::Communicator& dp_;
  const comm::Communicator* expert_dp_;  // or null: the experts' gradients over dp_
  int zero_;
  AdamWConfig adamw_config_;
  std::unique_ptr<AdamW> whole_;  // stage 0
  std::unique_ptr<AdamW> scratch_;  // stage ≥ 1, while a checkpoint is saved or loaded
  std::vector<Bucket> buckets_;
  std::int64_t steps_ = 0;
  std::vector<Shape> shapes_;  // every parameter's local shape (stage 3 frees them)
  int in_flight_ = -1;         // stage ≥ 2: the block whose reduce-scatters are pending
  int layers_ = 0;             // this stage's blocks
};

}  // namespace meshtp::train
