// ATP cost model (ATP §3.3, §3.5, §4): communication by Eq. 2 on the bandwidths of Eq. 3–4
// (mesh_links.hpp), compute by FLOPs, overlap by chunks (forward) and dX/dW (backward).
//
// Mesh (d1, d2), N = d1·d2, M = b·s tokens, h hidden, e bytes per element, B1/B2 the
// all-reduce bandwidths of mesh dims 0/1. Per layer and pass, the four all-reduces f1…f4:
//   f1 qkv  column-first  [M, 3h/d1] on dim 1      f2 proj  row-first  [M, h/d2] on dim 0
//   f3 mlp1 column-first  [M, 4h/d1] on dim 1      f4 mlp2  row-first  [M, h/d2] on dim 0
// so one pass moves  M·e·(7h/(d1·B2) + 2h/(d2·B1))  and, forward + backward, L layers:
//   T_comm = 2·L·b·s·e·(7h/(d1·B2) + 2h/(d2·B1))                                  (Eq. 2)
// (the paper counts elements; e = 1 gives its formula verbatim). A term whose mesh dim has
// size 1 is 0.
//
// The candidate prices instead the collectives the runtime's block issues
// (layout/atp_traffic.hpp, counted equal by tests/model/atp_traffic_test.cpp): QKV's output
// reduce-scattered and the projection's input all-gathered over dim 1 where Eq. 2 has one
// all-reduce, each backward collective the transpose of its forward one, and the sharded
// LayerNorms' row-statistics all-reduces over dim 1; one call per chunk of each, so each
// pays its latency α = T_launch + (P−1)·L_sync per step of the ring. On top: the elementwise
// ops (elementwise.hpp, layout kAtp: E_f forward, E_b backward), and overlaps:
//   compute  G_f = (24·b·s·h² + 4·b·s²·h)/N / F,  G_b = 2·G_f    (GeMMs)
//            C_f = G_f + E_f                                    (forward compute)
//   chunks (ATP §4): the runtime's block (model/block.cpp) is a program on three resources —
//   the device's compute and one communication engine per mesh dim (like one NCCL
//   communicator each: a dim's collectives run one after the other, in the order started,
//   the two dims' at once). Every pass is a sequence of loops over the c chunks ("stages");
//   stage k's iteration i waits for stage k−1's collective of chunk i, computes, and starts
//   chunk i's collective of stage k; a dW GeMM may follow the loop, and a LayerNorm's
//   statistics all-reduce is waited at once. With t the device's clock and free_d the time
//   dim d's engine is done with what it was given:
//            iteration i of stage k:  t ← max(t, done[k−1][i]) + compute_k
//                                     done[k][i] = free_d ← max(t, free_d) + x_k
//                                     (t ← done[k][i] when the stage waits at once)
//            after the loop:          t ← t + after_k           (dW GeMM, bias gradients)
//            the pass:                T = t at the end (the last stage waits for everything)
//   The stages, per chunk (GeMM FLOPs / c / F, elementwise.hpp's ops / c, each collective's
//   call; Xᵈ on mesh dim d, "blocking" = the LayerNorm statistics):
//     forward  1 ln1                               AR¹ stats, blocking
//              2 qkv GeMM                          RS¹
//              3 qkv bias, attention core, softmax AG¹ (proj's input)
//              4 proj GeMM                         AR⁰
//              5 proj bias, residual, ln2          AR¹ stats, blocking
//              6 mlp1 GeMM                         AR¹
//              7 mlp1 bias + GeLU, mlp2 GeMM       AR⁰
//              8 mlp2 bias, residual               —
//     backward 1 mlp2 dX GeMM                      AR¹   then mlp2 dW GeMM + bias grad
//              2 GeLU backward, mlp1 dX GeMM       AR⁰   then mlp1 dW GeMM + bias grad
//              3 residual copy, ln2 backward       AR¹ stats, blocking
//              4 proj dX GeMM                      RS¹   then proj dW GeMM + bias grad
//              5 attention core backward, softmax  AG¹ (qkv's dy)
//              6 qkv dX GeMM                       AR⁰   then qkv dW GeMM + bias grad
//              7 residual copy, ln1 backward       AR¹ stats, blocking
//   so linear k+1's dX GeMM of chunk i waits for linear k's collective of chunk i, the
//   LayerNorms are barriers, and dims alternate only where the block alternates them.
//   c = 1 is ATP without the chunk optimisation: the forward is serial, T_f = C_f + X_f, and
//   in the backward each linear's collective hides under its own dW GeMM only.
//   Worked example, c = 2, ms, the backward's first three stages with round numbers
//   (mlp2: dX 1 per chunk, AR¹ 3 per chunk, dW 1; mlp1: dX 1, AR⁰ 3, dW 1; ln2: 1, no call):
//            mlp2: dX(0) 0–1, AR¹(0) 1–4;  dX(1) 1–2, AR¹(1) 4–7;  dW 2–3
//            mlp1: dX(0) 4–5 (waits AR¹(0)), AR⁰(0) 5–8;  dX(1) 7–8 (waits AR¹(1)),
//                  AR⁰(1) 8–11;  dW 8–9
//            ln2:  9–10 (AR⁰(0) done at 8);  11–12                              T = 12
//   Without the waits mlp1's dX would run 3–4 and 4–5 and T would be 10; with mlp1's
//   collective on dim 1 too it queues behind mlp2's (7–10, 10–13) and T = 14
//   (AtpCost.ChunkStagesWaitForTheSameChunkOfThePreviousStage). The model this replaced
//   priced a pass as one pipeline of every chunk's calls of all four linears against the
//   dims' totals, (G_b/2 + E_b)/c + max(G_b/2 + (c−1)/c·(G_b/2 + E_b), X_b/c + (c−1)/c·
//   max(X_b,0, X_b,1)), so it let a linear's collectives hide under the next linear's dX
//   GeMMs of the same chunk, which wait for them (docs/simulation.md, session 5).
//   ATP IC1's simulated platform (pcie-8xa100's levels, mesh (2, 4), M1): 4 chunks simulate
//   22% faster than 1 (chunk i's AR⁰ runs under chunk i+1's AR¹); priced so, 190.7 ms against
//   190.0 simulated. The preset itself is host-staged (Topology::host_staged: NCCL_P2P_DISABLE
//   puts both dims' traffic through host memory), which the platform does not model: there
//   the two dims share one engine (dim_sharing 1, chunk_stages_time) and chunks gain only what
//   compute hides (AtpCost.HostStagedDimsTakeTurns).
//   layer    T_f(c) + T_b  (+ T_f(c) again under full recomputation; under selective
//            recomputation backward stage 5 runs the attention core's forward, 4·b·s²·h/N/F,
//            and its softmax again first, and the layer pays what that adds to T_b)
// c = 1 is ATP without the chunk optimisation; mesh (N, 1) is Megatron-LM's 1D TP.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/gemm_model.hpp"
#include "layout/atp_traffic.hpp"
#include "plan/elementwise.hpp"
#include "plan/mesh_links.hpp"
#include "plan/model_spec.hpp"

