#include "ops/kernels.hpp"

#include <cstdlib>
#include <string_view>

#include "core/error.hpp"

namespace meshtp::kernels {

// Defined in kernels_portable.cpp and kernels_avx2.cpp.
const Table& portable_table();
const Table& avx2_table();

namespace {

bool cpu_has_avx2() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

Isa initial() {
  const char* env = std::getenv("MESHTP_KERNELS");
  if (env != nullptr && std::string_view(env) == "portable") return Isa::kPortable;
  return cpu_has_avx2() ? Isa::kAvx2 : Isa::kPortable;
}

Isa& current() {
  static Isa isa = initial();
  return isa;
}

const char* name(Isa isa) { return isa == Isa::kAvx2 ? "avx2" : "portable"; }

}  // namespace

bool available(Isa isa) { return isa == Isa::kPortable || cpu_has_avx2(); }

const Table& table(Isa isa) {
  MESHTP_CHECK(available(isa), "kernels: this CPU has no {} (AVX2 and FMA)", name(isa));
  return isa == Isa::kAvx2 ? avx2_table() : portable_table();
}

const Table& fast() {
  static const Table* const avx2 = available(Isa::kAvx2) ? &avx2_table() : nullptr;
  return current() == Isa::kAvx2 ? *avx2 : portable_table();
}

Isa selected() { return current(); }

void select(Isa isa) {
  table(isa);  // throws when not available
  current() = isa;
}

}  // namespace meshtp::kernels
