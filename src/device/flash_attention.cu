// Fused causal attention on the GPU (gpu_ops.hpp flash_attention_*): the math, the positions
// and the lse layout of ops/flash_attention.hpp (FlashAttention, Dao et al. 2022, Algorithms
// 1–2; FlashAttention-2's loop order, Dao 2023 §3.1), with grouped-query attention, q, k, v
// as strided views (the column blocks of packed [q | k | v] rows, or a context-parallel ring
// step's chunks), and nothing T×T: memory O(T) per head (the output and one log-sum-exp per
// row).
//
// Positions: query row t sits at q_pos + t, key row j at k_pos + j, and t sees j iff
// j ≤ t + shift, shift = q_pos − k_pos. A row that sees no key of the range gets out 0 and
// lse −∞, the identity of the merge.
//
// The kernels favour being plainly right over being fast: one thread per query row (or, for
// dK and dV, per key row), the other side streamed through shared memory in tiles of
// kTileFloats / HD rows that a block's threads load together, fp32 arithmetic throughout
// (bf16 loads widen, stores round once).
//   forward   thread (b, h, t): for each key tile, for each key it sees: s = scale·q·k_j and the
//             online softmax (running max m and sum l, accumulator A rescaled when m grows);
//             out = A / l, lse = m + log l
//   D         D_t = Σ_d dO_td·O_td per (b, h, t)
//   dQ        thread (b, h, t): for each key j it sees: p = e^(s − L_t), dp = dO_t·v_j,
//             dq += scale·p·(dp − D_t)·k_j;  dq's row += dq
//   dK, dV    thread (b, g, j) of KV head g: for each query head h of the group and each query
//             row t that sees j: p = e^(s − L_t), dv += p·dO_t,
//             dk += scale·p·(dO_t·v_j − D_t)·q_t;  dk's and dv's rows += dk, dv
//   merge     thread (b, h, t): L = log(e^(L_a) + e^(L_b)), O = e^(L_a − L)·O_a + e^(L_b − L)·O_b
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

// Element (row, col) of a strided matrix.
template <typename E>
__device__ __forceinline__ const E& at(const void* m, std::int64_t ld, std::int64_t row,
                                       std::int64_t col) {
  return static_cast<const E*>(m)[row * ld + col];
}
template <typename E>
__device__ __forceinline__ E* place(void* m, std::int64_t ld, std::int64_t row, std::int64_t col) {
  return static_cast<E*>(m) + row * ld + col;
}

// Rows [r0, r0 + rows) (of `limit`, from row `first`) of the HD columns from `col` of m into
// tile (rows × HD floats); rows past the limit are zero.
template <typename E, int HD>
__device__ void load_tile(float* tile, const void* m, std::int64_t ld, std::int64_t first,
                          std::int64_t r0, int rows, std::int64_t limit, std::int64_t col) {
  for (int i = threadIdx.x; i < rows * HD; i += blockDim.x) {
    const int r = i / HD, d = i % HD;
    const std::int64_t t = r0 + r;
    tile[i] = t < limit ? widen(at<E>(m, ld, first + t, col + d)) : 0.0f;
  }
}

__device__ __forceinline__ std::int64_t lse_index(const FlashOperands& o, std::int64_t b,
                                                  std::int64_t h, std::int64_t t) {
  return (b * o.NH + h) * o.Tq + t;
}

// The keys [0, n) that some query row of [t0, t0 + kRowsPerBlock) sees.
__device__ __forceinline__ std::int64_t keys_seen(const FlashOperands& o, std::int64_t t0) {
  const std::int64_t last = (t0 + kRowsPerBlock < o.Tq ? t0 + kRowsPerBlock : o.Tq) - 1;
  const std::int64_t n = last + (o.q_pos - o.k_pos) + 1;
  return n < 0 ? 0 : (n < o.Tk ? n : o.Tk);
}

// How many keys of the tile from c0 (kKeys of them, the range's end at Tk) row t sees.
__device__ __forceinline__ int visible(const FlashOperands& o, std::int64_t t, std::int64_t c0,
                                       int keys) {
  std::int64_t n = t + (o.q_pos - o.k_pos) - c0 + 1;
  if (n > keys) n = keys;
  if (n > o.Tk - c0) n = o.Tk - c0;
  return n < 0 ? 0 : static_cast<int>(n);
}

