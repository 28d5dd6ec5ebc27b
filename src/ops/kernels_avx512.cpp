// The AVX-512 instantiation of the fast kernels (16 floats a vector; AVX-512F, with AVX2 and
// FMA for the 256-bit steps). As in kernels_avx2.cpp, every standard header is included before
// the target pragma, and kernels.cpp calls these only on a CPU that has AVX-512F.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "ops/kernels.hpp"
#include "ops/layernorm.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>  // before the pragma: its helpers carry their own targets

#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma")
#define MESHTP_KERNELS_AVX512 1
#include "ops/kernels_impl.hpp"

namespace meshtp::kernels {

const Table& avx512_table() {
  static const Table t = make_table<Avx512>("avx512");
  return t;
}

}  // namespace meshtp::kernels
#pragma GCC pop_options
#else
namespace meshtp::kernels {
const Table& portable_table();
const Table& avx512_table() { return portable_table(); }  // never selected: available() is false
}  // namespace meshtp::kernels
#endif
