// How each kind of parameter is split over the mesh (d1, d2), as data: one rule per kind
// mapping a local element to its global element. Init, load, save and gradient gathering
// all go through it, so every layout agrees on what a global tensor is.
//
//   kind               global   local                  spec (tensor dims)   replicated over
//   kHidden            [h]      [h/d2]   block c1       [R, S(0)]            mesh dim 0
//   kColumnFirstWeight [M, K]   [M/d1, K/d2]            [S(0), S(1)]         —
//   kColumnFirstBias   [M]      [M/d1]   block c0       [S(0), R]            mesh dim 1
//   kRowFirstWeight    [M, K]   [M/d2, K/d1]            [S(1), S(0)]         —
//   kRowFirstBias      [M]      [M/d2]   block c1       [R, S(0)]            mesh dim 0
//   kQkvWeight         [3h, h]  [3h/d1, h/d2]           heads, see below     —
//   kQkvBias           [3h]     [3h/d1]                 heads, see below     mesh dim 1
//
// 2D GeMM tensor parallelism (model/gemm2d_block.hpp; mesh (Nr, Nc) = (d1, d2)) stores each
// linear's matrix as gemm2d_linear keeps it: W [M, K] itself ([S(0), S(1)], the
// kColumnFirstWeight rule) or V = Wᵀ [K, M] block (c0, c1) — out-features over mesh dim 1
// either way for the activations, which is all the attention core needs:
//
//   kind                  global   local                     local (i, j) → global
//   kGemm2dWeightT        [M, K]   [K/Nr, M/Nc]              W[c1·M/Nc + j, c0·K/Nr + i]
//   kGemm2dQkvWeight      [3h, h]  [3h/Nr, h/Nc]             W[π(c0·3h/Nr + i), c1·h/Nc + j]
//   kGemm2dQkvWeightT     [3h, h]  [h/Nr, 3h/Nc]             W[π(c1·3h/Nc + j), c0·h/Nr + i]
//   kGemm2dBias           [M]      [M/Nc]  block c1          replicated over mesh dim 0
//   kGemm2dQkvBias        [3h]     [3h/Nc]                   b[π(c1·3h/Nc + i)], rep. dim 0
//
// π permutes the GeMM's out index m' so that output column block c1 ([n, 3h/Nc]) is q | k | v
// of heads [c1·a/Nc, (c1+1)·a/Nc): with w = h/Nc, c = m' / 3w, r = m' mod 3w,
//   π(m') = (r / w)·h + c·w + r mod w.
// Example h = 4, Nc = 2 (w = 2): m' = 0..11 → 0 1 4 5 8 9 | 2 3 6 7 10 11.
//
// QKV (PyTorch layout: rows are q, then k, then v, each h rows with heads contiguous) is
// column-first, but a contiguous row block would mix q, k and v of different heads. Its local
// rows are instead d2 pieces, piece j holding the heads of rank (c0, j), q then k then v:
//
//   local row r,  w = h/(d1·d2):   j = r / 3w,  t = (r mod 3w) / w  (0 q, 1 k, 2 v),
//                                  u = r mod w
//   global row = t·h + (c0·d2 + j)·w + u
//
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
};
std::string_view name(ParamShard kind);

// Local shape on a mesh (d1, d2); throws naming the dim and the sizes if one does not divide.
Shape local_shape(ParamShard kind, const Shape& global, const std::vector<int>& mesh_shape);

// Mesh dims over which every rank holds the same local values.
std::vector<int> replicated_dims(ParamShard kind);

// Calls fn(local_flat_index, global_flat_index) for every local element of the rank at
// `coords`, in local order.
void for_each_local(ParamShard kind, const Shape& global, const std::vector<int>& mesh_shape,
                    const std::vector<int>& coords,
                    const std::function<void(std::int64_t, std::int64_t)>& fn);

// local = this rank's block of a global tensor (every rank passes the same global).
void scatter_param(ParamShard kind, const Tensor& global, const mesh::DeviceMesh& mesh,
                   std::span<float> local);

// The global tensor assembled from every rank's local block: an all_gather over the whole
// mesh; replicated blocks are taken from the member with coordinate 0 in those dims.
// Collective; every rank returns the global tensor.
Tensor gather_param(ParamShard kind, std::span<const float> local, const Shape& global,
                    const mesh::DeviceMesh& mesh);

}  // namespace meshtp::parallel
