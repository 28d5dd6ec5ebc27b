// Element: the one enum of what one value in a buffer is — device arrays (fp32 or bf16),
// messages (every type a collective moves), tensors. Not a training precision (core/precision.hpp):
// a bf16 mixed-precision run holds fp32 and bf16 buffers both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace meshtp {

enum class Element { kF32, kBF16, kF64, kI32, kI64, kU8 };

std::size_t element_size(Element type);  // 4, 2, 8, 4, 8, 1
const char* to_string(Element type);     // "fp32", "bf16", "fp64", "int32", "int64", "uint8"

// The element of a C++ type that a message can carry (bf16 has no C++ type here: buffers of it
// travel as Element::kBF16 with untyped storage).
template <typename T> constexpr Element element_of() {
  if constexpr (std::is_same_v<T, float>) return Element::kF32;
  else if constexpr (std::is_same_v<T, double>) return Element::kF64;
  else if constexpr (std::is_same_v<T, int>) return Element::kI32;
  else if constexpr (std::is_same_v<T, std::int64_t>) return Element::kI64;
  else if constexpr (std::is_same_v<T, unsigned char>) return Element::kU8;
  else static_assert(sizeof(T) == 0, "no Element for this type");
}

}  // namespace meshtp
