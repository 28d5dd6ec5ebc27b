#include "ops/kernels.hpp"

#include <cstdlib>
#include <string_view>

#include "core/error.hpp"

namespace meshtp::kernels {

// The kernels for W floats a vector, defined in kernels_simd.cpp (compiled once per W):
// 4 the baseline ISA, 8 AVX2 + FMA, 16 AVX-512F.
template <int W>
const Table& simd_table();

namespace {

bool cpu_has(Isa isa) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  switch (isa) {
    case Isa::kPortable: return true;
    case Isa::kAvx2: return avx2;
    case Isa::kAvx512: return avx2 && __builtin_cpu_supports("avx512f");
  }
  return false;
#else
  return isa == Isa::kPortable;
#endif
}

// The best the CPU has, or MESHTP_KERNELS's choice.
Isa initial() {
  const char* env = std::getenv("MESHTP_KERNELS");
  if (env != nullptr && *env != '\0') {
    for (const Isa isa : kIsas) {
      if (std::string_view(env) == to_string(isa)) {
        MESHTP_CHECK(cpu_has(isa), "MESHTP_KERNELS={}: this CPU has no {}", env, env);
        return isa;
      }
    }
    fail("MESHTP_KERNELS='{}' is not one of portable, avx2, avx512", env);
  }
  return cpu_has(Isa::kAvx512) ? Isa::kAvx512 : cpu_has(Isa::kAvx2) ? Isa::kAvx2 : Isa::kPortable;
}

Isa& current() {
  static Isa isa = initial();
  return isa;
}

}  // namespace

const char* to_string(Isa isa) {
  switch (isa) {
    case Isa::kPortable: return "portable";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "?";
}

bool available(Isa isa) { return cpu_has(isa); }

const Table& table(Isa isa) {
  MESHTP_CHECK(available(isa), "kernels: this CPU has no {}", to_string(isa));
  switch (isa) {
    case Isa::kAvx2: return simd_table<8>();
    case Isa::kAvx512: return simd_table<16>();
    case Isa::kPortable: break;
  }
  return simd_table<4>();
}

const Table& fast() {
  // One lookup per op call (not per row): the tables are built once, on first use.
  static const Table* const tables[] = {
      &simd_table<4>(), available(Isa::kAvx2) ? &simd_table<8>() : nullptr,
      available(Isa::kAvx512) ? &simd_table<16>() : nullptr};
  return *tables[static_cast<int>(current())];
}

Isa selected() { return current(); }

void select(Isa isa) {
  table(isa);  // throws when not available
  current() = isa;
}

}  // namespace meshtp::kernels
