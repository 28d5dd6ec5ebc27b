// Mixture of experts, the serial pieces (no communication): the top-k router and its
// load-balancing loss, the dispatch order, the experts' MLPs as a grouped GeMM, and the
// weighted combine. parallel/moe.hpp runs them with expert parallelism in between.
//
//   N tokens, h hidden, E experts, k = top_k experts per token, F an expert's MLP width
//   (or a tensor-parallel shard of it)
//
// Router (Mixtral's convention, Jiang et al. 2024 §2.1; Megatron-Core's top-k router without
// pre-softmax is the same):
//   ℓ = x·W_rᵀ                                   logits [N, E]
//   p_n = softmax(ℓ_n)                           probabilities over all experts (aux loss)
//   S_n = the k largest ℓ_n (ties: lower index)  chosen experts, by descending logit
//   g_{n,j} = exp(ℓ_{n,S_nj}) / Σ_i exp(ℓ_{n,S_ni})   gates: softmax over the chosen logits
//
// Forced balance (a benchmark's routing, as Megatron-Core's --moe-router-force-load-balancing
// forces it; there with random logits, here exactly): token n's experts are
//   S_n = { (n·k + j) mod E : j = 0 … k−1 }            (k ≤ E: distinct)
// so every expert gets ⌊N·k/E⌋ or ⌈N·k/E⌉ of a call's assignments whatever the logits, and
// the gates are the softmax over those experts' logits as above, so the router still learns.
// The memory and time of a forced run are what the planner prices (balanced routing).
//
// Capacity (Lepikhin et al. 2021, GShard §2.2; Megatron-Core's get_capacity): with a
// capacity factor cf > 0, expert e takes at most C = ⌈cf·N·k/E⌉ of the call's assignments, in
// token order (Megatron-Core's "position" drop policy); the others are dropped: their gate
// contributes nothing. cf = 0 is dropless. Drops depend on which tokens share a call, so a
// layer that routes its tokens in shards drops per shard, as Megatron-Core does per rank.
//
// Load-balancing loss (Fedus et al. 2022, Switch Transformer §2.2, Eq. 4; Megatron-Core's
// switch_load_balancing_loss_func), over a token set of N_g tokens that may be spread over
// ranks, with c_e the set's assignments to expert e (before the capacity cut):
//   aux = α · E / (N_g² · k) · Σ_e c_e · Σ_n p_{n,e}
// Each call sums its own tokens' p: the partials of the set's calls add up to aux. It is α
// when routing is uniform (c_e = N_g·k/E, p = 1/E). c is piecewise constant in ℓ, so
//   ∂aux/∂p_{n,e} = α · E · c_e / (N_g² · k)
//
// Router backward, for dg = ∂L/∂g and the aux loss's weight a in L:
//   dℓ_{n,S_nj} = g_{n,j} · (dg_{n,j} − Σ_i g_{n,i}·dg_{n,i})          (the gates' softmax)
//   dℓ_n       += p_n ⊙ (dp_n − Σ_e p_{n,e}·dp_{n,e}),  dp_{n,e} = a·∂aux/∂p_{n,e}
//
// Dispatch: the kept assignments sorted by expert, stably (token, then slot): expert e's rows
// are [offsets[e], offsets[e+1]) of the permuted tokens xp, xp[r] = x[token_of[r]];
// row_of[n·k + j] is assignment (n, j)'s row, −1 when dropped.
//
// Experts (grouped GeMM: one GeMM per expert on the CPU), for expert e's rows X_e:
//   H_e = X_e·W1_eᵀ   A_e = gelu(H_e)   Y_e = A_e·W2_eᵀ
//   W1 [E·F, h] (expert e's rows [e·F, (e+1)·F)),  W2 [E·h, F] (rows [e·h, (e+1)·h))
// With F a shard of the width (expert tensor parallelism), Y is a partial sum over shards.
// Backward: dA = dY·W2_e   dW2_e += dYᵀ·A   dH = gelu'(H) ⊙ dA   dW1_e += dHᵀ·X_e   dX_e = dH·W1_e
//
// Combine: y_n = Σ_j g_{n,j} · yp[row_of(n, j)] over kept assignments; backward
//   dyp[row_of(n, j)] = g_{n,j}·dy_n,   dg_{n,j} = ⟨dy_n, yp[row_of(n, j)]⟩ (0 when dropped)
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tensor/tensor.hpp"