template <typename E, int HD>
__global__ void flash_forward_kernel(FlashOperands o, float* lse, float scale) {
  constexpr int kKeys = kTileFloats / HD;
  __shared__ float k_tile[kTileFloats];
  __shared__ float v_tile[kTileFloats];
  const std::int64_t b = blockIdx.z, h = blockIdx.y;
  const std::int64_t t0 = static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock;
  const std::int64_t t = t0 + threadIdx.x;
  const bool mine = t < o.Tq;
  const std::int64_t g = h / (o.NH / o.NKV);
  float q[HD], acc[HD];
  float m = -INFINITY, l = 0.0f;
  for (int d = 0; d < HD; ++d) {
    q[d] = mine ? widen(at<E>(o.q, o.ldq, b * o.Tq + t, h * HD + d)) * scale : 0.0f;
    acc[d] = 0.0f;
  }
  const std::int64_t keys = keys_seen(o, t0);
  for (std::int64_t c0 = 0; c0 < keys; c0 += kKeys) {
    __syncthreads();  // the previous tile is no longer read
    load_tile<E, HD>(k_tile, o.k, o.ldk, b * o.Tk, c0, kKeys, o.Tk, g * HD);
    load_tile<E, HD>(v_tile, o.v, o.ldv, b * o.Tk, c0, kKeys, o.Tk, g * HD);
    __syncthreads();
    if (!mine) continue;
    const int seen = visible(o, t, c0, kKeys);
    for (int j = 0; j < seen; ++j) {
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
  E* row = place<E>(o.out, o.ldo, b * o.Tq + t, h * HD);
  for (int d = 0; d < HD; ++d) put(&row[d], l > 0.0f ? acc[d] / l : 0.0f);
  lse[lse_index(o, b, h, t)] = l > 0.0f ? m + logf(l) : -INFINITY;
}

// D_t = Σ_d dO_td·O_td, one thread per (b, h, t).
template <typename E>
__global__ void flash_delta_kernel(float* delta, FlashOperands o, int hd) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= o.B * o.NH * o.Tq) return;  // i = (b·NH + h)·Tq + t
  const std::int64_t t = i % o.Tq, h = (i / o.Tq) % o.NH, b = i / (o.Tq * o.NH);
  float sum = 0.0f;
  for (int d = 0; d < hd; ++d) {
    sum += widen(at<E>(o.dout, o.lddo, b * o.Tq + t, h * hd + d)) *
           widen(at<E>(static_cast<const void*>(o.out), o.ldo, b * o.Tq + t, h * hd + d));
  }
  delta[i] = sum;
}

template <typename E, int HD>
__global__ void flash_dq_kernel(FlashOperands o, const float* lse, const float* delta,
                                float scale) {
  constexpr int kKeys = kTileFloats / HD;
  __shared__ float k_tile[kTileFloats];
  __shared__ float v_tile[kTileFloats];
  const std::int64_t b = blockIdx.z, h = blockIdx.y;
  const std::int64_t t0 = static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock;
  const std::int64_t t = t0 + threadIdx.x;
  const float L = t < o.Tq ? lse[lse_index(o, b, h, t)] : -INFINITY;
  const bool mine = t < o.Tq && L > -INFINITY;  // a row that sees no key has no gradient
  const std::int64_t g = h / (o.NH / o.NKV);
  float q[HD], dO[HD], dq[HD];
  for (int d = 0; d < HD; ++d) {
    q[d] = mine ? widen(at<E>(o.q, o.ldq, b * o.Tq + t, h * HD + d)) * scale : 0.0f;
    dO[d] = mine ? widen(at<E>(o.dout, o.lddo, b * o.Tq + t, h * HD + d)) : 0.0f;
    dq[d] = 0.0f;
  }
  const float D = mine ? delta[lse_index(o, b, h, t)] : 0.0f;
  const std::int64_t keys = keys_seen(o, t0);
  for (std::int64_t c0 = 0; c0 < keys; c0 += kKeys) {
    __syncthreads();
    load_tile<E, HD>(k_tile, o.k, o.ldk, b * o.Tk, c0, kKeys, o.Tk, g * HD);
    load_tile<E, HD>(v_tile, o.v, o.ldv, b * o.Tk, c0, kKeys, o.Tk, g * HD);
    __syncthreads();
    if (!mine) continue;
    const int seen = visible(o, t, c0, kKeys);
    for (int j = 0; j < seen; ++j) {
      float score = 0.0f, dp = 0.0f;
      for (int d = 0; d < HD; ++d) {
        score += q[d] * k_tile[j * HD + d];
        dp += dO[d] * v_tile[j * HD + d];
      }
      const float ds = expf(score - L) * (dp - D) * scale;
      for (int d = 0; d < HD; ++d) dq[d] += ds * k_tile[j * HD + d];
    }
  }
  if (!mine) return;
  E* target = place<E>(o.dq, o.lddq, b * o.Tq + t, h * HD);
  for (int d = 0; d < HD; ++d) put(&target[d], widen(target[d]) + dq[d]);
}

