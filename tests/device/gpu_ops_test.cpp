// Every GPU op against the CPU reference op (ops/), in fp32 and bf16, on shapes that are not
// multiples of the kernels' block sizes. Inputs are random; outputs are poisoned (NaN) before
// an op that overwrites them, and hold random values before an op that adds into them.
//
// Tolerances (max |gpu − cpu| / max |cpu|, tensor/tensor.hpp's max_relative_error):
//   fp32  2e-5 — same inputs, fp32 arithmetic in another order (and tanhf/expf vs the CPU's
//         approximations, within 1.2e-7 relative); 1e-4 where a row of 10³–10⁴ terms is summed.
//   bf16  the CPU runs on the same bf16-rounded inputs in fp32; the GPU rounds its output (and,
//         for ops that chain products, intermediates like attention's probabilities) to bf16:
//         2⁻⁸ relative per rounding, a few roundings deep → 2e-2.
//
// Without a GPU the binary exits 77 (gpu_test_main.cpp), which ctest reports as Skipped.
#include "device/gpu_ops.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "adamw_reference.hpp"
#include "core/error.hpp"
#include "device/gpu.hpp"
#include "device/gpu_backend.hpp"
#include "ops/cpu_backend.hpp"
#include "ops/rope.hpp"
#include "ops/ops.hpp"
#include "tensor/gemm.hpp"
#include "tensor/tensor.hpp"

