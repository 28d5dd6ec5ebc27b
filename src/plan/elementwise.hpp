// Elementwise cost: the memory-bound, non-GeMM work of one transformer layer per rank, which
// the FLOP count 72·b·s·h² + 12·b·s²·h (ATP §5, Table 2) leaves out: two LayerNorms, the attention
// softmax, four bias adds, two residual adds and GeLU. Each op streams over one tensor of
// `elements` values per rank and touches each value `factor` times (reads + writes), so
//
//     time = elements · factor · e / R        e = model.element_bytes(), R = elementwise_gbps·1e9
//
// with R the device's effective bandwidth for streaming ops (topology.hpp).
//
// Factors (reads + writes per element of each op, forward and backward) are
// core/op_costs.hpp's, shared with `meshtp calibrate` and the simulated build. (The serial
// LayerNorm, used when the stream is not split over features, makes one more read pass in
// forward; `meshtp calibrate` measures R in these units, so it absorbs that, and the tanh/exp
// arithmetic of GeLU and softmax.)
//
// Elements per rank, M = b·s tokens, h hidden, a heads, N = d1·d2 ranks:
//   tensor                  kAtp: ATP (d1, d2)          kSequenceParallel: (N, 1)   kFullySharded
//   stream (ln, residual,   M·h/d2   [R, S(1)]          M·h/N  tokens split         M·h/N
//     proj/mlp2 bias fwd)
//   qkv bias fwd            M·3h/N   reduce-scattered   M·3h/N                      M·3h/N
//   qkv bias bwd            M·3h/d1  dy gathered, dim 1 M·3h/N                      M·3h/N
//   mlp1 out (bias, gelu)   M·4h/d1  [S(1), R]          M·4h/N                      M·4h/N
//   proj/mlp2 bias bwd      M·h/d2                      M·h    dy gathered, dim 0   M·h/N
//   softmax                 b·a·s²/N                    b·a·s²/N                    b·a·s²/N
//   attention io (fused)    b·s·(h + g·d)/N             b·s·(h + g·d)/N             b·s·(h + g·d)/N
// So Megatron (N, 1) without sequence parallelism REPLICATES the LayerNorm/residual work on
// every rank (M·h each), ATP divides it by d2 only, and mesh (1, N) replicates GeLU (M·4h).
// The attention core is fully sharded in every layout (model/block.hpp), so softmax is /N.
// kFullySharded is the 2D GeMM algorithms' layout (MeshSlice §3.2.1): activations
// (B·S, H·D) keep tokens over mesh rows and features over mesh columns between layers, the
// attention core holds whole sequences and heads locally (planner.cpp), and LayerNorm, GeLU,
// bias and residual act on the local block; LayerNorm's row statistics need a small
// all-reduce along the mesh row, which is not priced (2 values per row, like ATP's).
//
// Order of `ops`: the runtime's, forward then backward (model/block.cpp):
//   fwd ln1, qkv bias, softmax, proj bias, residual1, ln2, mlp1 bias, gelu, mlp2 bias, residual2
//   bwd residual2, mlp2 bias, gelu, mlp1 bias, ln2, residual1, proj bias, softmax, qkv bias, ln1
// then, when model.dropout (the megatron runtime), the attention dropout on the b·a·s²/N
// probabilities and the two residual branches' masks (core/op_costs.hpp), forward and
// backward; selective recomputation runs the attention dropout's forward again.
// With fused attention (model.attention, ops/flash_attention.hpp) "attention io" (2 touches
// forward, 4 backward: core/op_costs.hpp) replaces the softmax, there is no attention dropout
// op, and selective recomputation re-runs nothing here.
#pragma once

#include <string>
#include <vector>

#include "core/op_costs.hpp"
#include "plan/model_spec.hpp"

namespace meshtp::plan {

enum class ElementwiseLayout { kAtp, kSequenceParallel, kFullySharded };
const char* name(ElementwiseLayout layout);

// Reads + writes per element: core/op_costs.hpp.
using namespace op_costs;  // NOLINT(google-build-using-namespace): the touch constants

struct ElementwiseOp {
  std::string name;  // "ln1", "qkv bias", "softmax", …
  bool backward = false;
  double elements = 0;  // per rank
  double factor = 0;    // reads + writes per element
  double seconds = 0;
  double touched() const { return elements * factor; }
};

struct ElementwiseEstimate {
  double gbps = 0;                 // R used
  std::vector<ElementwiseOp> ops;  // one layer, forward then backward
  double forward_s = 0, backward_s = 0;
  double softmax_forward_s = 0;  // what selective recomputation runs again
  double touched(bool backward) const;
  // One layer's elementwise time per step: forward (twice under full recomputation, plus
  // the softmax forward again under selective) and backward.
  double layer_s(Recompute recompute) const;
};

// Throws meshtp::Error when gbps is not positive and finite, a mesh dim is < 1, or
// kSequenceParallel is asked for a mesh (d1, d2) with d2 ≠ 1.
ElementwiseEstimate elementwise_estimate(const ModelSpec& model, ElementwiseLayout layout, int d1,
                                         int d2, double gbps);

}  // namespace meshtp::plan
