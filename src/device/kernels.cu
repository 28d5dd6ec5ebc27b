// The GPU kernels behind gpu_ops.hpp, and their launchers (kernel_launch.hpp). Whole tensors
// per launch (a row per block where a row reduces, a grid-stride loop where it does not); fp32
// arithmetic; bf16 loads widen, bf16 stores round to nearest even once.
#include <cuda_bf16.h>

#include <cmath>

#include "device/kernel_launch.hpp"

namespace meshtp::gpu {

namespace {

using bf16 = __nv_bfloat16;

__device__ __forceinline__ float load(const float* p, std::int64_t i) { return p[i]; }
__device__ __forceinline__ float load(const bf16* p, std::int64_t i) {
  return __bfloat162float(p[i]);
}
__device__ __forceinline__ void store(float* p, std::int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void store(bf16* p, std::int64_t i, float v) {
  p[i] = __float2bfloat16_rn(v);
}

constexpr int kThreads = 256;  // threads per block everywhere

// Blocks for a grid-stride loop over n elements: enough to fill the device a few times over.
unsigned blocks_for(std::int64_t n) {
  const std::int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 4096 ? (blocks > 0 ? blocks : 1) : 4096);
}

// Σ over the block's threads (float, or double for a norm's sums); every thread gets the sum.
// `shared` holds 32 of them.
template <typename T>
__device__ T block_sum(T v, T* shared) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();  // shared may still be read by a previous reduction
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) / 32;
  v = lane < warps ? shared[lane] : T(0);
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ float block_max(float v, float* shared) {
  for (int offset = 16; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) / 32;
  v = lane < warps ? shared[lane] : -INFINITY;
  for (int offset = 16; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// GeLU, tanh form (ops/gelu.hpp): y = ½x(1 + tanh u), u = √(2/π)(x + 0.044715x³).
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

template <typename T>
__global__ void gelu_forward_kernel(T* y, const T* x, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const float v = load(x, i);
    const float u = kSqrt2OverPi * (v + kGeluCubic * v * v * v);
    store(y, i, 0.5f * v * (1.0f + tanhf(u)));
  }
}

template <typename T>
__global__ void gelu_backward_kernel(T* dx, const T* x, const T* dy, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const float v = load(x, i);
    const float th = tanhf(kSqrt2OverPi * (v + kGeluCubic * v * v * v));
    const float grad = 0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * kSqrt2OverPi *
                                                (1.0f + 3.0f * kGeluCubic * v * v);
    store(dx, i, load(dx, i) + load(dy, i) * grad);
  }
}

template <typename T>
__global__ void add_kernel(T* y, const T* a, const T* b, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    store(y, i, load(a, i) + load(b, i));
}

template <typename Y, typename X>
__global__ void convert_kernel(Y* y, const X* x, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    store(y, i, load(x, i));
}

// Strided 2D: element (i, j) of a rows × cols view at i·ld + j. Grid-stride over the rows·cols
// elements, so a view with few long rows and one with many short ones both fill the device.
template <typename Y, typename X>
__global__ void copy_2d_kernel(Y* y, std::int64_t ldy, const X* x, std::int64_t ldx,
                               std::int64_t rows, std::int64_t cols) {
  const std::int64_t n = rows * cols;
  for (std::int64_t e = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; e < n;
       e += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t i = e / cols, j = e % cols;
    store(y, i * ldy + j, load(x, i * ldx + j));
  }
}

template <typename T>
__global__ void add_2d_kernel(T* y, std::int64_t ldy, const T* x, std::int64_t ldx,
                              std::int64_t rows, std::int64_t cols) {
  const std::int64_t n = rows * cols;
  for (std::int64_t e = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; e < n;
       e += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t i = e / cols, j = e % cols;
    store(y, i * ldy + j, load(y, i * ldy + j) + load(x, i * ldx + j));
  }
}

// SwiGLU (ops/swiglu.hpp), grid-stride over rows·f: silu(a) = a·σ(a), σ(a) = 1/(1 + e^(−a)).
template <typename T>
__global__ void swiglu_forward_kernel(T* y, std::int64_t ldy, const T* x, std::int64_t ldx,
                                      std::int64_t rows, std::int64_t f) {
  const std::int64_t n = rows * f;
  for (std::int64_t e = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; e < n;
       e += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t i = e / f, j = e % f;
    const float a = load(x, i * ldx + j), b = load(x, i * ldx + f + j);
    const float sig = 1.0f / (1.0f + expf(-a));
    store(y, i * ldy + j, a * sig * b);
  }
}

// da += dy ⊙ b ⊙ σ(a)·(1 + a·(1 − σ(a))),  db += dy ⊙ silu(a)
template <typename T>
__global__ void swiglu_backward_kernel(T* dx, std::int64_t lddx, const T* x, std::int64_t ldx,
                                       const T* dy, std::int64_t lddy, std::int64_t rows,
                                       std::int64_t f) {
  const std::int64_t n = rows * f;
  for (std::int64_t e = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; e < n;
       e += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t i = e / f, j = e % f;
    const float a = load(x, i * ldx + j), b = load(x, i * ldx + f + j);
    const float g = load(dy, i * lddy + j);
    const float sig = 1.0f / (1.0f + expf(-a));
    const std::int64_t da = i * lddx + j, db = da + f;
    store(dx, da, load(dx, da) + g * b * sig * (1.0f + a * (1.0f - sig)));
    store(dx, db, load(dx, db) + g * a * sig);
  }
}

// RoPE (ops/rope.hpp), grid-stride over the rows·heads·hd/2 pairs (i, i + hd/2) of each head:
// lo = u·c − v·s, hi = v·c + u·s with c, s of the row's position t = row mod T, s times sign.
template <typename T>
__global__ void rope_kernel(T* x, std::int64_t ldx, std::int64_t rows, std::int64_t heads,
                            std::int64_t hd, std::int64_t seq, const float* cos_sin,
                            std::int64_t ldt, float sign) {
  const std::int64_t half = hd / 2, n = rows * heads * half;
  for (std::int64_t e = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; e < n;
       e += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t r = e / (heads * half), h = (e / half) % heads, i = e % half;
    const float* cs = cos_sin + (r % seq) * ldt;
    const float c = cs[i], sn = sign * cs[half + i];
    const std::int64_t lo = r * ldx + h * hd + i, hi = lo + half;
    const float u = load(x, lo), v = load(x, hi);
    store(x, lo, u * c - v * sn);
    store(x, hi, v * c + u * sn);
  }
}

// LayerNorm forward, one block per row: two passes (mean, then centred variance) as the CPU op.
template <typename T>
__global__ void layernorm_forward_kernel(T* y, float* mean_out, float* rstd_out, const T* x,
                                         const float* w, const float* b, std::int64_t cols,
                                         float eps) {
  __shared__ float shared[32];
  const std::int64_t row = blockIdx.x;
  const T* xr = x + row * cols;
  T* yr = y + row * cols;
  float sum = 0.0f;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += load(xr, c);
  const float mean = block_sum(sum, shared) / static_cast<float>(cols);
  float sq = 0.0f;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float d = load(xr, c) - mean;
    sq += d * d;
  }
  const float rstd = rsqrtf(block_sum(sq, shared) / static_cast<float>(cols) + eps);
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    store(yr, c, (load(xr, c) - mean) * rstd * w[c] + b[c]);
  if (threadIdx.x == 0) {
    mean_out[row] = mean;
    rstd_out[row] = rstd;
  }
}

