// How each kind of parameter is split over the mesh (d1, d2): a placement per mesh dim
// (mesh/placement.hpp) of the STORED matrix — the global tensor itself, or its transpose, with
// QKV's out index regrouped by heads (π below). Init, load, save and gradient gathering all go
// through it: scatter is mesh::DTensor::distribute, gather a redistribute to [R, R].
//
//   kind                 global   stored               placements        local
//   kHidden              [h]      W                    [R, S(0)]         [h/d2]
//   kColumnFirstWeight   [M, K]   W                    [S(0), S(1)]      [M/d1, K/d2]
//   kColumnFirstBias     [M]      b                    [S(0), R]         [M/d1]
//   kRowFirstWeight      [M, K]   W                    [S(1), S(0)]      [M/d2, K/d1]
//   kRowFirstBias        [M]      b                    [R, S(0)]         [M/d2]
//   kQkvWeight           [3h, h]  π_{d1·d2} W          [S(0), S(1)]      [3h/d1, h/d2]
//   kQkvBias             [3h]     π_{d1·d2} b          [S(0), R]         [3h/d1]
//   kSwigluWeight        [2f, h]  σ_{d1} W             [S(0), S(1)]      [2f/d1, h/d2]
//
// 2D GeMM tensor parallelism (model/gemm2d_block.hpp; mesh (Nr, Nc) = (d1, d2)) stores each
// linear's matrix as gemm2d_linear keeps it, W [M, K] itself (kColumnFirstWeight) or V = Wᵀ
// [K, M] — out-features over mesh dim 1 either way, which is all the attention core needs:
//
//   kGemm2dWeightT       [M, K]   Wᵀ                   [S(0), S(1)]      [K/Nr, M/Nc]
//   kGemm2dQkvWeight     [3h, h]  π_{Nc} W             [S(0), S(1)]      [3h/Nr, h/Nc]
//   kGemm2dQkvWeightT    [3h, h]  (π_{Nc} W)ᵀ          [S(0), S(1)]      [h/Nr, 3h/Nc]
//   kGemm2dBias          [M]      b                    [R, S(0)]         [M/Nc]
//   kGemm2dQkvBias       [3h]     π_{Nc} b             [R, S(0)]         [3h/Nc]
//
// A mixture of experts' weights lie on the experts' own mesh (ep, etp) over the same ranks
// (Liu et al. 2025, "MoE Parallel Folding"; model/block.hpp), each expert's width F split over
// etp (parallel/moe.hpp's shards):
//
//   kExpertFc1           [E, F, h]  W1 itself          [S(0), S(1)]      [E/ep, F/etp, h]
//   kExpertFc2           [E, h, F]  W2 itself          [S(0), S(2)]      [E/ep, h, F/etp]
//
// π_B groups the out index by B blocks of heads, q | k | v of each block together: stored row
// m' is global row π_B(m') with w = h/B, c = m' / 3w, r = m' mod 3w,
//   π_B(m') = (r / w)·h + c·w + r mod w.
// Example h = 4, B = 2 (w = 2): m' = 0..11 → 0 1 4 5 8 9 | 2 3 6 7 10 11, so output column
// block c1 of the 2D GeMM QKV is q | k | v of heads [c1·a/Nc, (c1+1)·a/Nc).
//
// Grouped-query attention (kv heads g < heads a, head dim d): a QKV weight [h + 2·g·d, h]
// has sections q (h rows), k and v (g·d rows each); π_B then takes h/B rows of q, g·d/B of k
// and of v per block, so each head block holds its a/B query heads and their g/B KV heads
// (B must divide g). A QKV bias is always 3 equal sections (the runtime's grouped-query
// models have no biases).
//
// Replicated KV heads (Megatron-Core refuses them; meshtp runs them): with g < B (B % g == 0)
// block c reads KV head c·g/B, so kQkvWeight given kv_heads = g stores, per block, its h/B
// query rows and a copy of that head's d k rows and d v rows: B·(h/B + 2d) stored rows, each
// KV row held by B/g blocks. The copies' gradients are summed over them by the stack
// (model/stack.hpp), so every copy takes the same update.
//
// σ_B (kSwigluWeight, SwiGLU's first MLP linear, global rows gate f | up f as Hugging Face's
// gate_proj and up_proj stacked) groups the out index by B = d1 blocks the same way: block
// c0 is gate rows [c0·f/d1, (c0+1)·f/d1) then the same up rows, so rank (c0, ·)'s output
// columns are [gate | up] of its own f/d1 features, what swiglu_forward takes. Megatron-Core
// does the same per rank (megatron/core/transformer/mlp.py, core_v0.15.0: fc1 of width 2f
// column-parallel, each rank's output chunked in two halves, gate then up, by glu(); its
// sharded checkpoint saves the halves as two global tensors, apply_swiglu_sharded_factory),
// so a checkpoint does not depend on the tensor-parallel size; here the one global tensor
// gate | up plays that part.
//
// ATP's QKV (PyTorch layout: rows q, then k, then v, each h rows with heads contiguous) is
// column-first, but a contiguous row block would mix q, k and v of different heads. With
// B = d1·d2 head blocks (w = h/(d1·d2)), rank (c0, ·) holds stored rows of blocks
// c0·d2 … c0·d2 + d2 − 1, piece j = block c0·d2 + j, q then k then v:
//   local row r:  j = r / 3w,  t = (r mod 3w) / w  (0 q, 1 k, 2 v),  u = r mod w
//   global row = t·h + (c0·d2 + j)·w + u
// so the reduce-scatter over mesh dim 1 of the QKV output (Linear2D scatter_output) leaves
// rank (c0, c1) exactly q, k, v of heads [(c0·d2+c1)·a/(d1·d2), (c0·d2+c1+1)·a/(d1·d2)):
// rank r of the mesh holds head block r. Worked example, h = a = 4 (w = 1), mesh (2, 2):
// ranks (0, ·) hold local rows [0, 4, 8 | 1, 5, 9] (pieces 0 and 1: q0 k0 v0 | q1 k1 v1),
// ranks (1, ·) hold [2, 6, 10 | 3, 7, 11]; after the reduce-scatter rank (0, 1) keeps piece 1,
// the q, k, v of head 1.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "mesh/device_mesh.hpp"
#include "mesh/placement.hpp"
#include "tensor/tensor.hpp"