namespace meshtp::gpu {
namespace {

using ET = Element;
constexpr ET kTypes[] = {ET::kF32, ET::kBF16};

Context& ctx() {
  static Context context;
  return context;
}

double tolerance(ET type, double fp32 = 2e-5) { return type == ET::kF32 ? fp32 : 2e-2; }

// Uniform in [lo, hi), rounded to bf16 when the op runs in bf16 (so the CPU sees the GPU's
// inputs exactly).
std::vector<float> random_values(std::int64_t n, unsigned seed, ET type, float lo = -1.0f,
                                 float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = type == ET::kBF16 ? round_to_bf16(dist(rng)) : dist(rng);
  return v;
}

Buffer poisoned(ET type, std::int64_t n) {
  Buffer b(ctx(), static_cast<std::size_t>(n) * element_size(type));
  ctx().fill_bytes(b.data(), 0xFF, b.bytes());  // all ones: NaN in fp32 and bf16
  return b;
}

std::vector<float> down(const Buffer& b, ET type, std::int64_t n) {
  ctx().synchronize();
  return ctx().download_values(b, type, n);
}

ConstMatrixView view(const std::vector<float>& v, std::int64_t rows, std::int64_t cols) {
  return {v.data(), rows, cols, cols};
}
MatrixView view(std::vector<float>& v, std::int64_t rows, std::int64_t cols) {
  return {v.data(), rows, cols, cols};
}

std::string label(ET type) { return std::string("type ") + to_string(type); }

TEST(GpuBf16, DeviceRoundsAsTheHost) {
  // Halfway cases, tiny, huge and negative values: the device's fp32 → bf16 conversion must
  // round as to_bf16 does, or every bf16 reference below would be off.
  std::vector<float> x = random_values(4096, 1, ET::kF32, -100.0f, 100.0f);
  x.push_back(1.0f + 1.0f / 256);  // tie → even (down)
  x.push_back(1.0f + 3.0f / 256);  // tie → even (up)
  x.push_back(1e-40f);             // subnormal
  x.push_back(3.0e38f);
  const Buffer in = ctx().upload_values(x, ET::kF32);
  Buffer out(ctx(), x.size() * 2);
  convert(ctx(), out.data(), ET::kBF16, in.data(), ET::kF32, static_cast<std::int64_t>(x.size()));
  const std::vector<float> got = down(out, ET::kBF16, static_cast<std::int64_t>(x.size()));
  for (std::size_t i = 0; i < x.size(); ++i)
    ASSERT_EQ(got[i], round_to_bf16(x[i])) << "x = " << x[i] << " at " << i;
}

struct GemmCase {
  std::int64_t m, n, k;
  Trans ta, tb;
  float alpha, beta;
};

TEST(GpuGemm, MatchesBlasForEveryTransposeAndScale) {
  const GemmCase cases[] = {{37, 53, 71, Trans::kNo, Trans::kNo, 1.0f, 0.0f},
                            {37, 53, 71, Trans::kYes, Trans::kNo, 1.0f, 0.0f},
                            {37, 53, 71, Trans::kNo, Trans::kYes, 0.5f, 1.0f},
                            {37, 53, 71, Trans::kYes, Trans::kYes, -2.0f, 0.25f},
                            {1, 1, 1, Trans::kNo, Trans::kNo, 1.0f, 0.0f},
                            {256, 384, 512, Trans::kNo, Trans::kNo, 1.0f, 0.0f}};
  for (ET type : kTypes)
    for (const GemmCase& c : cases) {
      const std::int64_t ar = c.ta == Trans::kNo ? c.m : c.k, ac = c.ta == Trans::kNo ? c.k : c.m;
      const std::int64_t br = c.tb == Trans::kNo ? c.k : c.n, bc = c.tb == Trans::kNo ? c.n : c.k;
      const auto a = random_values(ar * ac, 1, type), b = random_values(br * bc, 2, type);
      auto cpu = random_values(c.m * c.n, 3, type);
      const Buffer da = ctx().upload_values(a, type), db = ctx().upload_values(b, type);
      Buffer dc = c.beta == 0.0f ? poisoned(type, c.m * c.n) : ctx().upload_values(cpu, type);
      gemm(ctx(), matrix_of(da, type, ar, ac), c.ta, matrix_of(db, type, br, bc), c.tb,
           matrix_of(dc, type, c.m, c.n), c.alpha, c.beta);
      meshtp::gemm(view(a, ar, ac), c.ta, view(b, br, bc), c.tb, view(cpu, c.m, c.n), c.alpha,
                   c.beta);
      const auto got = down(dc, type, c.m * c.n);
      EXPECT_LE(max_relative_error(got, cpu), tolerance(type, 1e-5))
          << label(type) << " " << c.m << "x" << c.n << "x" << c.k << " ta "
          << static_cast<int>(c.ta) << " tb " << static_cast<int>(c.tb);
    }
}

// The CPU runtime's bf16 mode (tensor/gemm.hpp ScopedGemmPrecision: operands rounded to bf16,
// fp32 accumulation and output) is this GPU GeMM: bf16 A and B, fp32 C. Same rounded operands,
// so only the summation order differs: the fp32 tolerance, not bf16's.
TEST(GpuGemm, Bf16OperandsWithFp32OutputAreTheCpuBf16Mode) {
  for (const GemmCase& c : {GemmCase{37, 53, 71, Trans::kNo, Trans::kYes, 1.0f, 0.0f},
                            GemmCase{256, 384, 512, Trans::kYes, Trans::kNo, 0.5f, 1.0f}}) {
    const std::int64_t ar = c.ta == Trans::kNo ? c.m : c.k, ac = c.ta == Trans::kNo ? c.k : c.m;
    const std::int64_t br = c.tb == Trans::kNo ? c.k : c.n, bc = c.tb == Trans::kNo ? c.n : c.k;
    // fp32 values: the upload rounds them to bf16 as the CPU's scope does.
    const auto a = random_values(ar * ac, 4, ET::kF32), b = random_values(br * bc, 5, ET::kF32);
    auto cpu = random_values(c.m * c.n, 6, ET::kF32);
    const Buffer da = ctx().upload_values(a, ET::kBF16), db = ctx().upload_values(b, ET::kBF16);
    Buffer dc = c.beta == 0.0f ? poisoned(ET::kF32, c.m * c.n) : ctx().upload_values(cpu, ET::kF32);
    gemm(ctx(), matrix_of(da, ET::kBF16, ar, ac), c.ta, matrix_of(db, ET::kBF16, br, bc), c.tb,
         matrix_of(dc, ET::kF32, c.m, c.n), c.alpha, c.beta);
    {
      const ScopedGemmPrecision bf16(Precision::kBf16);
      meshtp::gemm(view(a, ar, ac), c.ta, view(b, br, bc), c.tb, view(cpu, c.m, c.n), c.alpha,
                   c.beta);
    }
    EXPECT_LE(max_relative_error(down(dc, ET::kF32, c.m * c.n), cpu), 1e-5)
        << c.m << "x" << c.n << "x" << c.k;
  }
}

TEST(GpuGemm, StridedViewsLeaveTheRestAlone) {
  // C is the 20x30 top-left block of a 24x40 matrix (ld 40), A a block of a wider one.
  for (ET type : kTypes) {
    const std::int64_t m = 20, n = 30, k = 17, lda = 25, ldc = 40;
    const auto a = random_values(m * lda, 4, type), b = random_values(k * n, 5, type);
    const auto c0 = random_values(24 * ldc, 6, type);
    const Buffer da = ctx().upload_values(a, type), db = ctx().upload_values(b, type);
    Buffer dc = ctx().upload_values(c0, type);
    gemm(ctx(), {da.data(), type, m, k, lda}, Trans::kNo, matrix_of(db, type, k, n), Trans::kNo,
         {dc.data(), type, m, n, ldc});
    std::vector<float> cpu = c0;
    meshtp::gemm({a.data(), m, k, lda}, Trans::kNo, view(b, k, n), Trans::kNo,
                 {cpu.data(), m, n, ldc});
    const auto got = down(dc, type, 24 * ldc);
    EXPECT_LE(max_relative_error(got, cpu), tolerance(type, 1e-5)) << label(type);
    for (std::int64_t i = 0; i < 24; ++i)
      for (std::int64_t j = 0; j < ldc; ++j)
        if (i >= m || j >= n) {
          ASSERT_EQ(got[static_cast<std::size_t>(i * ldc + j)],
                    c0[static_cast<std::size_t>(i * ldc + j)])
              << "outside C at " << i << "," << j;
        }
  }
}

// The backend's 2D primitives (device/backend.hpp) on strided views: copy (same type and
// converting either way), add and zero, each against the host loop, the padding untouched.
TEST(GpuViews, CopyAddAndZeroOnStridedViewsLeaveThePaddingAlone) {
  const std::int64_t rows = 13, cols = 37, lds = 41, ldd = 50;
  for (ET src_type : kTypes) {
    for (ET dst_type : kTypes) {
      const auto src = random_values(rows * lds, 7, src_type);
      const auto dst0 = random_values(rows * ldd, 8, dst_type);
      const Buffer ds = ctx().upload_values(src, src_type);
      Buffer dd = ctx().upload_values(dst0, dst_type);
      const View vs{ds.data(), src_type, rows, cols, lds}, vd{dd.data(), dst_type, rows, cols, ldd};
      copy_2d(ctx(), vd, vs);
      auto got = down(dd, dst_type, rows * ldd);
      for (std::int64_t i = 0; i < rows; ++i)
        for (std::int64_t j = 0; j < ldd; ++j) {
          const float want = j < cols ? (dst_type == ET::kBF16 ? round_to_bf16(src[i * lds + j])
                                                               : src[i * lds + j])
                                      : dst0[i * ldd + j];
          ASSERT_EQ(got[i * ldd + j], want) << label(src_type) << " → " << label(dst_type)
                                             << " at " << i << "," << j;
        }
      if (src_type != dst_type) continue;
      add_2d(ctx(), vd, vs);  // dst = 2·src inside, padding unchanged
      got = down(dd, dst_type, rows * ldd);
      for (std::int64_t i = 0; i < rows; ++i)
        for (std::int64_t j = 0; j < cols; ++j)
          ASSERT_EQ(got[i * ldd + j], 2.0f * src[i * lds + j]) << label(src_type);
      zero_2d(ctx(), vd.block(2, 3, 4, 5));
      got = down(dd, dst_type, rows * ldd);
      EXPECT_EQ(got[2 * ldd + 3], 0.0f);
      EXPECT_EQ(got[5 * ldd + 7], 0.0f);
      EXPECT_EQ(got[5 * ldd + 8], 2.0f * src[5 * lds + 8]);
      EXPECT_EQ(got[1 * ldd + 3], 2.0f * src[1 * lds + 3]);
      EXPECT_EQ(got[2 * ldd + cols], dst0[2 * ldd + cols]);
    }
  }
}

// The same view calls on GpuBackend and CpuBackend give the same C (the backend interface's
// GeMM with an offset view, transposes, β and the bias+GeLU epilogue), and an event recorded
// after it is done once the host synchronizes on it.
TEST(GpuViews, BackendGemmEqualsTheCpuBackendAndEventsComplete) {
  device::GpuBackend gpu(ctx());
  device::Backend& cpu = cpu_backend();
  const std::int64_t m = 9, n = 11, k = 6;
  const auto a = random_values(2 + k * (m + 3), 9, ET::kF32);  // used transposed, ld m+3
  const auto b = random_values(n * k, 10, ET::kF32), c0 = random_values(m * n, 11, ET::kF32);
  const auto bias = random_values(n, 12, ET::kF32);
  std::vector<float> results[2];
  int which = 0;
  for (device::Backend* be : {static_cast<device::Backend*>(&gpu), &cpu}) {
    device::Array da = be->alloc(static_cast<std::int64_t>(a.size()), ET::kF32);
    device::Array db = be->alloc(n * k, ET::kF32), dc = be->alloc(m * n, ET::kF32);
    device::Array dbias = be->alloc(n, ET::kF32);
    be->upload(da, a);
    be->upload(db, b);
    be->upload(dc, c0);
    be->upload(dbias, bias);
    be->gemm(dc.view(m, n), da.view(2, k, m, m + 3), Trans::kYes, db.view(n, k), Trans::kYes, 0.5f,
             0.0f, device::Epilogue::kBiasGelu, dbias.view(1, n));
    auto event = be->record();
    event->synchronize();
    EXPECT_TRUE(event->done());
    be->wait(*event);
    results[which++] = be->download(dc);
  }
  EXPECT_LE(max_relative_error(results[0], results[1]), 2e-5);
}

TEST(GpuViews, MismatchedViewsAreRefusedNamingBoth) {
  Buffer b = poisoned(ET::kF32, 64);
  const View a{b.data(), ET::kF32, 4, 4, 4}, c{b.data(), ET::kF32, 4, 3, 4};
  EXPECT_THROW(copy_2d(ctx(), a, c), Error);
  EXPECT_THROW(add_2d(ctx(), a, View{b.data(), ET::kBF16, 4, 4, 4}), Error);
}

TEST(GpuGemm, BiasAndGeluEpilogues) {
  for (ET type : kTypes)
    for (Epilogue ep : {Epilogue::kBias, Epilogue::kBiasGelu}) {
      const std::int64_t m = 33, n = 65, k = 40;
      const auto a = random_values(m * k, 7, type), b = random_values(k * n, 8, type);
      const auto bias = random_values(n, 9, type);
      const Buffer da = ctx().upload_values(a, type), db = ctx().upload_values(b, type);
      const Buffer dbias = ctx().upload_values(bias, type);
      Buffer dc = poisoned(type, m * n);
      gemm(ctx(), matrix_of(da, type, m, k), Trans::kNo, matrix_of(db, type, k, n), Trans::kNo,
           matrix_of(dc, type, m, n), 1.0f, 0.0f, ep, dbias.data());
      std::vector<float> pre(static_cast<std::size_t>(m * n));
      meshtp::gemm(view(a, m, k), Trans::kNo, view(b, k, n), Trans::kNo, view(pre, m, n));
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j) pre[static_cast<std::size_t>(i * n + j)] += bias[j];
      std::vector<float> cpu = pre;
      if (ep == Epilogue::kBiasGelu) gelu_forward_reference(view(cpu, m, n), view(pre, m, n));
      EXPECT_LE(max_relative_error(down(dc, type, m * n), cpu), tolerance(type, 1e-4))
          << label(type) << " epilogue " << static_cast<int>(ep);
    }
}

TEST(GpuGemm, ShapeMismatchNamesTheShapes) {
  const Buffer a(ctx(), 64), b(ctx(), 64), c(ctx(), 64);
  try {
    gemm(ctx(), {a.data(), ET::kF32, 2, 3, 3}, Trans::kNo, {b.data(), ET::kF32, 4, 2, 2},
         Trans::kNo, {c.data(), ET::kF32, 2, 2, 2});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("op(A) 2x3"), std::string::npos) << e.what();
  }
}

TEST(GpuOps, GeluForwardBackward) {
  for (ET type : kTypes) {
    const std::int64_t n = 3 * 1000 + 7;
    const auto x = random_values(n, 10, type, -4.0f, 4.0f), dy = random_values(n, 11, type);
    const auto dx0 = random_values(n, 12, type);
    const Buffer dxin = ctx().upload_values(x, type), ddy = ctx().upload_values(dy, type);
    Buffer y = poisoned(type, n), ddx = ctx().upload_values(dx0, type);
    gelu_forward(ctx(), type, y.data(), dxin.data(), n);
    gelu_backward(ctx(), type, ddx.data(), dxin.data(), ddy.data(), n);
    std::vector<float> cy(static_cast<std::size_t>(n)), cdx = dx0;
    gelu_forward_reference(view(cy, 1, n), view(x, 1, n));
    gelu_backward_reference(view(cdx, 1, n), view(x, 1, n), view(dy, 1, n));
    EXPECT_LE(max_relative_error(down(y, type, n), cy), tolerance(type)) << label(type);
    EXPECT_LE(max_relative_error(down(ddx, type, n), cdx), tolerance(type)) << label(type);
  }
}

