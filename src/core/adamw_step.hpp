// The constants of one AdamW step (Loshchilov & Hutter, decoupled weight decay), and the one
// documented formula. It has one host implementation, ops/adamw.hpp's adamw_update (the
// kernels of ops/kernels.hpp, vectorised per ISA), which every CPU path calls (train::AdamW,
// ops::CpuBackend); the GPU's kernel (device/kernels.cu, behind device/gpu_ops.hpp) is the
// same formula in the same order of operations on the device:
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
