// The AVX2 + FMA instantiation of the fast kernels. Every standard header is included before
// the target pragma, so only the kernels (unnamed namespace, kernels_impl.hpp) are compiled
// for AVX2; kernels.cpp calls them only on a CPU that has it.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "ops/kernels.hpp"
#include "ops/layernorm.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>  // before the pragma: its helpers carry their own targets

#pragma GCC push_options
#pragma GCC target("avx2,fma")
#define MESHTP_KERNELS_AVX2 1
#include "ops/kernels_impl.hpp"

namespace meshtp::kernels {

const Table& avx2_table() {
  static const Table t = make_table<Avx2>("avx2");
  return t;
}

}  // namespace meshtp::kernels
#pragma GCC pop_options
#else
namespace meshtp::kernels {
const Table& portable_table();
const Table& avx2_table() { return portable_table(); }  // never selected: available() is false
}  // namespace meshtp::kernels
#endif