TEST(GpuOps, ResidualForward) {
  for (ET type : kTypes) {
    const std::int64_t n = 1025;
    const auto a = random_values(n, 13, type), b = random_values(n, 14, type);
    const Buffer da = ctx().upload_values(a, type), db = ctx().upload_values(b, type);
    Buffer y = poisoned(type, n);
    residual_forward(ctx(), type, y.data(), da.data(), db.data(), n);
    std::vector<float> cy(static_cast<std::size_t>(n));
    residual_forward_reference(view(cy, 1, n), view(a, 1, n), view(b, 1, n));
    EXPECT_LE(max_relative_error(down(y, type, n), cy), tolerance(type, 1e-7)) << label(type);
  }
}

// Gradient clipping's halves: Σ x² (in double on the host, against cuBLAS's nrm2 squared)
// and x ← α·x, on more values than one nrm2 block.
TEST(GpuOps, SumOfSquaresAndScale) {
  const std::int64_t n = 300'001;
  const auto x = random_values(n, 17, ET::kF32, -3.0f, 3.0f);
  Buffer dx = ctx().upload_values(x, ET::kF32);
  double want = 0;
  for (const float v : x) want += static_cast<double>(v) * v;
  EXPECT_NEAR(sum_of_squares(ctx(), dx.as<float>(), n), want, 1e-5 * want);
  EXPECT_EQ(sum_of_squares(ctx(), dx.as<float>(), 0), 0.0);
  // Batched (the gradient norm's one wait): pieces of x, an empty one among them, each the
  // one-by-one value exactly (the same nrm2 calls, read back together).
  const float* p = dx.as<float>();
  const std::vector<std::span<const float>> pieces{
      {p, 1000}, {p + 1000, 0}, {p + 1000, 200'000}, {p + 201'000, 99'001}};
  const std::vector<double> batched = sums_of_squares(ctx(), pieces);
  ASSERT_EQ(batched.size(), pieces.size());
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    EXPECT_EQ(batched[i],
              sum_of_squares(ctx(), pieces[i].data(), static_cast<std::int64_t>(pieces[i].size())))
        << "piece " << i;
  }
  scale(ctx(), dx.as<float>(), 0.25f, n);
  std::vector<float> scaled = x;
  for (float& v : scaled) v *= 0.25f;
  EXPECT_LE(max_relative_error(down(dx, ET::kF32, n), scaled), 1e-7);
}

TEST(GpuOps, LayerNormForwardBackward) {
  for (ET type : kTypes)
    for (std::int64_t cols : {1, 300, 2053}) {
      const std::int64_t rows = 67, n = rows * cols;
      const auto x = random_values(n, 15, type, -2.0f, 3.0f), dy = random_values(n, 16, type);
      const auto w = random_values(cols, 17, ET::kF32), b = random_values(cols, 18, ET::kF32);
      const auto dx0 = random_values(n, 19, type);
      const auto dw0 = random_values(cols, 20, ET::kF32), db0 = random_values(cols, 21, ET::kF32);
      const Buffer dxin = ctx().upload_values(x, type), ddy = ctx().upload_values(dy, type);
      const Buffer dw_ = ctx().upload_values(w, ET::kF32), db_ = ctx().upload_values(b, ET::kF32);
      Buffer y = poisoned(type, n), mean = poisoned(ET::kF32, rows),
             rstd = poisoned(ET::kF32, rows);
      Buffer ddx = ctx().upload_values(dx0, type);
      Buffer gdw = ctx().upload_values(dw0, ET::kF32), gdb = ctx().upload_values(db0, ET::kF32);
      layernorm_forward(ctx(), type, y.data(), mean.as<float>(), rstd.as<float>(), dxin.data(),
                        dw_.as<float>(), db_.as<float>(), rows, cols);
      layernorm_backward(ctx(), type, ddx.data(), gdw.as<float>(), gdb.as<float>(), ddy.data(),
                         dxin.data(), dw_.as<float>(), mean.as<float>(), rstd.as<float>(), rows,
                         cols);
      std::vector<float> cy(static_cast<std::size_t>(n)), cm(rows), cr(rows);
      std::vector<float> cdx = dx0, cdw = dw0, cdb = db0;
      layernorm_forward_reference(view(cy, rows, cols), cm, cr, view(x, rows, cols), w, b);
      layernorm_backward_reference(view(cdx, rows, cols), cdw, cdb, view(dy, rows, cols),
                                   view(x, rows, cols), w, cm, cr);
      const std::string what = label(type) + " C=" + std::to_string(cols);
      EXPECT_LE(max_relative_error(down(y, type, n), cy), tolerance(type, 1e-4)) << what;
      EXPECT_LE(max_relative_error(down(mean, ET::kF32, rows), cm), 1e-5) << what;
      EXPECT_LE(max_relative_error(down(rstd, ET::kF32, rows), cr), 1e-4) << what;
      EXPECT_LE(max_relative_error(down(ddx, type, n), cdx), tolerance(type, 1e-4)) << what;
      EXPECT_LE(max_relative_error(down(gdw, ET::kF32, cols), cdw), tolerance(type, 1e-4)) << what;
      EXPECT_LE(max_relative_error(down(gdb, ET::kF32, cols), cdb), 1e-4) << what;
    }
}

TEST(GpuOps, CrossEntropyForwardBackward) {
  // Contiguous rows, and rows padded to ld > classes (the GPT's vocabulary padding): the
  // padding of the logits is NaN, so reading it poisons the loss, and the padding of dlogits
  // must come back as it went in.
  for (ET type : kTypes)
    for (const std::int64_t pad : {0, 24}) {
      const std::int64_t rows = 13, classes = 1000, ld = classes + pad, n = rows * ld;
      auto logits = random_values(n, 22, type, -5.0f, 5.0f);
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = classes; c < ld; ++c)
          logits[r * ld + c] = std::numeric_limits<float>::quiet_NaN();
      std::vector<std::int32_t> targets(rows);
      for (std::int64_t r = 0; r < rows; ++r)
        targets[r] = static_cast<std::int32_t>((r * 131) % classes);
      const auto d0 = random_values(n, 23, type);
      const Buffer dl = ctx().upload_values(logits, type);
      Buffer lse = poisoned(ET::kF32, rows), dd = ctx().upload_values(d0, type);
      const double loss = cross_entropy_forward(ctx(), type, lse.as<float>(), dl.data(), targets,
                                                rows, classes, ld);
      cross_entropy_backward(ctx(), type, dd.data(), dl.data(), lse.as<float>(), targets, rows,
                             classes, ld, 0.5f);
      std::vector<float> clse(rows), cd = d0;
      const double closs = cross_entropy_forward_reference(
          clse, ConstMatrixView{logits.data(), rows, classes, ld}, targets);
      cross_entropy_backward_reference(MatrixView{cd.data(), rows, classes, ld},
                                       ConstMatrixView{logits.data(), rows, classes, ld}, clse,
                                       targets, 0.5f);
      const std::string what = label(type) + " ld=" + std::to_string(ld);
      EXPECT_NEAR(loss, closs, 1e-5 * std::abs(closs)) << what;
      EXPECT_LE(max_relative_error(down(lse, ET::kF32, rows), clse), 1e-5) << what;
      EXPECT_LE(max_relative_error(down(dd, type, n), cd), tolerance(type, 1e-5)) << what;
    }
}

TEST(GpuOps, CrossEntropyRejectsATargetOutsideTheClasses) {
  const Buffer logits(ctx(), 4 * 10 * 4), lse(ctx(), 4 * 4);
  const std::vector<std::int32_t> targets = {0, 3, 10, 1};
  try {
    cross_entropy_forward(ctx(), ET::kF32, lse.as<float>(), logits.data(), targets, 4, 10, 10);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("target 10 at position 2 is outside [0, 10)"),
              std::string::npos)
        << e.what();
  }
}