// dx += rstd·(g − mean(g) − x̂·mean(g⊙x̂)), g = dy⊙w; one block per row.
template <typename T>
__global__ void layernorm_backward_dx_kernel(T* dx, const T* dy, const T* x, const float* w,
                                             const float* mean, const float* rstd,
                                             std::int64_t cols) {
  __shared__ float shared[32];
  const std::int64_t row = blockIdx.x;
  const T* xr = x + row * cols;
  const T* dyr = dy + row * cols;
  T* dxr = dx + row * cols;
  const float mu = mean[row], rs = rstd[row];
  float sum_g = 0.0f, sum_gx = 0.0f;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float g = load(dyr, c) * w[c];
    sum_g += g;
    sum_gx += g * (load(xr, c) - mu) * rs;
  }
  const float mean_g = block_sum(sum_g, shared) / static_cast<float>(cols);
  const float mean_gx = block_sum(sum_gx, shared) / static_cast<float>(cols);
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float g = load(dyr, c) * w[c];
    const float xhat = (load(xr, c) - mu) * rs;
    store(dxr, c, load(dxr, c) + rs * (g - mean_g - xhat * mean_gx));
  }
}

// dw += Σ_n dy⊙x̂, db += Σ_n dy: a thread per column over a slice of the rows (blockIdx.y),
// one atomic add per column and slice.
template <typename T>
__global__ void layernorm_backward_dw_kernel(float* dw, float* db, const T* dy, const T* x,
                                             const float* mean, const float* rstd,
                                             std::int64_t rows, std::int64_t cols,
                                             std::int64_t rows_per_slice) {
  const std::int64_t c = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  if (c >= cols) return;
  const std::int64_t r0 = blockIdx.y * rows_per_slice;
  const std::int64_t r1 = r0 + rows_per_slice < rows ? r0 + rows_per_slice : rows;
  float acc_w = 0.0f, acc_b = 0.0f;
  for (std::int64_t r = r0; r < r1; ++r) {
    const float d = load(dy, r * cols + c);
    acc_w += d * (load(x, r * cols + c) - mean[r]) * rstd[r];
    acc_b += d;
  }
  atomicAdd(dw + c, acc_w);
  atomicAdd(db + c, acc_b);
}

// Cross-entropy forward, one block per row: lse = max + log Σ exp(x − max); loss = lse − x[t].
template <typename T>
__global__ void cross_entropy_forward_kernel(float* lse, float* loss, const T* logits,
                                             const std::int32_t* targets, std::int64_t classes,
                                             std::int64_t ld) {
  __shared__ float shared[32];
  const std::int64_t row = blockIdx.x;
  const T* xr = logits + row * ld;
  float mx = -INFINITY;
  for (std::int64_t c = threadIdx.x; c < classes; c += blockDim.x) mx = fmaxf(mx, load(xr, c));
  mx = block_max(mx, shared);
  float sum = 0.0f;
  for (std::int64_t c = threadIdx.x; c < classes; c += blockDim.x) sum += expf(load(xr, c) - mx);
  sum = block_sum(sum, shared);
  if (threadIdx.x == 0) {
    const float l = mx + logf(sum);
    lse[row] = l;
    loss[row] = l - load(xr, targets[row]);
  }
}

// dlogits += (dloss/N)·(softmax − onehot), one block per row.
template <typename T>
__global__ void cross_entropy_backward_kernel(T* dlogits, const T* logits, const float* lse,
                                              const std::int32_t* targets, std::int64_t classes,
                                              std::int64_t ld, float scale) {
  const std::int64_t row = blockIdx.x;
  const T* xr = logits + row * ld;
  T* dr = dlogits + row * ld;
  const float l = lse[row];
  const std::int32_t t = targets[row];
  for (std::int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
    const float p = expf(load(xr, c) - l);
    store(dr, c, load(dr, c) + scale * (p - (c == t ? 1.0f : 0.0f)));
  }
}

template <typename T>
__global__ void embedding_forward_kernel(T* out, const std::int32_t* tokens, const T* wte,
                                         const T* wpe, std::int64_t rows, std::int64_t seq,
                                         std::int64_t channels) {
  const std::int64_t n = rows * channels;
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t r = i / channels, c = i % channels;
    store(out, i, load(wte, tokens[r] * channels + c) + load(wpe, (r % seq) * channels + c));
  }
}

template <typename T>
__global__ void embedding_backward_kernel(float* dwte, float* dwpe, const T* dout,
                                          const std::int32_t* tokens, std::int64_t rows,
                                          std::int64_t seq, std::int64_t channels) {
  const std::int64_t n = rows * channels;
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t r = i / channels, c = i % channels;
    const float d = load(dout, i);
    atomicAdd(dwte + tokens[r] * channels + c, d);
    atomicAdd(dwpe + (r % seq) * channels + c, d);
  }
}

