// Precision: the one enum of a model's numeric format, and bf16's rounding on the host.
//
//   fp32   every value 4 bytes.
//   fp16   mixed precision (Micikevicius et al. 2018): fp16 weights and activations, fp32
//          master weights, moments and accumulation. The planner prices it; the runtime does
//          not run it (it would need loss scaling).
//   bf16   mixed precision the same way with bfloat16 (8 exponent bits: fp32's range, so no
//          loss scaling). The runtime runs it (tensor/gemm.hpp ScopedGemmPrecision): every GeMM
//          takes its operands in bf16 and accumulates in fp32.
//
// bf16 is the top half of an fp32: 1 sign, 8 exponent and 7 stored mantissa bits. Rounding
// an fp32 to bf16 drops the low 16 bits to nearest, ties to even (what CUDA's
// __float2bfloat16_rn does), so a rounded value is within 2⁻⁸ of x relative (half an ulp of
// 8 significant bits):  |round_to_bf16(x) − x| ≤ 2⁻⁸·|x|  for normal x.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/element.hpp"

namespace meshtp {

enum class Precision { kFp16, kFp32, kBf16 };

const char* name(Precision p);  // "fp16", "fp32", "bf16"
// "fp16" | "fp32" | "bf16", or meshtp::Error naming `what` and the text.
Precision parse_precision(std::string_view text, std::string_view what = "precision");
// Bytes of one element: 4 for fp32, 2 for the mixed precisions (weights and activations).
inline int element_bytes(Precision p) { return p == Precision::kFp32 ? 4 : 2; }
// The element of a run's compute copies (weights, activations) on a device: fp32 → kF32,
// bf16 → kBF16; the one place a precision becomes a buffer's Element (core/element.hpp).
// fp16 throws meshtp::Error (no device trains in it: it would need loss scaling).
Element compute_element(Precision p);

// bf16 ⇄ fp32 (round to nearest, ties to even; NaN stays NaN; overflow rounds to infinity).
std::uint16_t to_bf16(float value);
float from_bf16(std::uint16_t bits);
// x rounded to the nearest bf16 value, as fp32: what a bf16 round trip leaves of x.
inline float round_to_bf16(float x) { return from_bf16(to_bf16(x)); }
// round_to_bf16 of n values from `in` to `out` (the same values as one by one), written
// branch-free so the compiler vectorises it: a GeMM's operands are rounded this way.
void round_to_bf16(const float* in, float* out, std::int64_t n);
// n values converted each way at once (the same values as one by one): bf16 storage of a GeMM
// operand (device/backend.hpp) written and read.
void floats_to_bf16(const float* in, std::uint16_t* out, std::int64_t n);
void bf16_to_floats(const std::uint16_t* in, float* out, std::int64_t n);

}  // namespace meshtp
