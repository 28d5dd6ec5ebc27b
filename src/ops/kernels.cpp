#include "ops/kernels.hpp"

#include <cstdlib>
#include <string_view>

#include "core/error.hpp"

namespace meshtp::kernels {

// Defined in kernels_portable.cpp, kernels_avx2.cpp and kernels_avx512.cpp.
const Table& portable_table();
const Table& avx2_table();
const Table& avx512_table();

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
    case Isa::kAvx2: return avx2_table();
    case Isa::kAvx512: return avx512_table();
    case Isa::kPortable: break;
  }
  return portable_table();
}

const Table& fast() {
  // One lookup per op call (not per row): the tables are built once, on first use.
  static const Table* const tables[] = {
      &portable_table(), available(Isa::kAvx2) ? &avx2_table() : nullptr,
      available(Isa::kAvx512) ? &avx512_table() : nullptr};
  return *tables[static_cast<int>(current())];
}

Isa selected() { return current(); }

void select(Isa isa) {
  table(isa);  // throws when not available
  current() = isa;
}

}  // namespace meshtp::kernels