TEST(GpuOps, EmbeddingForwardBackward) {
  for (ET type : kTypes) {
    const std::int64_t B = 3, T = 7, C = 33, V = 11, maxT = 9;
    std::vector<std::int32_t> tokens(B * T);
    for (std::int64_t i = 0; i < B * T; ++i)
      tokens[i] = static_cast<std::int32_t>((i * 5) % V);  // repeats
    const auto wte = random_values(V * C, 24, type), wpe = random_values(maxT * C, 25, type);
    const auto dout = random_values(B * T * C, 26, type);
    const auto dwte0 = random_values(V * C, 27, ET::kF32),
               dwpe0 = random_values(maxT * C, 28, ET::kF32);
    const Buffer dte = ctx().upload_values(wte, type), dpe = ctx().upload_values(wpe, type);
    const Buffer ddo = ctx().upload_values(dout, type);
    Buffer out = poisoned(type, B * T * C);
    Buffer gte = ctx().upload_values(dwte0, ET::kF32), gpe = ctx().upload_values(dwpe0, ET::kF32);
    embedding_forward(ctx(), type, out.data(), tokens, B, T, dte.data(), V, dpe.data(), C);
    embedding_backward(ctx(), type, gte.as<float>(), gpe.as<float>(), ddo.data(), tokens, B, T, V,
                       C);
    std::vector<float> cout_(static_cast<std::size_t>(B * T * C)), cte = dwte0, cpe = dwpe0;
    embedding_forward(view(cout_, B * T, C), tokens, B, T, view(wte, V, C), view(wpe, maxT, C));
    embedding_backward(view(cte, V, C), view(cpe, maxT, C), view(dout, B * T, C), tokens, B, T);
    EXPECT_LE(max_relative_error(down(out, type, B * T * C), cout_), tolerance(type, 1e-7))
        << label(type);
    EXPECT_LE(max_relative_error(down(gte, ET::kF32, V * C), cte), 1e-6) << label(type);
    EXPECT_LE(max_relative_error(down(gpe, ET::kF32, maxT * C), cpe), 1e-6) << label(type);
  }
}

TEST(GpuOps, EmbeddingRejectsATokenOutsideTheVocabulary) {
  const Buffer wte(ctx(), 64), wpe(ctx(), 64), out(ctx(), 64);
  const std::vector<std::int32_t> tokens = {1, -1};
  try {
    embedding_forward(ctx(), ET::kF32, out.data(), tokens, 1, 2, wte.data(), 4, wpe.data(), 2);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token -1 at position 1"), std::string::npos) << e.what();
  }
}

TEST(GpuOps, AttentionForwardBackward) {
  for (ET type : kTypes) {
    const std::int64_t B = 2, T = 37, NH = 3, HD = 16, Cp = NH * HD;
    const auto qkv = random_values(B * T * 3 * Cp, 29, type, -1.5f, 1.5f);
    const auto dout = random_values(B * T * Cp, 30, type);
    const auto dqkv0 = random_values(B * T * 3 * Cp, 31, type);
    const Buffer dq = ctx().upload_values(qkv, type), ddo = ctx().upload_values(dout, type);
    Buffer out = poisoned(type, B * T * Cp), att = poisoned(type, B * NH * T * T);
    Buffer scratch = poisoned(type, attention_scratch_elements(B, T, NH));
    Buffer ddq = ctx().upload_values(dqkv0, type);
    attention_forward(ctx(), type, out.data(), att.data(), dq.data(), B, T, NH, HD);
    attention_backward(ctx(), type, ddq.data(), scratch.data(), ddo.data(), dq.data(), att.data(),
                       B, T, NH, HD);
    std::vector<float> cout_(static_cast<std::size_t>(B * T * Cp));
    std::vector<float> catt(static_cast<std::size_t>(attention_att_size(B, T, NH)));
    std::vector<float> cscratch(static_cast<std::size_t>(T * T)), cdq = dqkv0;
    attention_forward_reference(view(cout_, B * T, Cp), catt, view(qkv, B * T, 3 * Cp), B, T, NH);
    attention_backward_reference(view(cdq, B * T, 3 * Cp), cscratch, view(dout, B * T, Cp),
                                 view(qkv, B * T, 3 * Cp), catt, B, T, NH);
    EXPECT_LE(max_relative_error(down(att, type, B * NH * T * T), catt), tolerance(type, 1e-5))
        << label(type);
    EXPECT_LE(max_relative_error(down(out, type, B * T * Cp), cout_), tolerance(type, 1e-5))
        << label(type);
    EXPECT_LE(max_relative_error(down(ddq, type, B * T * 3 * Cp), cdq), tolerance(type, 1e-4))
        << label(type);
  }
}

// The fused core against the CPU's (ops/flash_attention.hpp): multi-head and grouped-query,
// sequences not a multiple of the kernels' 64-row blocks or their key tiles, every head dim
// the kernel runs; the backward adds into random dqkv. And a head dim it does not run is
// refused naming it.
TEST(GpuOps, FlashAttentionMatchesTheCpuFusedCore) {
  struct Case {
    std::int64_t B, T, NH, NKV, HD;
  };
  for (const Case c : {Case{2, 37, 4, 4, 16}, Case{1, 130, 4, 2, 32}, Case{2, 70, 8, 1, 64},
                       Case{1, 65, 2, 2, 128}, Case{1, 33, 2, 1, 256}}) {
    for (ET type : kTypes) {
      const std::int64_t W = (c.NH + 2 * c.NKV) * c.HD, O = c.NH * c.HD, rows = c.B * c.T;
      const auto qkv = random_values(rows * W, 41, type, -1.5f, 1.5f);
      const auto dout = random_values(rows * O, 42, type);
      const auto dqkv0 = random_values(rows * W, 43, type);
      const Buffer dq = ctx().upload_values(qkv, type), ddo = ctx().upload_values(dout, type);
      Buffer out = poisoned(type, rows * O), ddq = ctx().upload_values(dqkv0, type);
      Buffer lse(ctx(), static_cast<std::size_t>(c.B * c.NH * c.T) * sizeof(float));
      FlashAttention a{.batch = c.B, .heads = c.NH, .kv_heads = c.NKV};
      Buffer scratch(
          ctx(), static_cast<std::size_t>(flash_attention_scratch_floats(a, c.T)) * sizeof(float));
      // q, k and v as the column blocks of the packed rows (device::qkv_columns).
      const device::QkvColumns in =
          device::qkv_columns(View::packed(dq.data(), type, rows, W), O, c.NH, c.NKV);
      const device::QkvColumns grad =
          device::qkv_columns(View::packed(ddq.data(), type, rows, W), O, c.NH, c.NKV);
      const View out_v = View::packed(out.data(), type, rows, O);
      flash_attention_forward(ctx(), out_v, lse.as<float>(), in.q, in.k, in.v, a);
      // The backward reads the GPU's own out (what a model passes), as the CPU's reads its own.
      flash_attention_backward(ctx(), grad.q, grad.k, grad.v, scratch.as<float>(),
                               View::packed(ddo.data(), type, rows, O), in.q, in.k, in.v, out_v,
                               lse.as<float>(), a);
      std::vector<float> cout_(static_cast<std::size_t>(rows * O)), cdq = dqkv0;
      std::vector<float> clse(static_cast<std::size_t>(c.B * c.NH * c.T));
      std::vector<float> cscratch(
          static_cast<std::size_t>(flash_attention_scratch_size(a, c.T, c.T, c.HD)));
      flash_attention_forward_qkv(view(cout_, rows, O), clse, cscratch, view(qkv, rows, W), c.B,
                                  c.T, c.NH, c.NKV);
      flash_attention_backward_qkv(view(cdq, rows, W), cscratch, view(dout, rows, O),
                                   view(qkv, rows, W), view(cout_, rows, O), clse, c.B, c.T, c.NH,
                                   c.NKV);
      ctx().synchronize();
      std::vector<float> glse(clse.size());
      ctx().download(glse.data(), lse.data(), glse.size() * sizeof(float));
      const std::string what = label(type) + " B=" + std::to_string(c.B) + " T=" +
                               std::to_string(c.T) + " NH=" + std::to_string(c.NH) + " NKV=" +
                               std::to_string(c.NKV) + " HD=" + std::to_string(c.HD);
      EXPECT_LE(max_relative_error(down(out, type, rows * O), cout_), tolerance(type, 1e-5)) << what;
      EXPECT_LE(max_relative_error(glse, clse), 1e-5) << what;
      EXPECT_LE(max_relative_error(down(ddq, type, rows * W), cdq), tolerance(type, 1e-4)) << what;
    }
  }
  Buffer any(ctx(), 64 * 48 * sizeof(float));
  try {
    const View v = View::packed(any.data(), ET::kF32, 1, 48);
    flash_attention_forward(ctx(), v, any.as<float>(), v, v, v, FlashAttention{});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("head dim HD=48"), std::string::npos) << e.what();
  }
}