// Masked softmax of one attention row (query t = row mod seq), in place; one block per row.
template <typename T>
__global__ void causal_softmax_kernel(T* x, std::int64_t seq) {
  __shared__ float shared[32];
  const std::int64_t row = blockIdx.x;
  const std::int64_t t = row % seq;
  T* xr = x + row * seq;
  float mx = -INFINITY;
  for (std::int64_t j = threadIdx.x; j <= t; j += blockDim.x) mx = fmaxf(mx, load(xr, j));
  mx = block_max(mx, shared);
  float sum = 0.0f;
  for (std::int64_t j = threadIdx.x; j <= t; j += blockDim.x) sum += expf(load(xr, j) - mx);
  const float inv = 1.0f / block_sum(sum, shared);
  for (std::int64_t j = threadIdx.x; j < seq; j += blockDim.x)
    store(xr, j, j <= t ? expf(load(xr, j) - mx) * inv : 0.0f);
}

template <typename T>
__global__ void causal_softmax_backward_kernel(T* ds, const T* p, std::int64_t seq) {
  __shared__ float shared[32];
  const std::int64_t row = blockIdx.x;
  const std::int64_t t = row % seq;
  T* dr = ds + row * seq;
  const T* pr = p + row * seq;
  float dot = 0.0f;
  for (std::int64_t j = threadIdx.x; j <= t; j += blockDim.x) dot += load(dr, j) * load(pr, j);
  dot = block_sum(dot, shared);
  for (std::int64_t j = threadIdx.x; j < seq; j += blockDim.x)
    store(dr, j, j <= t ? load(pr, j) * (load(dr, j) - dot) : 0.0f);
}

// AdamW, many tensors per launch: block b updates chunk b, kAdamWChunk elements of one
// tensor: core/adamw_step.hpp's formula in its order of operations, so fp32 results match
// the host's (ops/adamw.hpp) up to sqrt's rounding.
__global__ void adamw_kernel(const AdamWTensor* tensors, const AdamWChunk* chunks, AdamWStep s) {
  const AdamWChunk c = chunks[blockIdx.x];
  const AdamWTensor t = tensors[c.tensor];
  const std::int64_t begin = std::int64_t{c.chunk} * kAdamWChunk;
  const std::int64_t end = begin + kAdamWChunk < t.n ? begin + kAdamWChunk : t.n;
  for (std::int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const float g = t.g[i];
    const float m = s.beta1 * t.m[i] + (1.0f - s.beta1) * g;
    const float v = s.beta2 * t.v[i] + (1.0f - s.beta2) * g * g;
    t.m[i] = m;
    t.v[i] = v;
    const float m_hat = m / s.bias1;
    const float v_hat = v / s.bias2;
    const float p = t.p[i] - s.lr * (m_hat / (sqrtf(v_hat) + s.eps) + s.decay * t.p[i]);
    t.p[i] = p;
    if (t.p_compute != nullptr) static_cast<bf16*>(t.p_compute)[i] = __float2bfloat16_rn(p);
  }
}

// ---- normalisations on strided views (device/backend.hpp's norm ops) ------------------------
// LayerNorm and RMSNorm share these kernels: RMSNorm is LayerNorm with mean 0, no b and no Σg
// term (kRms). Rows are `ld` elements apart; one block per row. Row sums are fp64 (the CPU
// ops' order: float terms widened and added in double), so the phase kernels' sums are the
// CPU's up to the order of the additions. `sums` holds a row's sums at [row] and [rows + row]
// (LayerNorm: Σx | Σx² forward, Σg | Σg·x̂ backward; RMSNorm: [row] alone), as the CPU ops
// (ops/layernorm.cpp, ops/rmsnorm.cpp) lay them out.


// Σx and Σx² of one row (every thread gets both).
template <typename T>
__device__ void row_moments(const T* xr, std::int64_t cols, double* shared, double& sum,
                            double& sum_sq) {
  double s = 0.0, q = 0.0;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const double v = load(xr, c);
    s += v;
    q += v * v;
  }
  sum = block_sum(s, shared);
  sum_sq = block_sum(q, shared);
}

// Σg and Σg·x̂ of one row, g = dy⊙w, x̂ = (x − mean)·rstd (every thread gets both).
template <typename T>
__device__ void row_backward_sums(const T* dyr, const T* xr, const float* w, float mean, float rstd,
                                  std::int64_t cols, double* shared, double& sum_g,
                                  double& sum_gx) {
  double s = 0.0, q = 0.0;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float g = load(dyr, c) * w[c];
    const float xhat = (load(xr, c) - mean) * rstd;
    s += g;
    q += static_cast<double>(g) * xhat;
  }
  sum_g = block_sum(s, shared);
  sum_gx = block_sum(q, shared);
}

// A row's sums where the phases keep them, the CPU's layout: LayerNorm's two at [row] and
// [rows + row], RMSNorm's one (the second) at [row].
template <bool kRms>
__device__ void store_row_sums(double* sums, std::int64_t row, std::int64_t rows, double first,
                               double second) {
  if (kRms) {
    sums[row] = second;
  } else {
    sums[row] = first;
    sums[rows + row] = second;
  }
}

template <typename T, bool kRms>
__global__ void norm_forward_sums_kernel(double* sums, const T* x, std::int64_t ldx,
                                         std::int64_t rows, std::int64_t cols) {
  __shared__ double shared[32];
  const std::int64_t row = blockIdx.x;
  double s, q;
  row_moments(x + row * ldx, cols, shared, s, q);
  if (threadIdx.x == 0) store_row_sums<kRms>(sums, row, rows, s, q);
}

