// Per-rank memory of a candidate: parameters, gradients, optimizer state, activations
// (Korthikanti et al., "Reducing activation recomputation in large transformer models",
// Korthikanti 2023 §4, Table 2) and transient communication buffers.
//
//   params/grads   (L·(12h²+13h) + V·h)/N elements each (every strategy shards every weight)
//   optimizer      AdamW with 2 fp32 states (8 B/param), plus an fp32 master copy
//                  (4 B/param) under fp16 mixed precision — 16 B/param in both precisions
//
// Activations of one layer, in Korthikanti's bytes for fp16 (scaled by e/2 for fp32),
// with s·b·h written sbh and a heads:
//   unsharded                 sbh·(34 + 5·a·s/h)
//   Megatron TP t             sbh·(10 + 24/t + 5·a·s/(h·t))
//   TP + sequence parallel    sbh/t·(34 + 5·a·s/h)      ← 1D TP, and every 2D GeMM
//                                                          algorithm (all tensors over N)
//   ATP (d1, d2)              sbh·(10/d2 + 6/N + 18/d1) + 5·a·s²·b/N
//     the 10·sbh of layer inputs, LayerNorm outputs and dropout masks are
//     [Replicate, Shard(1)] (÷d2); Q, K, V are fully sharded (÷N); the projection input
//     (2) and the MLP's 4h activations (16) are column-first outputs (÷d1); the attention
//     scores 5·a·s²·b are fully sharded (÷N). ATP (N, 1) gives Megatron's formula.
//   selective recomputation drops the 5·a·s² terms; full recomputation keeps only each
//   layer's input (2·sbh, sharded like the layer input) plus one layer's activations.
#pragma once

#include <iosfwd>

#include "plan/model_spec.hpp"

namespace meshtp::plan {

struct MemoryEstimate {
  double params_bytes = 0;
  double grads_bytes = 0;
  double optimizer_bytes = 0;
  double activations_bytes = 0;
  double workspace_bytes = 0;

  double total_bytes() const {
    return params_bytes + grads_bytes + optimizer_bytes + activations_bytes + workspace_bytes;
  }
  double total_gib() const;
};

std::ostream& operator<<(std::ostream& os, const MemoryEstimate& m);

// How the activations of one layer are sharded.
enum class ActivationLayout { kSequenceParallel, kAtp };

// One layer's stored activations per rank, no recomputation (Korthikanti bytes · e/2).
double layer_activation_bytes(const ModelSpec& model, ActivationLayout layout, int d1, int d2);

MemoryEstimate estimate_memory(const ModelSpec& model, ActivationLayout layout, int d1, int d2,
                               double workspace_bytes);

// Data parallelism over dp replicas with ZeRO stage `zero` (Rajbhandari et al. 2020 §5), as
// the runtime shards (train/zero.hpp): with dp > 1 the gradient buckets hold one more copy of
// the gradients (buffers); stage ≥ 1 keeps 1/dp of the optimizer state plus the 1/dp of the
// values being updated, stage 2 also 1/dp of the summed gradients; stage 3 keeps 1/dp of the
// parameters plus two of the `layers` blocks whole (the running one and the prefetched one).
// The model's own gradient accumulators stay whole in the runtime, so they are not divided.
void add_data_parallel(MemoryEstimate& m, int dp, int zero, int layers = 1);

}  // namespace meshtp::plan