// A context-parallel ring step's calls against the CPU's: q rows at one position, k and v
// rows (fewer or more) at another, as separate strided views (the causal edge inside the
// range, a range every row sees whole, and one no row sees: out 0, lse −∞), the backward
// adding into random dq, dk, dv; then the partial results merged into a running one.
TEST(GpuOps, FlashAttentionOverAKeyRangeAndTheMergeMatchTheCpu) {
  struct Case {
    std::int64_t B, Tq, Tk, NH, NKV, HD, q_pos, k_pos;
  };
  for (const Case c : {Case{2, 37, 50, 4, 2, 32, 40, 10}, Case{1, 70, 70, 2, 1, 64, 140, 0},
                       Case{1, 20, 30, 2, 2, 16, 0, 25}, Case{2, 65, 33, 4, 4, 128, 65, 60}}) {
    for (ET type : kTypes) {
      const FlashAttention a{
          .batch = c.B, .heads = c.NH, .kv_heads = c.NKV, .q_pos = c.q_pos, .k_pos = c.k_pos};
      const std::int64_t O = c.NH * c.HD, K = c.NKV * c.HD, nq = c.B * c.Tq, nk = c.B * c.Tk;
      // k and v inside one wider buffer [k | v | pad], as a ring's travelling block holds them.
      const std::int64_t ldkv = 2 * K + 3;
      const auto q = random_values(nq * O, 51, type, -1.5f, 1.5f);
      const auto kv = random_values(nk * ldkv, 52, type, -1.5f, 1.5f);
      const auto dout = random_values(nq * O, 53, type);
      const auto dq0 = random_values(nq * O, 54, type), dkv0 = random_values(nk * ldkv, 55, type);
      const auto run_lse = random_values(c.B * c.NH * c.Tq, 56, ET::kF32);
      const auto run_out = random_values(nq * O, 57, type);
      const Buffer gq = ctx().upload_values(q, type), gkv = ctx().upload_values(kv, type);
      const Buffer gdo = ctx().upload_values(dout, type);
      Buffer out = poisoned(type, nq * O), gdq = ctx().upload_values(dq0, type);
      Buffer gdkv = ctx().upload_values(dkv0, type);
      Buffer lse(ctx(), static_cast<std::size_t>(c.B * c.NH * c.Tq) * sizeof(float));
      Buffer scratch(
          ctx(), static_cast<std::size_t>(flash_attention_scratch_floats(a, c.Tq)) * sizeof(float));
      Buffer merged = ctx().upload_values(run_out, type);
      Buffer merged_lse = ctx().upload_values(run_lse, ET::kF32);
      const View qv = View::packed(gq.data(), type, nq, O);
      const View kvv{gkv.data(), type, nk, ldkv, ldkv}, dkvv{gdkv.data(), type, nk, ldkv, ldkv};
      const View ov = View::packed(out.data(), type, nq, O);
      flash_attention_forward(ctx(), ov, lse.as<float>(), qv, kvv.block(0, 0, nk, K),
                              kvv.block(0, K, nk, K), a);
      flash_attention_backward(
          ctx(), View::packed(gdq.data(), type, nq, O), dkvv.block(0, 0, nk, K),
          dkvv.block(0, K, nk, K), scratch.as<float>(), View::packed(gdo.data(), type, nq, O), qv,
          kvv.block(0, 0, nk, K), kvv.block(0, K, nk, K), ov, lse.as<float>(), a);
      flash_attention_merge(ctx(), View::packed(merged.data(), type, nq, O), merged_lse.as<float>(),
                            ov, lse.as<float>(), a);
      // The CPU's, on the same (rounded) values.
      const ConstMatrixView ckv = view(kv, nk, ldkv);
      std::vector<float> cout_(static_cast<std::size_t>(nq * O)), cdq = dq0, cdkv = dkv0;
      std::vector<float> clse(static_cast<std::size_t>(c.B * c.NH * c.Tq));
      std::vector<float> cscratch(
          static_cast<std::size_t>(flash_attention_scratch_size(a, c.Tq, c.Tk, c.HD)));
      flash_attention_forward(view(cout_, nq, O), clse, cscratch, view(q, nq, O),
                              ckv.block(0, 0, nk, K), ckv.block(0, K, nk, K), a);
      const MatrixView cdkv_m = view(cdkv, nk, ldkv);
      flash_attention_backward(view(cdq, nq, O), cdkv_m.block(0, 0, nk, K),
                               cdkv_m.block(0, K, nk, K), cscratch, view(dout, nq, O),
                               view(q, nq, O), ckv.block(0, 0, nk, K), ckv.block(0, K, nk, K),
                               view(cout_, nq, O), clse, a);
      std::vector<float> cmerged = run_out, cmerged_lse = run_lse;
      flash_attention_merge(view(cmerged, nq, O), cmerged_lse, view(cout_, nq, O), clse, a);
      ctx().synchronize();
      std::vector<float> glse(clse.size()), gmerged_lse(clse.size());
      ctx().download(glse.data(), lse.data(), glse.size() * sizeof(float));
      ctx().download(gmerged_lse.data(), merged_lse.data(), gmerged_lse.size() * sizeof(float));
      const std::string what = label(type) + " Tq=" + std::to_string(c.Tq) +
                               " Tk=" + std::to_string(c.Tk) + " q_pos=" + std::to_string(c.q_pos) +
                               " k_pos=" + std::to_string(c.k_pos);
      EXPECT_LE(max_relative_error(down(out, type, nq * O), cout_), tolerance(type, 1e-5)) << what;
      for (std::size_t i = 0; i < clse.size(); ++i) {  // −∞ where a row sees no key
        if (std::isinf(clse[i])) {
          EXPECT_EQ(glse[i], clse[i]) << what << " row " << i;
        } else {
          EXPECT_NEAR(glse[i], clse[i], 1e-4 * (1 + std::abs(clse[i]))) << what << " row " << i;
        }
      }
      EXPECT_LE(max_relative_error(down(gdq, type, nq * O), cdq), tolerance(type, 1e-4)) << what;
      EXPECT_LE(max_relative_error(down(gdkv, type, nk * ldkv), cdkv), tolerance(type, 1e-4))
          << what;
      EXPECT_LE(max_relative_error(down(merged, type, nq * O), cmerged), tolerance(type, 1e-5))
          << what;
      EXPECT_LE(max_relative_error(gmerged_lse, cmerged_lse), 1e-5) << what;
    }
  }
}

TEST(GpuOps, AdamWManyTensorsInOneLaunch) {
  const AdamWStep step{.lr = 1e-3f,
                       .beta1 = 0.9f,
                       .beta2 = 0.95f,
                       .eps = 1e-8f,
                       .decay = 0.1f,
                       .bias1 = 1.0f - 0.9f * 0.9f,
                       .bias2 = 1.0f - 0.95f * 0.95f};
  // Sizes around the kernel's chunk (kAdamWChunk = 65536 elements a block): one, exactly one
  // chunk, several with a short last one.
  const std::int64_t sizes[] = {1, 1000, 65536, 200003};
  std::vector<std::vector<float>> p, g, m, v;
  std::vector<Buffer> dp, dg, dm, dv, dlow;
  std::vector<AdamWTensor> tensors;
  for (std::size_t t = 0; t < std::size(sizes); ++t) {
    const std::int64_t n = sizes[t];
    p.push_back(random_values(n, 40 + t, ET::kF32));
    g.push_back(random_values(n, 50 + t, ET::kF32));
    m.push_back(random_values(n, 60 + t, ET::kF32, -0.1f, 0.1f));
    v.push_back(random_values(n, 70 + t, ET::kF32, 0.0f, 0.01f));
    dp.push_back(ctx().upload_values(p[t], ET::kF32));
    dg.push_back(ctx().upload_values(g[t], ET::kF32));
    dm.push_back(ctx().upload_values(m[t], ET::kF32));
    dv.push_back(ctx().upload_values(v[t], ET::kF32));
    dlow.push_back(poisoned(ET::kBF16, n));
  }
  for (std::size_t t = 0; t < std::size(sizes); ++t)
    tensors.push_back({dp[t].as<float>(), dg[t].as<float>(), dm[t].as<float>(), dv[t].as<float>(),
                       sizes[t], dlow[t].data()});
  adamw_update(ctx(), tensors, step);
  for (std::size_t t = 0; t < std::size(sizes); ++t) {
    test_support::adamw_reference(p[t], g[t], m[t], v[t], step);
    const std::int64_t n = sizes[t];
    EXPECT_LE(max_relative_error(down(dp[t], ET::kF32, n), p[t]), 1e-6) << "tensor " << t;
    EXPECT_LE(max_relative_error(down(dm[t], ET::kF32, n), m[t]), 1e-6) << "tensor " << t;
    EXPECT_LE(max_relative_error(down(dv[t], ET::kF32, n), v[t]), 1e-6) << "tensor " << t;
    std::vector<float> low = p[t];
    for (float& x : low) x = round_to_bf16(x);
    EXPECT_LE(max_relative_error(down(dlow[t], ET::kBF16, n), low), 1e-2) << "tensor " << t;
  }
}

