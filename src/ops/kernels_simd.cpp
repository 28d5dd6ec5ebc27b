// The fast kernels (kernels_impl.hpp) for one vector width W = MESHTP_KERNELS_WIDTH floats;
// src/ops/CMakeLists.txt compiles this file once per width: 4 (the baseline ISA), 8 (AVX2 +
// FMA), 16 (AVX-512F). Every standard header is included before the target pragma, so only the
// kernels (an unnamed namespace) are compiled for AVX2/AVX-512: no AVX code lands in an inline
// function of a header that the linker could pick for a caller on a CPU without it.
// kernels.cpp calls a table only on a CPU that has its ISA.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>

#include "ops/kernels.hpp"
#include "ops/layernorm.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>  // before the pragma: its helpers carry their own targets
#if MESHTP_KERNELS_WIDTH == 16
#pragma GCC target("avx512f,avx2,fma")
#elif MESHTP_KERNELS_WIDTH == 8
#pragma GCC target("avx2,fma")
#endif
#endif
#include "ops/kernels_impl.hpp"

namespace meshtp::kernels {

template <int W>
const Table& simd_table();  // called by kernels.cpp

template <>
const Table& simd_table<MESHTP_KERNELS_WIDTH>() {
  constexpr int w = MESHTP_KERNELS_WIDTH;
  static const Table t = make_table<Simd<w>>(w == 16 ? "avx512" : w == 8 ? "avx2" : "portable");
  return t;
}

}  // namespace meshtp::kernels
