// Local elementwise benchmark: the runtime's memory-bound kernels (src/ops LayerNorm and
// GeLU, forward and backward, exactly as model/block.cpp calls them) over one [rows, cols]
// fp32 buffer per tensor, for the planner's elementwise rate (plan/elementwise.hpp).
//
//   layernorm forward   y = ln(x)                 x, y [rows, cols]; w, b [cols]
//   layernorm backward  dx += ln'(x)·dy           dw, db += …
//   gelu forward        y = gelu(x)
//   gelu backward       dx = 0; dx += gelu'(x)·dy (the block zeroes dx first)
//
// Each time is the median over iterations of one call on this rank; the caller takes the
// max over ranks and turns times into a rate with the planner's touch counts.
#pragma once

#include <cstdint>

namespace meshtp::bench {

struct ElementwiseShape {
  std::int64_t rows = 0, cols = 0;
};

struct LocalElementwiseSample {
  ElementwiseShape shape;
  int iterations = 0;
  double layernorm_forward_s = 0, layernorm_backward_s = 0;  // medians
  double gelu_forward_s = 0, gelu_backward_s = 0;
};

// Throws meshtp::Error for a non-positive shape or target time. Allocates 4 tensors of
// rows·cols floats.
LocalElementwiseSample time_local_elementwise(const ElementwiseShape& shape,
                                              double target_seconds = 0.2);

}  // namespace meshtp::bench