// ---- GpuBackend's norm and vocabulary-shard view ops against CpuBackend ---------------------
// The same calls on both backends with the same inputs (bf16-rounded for a bf16 GPU run; the
// CPU computes on them in fp32). Activations are strided views (rows cols + 5 apart) whose
// padding holds random values on both backends, so comparing whole arrays also checks that
// neither writes it.

device::GpuBackend& gpu_backend() {
  static device::GpuBackend backend(ctx());
  return backend;
}

bool on_cpu(const device::Backend& be) {
  return &be == static_cast<const device::Backend*>(&cpu_backend());
}

// An array on `be` holding `values`: of `type` on the GPU, fp32 on the CPU.
device::Array array_of(device::Backend& be, const std::vector<float>& values, ET type) {
  device::Array a =
      be.alloc(static_cast<std::int64_t>(values.size()), on_cpu(be) ? ET::kF32 : type);
  be.upload(a, values);
  return a;
}

// A norm's fp64 sums read back (GpuBackend::download takes fp32 and bf16 arrays only).
std::vector<double> doubles(device::Backend& be, const device::Array& a) {
  std::vector<double> out(static_cast<std::size_t>(a.count()));
  if (on_cpu(be)) {
    std::memcpy(out.data(), a.data(), out.size() * sizeof(double));
  } else {
    be.synchronize();
    ctx().download(out.data(), a.data(), out.size() * sizeof(double));
  }
  return out;
}

double max_relative_error_fp64(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double diff = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return scale > 0.0 ? diff / scale : diff;
}

const char* norm_name(layout::Norm norm) {
  return norm == layout::Norm::kLayerNorm ? "LayerNorm" : "RMSNorm";
}

// What one backend computes from the same inputs: the whole-row passes (…1) and the phases
// with c_global = C on one shard (…2).
struct NormResults {
  std::vector<float> y1, mean1, rstd1, dx1, dw1, db1;
  std::vector<double> fsums, bsums;
  std::vector<float> y2, mean2, rstd2, dx2, dw2, db2;
};

NormResults run_norm(device::Backend& be, layout::Norm norm, ET type, std::int64_t rows,
                     std::int64_t cols, std::int64_t ld) {
  const bool layer = norm == layout::Norm::kLayerNorm;
  const std::int64_t n = rows * ld;
  const auto x = random_values(n, 40, type, -2.0f, 3.0f), dy = random_values(n, 41, type);
  const auto y0 = random_values(n, 42, type), dx0 = random_values(n, 43, type);
  const auto w = random_values(cols, 44, ET::kF32), b = random_values(cols, 45, ET::kF32);
  const auto dw0 = random_values(cols, 46, ET::kF32), db0 = random_values(cols, 47, ET::kF32);
  const auto stats0 = random_values(rows, 48, ET::kF32);
  device::Array X = array_of(be, x, type), DY = array_of(be, dy, type);
  device::Array W = array_of(be, w, ET::kF32), B = array_of(be, b, ET::kF32);
  device::Array Y1 = array_of(be, y0, type), DX1 = array_of(be, dx0, type);
  device::Array Y2 = array_of(be, y0, type), DX2 = array_of(be, dx0, type);
  device::Array M1 = array_of(be, stats0, ET::kF32), R1 = array_of(be, stats0, ET::kF32);
  device::Array M2 = array_of(be, stats0, ET::kF32), R2 = array_of(be, stats0, ET::kF32);
  device::Array DW1 = array_of(be, dw0, ET::kF32), DB1 = array_of(be, db0, ET::kF32);
  device::Array DW2 = array_of(be, dw0, ET::kF32), DB2 = array_of(be, db0, ET::kF32);
  const std::int64_t count = device::norm_sum_count(norm, rows);
  device::Array FS = be.alloc(count, ET::kF64), BS = be.alloc(count, ET::kF64);

  const auto mat = [&](const device::Array& a, std::int64_t stride) {
    return a.view(0, rows, cols, stride);
  };
  const auto row = [](const device::Array& a) { return a.view(1, a.count()); };
  const View w_v = row(W), b_v = layer ? row(B) : View{};
  const View m1 = layer ? row(M1) : View{}, m2 = layer ? row(M2) : View{};
  const View db1 = layer ? row(DB1) : View{}, db2 = layer ? row(DB2) : View{};

  be.norm_forward(norm, mat(Y1, ld), m1, row(R1), mat(X, ld), w_v, b_v);
  be.norm_backward(norm, mat(DX1, ld), row(DW1), db1, mat(DY, ld), mat(X, ld), w_v, m1, row(R1));
  be.norm_forward_sums(norm, row(FS), mat(X, ld));
  be.norm_forward_apply(norm, mat(Y2, ld), m2, row(R2), mat(X, ld), w_v, b_v, row(FS), cols);
  be.norm_backward_sums(norm, row(BS), row(DW2), db2, mat(DY, ld), mat(X, ld), w_v, m2, row(R2));
  be.norm_backward_apply(norm, mat(DX2, ld), mat(DY, ld), mat(X, ld), w_v, m2, row(R2), row(BS),
                         cols);
  return {be.download(Y1),  be.download(M1),  be.download(R1),  be.download(DX1), be.download(DW1),
          be.download(DB1), doubles(be, FS),  doubles(be, BS),  be.download(Y2),  be.download(M2),
          be.download(R2),  be.download(DX2), be.download(DW2), be.download(DB2)};
}

// Packed views too: the GPU's LayerNorm over packed whole rows runs layernorm_forward/
// backward's kernels, over strided ones the view kernels.
TEST(GpuBackendNorms, WholeRowsAndPhasesEqualTheCpuBackend) {
  const std::int64_t rows = 37;
  for (layout::Norm norm : {layout::Norm::kLayerNorm, layout::Norm::kRmsNorm})
    for (ET type : kTypes)
      for (std::int64_t cols : {1, 300, 2053})
        for (std::int64_t pad : {5, 0}) {
          const std::int64_t ld = cols + pad;
          const NormResults g = run_norm(gpu_backend(), norm, type, rows, cols, ld);
          const NormResults c = run_norm(cpu_backend(), norm, type, rows, cols, ld);
          const std::string what = std::string(norm_name(norm)) + " " + label(type) +
                                   " C=" + std::to_string(cols) + " ld=" + std::to_string(ld);
          const double tol = tolerance(type, 1e-4);
          // The GPU against the CPU, pass by pass. The forward sums are fp64 sums of the same
          // values in another order; the backward's depend on each backend's own mean and rstd.
          EXPECT_LE(max_relative_error(g.y1, c.y1), tol) << what;
          EXPECT_LE(max_relative_error(g.mean1, c.mean1), 1e-5) << what;
          EXPECT_LE(max_relative_error(g.rstd1, c.rstd1), 1e-4) << what;
          EXPECT_LE(max_relative_error(g.dx1, c.dx1), tol) << what;
          EXPECT_LE(max_relative_error(g.dw1, c.dw1), tol) << what;
          EXPECT_LE(max_relative_error(g.db1, c.db1), 1e-4) << what;
          EXPECT_LE(max_relative_error_fp64(g.fsums, c.fsums), 1e-9) << what;
          EXPECT_LE(max_relative_error_fp64(g.bsums, c.bsums), 1e-4) << what;
          EXPECT_LE(max_relative_error(g.y2, c.y2), tol) << what;
          EXPECT_LE(max_relative_error(g.mean2, c.mean2), 1e-5) << what;
          EXPECT_LE(max_relative_error(g.rstd2, c.rstd2), 1e-4) << what;
          EXPECT_LE(max_relative_error(g.dx2, c.dx2), tol) << what;
          EXPECT_LE(max_relative_error(g.dw2, c.dw2), tol) << what;
          EXPECT_LE(max_relative_error(g.db2, c.db2), 1e-4) << what;
          // On the GPU, the phases on one shard (c_global = C) are the whole-row passes.
          EXPECT_LE(max_relative_error(g.y2, g.y1), tolerance(type, 1e-5)) << what;
          EXPECT_LE(max_relative_error(g.mean2, g.mean1), 1e-5) << what;
          EXPECT_LE(max_relative_error(g.rstd2, g.rstd1), 1e-5) << what;
          EXPECT_LE(max_relative_error(g.dx2, g.dx1), tolerance(type, 1e-5)) << what;
          EXPECT_LE(max_relative_error(g.dw2, g.dw1), 2e-5) << what;
          EXPECT_LE(max_relative_error(g.db2, g.db1), 1e-5) << what;
        }
}

