// Fused causal attention on the GPU (gpu_ops.hpp flash_attention_*): the math, the packed
// [q | k | v] rows and the lse layout of ops/flash_attention.hpp (FlashAttention, Dao et al.
// 2022, Algorithms 1–2; FlashAttention-2's loop order, Dao 2023 §3.1), with grouped-query
// attention, and nothing T×T: memory O(T) per head (the output and one log-sum-exp per row).
//
// The kernels favour being plainly right over being fast: one thread per query row (or, for
// dK and dV, per key row), the other side streamed through shared memory in tiles of
// kTileFloats / HD rows that a block's threads load together, fp32 arithmetic throughout
// (bf16 loads widen, stores round once).
//   forward   thread (b, h, t): for each key tile, for each key j ≤ t: s = scale·q·k_j and the
//             online softmax (running max m and sum l, accumulator A rescaled when m grows);
//             out = A / l, lse = m + log l
//   D         D_t = Σ_d dO_td·O_td per (b, h, t)
//   dQ        thread (b, h, t): for each key j ≤ t: p = e^(s − L_t), dp = dO_t·v_j,
//             dq += scale·p·(dp − D_t)·k_j;  dqkv's q part += dq
//   dK, dV    thread (b, g, j) of KV head g: for each query head h of the group and each query
//             row t ≥ j: p = e^(s − L_t), dv += p·dO_t, dk += scale·p·(dO_t·v_j − D_t)·q_t;
//             dqkv's k and v parts += dk, dv
// Each output element is written by one thread: no atomics, and the result does not depend on
// scheduling. Head dims 16, 32, 64, 128 and 256 (each its own instantiation: the per-thread
// vectors live in registers or local memory).
#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "device/kernel_launch.hpp"

