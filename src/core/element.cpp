#include "core/element.hpp"

namespace meshtp {

std::size_t element_size(Element type) {
  switch (type) {
    case Element::kF32: return 4;
    case Element::kBF16: return 2;
    case Element::kF64: return 8;
    case Element::kI32: return 4;
    case Element::kI64: return 8;
    case Element::kU8: return 1;
  }
  return 0;
}

const char* to_string(Element type) {
  switch (type) {
    case Element::kF32: return "fp32";
    case Element::kBF16: return "bf16";
    case Element::kF64: return "fp64";
    case Element::kI32: return "int32";
    case Element::kI64: return "int64";
    case Element::kU8: return "uint8";
  }
  return "?";
}

}  // namespace meshtp