// The forward sums of two column shards, added elementwise (the group's all-reduce), are the
// sums of the whole rows: the layout the CPU and the GPU share.
TEST(GpuBackendNorms, ShardSumsAddUpToTheWholeRows) {
  device::Backend& be = gpu_backend();
  const std::int64_t rows = 9, cols = 301, ld = 310, half = 128;
  for (layout::Norm norm : {layout::Norm::kLayerNorm, layout::Norm::kRmsNorm})
    for (ET type : kTypes) {
      device::Array X = array_of(be, random_values(rows * ld, 50, type, -2.0f, 3.0f), type);
      const std::int64_t count = device::norm_sum_count(norm, rows);
      device::Array whole = be.alloc(count, ET::kF64), left = be.alloc(count, ET::kF64),
                    right = be.alloc(count, ET::kF64);
      const View x = X.view(0, rows, cols, ld);
      be.norm_forward_sums(norm, whole.view(1, count), x);
      be.norm_forward_sums(norm, left.view(1, count), x.block(0, 0, rows, half));
      be.norm_forward_sums(norm, right.view(1, count), x.block(0, half, rows, cols - half));
      const auto w = doubles(be, whole), l = doubles(be, left), r = doubles(be, right);
      std::vector<double> sum(w.size());
      for (std::size_t i = 0; i < sum.size(); ++i) sum[i] = l[i] + r[i];
      EXPECT_LE(max_relative_error_fp64(sum, w), 1e-12) << norm_name(norm) << " " << label(type);
    }
}

// SwiGLU forward and backward (gradients added into nonzero ones) and RoPE forward and back
// on strided views: the GPU backend against the CPU backend on the same values (bf16 inputs
// rounded first, so both read the same numbers).
TEST(GpuBackendBlockOps, SwigluAndRopeOnStridedViewsEqualTheCpuBackend) {
  const std::int64_t n = 37, f = 50, ldx = 2 * f + 3, ldy = f + 5;
  const std::int64_t batch = 3, seq = 8, heads = 4, hd = 16, ldq = heads * hd + 7;
  const RopeTable table = rope_table(hd, 0, seq);
  for (ET type : kTypes) {
    std::vector<float> y[2], dx[2], rot[2], back[2];
    int which = 0;
    for (device::Backend* be : {static_cast<device::Backend*>(&gpu_backend()),
                                static_cast<device::Backend*>(&cpu_backend())}) {
      device::Array x = array_of(*be, random_values(n * ldx, 70, type), type);
      device::Array out = array_of(*be, random_values(n * ldy, 71, type), type);
      device::Array dy = array_of(*be, random_values(n * ldy, 72, type), type);
      device::Array g = array_of(*be, random_values(n * ldx, 73, type), type);
      be->swiglu_forward(out.view(0, n, f, ldy), x.view(0, n, 2 * f, ldx));
      be->swiglu_backward(g.view(0, n, 2 * f, ldx), x.view(0, n, 2 * f, ldx),
                          dy.view(0, n, f, ldy));
      y[which] = be->download(out);
      dx[which] = be->download(g);
      device::Array q = array_of(*be, random_values(batch * seq * ldq, 74, type), type);
      device::Array cs = array_of(
          *be, {table.cos_sin.values().begin(), table.cos_sin.values().end()}, ET::kF32);
      const View qv = q.view(0, batch * seq, heads * hd, ldq);
      be->rope(qv, cs.view(seq, hd), batch, heads, false);
      rot[which] = be->download(q);
      be->rope(qv, cs.view(seq, hd), batch, heads, true);
      back[which] = be->download(q);
      ++which;
    }
    const double tol = type == ET::kBF16 ? 2e-2 : 1e-5;
    EXPECT_LE(max_relative_error(y[0], y[1]), tol) << "swiglu y, " << label(type);
    EXPECT_LE(max_relative_error(dx[0], dx[1]), tol) << "swiglu dx, " << label(type);
    EXPECT_LE(max_relative_error(rot[0], rot[1]), tol) << "rope, " << label(type);
    EXPECT_LE(max_relative_error(back[0], back[1]), tol) << "rope back, " << label(type);
  }
}

TEST(GpuBackendNorms, ResidualNormEqualsTheCpuBackend) {
  const std::int64_t rows = 21, cols = 300;
  for (layout::Norm norm : {layout::Norm::kLayerNorm, layout::Norm::kRmsNorm})
    for (ET type : kTypes) {
      const bool layer = norm == layout::Norm::kLayerNorm;
      const std::int64_t ld = cols + 7;
      std::vector<float> results[2][3];
      int which = 0;
      for (device::Backend* be : {static_cast<device::Backend*>(&gpu_backend()),
                                  static_cast<device::Backend*>(&cpu_backend())}) {
        device::Array A = array_of(*be, random_values(rows * ld, 51, type), type);
        device::Array Bin = array_of(*be, random_values(rows * ld, 52, type), type);
        device::Array S = array_of(*be, random_values(rows * ld, 53, type), type);
        device::Array Y = array_of(*be, random_values(rows * ld, 54, type), type);
        device::Array W = array_of(*be, random_values(cols, 55, ET::kF32), ET::kF32);
        device::Array B = array_of(*be, random_values(cols, 56, ET::kF32), ET::kF32);
        device::Array M = array_of(*be, random_values(rows, 57, ET::kF32), ET::kF32);
        device::Array R = array_of(*be, random_values(rows, 58, ET::kF32), ET::kF32);
        be->residual_norm_forward(norm, S.view(0, rows, cols, ld), Y.view(0, rows, cols, ld),
                                  layer ? M.view(1, rows) : View{}, R.view(1, rows),
                                  A.view(0, rows, cols, ld), Bin.view(0, rows, cols, ld),
                                  W.view(1, cols), layer ? B.view(1, cols) : View{});
        results[which][0] = be->download(S);
        results[which][1] = be->download(Y);
        results[which][2] = be->download(R);
        ++which;
      }
      const std::string what = std::string(norm_name(norm)) + " " + label(type);
      EXPECT_LE(max_relative_error(results[0][0], results[1][0]), tolerance(type, 1e-6)) << what;
      EXPECT_LE(max_relative_error(results[0][1], results[1][1]), tolerance(type, 1e-4)) << what;
      EXPECT_LE(max_relative_error(results[0][2], results[1][2]), tolerance(type, 1e-4)) << what;
    }
}

TEST(GpuBackendVocab, EmbeddingShardEqualsTheCpuBackend) {
  // The shard holds tokens [11, 20) of 23; tokens repeat and most fall outside it.
  const std::int64_t n = 29, c = 33, begin = 11, shard_rows = 9;
  const std::int64_t ld_out = c + 4, ld_wte = c + 3, ld_dwte = c + 2;
  std::vector<std::int32_t> tokens(n);
  for (std::int64_t i = 0; i < n; ++i) tokens[i] = static_cast<std::int32_t>((i * 7) % 23);
  for (ET type : kTypes) {
    std::vector<float> out[2], dwte[2];
    int which = 0;
    for (device::Backend* be : {static_cast<device::Backend*>(&gpu_backend()),
                                static_cast<device::Backend*>(&cpu_backend())}) {
      device::Array wte = array_of(*be, random_values(shard_rows * ld_wte, 60, type), type);
      device::Array o = array_of(*be, random_values(n * ld_out, 61, type), type);
      device::Array dout = array_of(*be, random_values(n * ld_out, 62, type), type);
      device::Array dw = array_of(*be, random_values(shard_rows * ld_dwte, 63, ET::kF32), ET::kF32);
      be->embedding_shard_forward(o.view(0, n, c, ld_out), tokens,
                                  wte.view(0, shard_rows, c, ld_wte), begin);
      be->embedding_shard_backward(dw.view(0, shard_rows, c, ld_dwte), dout.view(0, n, c, ld_out),
                                   tokens, begin);
      out[which] = be->download(o);
      dwte[which] = be->download(dw);
      ++which;
    }
    EXPECT_EQ(out[0], out[1]) << label(type);  // copies and zeros: exact
    EXPECT_LE(max_relative_error(dwte[0], dwte[1]), 1e-6) << label(type);
  }
}