namespace meshtp::gpu {

namespace {

using bf16 = __nv_bfloat16;

__device__ __forceinline__ float widen(float v) { return v; }
__device__ __forceinline__ float widen(bf16 v) { return __bfloat162float(v); }
__device__ __forceinline__ void put(float* p, float v) { *p = v; }
__device__ __forceinline__ void put(bf16* p, float v) { *p = __float2bfloat16_rn(v); }

constexpr int kRowsPerBlock = 64;     // query (or key) rows a block's threads own
constexpr int kTileFloats = 4096;     // one shared tile: rows × HD floats (16 KiB)

// The packed rows: row (b, t) of qkv holds [q (NH·HD) | k (NKV·HD) | v (NKV·HD)].
struct Shape {
  std::int64_t B, T, NH, NKV;
  float scale;
  __device__ std::int64_t ld(int hd) const { return (NH + 2 * NKV) * hd; }
  __device__ std::int64_t row(std::int64_t b, std::int64_t t, int hd) const {
    return (b * T + t) * ld(hd);
  }
  __device__ std::int64_t q_col(std::int64_t h, int hd) const { return h * hd; }
  __device__ std::int64_t k_col(std::int64_t g, int hd) const { return (NH + g) * hd; }
  __device__ std::int64_t v_col(std::int64_t g, int hd) const { return (NH + NKV + g) * hd; }
  __device__ std::int64_t lse(std::int64_t b, std::int64_t h, std::int64_t t) const {
    return (b * NH + h) * T + t;
  }
};

// Loads rows [r0, r0 + rows) of the column block `col` of every row of sequence b into
// tile (rows × HD floats); rows past T are zero.
template <typename E, int HD>
__device__ void load_tile(float* tile, const E* qkv, const Shape& s, std::int64_t b,
                          std::int64_t r0, int rows, std::int64_t col) {
  for (int i = threadIdx.x; i < rows * HD; i += blockDim.x) {
    const int r = i / HD, d = i % HD;
    const std::int64_t t = r0 + r;
    tile[i] = t < s.T ? widen(qkv[s.row(b, t, HD) + col + d]) : 0.0f;
  }
}

template <typename E, int HD>
__global__ void flash_forward_kernel(E* out, float* lse, const E* qkv, Shape s) {
  constexpr int kKeys = kTileFloats / HD;
  __shared__ float k_tile[kTileFloats];
  __shared__ float v_tile[kTileFloats];
  const std::int64_t b = blockIdx.z, h = blockIdx.y;
  const std::int64_t t0 = static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock;
  const std::int64_t t = t0 + threadIdx.x;
  const bool mine = t < s.T;
  const std::int64_t g = h / (s.NH / s.NKV);
  float q[HD], acc[HD];
  float m = -INFINITY, l = 0.0f;
  for (int d = 0; d < HD; ++d) {
    q[d] = mine ? widen(qkv[s.row(b, t, HD) + s.q_col(h, HD) + d]) * s.scale : 0.0f;
    acc[d] = 0.0f;
  }
  const std::int64_t last = (t0 + kRowsPerBlock < s.T ? t0 + kRowsPerBlock : s.T) - 1;  // the block's last query row
  for (std::int64_t c0 = 0; c0 <= last; c0 += kKeys) {
    __syncthreads();  // the previous tile is no longer read
    load_tile<E, HD>(k_tile, qkv, s, b, c0, kKeys, s.k_col(g, HD));
    load_tile<E, HD>(v_tile, qkv, s, b, c0, kKeys, s.v_col(g, HD));
    __syncthreads();
    if (!mine) continue;
    const int visible = static_cast<int>(t - c0 + 1 < kKeys ? t - c0 + 1 : kKeys);
    for (int j = 0; j < visible; ++j) {
      float score = 0.0f;
      for (int d = 0; d < HD; ++d) score += q[d] * k_tile[j * HD + d];
      if (score > m) {  // rescale what was summed at the old maximum
        const float correction = expf(m - score);
        l *= correction;
        for (int d = 0; d < HD; ++d) acc[d] *= correction;
        m = score;
      }
      const float p = expf(score - m);
      l += p;
      for (int d = 0; d < HD; ++d) acc[d] += p * v_tile[j * HD + d];
    }
  }
  if (!mine) return;
  const std::int64_t o = (b * s.T + t) * (s.NH * HD) + h * HD;
  for (int d = 0; d < HD; ++d) put(&out[o + d], acc[d] / l);
  lse[s.lse(b, h, t)] = m + logf(l);
}

// D_t = Σ_d dO_td·O_td, one thread per (b, h, t).
template <typename E>
__global__ void flash_delta_kernel(float* delta, const E* dout, const E* out, std::int64_t rows,
                                   std::int64_t T, std::int64_t NH, int hd) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows) return;  // i = (b·NH + h)·T + t
  const std::int64_t t = i % T, h = (i / T) % NH, b = i / (T * NH);
  const std::int64_t o = (b * T + t) * (NH * hd) + h * hd;
  float sum = 0.0f;
  for (int d = 0; d < hd; ++d) sum += widen(dout[o + d]) * widen(out[o + d]);
  delta[i] = sum;
}

