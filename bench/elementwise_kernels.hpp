// Elementwise kernel benchmark (`meshtp bench elementwise`): every elementwise op with a fast
// kernel (ops/kernels.hpp) timed three ways on the same buffers, interleaved so load drift
// hits all alike — its naive *_reference loop, the portable kernels, AVX2 + FMA and AVX-512
// when the CPU has them — as a rate in GB/s of the bytes each op must move:
//
//   op                 touches per element (reads + writes)
//   layernorm fwd/bwd  3 / 6     (plan/elementwise.hpp, as `meshtp calibrate` counts)
//   gelu fwd/bwd       2 / 5
//   residual fwd       3         read a, b, write y
//   cross-entropy fwd  1         read the logits (row max and Σ exp in cache)
//   cross-entropy bwd  3         read logits, read + write the gradient
//   adamw              7         read p, g, m, v, write p, m, v; its reference is the
//                                portable kernel (one host AdamW, core/adamw_step.hpp)
//
// Validation first: each fast result must match its reference (max relative error ≤ 1e-5).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace meshtp::bench {

struct ElementwiseKernelSample {
  std::string op;
  double touches = 0;                // reads + writes per element
  std::int64_t elements = 0;
  double reference_s = 0;             // median
  std::array<double, 3> isa_s{};      // median per kernels::Isa (index), 0 when the CPU lacks it
  double error = 0;                  // max relative error of the selected kernels vs reference
};

// Throws meshtp::Error for a non-positive shape or a kernel that disagrees with its reference.
std::vector<ElementwiseKernelSample> time_elementwise_kernels(std::int64_t rows, std::int64_t cols,
                                                              double target_seconds = 0.2);

}  // namespace meshtp::bench
