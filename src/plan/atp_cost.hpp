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
//   forward, c chunks (ATP §4.1: chunk i's collectives run under chunk i+1's compute; each
//   chunk launches its own; LayerNorm, GeLU, … run per chunk between them). The chunks form
//   a pipeline over three resources — the device's compute, mesh dim 0's links and mesh dim
//   1's links (a device runs collectives on both dims at once: chunk i's on dim 0 under
//   chunk i+1's on dim 1) — each busy for its own total, so after the first chunk the
//   busiest one sets the pace:
//            T_f(c) = (C_f + X_f)/c + (c−1)/c · max(C_f, X_f,0, X_f,1)
//            X_f,d  = the forward calls on mesh dim d,   X_f = X_f,0 + X_f,1
//   backward (ATP §4.2: per linear, every chunk's dX GeMM starts its collectives, the dW GeMM
//   — half of G_b — runs under them, and each chunk's elementwise ops follow its own; only
//   the first chunk's dX GeMMs and the last chunk's elementwise ops cannot overlap
//   communication; the chunks' calls pipeline over the two dims likewise):
//            T_b(c) = (G_b/2 + E_b)/c + max(G_b/2 + (c−1)/c · (G_b/2 + E_b),
//                                            X_b/c + (c−1)/c · max(X_b,0, X_b,1))
//   (c = 1: T_f = C_f + X_f, T_b = G_b/2 + max(G_b/2, X_b) + E_b.) Both overlaps are what
//   `meshtp simulate` measured (docs/simulation.md): on ATP IC1 (pcie-8xa100, mesh (2, 4),
//   M1) 22% less time with 4 chunks than with 1, which max(C_f, X_f) alone priced at 0.1%;
//   on IC3 (nvswitch-8xa100, mesh (1, 8)) a backward of 2.81 ms simulated against 3.75 ms
//   when only the dW GeMMs hid communication.
//   layer    T_f(c) + T_b  (+ T_f(c) again under full recomputation, + the attention core's
//            forward 4·b·s²·h/N/F and its softmax under selective recomputation)
// c = 1 is ATP without the chunk optimisation; mesh (N, 1) is Megatron-LM's 1D TP.
#pragma once

#include <optional>
#include <string>
#include <vector>

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
  double compute_s = 0;
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

// `elementwise`: elementwise_estimate(model, kAtp, d1, d2, R); an empty one ({}) prices the
// GeMMs and collectives alone.
AtpEstimate atp_estimate(const ModelSpec& model, const MeshLinks& links, int chunks,
                         double flops_per_s, const ElementwiseEstimate& elementwise);

}  // namespace meshtp::plan
