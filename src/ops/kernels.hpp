// Fast float kernels of the elementwise ops, with a run-time choice of instruction set.
//
// The ops (gelu.hpp, layernorm.hpp, attention.hpp, residual.hpp, cross_entropy.hpp, the
// linear's bias) and the layers above them that loop over rows themselves (the sharded
// LayerNorm, the vocabulary-parallel head, AdamW) call these on contiguous rows:
//
//   gelu_forward         y = gelu(x)                        (tanh form, as gelu.hpp)
//   gelu_backward        dx += dy ⊙ gelu'(x)
//   bias_gelu_forward    pre += bias; y = gelu(pre)           (bias + GeLU in one pass)
//   add                  y = a + b                            (y may be a or b)
//   scale                x *= s
//   max_of               max_i x_i                            (−∞ for n = 0)
//   moments              Σ x_i, Σ x_i²                        (double lanes)
//   layernorm_row_*      one row of layernorm.hpp: forward (two-pass stats in double),
//                        apply (y = (x − mean)·rstd ⊙ w + b), backward sums (Σ g, Σ g·x̂ in
//                        double; dw += dy⊙x̂, db += dy) and backward apply
//                        (dx += rstd·(g − mean(g) − x̂·mean(g⊙x̂)))
//   softmax_row          p[0,valid) = softmax; p[valid,n) = 0     (the causal mask)
//   softmax_row_backward d[0,valid) = p⊙(d − Σ p⊙d); d[valid,n) = 0
//   sum_exp              Σ e^(x_i − shift)                    (double lanes)
//   scaled_exp           y (+)= scale·e^(x − shift)           (softmax − one-hot, exp(−∞) = 0)
//   adamw                one AdamW update of n parameters
//
// Three implementations of every kernel come from one source (kernels_impl.hpp): AVX-512
// (16 floats a vector; when the CPU has AVX-512F besides AVX2 + FMA), AVX2 + FMA (8 floats),
// both checked once with __builtin_cpu_supports, and a portable one GCC vectorises for the
// baseline ISA. The best the CPU has runs; MESHTP_KERNELS=portable|avx2|avx512 picks one
// (an error when the CPU lacks it). The arithmetic-bound kernels (GeLU, exp) run about 1.9×
// faster on 16 floats than on 8 on a CPU with full-width AVX-512 units (AMD Zen 5: `meshtp
// bench elementwise` prints all three). The naive scalar loops stay beside each op as its
// *_reference function; tests compare every instruction set against them and against finite
// differences.
//
// Accuracy: exp within 1.2e-7 relative on the normal range (and 0 below it, so exp(−∞) = 0);
// GeLU within 1e-6 relative of the exact tanh-form GeLU (as σ(2u), see kernels_impl.hpp).
#pragma once

#include <cstdint>

#include "core/adamw_step.hpp"

namespace meshtp::kernels {

struct RowSums {
  double first = 0.0, second = 0.0;  // moments: Σx, Σx²; layernorm backward: Σg, Σg·x̂
};

using AdamWStep = ::meshtp::AdamWStep;  // core/adamw_step.hpp

struct Table {
  const char* name;  // "avx512", "avx2", "portable"
  void (*gelu_forward)(float* y, const float* x, std::int64_t n);
  void (*gelu_backward)(float* dx, const float* x, const float* dy, std::int64_t n);
  void (*bias_gelu_forward)(float* pre, float* y, const float* bias, std::int64_t n);
  void (*add)(float* y, const float* a, const float* b, std::int64_t n);
  void (*scale)(float* x, std::int64_t n, float s);
  float (*max_of)(const float* x, std::int64_t n);
  RowSums (*moments)(const float* x, std::int64_t n);
  void (*layernorm_row_forward)(float* y, const float* x, std::int64_t n, const float* w,
                                const float* b, float* mean, float* rstd);
  void (*layernorm_row_apply)(float* y, const float* x, std::int64_t n, const float* w,
                              const float* b, float mean, float rstd);
  RowSums (*layernorm_row_backward_sums)(const float* dy, const float* x, std::int64_t n,
                                         const float* w, float mean, float rstd, float* dw,
                                         float* db);
  void (*layernorm_row_backward_apply)(float* dx, const float* dy, const float* x, std::int64_t n,
                                       const float* w, float mean, float rstd, float g_mean,
                                       float gx_mean);
  void (*softmax_row)(float* p, std::int64_t valid, std::int64_t n);
  void (*softmax_row_backward)(float* d, const float* p, std::int64_t valid, std::int64_t n);
  double (*sum_exp)(const float* x, std::int64_t n, float shift);
  void (*scaled_exp)(float* y, const float* x, std::int64_t n, float shift, float scale,
                     bool accumulate);
  void (*adamw)(float* p, const float* g, float* m, float* v, std::int64_t n,
                const AdamWStep& step);
};

enum class Isa { kPortable, kAvx2, kAvx512 };
inline constexpr Isa kIsas[] = {Isa::kPortable, Isa::kAvx2, Isa::kAvx512};
const char* to_string(Isa isa);  // "portable", "avx2", "avx512"

// kPortable always; kAvx2 when the CPU has AVX2 and FMA; kAvx512 when it has those and AVX-512F
bool available(Isa isa);
const Table& table(Isa isa);   // throws meshtp::Error when not available
const Table& fast();           // the selected table (the best available by default)
Isa selected();
void select(Isa isa);          // for tests and benchmarks; throws when not available

}  // namespace meshtp::kernels