// The statistics from the row's sums over c_global features (the CPU phase 2's formulas:
// LayerNorm's variance E[x²] − mean², clamped at 0), then y = (x − mean)·rstd ⊙ w (+ b).
// sums == nullptr: the row is whole, its sums are taken here (RMSNorm's whole-row forward).
template <typename T, bool kRms>
__global__ void norm_forward_apply_kernel(T* y, std::int64_t ldy, float* mean_out, float* rstd_out,
                                          const T* x, std::int64_t ldx, const float* w,
                                          const float* b, const double* sums, std::int64_t rows,
                                          std::int64_t cols, std::int64_t c_global, float eps) {
  __shared__ double shared[32];
  const std::int64_t row = blockIdx.x;
  const T* xr = x + row * ldx;
  T* yr = y + row * ldy;
  double s = 0.0, q = 0.0;
  if (sums == nullptr) {
    row_moments(xr, cols, shared, s, q);
  } else if (kRms) {
    q = sums[row];
  } else {
    s = sums[row];
    q = sums[rows + row];
  }
  float mean = 0.0f, rstd;
  if (kRms) {
    rstd = static_cast<float>(1.0 /
                              sqrt(q / static_cast<double>(c_global) + static_cast<double>(eps)));
  } else {
    const double inv_c = 1.0 / static_cast<double>(c_global);
    const double mu = s * inv_c;
    const double var = fmax(q * inv_c - mu * mu, 0.0);
    mean = static_cast<float>(mu);
    rstd = static_cast<float>(1.0 / sqrt(var + static_cast<double>(eps)));
  }
  if (threadIdx.x == 0) {
    if (!kRms) mean_out[row] = mean;
    rstd_out[row] = rstd;
  }
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float xhat = (load(xr, c) - mean) * rstd;
    store(yr, c, kRms ? xhat * w[c] : fmaf(xhat, w[c], b[c]));
  }
}

template <typename T, bool kRms>
__global__ void norm_backward_sums_kernel(double* sums, const T* dy, std::int64_t lddy, const T* x,
                                          std::int64_t ldx, const float* w, const float* mean,
                                          const float* rstd, std::int64_t rows, std::int64_t cols) {
  __shared__ double shared[32];
  const std::int64_t row = blockIdx.x;
  double sg, sgx;
  row_backward_sums(dy + row * lddy, x + row * ldx, w, kRms ? 0.0f : mean[row], rstd[row], cols,
                    shared, sg, sgx);
  if (threadIdx.x == 0) store_row_sums<kRms>(sums, row, rows, sg, sgx);
}

// dx += rstd·(g − mean(g) − x̂·mean(g⊙x̂)) with the means over c_global features (RMSNorm:
// no mean(g) term). sums == nullptr: the row is whole, its sums are taken here.
template <typename T, bool kRms>
__global__ void norm_backward_apply_kernel(T* dx, std::int64_t lddx, const T* dy, std::int64_t lddy,
                                           const T* x, std::int64_t ldx, const float* w,
                                           const float* mean, const float* rstd, const double* sums,
                                           std::int64_t rows, std::int64_t cols,
                                           std::int64_t c_global) {
  __shared__ double shared[32];
  const std::int64_t row = blockIdx.x;
  const T* dyr = dy + row * lddy;
  const T* xr = x + row * ldx;
  T* dxr = dx + row * lddx;
  const float mu = kRms ? 0.0f : mean[row], rs = rstd[row];
  double sg = 0.0, sgx = 0.0;
  if (sums == nullptr) {
    row_backward_sums(dyr, xr, w, mu, rs, cols, shared, sg, sgx);
  } else if (kRms) {
    sgx = sums[row];
  } else {
    sg = sums[row];
    sgx = sums[rows + row];
  }
  const double inv_c = 1.0 / static_cast<double>(c_global);
  const float g_mean = kRms ? 0.0f : static_cast<float>(sg * inv_c);
  const float gx_mean = static_cast<float>(sgx * inv_c);
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float xhat = (load(xr, c) - mu) * rs;
    const float inner = (load(dyr, c) * w[c] - g_mean) - xhat * gx_mean;
    store(dxr, c, fmaf(rs, inner, load(dxr, c)));
  }
}

// dw += Σ_n dy⊙x̂ (and LayerNorm's db += Σ_n dy): a thread per column over a slice of the rows
// (blockIdx.y), one atomic add per column and slice.
template <typename T, bool kRms>
__global__ void norm_backward_weights_kernel(float* dw, float* db, const T* dy, std::int64_t lddy,
                                             const T* x, std::int64_t ldx, const float* mean,
                                             const float* rstd, std::int64_t rows,
                                             std::int64_t cols, std::int64_t rows_per_slice) {
  const std::int64_t c = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  if (c >= cols) return;
  const std::int64_t r0 = blockIdx.y * rows_per_slice;
  const std::int64_t r1 = r0 + rows_per_slice < rows ? r0 + rows_per_slice : rows;
  float acc_w = 0.0f, acc_b = 0.0f;
  for (std::int64_t r = r0; r < r1; ++r) {
    const float d = load(dy, r * lddy + c);
    acc_w += d * (load(x, r * ldx + c) - (kRms ? 0.0f : mean[r])) * rstd[r];
    acc_b += d;
  }
  atomicAdd(dw + c, acc_w);
  if (!kRms) atomicAdd(db + c, acc_b);
}

// ---- a vocabulary shard: the token table's rows / the logits' columns [begin, begin + n) ----

// out[r,:] = wte[t_r − begin,:] if begin ≤ t_r < begin + wte_rows, else 0.
template <typename T>
__global__ void embedding_shard_forward_kernel(T* out, std::int64_t ldo, const std::int32_t* tokens,
                                               const T* wte, std::int64_t ldw,
                                               std::int64_t wte_rows, std::int64_t begin,
                                               std::int64_t rows, std::int64_t cols) {
  const std::int64_t n = rows * cols;
  for (std::int64_t e = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; e < n;
       e += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t r = e / cols, c = e % cols;
    const std::int64_t t = std::int64_t{tokens[r]} - begin;
    store(out, r * ldo + c, t >= 0 && t < wte_rows ? load(wte, t * ldw + c) : 0.0f);
  }
}

