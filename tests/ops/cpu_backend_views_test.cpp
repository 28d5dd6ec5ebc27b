// The backend's view primitives (device/backend.hpp) on the CPU: the strided GeMM against the
// naive reference for every transpose pair, α, β, both epilogues and views with an offset and a
// leading dimension wider than their columns; the 2D copy, add and zero touching exactly their
// view (the padding around it keeps a sentinel); events; and the refusals, naming the views.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.hpp"
#include "core/precision.hpp"
#include "error_of.hpp"
#include "ops/cpu_backend.hpp"
#include "ops/gelu.hpp"
#include "tensor/gemm.hpp"
#include "tensor/random.hpp"

namespace meshtp {
namespace {

constexpr float kSentinel = -123.0f;

// An array of `count` elements holding `values` where given, kSentinel elsewhere.
device::Array filled(device::Backend& be, std::int64_t count, float value = kSentinel) {
  device::Array a = be.alloc(count, Element::kF32);
  be.upload(a, std::vector<float>(static_cast<std::size_t>(count), value));
  return a;
}

// A rows × cols view at element `offset` of `a`, rows `ld` apart, holding uniform values.
View random_view(device::Backend& be, device::Array& a, std::int64_t offset, std::int64_t rows,
                 std::int64_t cols, std::int64_t ld, std::uint64_t seed) {
  const View v = a.view(offset, rows, cols, ld);
  const Tensor t = uniform_tensor({rows, cols}, seed);
  be.copy(v, host_view(t.matrix()));
  return v;
}

Tensor to_tensor(const View& v) {
  Tensor t({v.rows, v.cols});
  copy(host_matrix(v, "v"), t.matrix());
  return t;
}

std::vector<float> values_of(const View& v) {
  const Tensor t = to_tensor(v);
  return {t.values().begin(), t.values().end()};
}

TEST(CpuBackendViews, StridedGemmEqualsTheReferenceForEveryTransposeAlphaBetaAndEpilogue) {
  device::Backend& be = cpu_backend();
  const std::int64_t m = 5, n = 7, k = 3;
  for (Trans ta : {Trans::kNo, Trans::kYes}) {
    for (Trans tb : {Trans::kNo, Trans::kYes}) {
      for (device::Epilogue ep :
           {device::Epilogue::kNone, device::Epilogue::kBias, device::Epilogue::kBiasGelu}) {
        const std::int64_t ar = ta == Trans::kNo ? m : k, ac = ta == Trans::kNo ? k : m;
        const std::int64_t br = tb == Trans::kNo ? k : n, bc = tb == Trans::kNo ? n : k;
        device::Array sa = filled(be, 3 + ar * (ac + 2)), sb = filled(be, 1 + br * (bc + 4));
        device::Array sc = filled(be, 2 + m * (n + 1)), sbias = filled(be, n + 4);
        const View a = random_view(be, sa, 3, ar, ac, ac + 2, 1);
        const View b = random_view(be, sb, 1, br, bc, bc + 4, 2);
        const View c = random_view(be, sc, 2, m, n, n + 1, 3);
        const View bias = random_view(be, sbias, 4, 1, n, n, 4);
        const float alpha = 0.5f, beta = ep == device::Epilogue::kNone ? 2.0f : 0.0f;

        Tensor want = to_tensor(c);
        gemm_reference(to_tensor(a).matrix(), ta, to_tensor(b).matrix(), tb, want.matrix(), alpha,
                       beta);
        if (ep != device::Epilogue::kNone) {
          const Tensor bias_values = to_tensor(bias);
          for (std::int64_t i = 0; i < m; ++i)
            for (std::int64_t j = 0; j < n; ++j) want.matrix()(i, j) += bias_values.matrix()(0, j);
        }
        if (ep == device::Epilogue::kBiasGelu) {
          Tensor pre = want;
          gelu_forward_reference(want.matrix(), pre.matrix());
        }
        be.gemm(c, a, ta, b, tb, alpha, beta, ep, bias);
        EXPECT_LT(max_relative_error(to_tensor(c).values(), want.values()), 1e-6)
            << "ta=" << (ta == Trans::kYes) << " tb=" << (tb == Trans::kYes)
            << " epilogue=" << static_cast<int>(ep);
        // Nothing outside C's view was written: its padding columns and the offset.
        const std::vector<float> all = be.download(sc);
        for (std::int64_t e = 0; e < sc.count(); ++e) {
          const std::int64_t rel = e - 2;
          const bool inside = rel >= 0 && rel / (n + 1) < m && rel % (n + 1) < n;
          if (!inside) {
            EXPECT_EQ(all[static_cast<std::size_t>(e)], kSentinel) << "element " << e;
          }
        }
      }
    }
  }
}

TEST(CpuBackendViews, CopyAddAndZeroTouchExactlyTheirView) {
  device::Backend& be = cpu_backend();
  device::Array src_a = filled(be, 40), dst_a = filled(be, 40);
  const View src = random_view(be, src_a, 1, 3, 4, 6, 9);  // 3x4, rows 6 apart
  const View dst = dst_a.view(5, 3, 4, 9);                 // 3x4, rows 9 apart
  be.copy(dst, src);
  EXPECT_EQ(values_of(dst), values_of(src));
  be.add(dst, src);
  Tensor twice = to_tensor(src);
  for (float& x : twice.values()) x *= 2.0f;
  EXPECT_EQ(values_of(dst), std::vector<float>(twice.values().begin(), twice.values().end()));
  be.zero(dst.block(1, 1, 2, 2));
  const Tensor after = to_tensor(dst);
  EXPECT_EQ(after.matrix()(1, 1), 0.0f);
  EXPECT_EQ(after.matrix()(2, 2), 0.0f);
  EXPECT_EQ(after.matrix()(0, 0), twice.matrix()(0, 0));
  EXPECT_EQ(after.matrix()(1, 3), twice.matrix()(1, 3));
  const std::vector<float> all = be.download(dst_a);
  int untouched = 0;
  for (float x : all) untouched += x == kSentinel;
  EXPECT_EQ(untouched, 40 - 12);
}

TEST(CpuBackendViews, EventsAreDoneWhenMadeAndTheHostHasNoDeviceMemory) {
  device::Backend& be = cpu_backend();
  auto event = be.record();
  EXPECT_TRUE(event->done());
  event->synchronize();
  be.wait(*event);
  EXPECT_EQ(be.device_memory(), nullptr);
  EXPECT_EQ(be.native_stream(), nullptr);
}

TEST(CpuBackendViews, RefusesViewsThatDoNotFitOrChainNamingThem) {
  device::Backend& be = cpu_backend();
  device::Array a = filled(be, 12);
  EXPECT_THROW(
      {
        try {
          (void)a.view(2, 3, 4, 4);  // needs 2 + 2·4 + 4 = 14 elements
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("3x4 (ld 4) at element 2"), std::string::npos)
              << e.what();
          throw;
        }
      },
      Error);
  EXPECT_THROW((void)a.view(0, 2, 5, 4), Error);  // ld below cols
  const View v = a.view(3, 4);
  EXPECT_THROW((void)v.block(2, 1, 2, 3), Error);  // rows 2..4 of 3
  EXPECT_THROW(
      {
        try {
          be.copy(a.view(3, 4), a.view(4, 3));
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("3x4"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
  EXPECT_THROW(be.gemm(a.view(2, 2), a.view(2, 3), Trans::kNo, a.view(2, 2), Trans::kNo), Error);
  const View bf16{a.view(2, 2).data, Element::kBF16, 2, 2, 2};
  EXPECT_THROW(
      {
        try {
          be.add(bf16, bf16);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("bf16 2x2"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
  EXPECT_THROW(be.gemm(a.view(2, 2), a.view(2, 2), Trans::kNo, a.view(2, 2), Trans::kNo, 1.0f,
                       0.0f, device::Epilogue::kBias, a.view(1, 3)),
               Error);
}

// fp64 arrays hold a norm's sums (zeroed, copied, viewed); the fp32 value transfers refuse
// them, and integer arrays are refused when made, each naming the type.
TEST(CpuBackendViews, Fp64ArraysForSumsAndTheirRefusals) {
  device::Backend& be = cpu_backend();
  device::Array sums = be.alloc(6, Element::kF64), copy = be.alloc(6, Element::kF64);
  be.zero(sums);
  static_cast<double*>(sums.data())[5] = 2.5;
  be.copy(copy, sums);
  EXPECT_EQ(static_cast<const double*>(copy.data())[5], 2.5);
  EXPECT_EQ(static_cast<const double*>(copy.data())[0], 0.0);
  EXPECT_EQ(describe(sums.view(2, 3)), "fp64 2x3 (ld 3)");
  EXPECT_EQ(test_support::error_of([&] { be.upload(sums, std::vector<float>(6)); }),
            "cpu backend: uploading fp32 values into an fp64 array: only fp32 ones");
  EXPECT_EQ(test_support::error_of([&] { (void)be.download(sums); }),
            "cpu backend: downloading fp32 values from an fp64 array: only fp32 ones");
  EXPECT_NE(test_support::error_of([&] { (void)be.alloc(4, Element::kI32); }).find("not int32"),
            std::string::npos);
  device::Array f32 = be.alloc(6, Element::kF32);
  EXPECT_NE(test_support::error_of([&] { be.copy(f32, sums); }).find("6 fp64 elements into 6 fp32"),
            std::string::npos);
}

// An array's slice shares its storage (ZeRO's parts of a bucket), and the host's fp32 span of an
// array (device::floats) and host copies (edit_on_host / read_on_host) refuse what they cannot be.
TEST(CpuBackendViews, SlicesAndHostAccessOfArrays) {
  device::Backend& be = cpu_backend();
  device::Array a = be.alloc(6, Element::kF32);
  be.upload(a, std::vector<float>{0, 1, 2, 3, 4, 5});
  device::Array part = a.slice(2, 3);
  EXPECT_EQ(device::floats(part)[0], 2.0f);
  be.scale(part, 10.0f);
  EXPECT_EQ(be.download(a), (std::vector<float>{0, 1, 20, 30, 40, 5}));
  device::edit_on_host(be, part, [](std::span<float> v) { v[2] = -1.0f; });
  EXPECT_EQ(device::read_on_host(be, a, [](std::span<const float> v) { return v[4]; }), -1.0f);
  EXPECT_EQ(test_support::error_of([&] { (void)a.slice(4, 3); }),
            "a slice of 3 elements at 4 does not fit an array of 6");
  EXPECT_EQ(test_support::error_of([&] { (void)device::floats(be.alloc(2, Element::kF64)); }),
            "an fp32 span of an fp64 array");
}

}  // namespace
}  // namespace meshtp

namespace meshtp {
namespace {

// bf16 arrays store GeMM operands (model/block.hpp): upload rounds to nearest even, download and
// copy widen exactly, copy converts both ways on strided views, zero clears them, and a GeMM
// with a bf16 operand is, bit for bit, the bf16 GeMM of the fp32 values it was rounded from —
// under bf16 precision, and under fp32 too (a bf16 operand makes the product a bf16 one). The
// ops that compute refuse bf16 views, naming them.
std::vector<float> random_values(std::int64_t n, std::uint64_t seed) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = normal_at(seed, i);
  return v;
}

TEST(CpuBackendViews, Bf16ArraysStoreGemmOperands) {
  device::Backend& be = cpu_backend();
  const std::vector<float> x = random_values(6 * 5, 3);  // A: 6 x 5
  const std::vector<float> w = random_values(4 * 5, 4);  // B: 4 x 5, multiplied transposed
  device::Array a16 = be.alloc(30, Element::kBF16), a32 = be.alloc(30, Element::kF32);
  be.upload(a16, x);
  be.upload(a32, x);
  const std::vector<float> back = be.download(a16);
  for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(back[i], round_to_bf16(x[i])) << i;

  device::Array b = be.alloc(20, Element::kF32);
  be.upload(b, w);
  const auto product = [&](const device::Array& a, Precision p) {
    const ScopedGemmPrecision scope(p);
    device::Array c = be.alloc(24, Element::kF32);
    be.gemm(c.view(6, 4), a.view(6, 5), Trans::kNo, b.view(4, 5), Trans::kYes);
    return be.download(c);
  };
  const std::vector<float> rounded = product(a32, Precision::kBf16);
  EXPECT_EQ(product(a16, Precision::kBf16), rounded);
  EXPECT_EQ(product(a16, Precision::kFp32), rounded);
  EXPECT_NE(product(a32, Precision::kFp32), rounded);  // the test can tell them apart

  // A strided block converted into a bf16 array and back: the rounded values, in place.
  device::Array block = be.alloc(6, Element::kBF16), wide = be.alloc(30, Element::kF32);
  be.copy(block.view(3, 2), a32.view(1, 3, 2, 5));  // rows 0-2, columns 1-2
  be.zero(wide);
  be.copy(wide.view(1, 3, 2, 5), block.view(3, 2));
  const std::vector<float> got = be.download(wide);
  for (int r = 0; r < 3; ++r) {
    for (int k = 0; k < 2; ++k) {
      EXPECT_EQ(got[r * 5 + 1 + k], round_to_bf16(x[r * 5 + 1 + k])) << r << "," << k;
    }
    EXPECT_EQ(got[r * 5], 0.0f);
  }
  be.zero(block.view(3, 2));
  for (const float v : be.download(block)) EXPECT_EQ(v, 0.0f);
  device::Array copied = be.alloc(30, Element::kBF16);
  be.copy(copied, a32);  // whole arrays convert too
  EXPECT_EQ(be.download(copied), back);

  EXPECT_NE(test_support::error_of([&] { be.add(a16.view(6, 5), a16.view(6, 5)); }).find("bf16"),
            std::string::npos);
  EXPECT_NE(test_support::error_of([&] {
              be.copy(a16.view(6, 5), b.view(4, 5));
            }).find("copying fp32 4x5"),
            std::string::npos);
}

// The activations' backwards read a bf16 input (a block's stored FC1 output) as the fp32 one
// rounded to it, bit for bit, from a strided view; an input of another element is refused.
TEST(CpuBackendViews, ActivationBackwardsReadABf16Input) {
  device::Backend& be = cpu_backend();
  const std::vector<float> x = random_values(5 * 8, 11);  // [5, 6] in a [5, 8] array
  device::Array x16 = be.alloc(40, Element::kBF16), x32 = be.alloc(40, Element::kF32);
  be.upload(x16, x);
  be.upload(x32, be.download(x16));  // the rounded values, in fp32
  device::Array dy = be.alloc(30, Element::kF32);
  be.upload(dy, random_values(30, 12));
  const auto backward = [&](const device::Array& in, bool swiglu) {
    device::Array dx = be.alloc(30, Element::kF32);
    be.zero(dx);
    const View xv = in.view(0, 5, 6, 8);
    if (swiglu) {
      be.swiglu_backward(dx.view(5, 6), xv, dy.view(0, 5, 3, 6));
    } else {
      be.gelu_backward(dx.view(5, 6), xv, dy.view(5, 6));
    }
    return be.download(dx);
  };
  for (const bool swiglu : {false, true}) {
    const std::vector<float> want = backward(x32, swiglu);
    EXPECT_EQ(backward(x16, swiglu), want) << (swiglu ? "swiglu" : "gelu");
    EXPECT_NE(want, std::vector<float>(30, 0.0f));  // the test can tell a result from none
  }
  device::Array x64 = be.alloc(30, Element::kF64), dx = be.alloc(30, Element::kF32);
  const std::string refused = test_support::error_of(
      [&] { be.gelu_backward(dx.view(5, 6), x64.view(5, 6), dy.view(5, 6)); });
  EXPECT_NE(refused.find("the activation's input is fp64 5x6"), std::string::npos) << refused;
}

// copy_blocks packs a 2D GeMM's bf16 operand blocks as they are (no conversion): strided
// blocks of a bf16 array into one packed message and back, bit for bit, the padding untouched;
// a pair of two element types or shapes is refused, naming both.
TEST(CpuBackendViews, CopyBlocksMovesBf16BlocksBitForBit) {
  device::Backend& be = cpu_backend();
  const std::vector<float> x = random_values(6 * 5, 7);
  device::Array src = be.alloc(30, Element::kBF16);
  be.upload(src, x);
  device::Array message = be.alloc(12, Element::kBF16);
  const View blocks[] = {src.view(0, 3, 2, 5), src.view(17, 3, 2, 5)};  // columns 0-1 and 2-3
  const View packed[] = {message.view(0, 3, 2, 2), message.view(6, 3, 2, 2)};
  be.copy_blocks(packed, blocks);
  device::Array back = be.alloc(30, Element::kBF16);
  be.upload(back, std::vector<float>(30, kSentinel));
  const View unpacked[] = {back.view(0, 3, 2, 5), back.view(17, 3, 2, 5)};
  be.copy_blocks(unpacked, packed);
  const std::vector<float> want = be.download(src), got = be.download(back);
  for (int i = 0; i < 30; ++i) {
    const int r = i / 5, c = i % 5;
    const bool copied = (r < 3 && c < 2) || (r >= 3 && c >= 2 && c < 4);
    EXPECT_EQ(got[i], copied ? want[i] : kSentinel) << r << "," << c;
  }
  device::Array wide = be.alloc(6, Element::kF32);
  const View mixed_dst[] = {wide.view(3, 2)};
  const View mixed_src[] = {src.view(0, 3, 2, 5)};
  const std::string refused = test_support::error_of([&] { be.copy_blocks(mixed_dst, mixed_src); });
  EXPECT_NE(refused.find("block 0"), std::string::npos) << refused;
  EXPECT_NE(refused.find("bf16 3x2"), std::string::npos) << refused;
}

}  // namespace
}  // namespace meshtp