// The cross-entropy's phases on a shard of 300 logit columns [600, 900) of a vocabulary whose
// real tokens end at 850 (so 50 padding columns), rows 310 apart.
TEST(GpuBackendVocab, CrossEntropyShardEqualsTheCpuBackend) {
  const std::int64_t n = 13, cols = 300, ld = 310, begin = 600, vocab_real = 850;
  std::vector<std::int32_t> targets(n);
  for (std::int64_t r = 0; r < n; ++r)  // every other row's target in the shard
    targets[r] = static_cast<std::int32_t>(r % 2 == 0 ? begin + (r * 37) % 250 : (r * 53) % 600);
  const float scale = 0.25f;
  for (ET type : kTypes) {
    struct Out {
      std::vector<float> masked, row_max, sums, lse, grad;
      double loss;
    } out[2];
    int which = 0;
    for (device::Backend* be : {static_cast<device::Backend*>(&gpu_backend()),
                                static_cast<device::Backend*>(&cpu_backend())}) {
      device::Array logits = array_of(*be, random_values(n * ld, 70, type, -5.0f, 5.0f), type);
      device::Array row_max = array_of(*be, random_values(n, 71, ET::kF32), ET::kF32);
      device::Array sums = array_of(*be, random_values(2 * n, 72, ET::kF32), ET::kF32);
      device::Array lse = array_of(*be, random_values(n, 73, ET::kF32), ET::kF32);
      const View l = logits.view(0, n, cols, ld);
      be->cross_entropy_shard_max(l, row_max.view(1, n), begin, vocab_real);
      Out& o = out[which++];
      o.masked = be->download(logits);
      be->cross_entropy_shard_sums(sums.view(1, 2 * n), l, row_max.view(1, n), targets, begin,
                                   vocab_real);
      o.loss =
          be->cross_entropy_shard_loss(lse.view(1, n), row_max.view(1, n), sums.view(1, 2 * n));
      be->cross_entropy_shard_backward(l, lse.view(1, n), targets, begin, scale);
      o.row_max = be->download(row_max);
      o.sums = be->download(sums);
      o.lse = be->download(lse);
      o.grad = be->download(logits);
    }
    // The padding columns [250, 300) of every row are −∞ on both; the rest as it was.
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t col = vocab_real - begin; col < cols; ++col)
        for (Out& o : out) {
          ASSERT_EQ(o.masked[r * ld + col], -std::numeric_limits<float>::infinity())
              << label(type) << " row " << r << " column " << col;
          o.masked[r * ld + col] = 0.0f;
        }
    const std::string what = label(type);
    EXPECT_EQ(out[0].masked, out[1].masked) << what;
    EXPECT_EQ(out[0].row_max, out[1].row_max) << what;
    EXPECT_LE(max_relative_error(out[0].sums, out[1].sums), 1e-5) << what;
    EXPECT_LE(max_relative_error(out[0].lse, out[1].lse), 1e-5) << what;
    EXPECT_NEAR(out[0].loss, out[1].loss, 1e-5 * std::abs(out[1].loss)) << what;
    EXPECT_LE(max_relative_error(out[0].grad, out[1].grad), tolerance(type, 1e-5)) << what;
  }
}

// One shard holding the whole vocabulary: the phases give the whole-vocabulary op's loss and
// lse (gpu::cross_entropy_forward), and its gradient (cross_entropy_backward into zeros).
TEST(GpuBackendVocab, OneCrossEntropyShardIsTheWholeOp) {
  device::Backend& be = gpu_backend();
  const std::int64_t n = 11, classes = 1000;
  std::vector<std::int32_t> targets(n);
  for (std::int64_t r = 0; r < n; ++r) targets[r] = static_cast<std::int32_t>((r * 131) % classes);
  const auto values = random_values(n * classes, 80, ET::kF32, -5.0f, 5.0f);
  device::Array logits = array_of(be, values, ET::kF32);
  device::Array row_max = be.alloc(n, ET::kF32), sums = be.alloc(2 * n, ET::kF32),
                lse = be.alloc(n, ET::kF32);
  be.cross_entropy_shard_max(logits.view(n, classes), row_max.view(1, n), 0, classes);
  be.cross_entropy_shard_sums(sums.view(1, 2 * n), logits.view(n, classes), row_max.view(1, n),
                              targets, 0, classes);
  const double loss =
      be.cross_entropy_shard_loss(lse.view(1, n), row_max.view(1, n), sums.view(1, 2 * n));
  be.cross_entropy_shard_backward(logits.view(n, classes), lse.view(1, n), targets, 0,
                                  1.0f / static_cast<float>(n));

  const Buffer whole = ctx().upload_values(values, ET::kF32);
  Buffer whole_lse = poisoned(ET::kF32, n), grad(ctx(), n * classes * sizeof(float));
  ctx().fill_bytes(grad.data(), 0, grad.bytes());
  const double whole_loss = cross_entropy_forward(ctx(), ET::kF32, whole_lse.as<float>(),
                                                  whole.data(), targets, n, classes, classes);
  cross_entropy_backward(ctx(), ET::kF32, grad.data(), whole.data(), whole_lse.as<float>(), targets,
                         n, classes, classes);
  EXPECT_NEAR(loss, whole_loss, 1e-5 * std::abs(whole_loss));
  EXPECT_LE(max_relative_error(be.download(lse), down(whole_lse, ET::kF32, n)), 1e-5);
  EXPECT_LE(max_relative_error(be.download(logits), down(grad, ET::kF32, n * classes)), 1e-5);
}

// Each op refuses a view of the wrong type or shape, naming it.
TEST(GpuBackendViews, NormAndVocabularyOpsRefuseAMismatchedViewNamingIt) {
  device::Backend& be = gpu_backend();
  const std::int64_t rows = 4, cols = 8;
  device::Array x = be.alloc(rows * cols, ET::kF32), y16 = be.alloc(rows * cols, ET::kBF16);
  device::Array vec = be.alloc(2 * rows + cols, ET::kF32), sums = be.alloc(2 * rows, ET::kF64);
  const View xv = x.view(rows, cols);
  // The message names the view: "<what> is <describe(view)>".
  const auto refuses = [](const char* what, const View& named, const std::function<void()>& call) {
    const std::string expected = std::string(what) + " is " + describe(named);
    try {
      call();
      ADD_FAILURE() << "no error for " << expected;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  const View fp32_sums = vec.view(1, rows);  // fp32 where fp64 is needed
  refuses("the sums", fp32_sums,
          [&] { be.norm_forward_sums(layout::Norm::kRmsNorm, fp32_sums, xv); });
  const View short_sums = sums.view(1, rows);  // LayerNorm needs 2·N
  refuses("the sums", short_sums,
          [&] { be.norm_forward_sums(layout::Norm::kLayerNorm, short_sums, xv); });
  const View y = y16.view(rows, cols);  // bf16 y for fp32 x
  refuses("y", y, [&] {
    be.norm_forward_apply(layout::Norm::kRmsNorm, y, {}, vec.view(1, rows), xv, vec.view(1, cols),
                          {}, sums.view(1, rows), cols);
  });
  refuses("y", y, [&] {
    be.norm_forward(layout::Norm::kRmsNorm, y, {}, vec.view(1, rows), xv, vec.view(1, cols), {});
  });
  const View short_mean = vec.view(1, rows - 1);  // N − 1 means
  refuses("mean", short_mean, [&] {
    be.norm_forward(layout::Norm::kLayerNorm, xv, short_mean, vec.view(1, rows), xv,
                    vec.view(1, cols), vec.view(1, cols));
  });
  refuses("mean", short_mean, [&] {
    be.norm_backward(layout::Norm::kLayerNorm, xv, vec.view(1, cols), vec.view(1, cols), xv, xv,
                     vec.view(1, cols), short_mean, vec.view(1, rows));
  });
  const View dwte16 = y16.view(rows, cols);  // the table's gradient is fp32
  refuses("dwte", dwte16,
          [&] { be.embedding_shard_backward(dwte16, xv, std::vector<std::int32_t>(rows, 0), 0); });
  const View ce_sums = vec.view(1, rows);  // N where 2·N are needed
  refuses("the sums", ce_sums, [&] {
    be.cross_entropy_shard_sums(ce_sums, xv, vec.view(1, rows), std::vector<std::int32_t>(rows, 0),
                                0, cols);
  });
  device::Array doubles_array = be.alloc(3, ET::kF64);
  EXPECT_THROW(be.upload(doubles_array, std::vector<float>(3, 1.0f)), Error);
}

TEST(GpuAllocator, ReusesFreedBlocksAndNamesAnImpossibleSize) {
  const AllocatorStats before = ctx().allocator_stats();
  { const Buffer a(ctx(), 5u << 20); }
  { const Buffer b(ctx(), 5u << 20); }  // the same rounded size: served from the cache
  const AllocatorStats after = ctx().allocator_stats();
  EXPECT_GE(after.cache_hits, before.cache_hits + 1);
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
  try {
    const Buffer huge(ctx(), std::size_t{1} << 50);
    FAIL() << "allocated a petabyte";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("GPU out of memory"), std::string::npos) << e.what();
  }
  const Buffer still(ctx(), 1024);  // the context is still usable
  EXPECT_NE(still.data(), nullptr);
}

}  // namespace
}  // namespace meshtp::gpu