// dwte[t_r − begin,:] += dout[r,:] for the rows whose token the shard holds (atomic adds).
template <typename T>
__global__ void embedding_shard_backward_kernel(float* dwte, std::int64_t ldw,
                                                std::int64_t wte_rows, const T* dout,
                                                std::int64_t ldd, const std::int32_t* tokens,
                                                std::int64_t begin, std::int64_t rows,
                                                std::int64_t cols) {
  const std::int64_t n = rows * cols;
  for (std::int64_t e = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; e < n;
       e += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t r = e / cols, c = e % cols;
    const std::int64_t t = std::int64_t{tokens[r]} - begin;
    if (t >= 0 && t < wte_rows) atomicAdd(dwte + t * ldw + c, load(dout, r * ldd + c));
  }
}

// One block per row: the columns from `real` (the first past the real vocabulary) are set to
// −∞, and row_max is the row's maximum (−∞ when the shard holds no real column).
template <typename T>
__global__ void cross_entropy_shard_max_kernel(T* logits, std::int64_t ld, float* row_max,
                                               std::int64_t cols, std::int64_t real) {
  __shared__ float shared[32];
  const std::int64_t row = blockIdx.x;
  T* xr = logits + row * ld;
  float mx = -INFINITY;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    if (c < real) {
      mx = fmaxf(mx, load(xr, c));
    } else {
      store(xr, c, -INFINITY);
    }
  }
  mx = block_max(mx, shared);
  if (threadIdx.x == 0) row_max[row] = mx;
}

// One block per row: sums[2r] = Σ_{c < real} exp(x − row_max) (in double, stored as fp32),
// sums[2r + 1] = the target's logit if the shard holds it, else 0.
template <typename T>
__global__ void cross_entropy_shard_sums_kernel(float* sums, const T* logits, std::int64_t ld,
                                                const float* row_max, const std::int32_t* targets,
                                                std::int64_t begin, std::int64_t cols,
                                                std::int64_t real) {
  __shared__ double shared[32];
  const std::int64_t row = blockIdx.x;
  const T* xr = logits + row * ld;
  const float mx = row_max[row];
  double s = 0.0;
  for (std::int64_t c = threadIdx.x; c < real; c += blockDim.x) s += expf(load(xr, c) - mx);
  s = block_sum(s, shared);
  if (threadIdx.x != 0) return;
  const std::int64_t t = std::int64_t{targets[row]} - begin;
  sums[2 * row] = static_cast<float>(s);
  sums[2 * row + 1] = t >= 0 && t < cols ? load(xr, t) : 0.0f;
}

// lse[r] = row_max[r] + log(sums[2r]).
__global__ void cross_entropy_shard_lse_kernel(float* lse, const float* row_max, const float* sums,
                                               std::int64_t rows) {
  for (std::int64_t r = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; r < rows;
       r += std::int64_t{gridDim.x} * blockDim.x)
    lse[r] = row_max[r] + logf(sums[2 * r]);
}

// logits[r, c] ← scale·(exp(x − lse[r]) − [c is the target's column]), in place (the padding
// columns, −∞, become 0).
template <typename T>
__global__ void cross_entropy_shard_backward_kernel(T* logits, std::int64_t ld, const float* lse,
                                                    const std::int32_t* targets, std::int64_t begin,
                                                    std::int64_t rows, std::int64_t cols,
                                                    float scale) {
  const std::int64_t n = rows * cols;
  for (std::int64_t e = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; e < n;
       e += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t r = e / cols, c = e % cols;
    float v = scale * expf(load(logits, r * ld + c) - lse[r]);
    if (c == std::int64_t{targets[r]} - begin) v -= scale;
    store(logits, r * ld + c, v);
  }
}

// Calls the statement with T = float or bf16 for the element type.
#define MESHTP_DISPATCH(type, ...) \
  do {                             \
    if ((type) == Element::kF32) { \
      using T = float;             \
      __VA_ARGS__;                 \
    } else {                       \
      using T = bf16;              \
      __VA_ARGS__;                 \
    }                              \
  } while (0)

unsigned rows_grid(std::int64_t rows) { return static_cast<unsigned>(rows); }

// Rows by index: one block per listed row (gather, row_dots) or destination row (scatter).
template <typename E>
__global__ void gather_rows_kernel(E* dst, std::int64_t ldd, const E* src, std::int64_t lds,
                                   std::int64_t cols, const std::int64_t* index,
                                   const float* scale) {
  const std::int64_t i = blockIdx.x, r = index[i];
  const float f = scale != nullptr ? scale[i] : 1.0f;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    store(dst, i * ldd + c, f * load(src, r * lds + c));
  }
}

template <typename E>
__global__ void scatter_add_rows_kernel(E* dst, std::int64_t ldd, const E* src, std::int64_t lds,
                                        std::int64_t cols, const std::int64_t* first,
                                        const std::int64_t* order, const float* scale) {
  const std::int64_t r = blockIdx.x;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float acc = load(dst, r * ldd + c);
    for (std::int64_t j = first[r]; j < first[r + 1]; ++j) {
      const std::int64_t i = order[j];
      acc += (scale != nullptr ? scale[i] : 1.0f) * load(src, i * lds + c);
    }
    store(dst, r * ldd + c, acc);
  }
}

template <typename E>
__global__ void row_dots_kernel(float* out, const E* a, std::int64_t lda, const std::int64_t* index,
                                const E* b, std::int64_t ldb, std::int64_t cols) {
  __shared__ double shared[32];
  const std::int64_t i = blockIdx.x, r = index[i];
  double sum = 0.0;  // in double, as the CPU's
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    sum += static_cast<double>(load(a, r * lda + c)) * load(b, i * ldb + c);
  }
  sum = block_sum(sum, shared);
  if (threadIdx.x == 0) out[i] = static_cast<float>(sum);
}

}  // namespace

cudaError_t launch_gelu_forward(cudaStream_t s, Element t, void* y, const void* x, std::int64_t n) {
  MESHTP_DISPATCH(t, gelu_forward_kernel<<<blocks_for(n), kThreads, 0, s>>>(
                         static_cast<T*>(y), static_cast<const T*>(x), n));
  return cudaGetLastError();
}