namespace meshtp::plan {

// Eq. 2 verbatim, bandwidth term only: 2·L·b·s·e·(7h/(d1·B2) + 2h/(d2·B1)), with B1, B2
// in bytes/s (ignored when their mesh dim has size 1) and e = model.element_bytes().
double atp_comm_time(const ModelSpec& model, int d1, int d2, double b1, double b2);

// One operator of one layer, for --explain.
struct AtpOp {
  std::string name;  // "ln1", "qkv", "attention", "proj", "ln2", "mlp1", "mlp2"
  bool backward = false;
  double flops_per_rank = 0;
  double compute_s = 0;  // chunks·chunk_s + dw_s
  double chunk_s = 0;    // one chunk's product(s): the forward's, or backward's dX (GemmModel)
  double dw_s = 0;       // backward of a linear: the dW product over the whole batch
  std::vector<layout::AtpCall> calls;  // its collectives (one layer, every chunk)
  double sent_bytes = 0;               // per rank, Σ over calls
  double comm_s = 0;                   // Σ over calls, latency included
};

struct AtpEstimate {
  int chunks = 1;
  // One layer. compute_* include the elementwise ops (elementwise_*).
  double compute_fwd_s = 0, comm_fwd_s = 0, compute_bwd_s = 0, comm_bwd_s = 0;
  double elementwise_fwd_s = 0, elementwise_bwd_s = 0;
  double forward_s = 0, backward_s = 0, recompute_s = 0, layer_s = 0;
  // The model (L layers).
  double t_comm_s = 0, t_compute_s = 0, t_step_s = 0;
  std::vector<AtpOp> ops;  // one layer, forward then backward
};

// Why ATP cannot shard `model` on (d1, d2) with `chunks`, e.g. "hidden=1000 is not
// divisible by d2=3 (mesh 2x3)"; nullopt when it can. It is the runtime block's own check
// (layout::atp_block_invalid_reason): the planner ranks only meshes the runtime runs.
std::optional<std::string> atp_invalid_reason(const ModelSpec& model, int d1, int d2,
                                              int chunks);

// One loop of the block over its chunks (the header's stages): per chunk, wait for the
// previous stage's collective of that chunk, compute, start this stage's collective.
struct ChunkStage {
  double compute_s = 0;   // per chunk
  int mesh_dim = 0;       // where comm_s runs
  double comm_s = 0;      // per chunk; 0: the stage starts no collective
  bool blocking = false;  // its collective is waited at once (LayerNorm statistics)
  double after_s = 0;     // after the loop, whole batch (dW GeMM, bias gradients)
};

// The time of one pass of `stages` over `chunks` chunks on the device and the two mesh
// dims' engines (the header's recurrence). `dim_sharing` (MeshLinks::dim_sharing): a
// collective that starts while the other dim's engine is busy is slowed by sharing × the
// overlap, x ← x + sharing·min(x, free_other − start) (the other's is not revisited); at
// sharing 1 (the dims take turns on one resource: a host-staged topology, or a measured
// sharing of 1) the two dims have one engine, whose collectives run one after the other in
// the order started — the formula would let a short collective hide inside a long one.
double chunk_stages_time(const std::vector<ChunkStage>& stages, int chunks, double dim_sharing = 0);

// `elementwise`: elementwise_estimate(model, kAtp, d1, d2, R); an empty one ({}) prices the
// GeMMs and collectives alone.
AtpEstimate atp_estimate(const ModelSpec& model, const MeshLinks& links, int chunks,
                         const GemmModel& gemm, const ElementwiseEstimate& elementwise);

}  // namespace meshtp::plan
