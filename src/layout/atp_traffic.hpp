// The traffic of ONE ATP block (ATP §3.2; Megatron-LM as the mesh (N, 1) or (1, N) case):
// every collective the runtime's block (model/block.hpp) issues per layer, forward and
// backward — the one description the planner prices (plan/atp_cost.hpp) and the comm
// ledger's count is tested against (tests/model/atp_traffic_test.cpp).
//
// Mesh (d1, d2), n = b·s tokens in c chunks of nc = n/c, h hidden, e bytes per element.
// Per layer and chunk (AR/RS/AG all-reduce / reduce-scatter / all-gather, subscript the mesh
// dim; message = layout::sent_bytes' n):
//
//   op    forward                        backward
//   ln1   AR₁ row stats  16·nc            AR₁ row sums  16·nc       (2 doubles per row)
//   qkv   RS₁ y_p        nc·3h/d1·e       AG₁ dy        nc·3h/d1·e,  AR₀ dx  nc·h/d2·e
//   proj  AG₁ x          nc·h/d1·e,       RS₁ dx        nc·h/d1·e
//         AR₀ y_p        nc·h/d2·e
//   ln2   AR₁ row stats  16·nc            AR₁ row sums  16·nc
//   mlp1  AR₁ y_p        nc·4h/d1·e       AR₀ dx        nc·h/d2·e
//   mlp2  AR₀ y_p        nc·h/d2·e        AR₁ dx        nc·4h/d1·e
//
// A group of one rank sends nothing: calls on a mesh dim of size 1 are left out. Bytes sent
// per rank and layer, forward, with P₁ = d2, P₀ = d1 (sent_bytes):
//   dim 1: (P₁−1)/P₁ · n·(3h/d1 + h/d1 + 2·4h/d1)·e + 2·2(P₁−1)/P₁ · 16n
//   dim 0: 2(P₀−1)/P₀ · 2·n·h/d2·e
// and the same in backward (each backward collective is a forward one transposed: AG ↔ RS,
// AR ↔ AR). ATP's Eq. 2 charges the QKV and projection pair as one all-reduce of n·3h/d1
// (7h/d1 all-reduce equivalents on dim 1, where the runtime's reduce-scatter + all-gather
// send (3h + h)/d1 / 2 = 2h/d1 of them) and leaves out the LayerNorm statistics.
//
// Worked example: mesh 2x2, n = 32, h = 32, c = 1, fp32: forward qkv RS₁ of 32·48·4 = 6144
// bytes, each rank sends 3072; ln1 AR₁ of 512 bytes, each rank sends 512.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "layout/model_shape.hpp"
#include "layout/vocabulary.hpp"

namespace meshtp::layout {

struct AtpShape {
  int d1 = 1, d2 = 1;  // mesh dims 0 and 1
  std::int64_t tokens = 0, hidden = 0;  // n = b·s of one replica, h
  int chunks = 1;
  int element_bytes = 4;
};

// `launches` identical calls per layer of one collective.
struct AtpCall {
  std::string op;  // "ln1", "qkv", "proj", "ln2", "mlp1", "mlp2"
  bool backward = false;
  CollectiveKind kind = CollectiveKind::kAllReduce;
  int mesh_dim = 0;
  int group_size = 1;
  int launches = 0;
  double message_bytes = 0;  // one call's n
  double bytes_per_rank() const { return launches * sent_bytes(kind, group_size, message_bytes); }
};

// Row statistics of the sharded LayerNorm: (Σx, Σx²) forward, (Σdy·w, Σdy·w·x̂) backward, in
// double.
inline constexpr int kLayerNormStatsBytesPerRow = 2 * 8;

// The calls of one layer, forward (in order) then backward (in order).
std::vector<AtpCall> atp_block_traffic(const AtpShape& shape);

// The layouts whose linears are priced GeMM by GeMM — tp1d (plan/fc_layers.hpp's tp1d_pass)
// and the 2D GeMM algorithms (gemm2d_traffic.hpp) — also send, outside their linears, for a
// stack of `layers` layers (here `launches` counts calls per step, not per layer):
//   tp1d, mesh (N, 1): LayerNorm runs on each rank's own tokens and sends nothing; its weight
//     and bias gradients are sums over those tokens, partial over dim 0, all-reduced once
//     per step for every layer at once (model/stack.cpp): AR₀ of layers·4h·e.
//   2D GeMM, mesh (Nr, Nc), nl = n/Nr rows and hl = h/Nc features per rank: ln1 and ln2
//     all-reduce their row statistics forward and row sums backward over dim 1, 16·nl each;
//     each layer's backward all-reduces its row-partial gradients over dim 0 in one call
//     (model/gemm2d_block.cpp): ln1, ln2 weight and bias and the four biases,
//     (2 + 3 + 1 + 2 + 4 + 1)·hl·e = 13·hl·e.
// Empty for atp and megatron (atp_block_traffic lists all of theirs). Worked example: 2D GeMM
// on 2x2, n = 32, h = 32, 2 layers, fp32: 4 forward AR₁ of 256 bytes (16 rows × 16), 4
// backward, and 2 AR₀ of 13·16·4 = 832 bytes.
std::vector<AtpCall> elementwise_traffic(Strategy strategy, const AtpShape& shape, int layers);

// What the runtime's ATP block (model/block.hpp) can run on mesh (d1, d2):
//   batch % chunks == 0        a chunk holds whole sequences
//   hidden % heads == 0        heads of width h/a
//   hidden % d1 == hidden % d2 == 0
//   heads % (d1·d2) == 0       the fully sharded attention core holds a/(d1·d2) whole heads
//                              on every rank (QKV's reduce-scatter over dim 1 splits a dim-0
//                              shard's heads, never its batch)
// e.g. a = 16 heads on 32 devices: no mesh runs. The one check: the block's validate throws
// the reason, the planner marks the candidate invalid with it (plan/atp_cost.hpp).
// Why the block of `shape` (its batch, hidden and heads) cannot run on mesh (d1, d2) in
// `chunks` chunks, naming the values ("heads=12 is not divisible by d1·d2=8 (mesh 4x2): …"),
// or nullopt. Sizes are positive (the callers check).
std::optional<std::string> atp_block_invalid_reason(const ModelShape& shape, int d1, int d2,
                                                    int chunks);

}  // namespace meshtp::layout