template <typename E, int HD>
__global__ void flash_dkv_kernel(FlashOperands o, const float* lse, const float* delta,
                                 float scale) {
  constexpr int kQueries = kTileFloats / HD;
  __shared__ float q_tile[kTileFloats];
  __shared__ float do_tile[kTileFloats];
  __shared__ float stats[2 * kTileFloats / 16];  // L and D of the tile's rows (kQueries ≤ 256)
  const std::int64_t b = blockIdx.z, g = blockIdx.y;
  const std::int64_t j0 = static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock;
  const std::int64_t j = j0 + threadIdx.x;
  const bool mine = j < o.Tk;
  const std::int64_t group = o.NH / o.NKV, shift = o.q_pos - o.k_pos;
  float k[HD], v[HD], dk[HD], dv[HD];
  for (int d = 0; d < HD; ++d) {
    k[d] = mine ? widen(at<E>(o.k, o.ldk, b * o.Tk + j, g * HD + d)) : 0.0f;
    v[d] = mine ? widen(at<E>(o.v, o.ldv, b * o.Tk + j, g * HD + d)) : 0.0f;
    dk[d] = 0.0f;
    dv[d] = 0.0f;
  }
  // Query rows t ≥ j0 − shift: earlier ones see none of the block's keys.
  const std::int64_t first = j0 - shift > 0 ? j0 - shift : 0;
  for (std::int64_t h = g * group; h < (g + 1) * group; ++h) {
    for (std::int64_t r0 = first; r0 < o.Tq; r0 += kQueries) {
      __syncthreads();
      load_tile<E, HD>(q_tile, o.q, o.ldq, b * o.Tq, r0, kQueries, o.Tq, h * HD);
      load_tile<E, HD>(do_tile, o.dout, o.lddo, b * o.Tq, r0, kQueries, o.Tq, h * HD);
      for (int i = threadIdx.x; i < kQueries; i += blockDim.x) {
        const std::int64_t t = r0 + i;
        stats[2 * i] = t < o.Tq ? lse[lse_index(o, b, h, t)] : -INFINITY;
        stats[2 * i + 1] = t < o.Tq ? delta[lse_index(o, b, h, t)] : 0.0f;
      }
      __syncthreads();
      if (!mine) continue;
      const int rows = static_cast<int>(o.Tq - r0 < kQueries ? o.Tq - r0 : kQueries);
      for (int i = 0; i < rows; ++i) {
        if (r0 + i + shift < j || !(stats[2 * i] > -INFINITY)) continue;  // masked, or no key
        float score = 0.0f, dp = 0.0f;
        for (int d = 0; d < HD; ++d) {
          score += q_tile[i * HD + d] * k[d];
          dp += do_tile[i * HD + d] * v[d];
        }
        const float p = expf(score * scale - stats[2 * i]);
        const float ds = p * (dp - stats[2 * i + 1]) * scale;
        for (int d = 0; d < HD; ++d) {
          dv[d] += p * do_tile[i * HD + d];
          dk[d] += ds * q_tile[i * HD + d];
        }
      }
    }
  }
  if (!mine) return;
  E* kt = place<E>(o.dk, o.lddk, b * o.Tk + j, g * HD);
  E* vt = place<E>(o.dv, o.lddv, b * o.Tk + j, g * HD);
  for (int d = 0; d < HD; ++d) {
    put(&kt[d], widen(kt[d]) + dk[d]);
    put(&vt[d], widen(vt[d]) + dv[d]);
  }
}