namespace meshtp::parallel {

enum class ParamShard {
  kHidden,
  kColumnFirstWeight,
  kColumnFirstBias,
  kRowFirstWeight,
  kRowFirstBias,
  kQkvWeight,
  kQkvBias,
  kGemm2dWeightT,
  kGemm2dQkvWeight,
  kGemm2dQkvWeightT,
  kGemm2dBias,
  kGemm2dQkvBias,
  kExpertFc1,
  kExpertFc2,
  kSwigluWeight,
};
// Whether parameters of this kind lie on the experts' own mesh (ep, etp) over the ranks of
// the attention's mesh (MoE parallel folding) rather than on the attention's (d1, d2).
inline bool on_expert_mesh(ParamShard kind) {
  return kind == ParamShard::kExpertFc1 || kind == ParamShard::kExpertFc2;
}
std::string_view name(ParamShard kind);

// The placements of the stored matrix, one per mesh dim.
mesh::ShardingSpec placements(ParamShard kind);

// Local shape on a mesh (d1, d2); throws naming the dim and the sizes if one does not divide.
// kv_heads (a QKV weight's g; 0: not one): below the head blocks, each block holds a copy of
// the one KV head its query heads read (see above).
Shape local_shape(ParamShard kind, const Shape& global, const std::vector<int>& mesh_shape,
                  std::int64_t kv_heads = 0);

// Mesh dims over which every rank holds the same local values (the Replicate placements).
std::vector<int> replicated_dims(ParamShard kind);

// Calls fn(local_flat_index, global_flat_index) for every local element of the rank at
// `coords`, in local order.
void for_each_local(ParamShard kind, const Shape& global, const std::vector<int>& mesh_shape,
                    const std::vector<int>& coords,
                    const std::function<void(std::int64_t, std::int64_t)>& fn,
                    std::int64_t kv_heads = 0);

// local = this rank's block of a global tensor (every rank passes the same global).
void scatter_param(ParamShard kind, const Tensor& global, const mesh::DeviceMesh& mesh,
                   std::span<float> local, std::int64_t kv_heads = 0);

// The global tensor assembled from every rank's local block: redistribute to [R, R] (an
// all_gather over each sharding mesh dim). Collective; every rank returns the global tensor
// (replicated KV rows: their copies must agree; the stack keeps them so).
Tensor gather_param(ParamShard kind, std::span<const float> local, const Shape& global,
                    const mesh::DeviceMesh& mesh, std::int64_t kv_heads = 0);

}  // namespace meshtp::parallel