template <typename E, int HD>
__global__ void flash_dq_kernel(E* dqkv, const E* dout, const E* qkv, const float* lse,
                                const float* delta, Shape s) {
  constexpr int kKeys = kTileFloats / HD;
  __shared__ float k_tile[kTileFloats];
  __shared__ float v_tile[kTileFloats];
  const std::int64_t b = blockIdx.z, h = blockIdx.y;
  const std::int64_t t0 = static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock;
  const std::int64_t t = t0 + threadIdx.x;
  const bool mine = t < s.T;
  const std::int64_t g = h / (s.NH / s.NKV);
  float q[HD], dO[HD], dq[HD];
  const std::int64_t o = (b * s.T + t) * (s.NH * HD) + h * HD;
  for (int d = 0; d < HD; ++d) {
    q[d] = mine ? widen(qkv[s.row(b, t, HD) + s.q_col(h, HD) + d]) * s.scale : 0.0f;
    dO[d] = mine ? widen(dout[o + d]) : 0.0f;
    dq[d] = 0.0f;
  }
  const float L = mine ? lse[s.lse(b, h, t)] : 0.0f;
  const float D = mine ? delta[s.lse(b, h, t)] : 0.0f;
  const std::int64_t last = (t0 + kRowsPerBlock < s.T ? t0 + kRowsPerBlock : s.T) - 1;
  for (std::int64_t c0 = 0; c0 <= last; c0 += kKeys) {
    __syncthreads();
    load_tile<E, HD>(k_tile, qkv, s, b, c0, kKeys, s.k_col(g, HD));
    load_tile<E, HD>(v_tile, qkv, s, b, c0, kKeys, s.v_col(g, HD));
    __syncthreads();
    if (!mine) continue;
    const int visible = static_cast<int>(t - c0 + 1 < kKeys ? t - c0 + 1 : kKeys);
    for (int j = 0; j < visible; ++j) {
      float score = 0.0f, dp = 0.0f;
      for (int d = 0; d < HD; ++d) {
        score += q[d] * k_tile[j * HD + d];
        dp += dO[d] * v_tile[j * HD + d];
      }
      const float ds = expf(score - L) * (dp - D) * s.scale;
      for (int d = 0; d < HD; ++d) dq[d] += ds * k_tile[j * HD + d];
    }
  }
  if (!mine) return;
  E* target = dqkv + s.row(b, t, HD) + s.q_col(h, HD);
  for (int d = 0; d < HD; ++d) put(&target[d], widen(target[d]) + dq[d]);
}

template <typename E, int HD>
__global__ void flash_dkv_kernel(E* dqkv, const E* dout, const E* qkv, const float* lse,
                                 const float* delta, Shape s) {
  constexpr int kQueries = kTileFloats / HD;
  __shared__ float q_tile[kTileFloats];
  __shared__ float do_tile[kTileFloats];
  __shared__ float stats[2 * kTileFloats / 16];  // L and D of the tile's rows (kQueries ≤ 256)
  const std::int64_t b = blockIdx.z, g = blockIdx.y;
  const std::int64_t j0 = static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock;
  const std::int64_t j = j0 + threadIdx.x;
  const bool mine = j < s.T;
  const std::int64_t group = s.NH / s.NKV;
  float k[HD], v[HD], dk[HD], dv[HD];
  for (int d = 0; d < HD; ++d) {
    k[d] = mine ? widen(qkv[s.row(b, j, HD) + s.k_col(g, HD) + d]) : 0.0f;
    v[d] = mine ? widen(qkv[s.row(b, j, HD) + s.v_col(g, HD) + d]) : 0.0f;
    dk[d] = 0.0f;
    dv[d] = 0.0f;
  }
  for (std::int64_t h = g * group; h < (g + 1) * group; ++h) {
    // Query rows from the block's first key row on: earlier ones see none of its keys.
    for (std::int64_t r0 = j0; r0 < s.T; r0 += kQueries) {
      __syncthreads();
      load_tile<E, HD>(q_tile, qkv, s, b, r0, kQueries, s.q_col(h, HD));
      for (int i = threadIdx.x; i < kQueries * HD; i += blockDim.x) {
        const std::int64_t t = r0 + i / HD;
        do_tile[i] = t < s.T ? widen(dout[(b * s.T + t) * (s.NH * HD) + h * HD + i % HD]) : 0.0f;
      }
      for (int i = threadIdx.x; i < kQueries; i += blockDim.x) {
        const std::int64_t t = r0 + i;
        stats[2 * i] = t < s.T ? lse[s.lse(b, h, t)] : 0.0f;
        stats[2 * i + 1] = t < s.T ? delta[s.lse(b, h, t)] : 0.0f;
      }
      __syncthreads();
      if (!mine) continue;
      const int rows = static_cast<int>(s.T - r0 < kQueries ? s.T - r0 : kQueries);
      for (int i = 0; i < rows; ++i) {
        if (r0 + i < j) continue;  // query row before the key: masked
        float score = 0.0f, dp = 0.0f;
        for (int d = 0; d < HD; ++d) {
          score += q_tile[i * HD + d] * k[d];
          dp += do_tile[i * HD + d] * v[d];
        }
        const float p = expf(score * s.scale - stats[2 * i]);
        const float ds = p * (dp - stats[2 * i + 1]) * s.scale;
        for (int d = 0; d < HD; ++d) {
          dv[d] += p * do_tile[i * HD + d];
          dk[d] += ds * q_tile[i * HD + d];
        }
      }
    }
  }
  if (!mine) return;
  E* kt = dqkv + s.row(b, j, HD) + s.k_col(g, HD);
  E* vt = dqkv + s.row(b, j, HD) + s.v_col(g, HD);
  for (int d = 0; d < HD; ++d) {
    put(&kt[d], widen(kt[d]) + dk[d]);
    put(&vt[d], widen(vt[d]) + dv[d]);
  }
}

