// The constants of one AdamW step (Loshchilov & Hutter, decoupled weight decay), shared by
// the CPU kernels (ops/kernels.hpp) and the GPU's (device/gpu_ops.hpp):
//
//   m ← β1·m + (1−β1)·g            v ← β2·v + (1−β2)·g²
//   p ← p − lr·( (m/bias1) / (√(v/bias2) + ε) + decay·p )      bias1 = 1−β1ᵗ, bias2 = 1−β2ᵗ
#pragma once

namespace meshtp {

struct AdamWStep {
  float lr = 0, beta1 = 0, beta2 = 0, eps = 0, decay = 0;
  float bias1 = 1, bias2 = 1;  // 1 − β1ᵗ, 1 − β2ᵗ
};

}  // namespace meshtp