cudaError_t launch_gelu_backward(cudaStream_t s, Element t, void* dx, const void* x, const void* dy,
                                 std::int64_t n) {
  MESHTP_DISPATCH(t,
                  gelu_backward_kernel<<<blocks_for(n), kThreads, 0, s>>>(
                      static_cast<T*>(dx), static_cast<const T*>(x), static_cast<const T*>(dy), n));
  return cudaGetLastError();
}

cudaError_t launch_add(cudaStream_t s, Element t, void* y, const void* a, const void* b,
                       std::int64_t n) {
  MESHTP_DISPATCH(
      t, add_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<T*>(y), static_cast<const T*>(a),
                                                       static_cast<const T*>(b), n));
  return cudaGetLastError();
}

cudaError_t launch_convert(cudaStream_t s, void* y, Element y_type, const void* x, std::int64_t n) {
  if (y_type == Element::kBF16)
    convert_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<bf16*>(y),
                                                      static_cast<const float*>(x), n);
  else
    convert_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<float*>(y),
                                                      static_cast<const bf16*>(x), n);
  return cudaGetLastError();
}

cudaError_t launch_copy_2d(cudaStream_t s, void* y, Element y_type, std::int64_t ldy,
                          const void* x, Element x_type, std::int64_t ldx, std::int64_t rows,
                          std::int64_t cols) {
  const unsigned blocks = blocks_for(rows * cols);
  if (y_type == Element::kF32 && x_type == Element::kF32)
    copy_2d_kernel<<<blocks, kThreads, 0, s>>>(static_cast<float*>(y), ldy,
                                               static_cast<const float*>(x), ldx, rows, cols);
  else if (y_type == Element::kBF16 && x_type == Element::kBF16)
    copy_2d_kernel<<<blocks, kThreads, 0, s>>>(static_cast<bf16*>(y), ldy,
                                               static_cast<const bf16*>(x), ldx, rows, cols);
  else if (y_type == Element::kBF16)
    copy_2d_kernel<<<blocks, kThreads, 0, s>>>(static_cast<bf16*>(y), ldy,
                                               static_cast<const float*>(x), ldx, rows, cols);
  else
    copy_2d_kernel<<<blocks, kThreads, 0, s>>>(static_cast<float*>(y), ldy,
                                               static_cast<const bf16*>(x), ldx, rows, cols);
  return cudaGetLastError();
}

cudaError_t launch_swiglu_forward(cudaStream_t s, Element t, void* y, std::int64_t ldy,
                                  const void* x, std::int64_t ldx, std::int64_t rows,
                                  std::int64_t f) {
  MESHTP_DISPATCH(t, swiglu_forward_kernel<<<blocks_for(rows * f), kThreads, 0, s>>>(
                         static_cast<T*>(y), ldy, static_cast<const T*>(x), ldx, rows, f));
  return cudaGetLastError();
}

cudaError_t launch_swiglu_backward(cudaStream_t s, Element t, void* dx, std::int64_t lddx,
                                   const void* x, std::int64_t ldx, const void* dy,
                                   std::int64_t lddy, std::int64_t rows, std::int64_t f) {
  MESHTP_DISPATCH(t, swiglu_backward_kernel<<<blocks_for(rows * f), kThreads, 0, s>>>(
                         static_cast<T*>(dx), lddx, static_cast<const T*>(x), ldx,
                         static_cast<const T*>(dy), lddy, rows, f));
  return cudaGetLastError();
}

cudaError_t launch_rope(cudaStream_t s, Element t, void* x, std::int64_t ldx, std::int64_t rows,
                        std::int64_t heads, std::int64_t hd, std::int64_t batch,
                        const float* cos_sin, std::int64_t ldt, float sign) {
  MESHTP_DISPATCH(t, rope_kernel<<<blocks_for(rows * heads * (hd / 2)), kThreads, 0, s>>>(
                         static_cast<T*>(x), ldx, rows, heads, hd, rows / batch, cos_sin, ldt,
                         sign));
  return cudaGetLastError();
}

cudaError_t launch_gather_rows(cudaStream_t s, Element t, void* dst, std::int64_t ldd,
                               const void* src, std::int64_t lds, std::int64_t rows,
                               std::int64_t cols, const std::int64_t* index, const float* scale) {
  MESHTP_DISPATCH(
      t, gather_rows_kernel<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(
             static_cast<T*>(dst), ldd, static_cast<const T*>(src), lds, cols, index, scale));
  return cudaGetLastError();
}

cudaError_t launch_scatter_add_rows(cudaStream_t s, Element t, void* dst, std::int64_t ldd,
                                    const void* src, std::int64_t lds, std::int64_t dst_rows,
                                    std::int64_t cols, const std::int64_t* first,
                                    const std::int64_t* order, const float* scale) {
  MESHTP_DISPATCH(t, scatter_add_rows_kernel<<<static_cast<unsigned>(dst_rows), kThreads, 0, s>>>(
                         static_cast<T*>(dst), ldd, static_cast<const T*>(src), lds, cols, first,
                         order, scale));
  return cudaGetLastError();
}

cudaError_t launch_row_dots(cudaStream_t s, Element t, float* out, const void* a, std::int64_t lda,
                            const std::int64_t* index, const void* b, std::int64_t ldb,
                            std::int64_t rows, std::int64_t cols) {
  MESHTP_DISPATCH(
      t, row_dots_kernel<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(
             out, static_cast<const T*>(a), lda, index, static_cast<const T*>(b), ldb, cols));
  return cudaGetLastError();
}

cudaError_t launch_add_2d(cudaStream_t s, Element t, void* y, std::int64_t ldy, const void* x,
                         std::int64_t ldx, std::int64_t rows, std::int64_t cols) {
  MESHTP_DISPATCH(t, add_2d_kernel<<<blocks_for(rows * cols), kThreads, 0, s>>>(
                         static_cast<T*>(y), ldy, static_cast<const T*>(x), ldx, rows, cols));
  return cudaGetLastError();
}