dim3 rows_grid(const Shape& s, std::int64_t heads) {
  return dim3(static_cast<unsigned>((s.T + kRowsPerBlock - 1) / kRowsPerBlock),
              static_cast<unsigned>(heads), static_cast<unsigned>(s.B));
}

// Calls `launch.template operator()<E, HD>()` for the element type and head dim.
template <typename Launch>
cudaError_t dispatch(Element type, int hd, Launch&& launch) {
  const auto with = [&](auto element) -> cudaError_t {
    using E = decltype(element);
    switch (hd) {
      case 16: return launch.template operator()<E, 16>();
      case 32: return launch.template operator()<E, 32>();
      case 64: return launch.template operator()<E, 64>();
      case 128: return launch.template operator()<E, 128>();
      case 256: return launch.template operator()<E, 256>();
      default: return cudaErrorInvalidValue;
    }
  };
  return type == Element::kBF16 ? with(bf16{}) : with(0.0f);
}

}  // namespace

bool flash_attention_head_dim_supported(std::int64_t head_dim) {
  return head_dim == 16 || head_dim == 32 || head_dim == 64 || head_dim == 128 || head_dim == 256;
}

cudaError_t launch_flash_attention_forward(cudaStream_t stream, Element type, void* out, float* lse,
                                           const void* qkv, std::int64_t batch, std::int64_t seq,
                                           std::int64_t heads, std::int64_t kv_heads,
                                           std::int64_t head_dim) {
  const Shape s{batch, seq, heads, kv_heads, 1.0f / sqrtf(static_cast<float>(head_dim))};
  return dispatch(type, static_cast<int>(head_dim), [&]<typename E, int HD>() {
    flash_forward_kernel<E, HD><<<rows_grid(s, heads), kRowsPerBlock, 0, stream>>>(
        static_cast<E*>(out), lse, static_cast<const E*>(qkv), s);
    return cudaGetLastError();
  });
}

cudaError_t launch_flash_attention_backward(cudaStream_t stream, Element type, void* dqkv,
                                            float* delta, const void* dout, const void* out,
                                            const float* lse, const void* qkv, std::int64_t batch,
                                            std::int64_t seq, std::int64_t heads,
                                            std::int64_t kv_heads, std::int64_t head_dim) {
  const Shape s{batch, seq, heads, kv_heads, 1.0f / sqrtf(static_cast<float>(head_dim))};
  const std::int64_t rows = batch * heads * seq;
  return dispatch(type, static_cast<int>(head_dim), [&]<typename E, int HD>() {
    flash_delta_kernel<E><<<static_cast<unsigned>((rows + 255) / 256), 256, 0, stream>>>(
        delta, static_cast<const E*>(dout), static_cast<const E*>(out), rows, seq, heads, HD);
    flash_dq_kernel<E, HD><<<rows_grid(s, heads), kRowsPerBlock, 0, stream>>>(
        static_cast<E*>(dqkv), static_cast<const E*>(dout), static_cast<const E*>(qkv), lse,
        delta, s);
    flash_dkv_kernel<E, HD><<<rows_grid(s, kv_heads), kRowsPerBlock, 0, stream>>>(
        static_cast<E*>(dqkv), static_cast<const E*>(dout), static_cast<const E*>(qkv), lse,
        delta, s);
    return cudaGetLastError();
  });
}

}  // namespace meshtp::gpu
