// What gpu.hpp declares that needs no GPU: element types.
#include "device/gpu.hpp"

namespace meshtp::gpu {

std::size_t element_size(ElementType type) { return type == ElementType::kF32 ? 4 : 2; }

const char* to_string(ElementType type) { return type == ElementType::kF32 ? "fp32" : "bf16"; }

}  // namespace meshtp::gpu