cudaError_t launch_layernorm_forward(cudaStream_t s, Element t, void* y, float* mean, float* rstd,
                                     const void* x, const float* w, const float* b,
                                     std::int64_t rows, std::int64_t cols, float eps) {
  MESHTP_DISPATCH(t,
                  layernorm_forward_kernel<<<rows_grid(rows), kThreads, 0, s>>>(
                      static_cast<T*>(y), mean, rstd, static_cast<const T*>(x), w, b, cols, eps));
  return cudaGetLastError();
}

cudaError_t launch_layernorm_backward(cudaStream_t s, Element t, void* dx, float* dw, float* db,
                                      const void* dy, const void* x, const float* w,
                                      const float* mean, const float* rstd, std::int64_t rows,
                                      std::int64_t cols, std::int64_t slices) {
  MESHTP_DISPATCH(t, layernorm_backward_dx_kernel<<<rows_grid(rows), kThreads, 0, s>>>(
                         static_cast<T*>(dx), static_cast<const T*>(dy), static_cast<const T*>(x),
                         w, mean, rstd, cols));
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) return status;
  const std::int64_t per_slice = (rows + slices - 1) / slices;
  const dim3 grid(static_cast<unsigned>((cols + kThreads - 1) / kThreads),
                  static_cast<unsigned>((rows + per_slice - 1) / per_slice));
  MESHTP_DISPATCH(t, layernorm_backward_dw_kernel<<<grid, kThreads, 0, s>>>(
                         dw, db, static_cast<const T*>(dy), static_cast<const T*>(x), mean, rstd,
                         rows, cols, per_slice));
  return cudaGetLastError();
}

cudaError_t launch_cross_entropy_forward(cudaStream_t s, Element t, float* lse, float* loss,
                                         const void* logits, const std::int32_t* targets,
                                         std::int64_t rows, std::int64_t classes, std::int64_t ld) {
  MESHTP_DISPATCH(t, cross_entropy_forward_kernel<<<rows_grid(rows), kThreads, 0, s>>>(
                         lse, loss, static_cast<const T*>(logits), targets, classes, ld));
  return cudaGetLastError();
}

cudaError_t launch_cross_entropy_backward(cudaStream_t s, Element t, void* dlogits,
                                          const void* logits, const float* lse,
                                          const std::int32_t* targets, std::int64_t rows,
                                          std::int64_t classes, std::int64_t ld, float scale) {
  MESHTP_DISPATCH(t, cross_entropy_backward_kernel<<<rows_grid(rows), kThreads, 0, s>>>(
                         static_cast<T*>(dlogits), static_cast<const T*>(logits), lse, targets,
                         classes, ld, scale));
  return cudaGetLastError();
}

cudaError_t launch_embedding_forward(cudaStream_t s, Element t, void* out,
                                     const std::int32_t* tokens, const void* wte, const void* wpe,
                                     std::int64_t rows, std::int64_t seq, std::int64_t channels) {
  MESHTP_DISPATCH(t, embedding_forward_kernel<<<blocks_for(rows * channels), kThreads, 0, s>>>(
                         static_cast<T*>(out), tokens, static_cast<const T*>(wte),
                         static_cast<const T*>(wpe), rows, seq, channels));
  return cudaGetLastError();
}

cudaError_t launch_embedding_backward(cudaStream_t s, Element t, float* dwte, float* dwpe,
                                      const void* dout, const std::int32_t* tokens,
                                      std::int64_t rows, std::int64_t seq, std::int64_t channels) {
  MESHTP_DISPATCH(t, embedding_backward_kernel<<<blocks_for(rows * channels), kThreads, 0, s>>>(
                         dwte, dwpe, static_cast<const T*>(dout), tokens, rows, seq, channels));
  return cudaGetLastError();
}

cudaError_t launch_causal_softmax(cudaStream_t s, Element t, void* x, std::int64_t rows,
                                  std::int64_t seq) {
  MESHTP_DISPATCH(
      t, causal_softmax_kernel<<<rows_grid(rows), kThreads, 0, s>>>(static_cast<T*>(x), seq));
  return cudaGetLastError();
}

cudaError_t launch_causal_softmax_backward(cudaStream_t s, Element t, void* ds, const void* p,
                                           std::int64_t rows, std::int64_t seq) {
  MESHTP_DISPATCH(t, causal_softmax_backward_kernel<<<rows_grid(rows), kThreads, 0, s>>>(
                         static_cast<T*>(ds), static_cast<const T*>(p), seq));
  return cudaGetLastError();
}

cudaError_t launch_adamw(cudaStream_t s, const AdamWTensor* tensors, const AdamWChunk* chunks,
                         std::int64_t chunk_count, const AdamWStep& step) {
  adamw_kernel<<<static_cast<unsigned>(chunk_count), kThreads, 0, s>>>(tensors, chunks, step);
  return cudaGetLastError();
}

// Calls the statement with T = float or bf16 and kRms = rms.
#define MESHTP_DISPATCH_NORM(type, rms, ...) \
  do {                                       \
    if (rms) {                               \
      constexpr bool kRms = true;            \
      MESHTP_DISPATCH(type, __VA_ARGS__);    \
    } else {                                 \
      constexpr bool kRms = false;           \
      MESHTP_DISPATCH(type, __VA_ARGS__);    \
    }                                        \
  } while (0)

cudaError_t launch_norm_forward_sums(cudaStream_t s, Element t, bool rms, double* sums,
                                     const void* x, std::int64_t ldx, std::int64_t rows,
                                     std::int64_t cols) {
  MESHTP_DISPATCH_NORM(t, rms,
                       norm_forward_sums_kernel<T, kRms><<<rows_grid(rows), kThreads, 0, s>>>(
                           sums, static_cast<const T*>(x), ldx, rows, cols));
  return cudaGetLastError();
}

