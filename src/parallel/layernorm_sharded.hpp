// LayerNorm whose normalised (hidden) dim is split over a process group: ATP's residual
// stream is [Replicate, Shard(1)], so each rank holds h/d2 of every row's h features.
//
//   N   rows held here (all tokens, or a chunk of them)
//   C   local features (C_global / group size)
//
// Placements: x, y [R, S(1)] (hidden split over mesh dim 1); w, b [S(0)] over the same group
// (replicated over mesh dim 0). Per-row statistics are reduced over the group:
//
//   forward : s1_n = Σ_c x[n,c],  s2_n = Σ_c x[n,c]²            (local, in double)
//             all_reduce over the group of (s1, s2)             2·N doubles, blocking
//             μ_n = s1_n/C_global,  rstd_n = 1/√(s2_n/C_global − μ_n² + eps)
//             y = (x − μ)·rstd ⊙ w + b
//   backward: g = dy ⊙ w;  t1_n = Σ_c g,  t2_n = Σ_c g ⊙ x̂      (local, in double)
//             all_reduce over the group of (t1, t2)             2·N doubles, blocking
//             dx += rstd·(g − t1/C_global − x̂·t2/C_global)
//             dw += Σ_n dy ⊙ x̂,  db += Σ_n dy                   (complete: every row is here)
//
// With no group (or a group of one) these are exactly ops' layernorm_forward/backward (the
// serial two-pass statistics). Row work runs on the fast kernels (ops/kernels.hpp). The single-pass
// variance in double loses nothing that matters for activations whose mean is within ~10⁴ standard
// deviations of zero.
//
// `scratch` holds 2·N doubles (the statistics in flight); the caller sizes it once.
//
// On the seam (docs/seam.md): norm_sharded_forward/backward and residual_norm_sharded_forward
// below take a device::Backend and its views, and run the backend's norm phases
// (device/backend.hpp: norm_forward_sums → the group's all-reduce of the fp64 sums →
// norm_forward_apply); a serial group runs the backend's whole-row op. On host memory: the
// CPU backend and ops/cpu_backend.hpp's host_view.
#pragma once

#include <cstdint>
#include <span>

#include "comm/communicator.hpp"
#include "core/view.hpp"
#include "device/backend.hpp"
#include "layout/vocabulary.hpp"
#include "tensor/tensor.hpp"

namespace meshtp::parallel {

// x, y, dx, dy, sum, a, b_in: N × C views of `backend`'s memory; w, b, dw, db: fp32 1 × C;
// mean, rstd: fp32 1 × N (RMSNorm: b, db, mean empty, rstd holds r); sums: fp64
// 1 × ≥ norm_sum_count(norm, N), the statistics in flight. A group must move `backend`'s
// memory (comm::Communicator::host_staged or nccl for a device).
void norm_sharded_forward(device::Backend& backend, layout::Norm norm, const View& y,
                          const View& mean, const View& rstd, const View& x, const View& w,
                          const View& b, std::int64_t c_global, const comm::Communicator* group,
                          const View& sums);
void norm_sharded_backward(device::Backend& backend, layout::Norm norm, const View& dx,
                           const View& dw, const View& db, const View& dy, const View& x,
                           const View& w, const View& mean, const View& rstd, std::int64_t c_global,
                           const comm::Communicator* group, const View& sums);
void residual_norm_sharded_forward(device::Backend& backend, layout::Norm norm, const View& sum,
                                   const View& y, const View& mean, const View& rstd, const View& a,
                                   const View& b_in, const View& w, const View& b,
                                   std::int64_t c_global, const comm::Communicator* group,
                                   const View& sums);

}  // namespace meshtp::parallel
