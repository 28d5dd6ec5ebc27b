// The normalisations' ε, one constant each for the CPU ops (ops/layernorm.hpp, ops/rmsnorm.hpp)
// and the GPU kernels (device/ops.cpp) alike: PyTorch nn.LayerNorm's default eps, and Llama 2
// and 3's `rms_norm_eps`.
#pragma once

namespace meshtp {

inline constexpr float kLayerNormEps = 1e-5f;
inline constexpr float kRmsNormEps = 1e-5f;

}  // namespace meshtp