cudaError_t launch_norm_forward_apply(cudaStream_t s, Element t, bool rms, void* y,
                                      std::int64_t ldy, float* mean, float* rstd, const void* x,
                                      std::int64_t ldx, const float* w, const float* b,
                                      const double* sums, std::int64_t rows, std::int64_t cols,
                                      std::int64_t c_global, float eps) {
  MESHTP_DISPATCH_NORM(t, rms,
                       norm_forward_apply_kernel<T, kRms><<<rows_grid(rows), kThreads, 0, s>>>(
                           static_cast<T*>(y), ldy, mean, rstd, static_cast<const T*>(x), ldx, w, b,
                           sums, rows, cols, c_global, eps));
  return cudaGetLastError();
}

cudaError_t launch_norm_backward_sums(cudaStream_t s, Element t, bool rms, double* sums,
                                      const void* dy, std::int64_t lddy, const void* x,
                                      std::int64_t ldx, const float* w, const float* mean,
                                      const float* rstd, std::int64_t rows, std::int64_t cols) {
  MESHTP_DISPATCH_NORM(t, rms,
                       norm_backward_sums_kernel<T, kRms><<<rows_grid(rows), kThreads, 0, s>>>(
                           sums, static_cast<const T*>(dy), lddy, static_cast<const T*>(x), ldx, w,
                           mean, rstd, rows, cols));
  return cudaGetLastError();
}

cudaError_t launch_norm_backward_apply(cudaStream_t s, Element t, bool rms, void* dx,
                                       std::int64_t lddx, const void* dy, std::int64_t lddy,
                                       const void* x, std::int64_t ldx, const float* w,
                                       const float* mean, const float* rstd, const double* sums,
                                       std::int64_t rows, std::int64_t cols,
                                       std::int64_t c_global) {
  MESHTP_DISPATCH_NORM(
      t, rms,
      norm_backward_apply_kernel<T, kRms><<<rows_grid(rows), kThreads, 0, s>>>(
          static_cast<T*>(dx), lddx, static_cast<const T*>(dy), lddy, static_cast<const T*>(x), ldx,
          w, mean, rstd, sums, rows, cols, c_global));
  return cudaGetLastError();
}

cudaError_t launch_norm_backward_weights(cudaStream_t s, Element t, bool rms, float* dw, float* db,
                                         const void* dy, std::int64_t lddy, const void* x,
                                         std::int64_t ldx, const float* mean, const float* rstd,
                                         std::int64_t rows, std::int64_t cols,
                                         std::int64_t slices) {
  const std::int64_t per_slice = (rows + slices - 1) / slices;
  const dim3 grid(static_cast<unsigned>((cols + kThreads - 1) / kThreads),
                  static_cast<unsigned>((rows + per_slice - 1) / per_slice));
  MESHTP_DISPATCH_NORM(t, rms,
                       norm_backward_weights_kernel<T, kRms><<<grid, kThreads, 0, s>>>(
                           dw, db, static_cast<const T*>(dy), lddy, static_cast<const T*>(x), ldx,
                           mean, rstd, rows, cols, per_slice));
  return cudaGetLastError();
}

cudaError_t launch_embedding_shard_forward(cudaStream_t s, Element t, void* out, std::int64_t ldo,
                                           const std::int32_t* tokens, const void* wte,
                                           std::int64_t ldw, std::int64_t wte_rows,
                                           std::int64_t begin, std::int64_t rows,
                                           std::int64_t cols) {
  MESHTP_DISPATCH(t, embedding_shard_forward_kernel<<<blocks_for(rows * cols), kThreads, 0, s>>>(
                         static_cast<T*>(out), ldo, tokens, static_cast<const T*>(wte), ldw,
                         wte_rows, begin, rows, cols));
  return cudaGetLastError();
}

cudaError_t launch_embedding_shard_backward(cudaStream_t s, Element t, float* dwte,
                                            std::int64_t ldw, std::int64_t wte_rows,
                                            const void* dout, std::int64_t ldd,
                                            const std::int32_t* tokens, std::int64_t begin,
                                            std::int64_t rows, std::int64_t cols) {
  MESHTP_DISPATCH(
      t, embedding_shard_backward_kernel<<<blocks_for(rows * cols), kThreads, 0, s>>>(
             dwte, ldw, wte_rows, static_cast<const T*>(dout), ldd, tokens, begin, rows, cols));
  return cudaGetLastError();
}

cudaError_t launch_cross_entropy_shard_max(cudaStream_t s, Element t, void* logits, std::int64_t ld,
                                           float* row_max, std::int64_t rows, std::int64_t cols,
                                           std::int64_t real) {
  MESHTP_DISPATCH(t, cross_entropy_shard_max_kernel<<<rows_grid(rows), kThreads, 0, s>>>(
                         static_cast<T*>(logits), ld, row_max, cols, real));
  return cudaGetLastError();
}

cudaError_t launch_cross_entropy_shard_sums(cudaStream_t s, Element t, float* sums,
                                            const void* logits, std::int64_t ld,
                                            const float* row_max, const std::int32_t* targets,
                                            std::int64_t begin, std::int64_t rows,
                                            std::int64_t cols, std::int64_t real) {
  MESHTP_DISPATCH(
      t, cross_entropy_shard_sums_kernel<<<rows_grid(rows), kThreads, 0, s>>>(
             sums, static_cast<const T*>(logits), ld, row_max, targets, begin, cols, real));
  return cudaGetLastError();
}

cudaError_t launch_cross_entropy_shard_lse(cudaStream_t s, float* lse, const float* row_max,
                                           const float* sums, std::int64_t rows) {
  cross_entropy_shard_lse_kernel<<<blocks_for(rows), kThreads, 0, s>>>(lse, row_max, sums, rows);
  return cudaGetLastError();
}

cudaError_t launch_cross_entropy_shard_backward(cudaStream_t s, Element t, void* logits,
                                                std::int64_t ld, const float* lse,
                                                const std::int32_t* targets, std::int64_t begin,
                                                std::int64_t rows, std::int64_t cols, float scale) {
  MESHTP_DISPATCH(t,
                  cross_entropy_shard_backward_kernel<<<blocks_for(rows * cols), kThreads, 0, s>>>(
                      static_cast<T*>(logits), ld, lse, targets, begin, rows, cols, scale));
  return cudaGetLastError();
}

}  // namespace meshtp::gpu
