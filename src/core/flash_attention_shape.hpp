// The sizes and positions of one fused causal attention call (ops/flash_attention.hpp gives
// the math, the layouts and what the positions mean): the one type the CPU op, the backends'
// view ops (device/backend.hpp) and the GPU kernels take, so a ring step of context
// parallelism names its chunks' positions the same way on every device.
#pragma once

#include <cstdint>

namespace meshtp {

struct FlashAttention {
  std::int64_t batch = 1;      // B
  std::int64_t heads = 1;      // NH
  std::int64_t kv_heads = 1;   // NKV: NH % NKV == 0
  std::int64_t q_pos = 0;      // absolute position of each sequence's first query row
  std::int64_t k_pos = 0;      // absolute position of each sequence's first key row
  std::int64_t block_q = 64;   // query rows per tile (core/op_costs.hpp kFlashBlockQ)
  std::int64_t block_k = 256;  // keys per tile (kFlashBlockK)
};

}  // namespace meshtp