// (out, lse) ← the merge of (out, lse) and (part, part_lse), one thread per (b, h, t).
template <typename E>
__global__ void flash_merge_kernel(void* out, std::int64_t ldo, float* lse, const void* part,
                                   std::int64_t ldp, const float* part_lse, std::int64_t rows,
                                   std::int64_t Tq, std::int64_t NH, int hd) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows) return;  // i = (b·NH + h)·Tq + t
  const float la = lse[i], lb = part_lse[i];
  if (!(lb > -INFINITY)) return;  // the part saw no key: nothing to add
  const std::int64_t t = i % Tq, h = (i / Tq) % NH, b = i / (Tq * NH);
  E* o = place<E>(out, ldo, b * Tq + t, h * hd);
  const E* p = &at<E>(part, ldp, b * Tq + t, h * hd);
  const float m = la > lb ? la : lb;
  const float L = la > -INFINITY ? m + log1pf(expf(-fabsf(la - lb))) : lb;
  const float wa = la > -INFINITY ? expf(la - L) : 0.0f, wb = expf(lb - L);
  for (int d = 0; d < hd; ++d) put(&o[d], wa * widen(o[d]) + wb * widen(p[d]));
  lse[i] = L;
}

dim3 rows_grid(std::int64_t rows, std::int64_t heads, std::int64_t batch) {
  return dim3(static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock),
              static_cast<unsigned>(heads), static_cast<unsigned>(batch));
}

unsigned flat_blocks(std::int64_t n) { return static_cast<unsigned>((n + 255) / 256); }

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

float scale_of(std::int64_t head_dim) { return 1.0f / sqrtf(static_cast<float>(head_dim)); }

}  // namespace

bool flash_attention_head_dim_supported(std::int64_t head_dim) {
  return head_dim == 16 || head_dim == 32 || head_dim == 64 || head_dim == 128 || head_dim == 256;
}

cudaError_t launch_flash_attention_forward(cudaStream_t stream, Element type,
                                           const FlashOperands& o, float* lse,
                                           std::int64_t head_dim) {
  return dispatch(type, static_cast<int>(head_dim), [&]<typename E, int HD>() {
    flash_forward_kernel<E, HD>
        <<<rows_grid(o.Tq, o.NH, o.B), kRowsPerBlock, 0, stream>>>(o, lse, scale_of(HD));
    return cudaGetLastError();
  });
}

cudaError_t launch_flash_attention_backward(cudaStream_t stream, Element type,
                                            const FlashOperands& o, const float* lse, float* delta,
                                            std::int64_t head_dim) {
  return dispatch(type, static_cast<int>(head_dim), [&]<typename E, int HD>() {
    flash_delta_kernel<E><<<flat_blocks(o.B * o.NH * o.Tq), 256, 0, stream>>>(delta, o, HD);
    flash_dq_kernel<E, HD>
        <<<rows_grid(o.Tq, o.NH, o.B), kRowsPerBlock, 0, stream>>>(o, lse, delta, scale_of(HD));
    flash_dkv_kernel<E, HD>
        <<<rows_grid(o.Tk, o.NKV, o.B), kRowsPerBlock, 0, stream>>>(o, lse, delta, scale_of(HD));
    return cudaGetLastError();
  });
}

cudaError_t launch_flash_attention_merge(cudaStream_t stream, Element type, void* out,
                                         std::int64_t ldo, float* lse, const void* part,
                                         std::int64_t ldp, const float* part_lse,
                                         std::int64_t batch, std::int64_t tq, std::int64_t heads,
                                         std::int64_t head_dim) {
  const std::int64_t rows = batch * heads * tq;
  const int hd = static_cast<int>(head_dim);
  if (type == Element::kBF16) {
    flash_merge_kernel<bf16><<<flat_blocks(rows), 256, 0, stream>>>(out, ldo, lse, part, ldp,
                                                                    part_lse, rows, tq, heads, hd);
  } else {
    flash_merge_kernel<float><<<flat_blocks(rows), 256, 0, stream>>>(out, ldo, lse, part, ldp,
                                                                     part_lse, rows, tq, heads, hd);
  }
  return cudaGetLastError();
}

}  // namespace meshtp::gpu