namespace meshtp {

struct MoeRouting {
  std::int64_t tokens = 0, experts = 0, top_k = 0;
  std::vector<float> probs;          // [N, E] softmax over every expert
  std::vector<std::int32_t> expert;  // [N, k] chosen experts, by descending logit
  std::vector<float> gate;           // [N, k] softmax over the chosen logits
  std::vector<std::uint8_t> kept;    // [N, k] 1 where the assignment is within capacity
  std::vector<std::int64_t> counts;  // [E] assignments per expert, before the capacity cut
};

// ⌈cf·N·k/E⌉, or N·k (everything fits) when cf is 0.
std::int64_t moe_capacity(std::int64_t tokens, std::int64_t experts, std::int64_t top_k,
                          double capacity_factor);

// Routes the N rows of logits [N, E] (by the k largest logits, or with force_balance by the
// cyclic rule above). Throws meshtp::Error naming the values unless 1 ≤ top_k ≤ E and
// capacity_factor ≥ 0.
MoeRouting moe_route(ConstMatrixView logits, std::int64_t top_k, double capacity_factor,
                     bool force_balance = false);

// This call's part of the set's load-balancing loss (above); global_counts has E entries.
double moe_aux_loss(const MoeRouting& routing, std::span<const std::int64_t> global_counts,
                    std::int64_t global_tokens, double coeff);

// dlogits [N, E] = ∂L/∂ℓ (overwritten) for dgate [N, k] = ∂L/∂g and the aux loss weighted
// by aux_weight·coeff in L (aux_weight 0: no aux term).
void moe_router_backward(MatrixView dlogits, const MoeRouting& routing,
                         std::span<const float> dgate, std::span<const std::int64_t> global_counts,
                         std::int64_t global_tokens, double coeff, double aux_weight);

struct MoeDispatch {
  std::vector<std::int64_t> offsets;   // [E + 1]
  std::vector<std::int64_t> row_of;    // [N·k], −1 when dropped
  std::vector<std::int64_t> token_of;  // [rows]
  std::int64_t rows() const { return offsets.empty() ? 0 : offsets.back(); }
};
MoeDispatch moe_dispatch(const MoeRouting& routing);

// xp[r] = x[token_of[r]]
void moe_permute(MatrixView xp, ConstMatrixView x, const MoeDispatch& dispatch);
// dx[token_of[r]] += dxp[r]
void moe_permute_backward(MatrixView dx, ConstMatrixView dxp, const MoeDispatch& dispatch);

// y = the gated sum of each token's expert outputs (overwritten; a token with every
// assignment dropped gets 0).
void moe_combine(MatrixView y, ConstMatrixView yp, const MoeRouting& routing,
                 const MoeDispatch& dispatch);
// dyp (overwritten) and dgate [N, k] (overwritten).
void moe_combine_backward(MatrixView dyp, std::span<float> dgate, ConstMatrixView dy,
                          ConstMatrixView yp, const MoeRouting& routing,
                          const MoeDispatch& dispatch);

// The experts' MLPs on the permuted rows: y, pre (H) and act (A) overwritten, rows × h, F, F.
// offsets has E + 1 entries (expert e's rows [offsets[e], offsets[e+1])).
void expert_mlp_forward(MatrixView y, MatrixView pre, MatrixView act, ConstMatrixView x,
                        ConstMatrixView w1, ConstMatrixView w2,
                        std::span<const std::int64_t> offsets);
// dx (rows × h) overwritten; dw1, dw2 accumulate; dact and dpre (rows × F) are scratch.
void expert_mlp_backward(MatrixView dx, MatrixView dw1, MatrixView dw2, MatrixView dact,
                         MatrixView dpre,
                         ConstMatrixView dy, ConstMatrixView x, ConstMatrixView pre,
                         ConstMatrixView act, ConstMatrixView w1, ConstMatrixView w2,
                         std::span<const std::int64_t> offsets);

}  // namespace meshtp
