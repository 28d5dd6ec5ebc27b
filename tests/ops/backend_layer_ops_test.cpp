// A block's activations and attention core as backend view ops (device/backend.hpp): the CPU
// backend's are the ops of src/ops (each argument where the op expects it: outputs against the
// op called directly), GeLU and SwiGLU on strided views leave the padding around them alone,
// and the inverted stand-in (tests/inverted_device.hpp: memory the host cannot read) gives the
// CPU backend's values bit for bit, so a layer written on these ops runs on device memory.
// Also: a scratch or saved buffer too small is refused, naming it.
#include <gtest/gtest.h>

#include <functional>

#include "error_of.hpp"
#include "inverted_device.hpp"
#include "ops/attention.hpp"
#include "ops/cpu_backend.hpp"
#include "ops/flash_attention.hpp"
#include "ops/gelu.hpp"
#include "ops/swiglu.hpp"
#include "tensor/random.hpp"

namespace meshtp {
namespace {

using Op = std::function<void(device::Backend&, const std::vector<View>&)>;

// `op` on `be`, over packed buffers holding `init`; every buffer afterwards.
std::vector<Tensor> run(device::Backend& be, const std::vector<Tensor>& init, const Op& op) {
  std::vector<device::Array> arrays;
  std::vector<View> views;
  for (const Tensor& t : init) {
    arrays.push_back(be.alloc(t.numel(), Element::kF32));
    be.upload(arrays.back(), t.values());
    views.push_back(arrays.back().view(t.dim(0), t.dim(1)));
  }
  op(be, views);
  std::vector<Tensor> out;
  for (std::size_t i = 0; i < init.size(); ++i) {
    out.emplace_back(init[i].shape());
    const std::vector<float> got = be.download(arrays[i]);
    std::copy(got.begin(), got.end(), out.back().values().begin());
  }
  return out;
}

struct Case {
  const char* name;
  std::vector<Tensor> init;
  Op op;
  std::vector<std::pair<int, Tensor>> want;  // buffer index → the op's direct result
};

constexpr std::int64_t kB = 2, kT = 5, kNH = 2, kHD = 4, kC = kNH * kHD, kN = kB * kT;
constexpr std::int64_t kNKV = 1, kF = 6;

std::vector<Case> cases() {
  std::vector<Case> all;
  const Tensor x = uniform_tensor({kN, kF}, 1), dy = uniform_tensor({kN, kF}, 2);
  const Tensor bias = uniform_tensor({1, kF}, 3), dx0 = uniform_tensor({kN, kF}, 4);
  {
    Tensor y({kN, kF}), pre = x;
    bias_gelu_forward(y.matrix(), pre.matrix(), bias.values());
    all.push_back(
        {"bias_gelu",
         {Tensor({kN, kF}), x, bias},
         [](device::Backend& be, const std::vector<View>& v) { be.bias_gelu(v[0], v[1], v[2]); },
         {{0, y}, {1, pre}}});
  }
  {
    Tensor y({kN, kF});
    gelu_forward(y.matrix(), x.matrix());
    all.push_back(
        {"gelu_forward",
         {Tensor({kN, kF}), x},
         [](device::Backend& be, const std::vector<View>& v) { be.gelu_forward(v[0], v[1]); },
         {{0, y}}});
    all.push_back(
        {"residual_grad",
         {Tensor({kN, kF}), dy},
         [](device::Backend& be, const std::vector<View>& v) { be.residual_grad(v[0], v[1]); },
         {{0, dy}}});
  }
  {
    Tensor dx = dx0;
    gelu_backward(dx.matrix(), x.matrix(), dy.matrix());
    all.push_back({"gelu_backward",
                   {dx0, x, dy},
                   [](device::Backend& be, const std::vector<View>& v) {
                     be.gelu_backward(v[0], v[1], v[2]);
                   },
                   {{0, dx}}});
  }
  {
    const Tensor x2 = uniform_tensor({kN, 2 * kF}, 5), dx2_0 = uniform_tensor({kN, 2 * kF}, 6);
    Tensor y({kN, kF}), dx2 = dx2_0;
    swiglu_forward(y.matrix(), x2.matrix());
    swiglu_backward(dx2.matrix(), x2.matrix(), dy.matrix());
    all.push_back(
        {"swiglu_forward",
         {Tensor({kN, kF}), x2},
         [](device::Backend& be, const std::vector<View>& v) { be.swiglu_forward(v[0], v[1]); },
         {{0, y}}});
    all.push_back({"swiglu_backward",
                   {dx2_0, x2, dy},
                   [](device::Backend& be, const std::vector<View>& v) {
                     be.swiglu_backward(v[0], v[1], v[2]);
                   },
                   {{0, dx2}}});
  }
  {
    const Tensor qkv = uniform_tensor({kN, 3 * kC}, 7), dout = uniform_tensor({kN, kC}, 8);
    const Tensor dqkv0 = uniform_tensor({kN, 3 * kC}, 9);
    Tensor out({kN, kC}), att({1, attention_att_size(kB, kT, kNH)}), dqkv = dqkv0;
    Tensor scratch({1, attention_scratch_size(kT)});
    attention_forward(out.matrix(), att.values(), qkv.matrix(), kB, kT, kNH);
    attention_backward(dqkv.matrix(), scratch.values(), dout.matrix(), qkv.matrix(), att.values(),
                       kB, kT, kNH);
    all.push_back({"attention_core_forward",
                   {Tensor(out.shape()), Tensor(att.shape()), qkv},
                   [](device::Backend& be, const std::vector<View>& v) {
                     be.attention_core_forward(v[0], v[1], v[2], kB, kT, kNH);
                   },
                   {{0, out}, {1, att}}});
    all.push_back({"attention_core_backward",
                   {dqkv0, Tensor(scratch.shape()), dout, qkv, att},
                   [](device::Backend& be, const std::vector<View>& v) {
                     be.attention_core_backward(v[0], v[1], v[2], v[3], v[4], kB, kT, kNH);
                   },
                   {{0, dqkv}}});
  }
  {
    const std::int64_t width = (kNH + 2 * kNKV) * kHD;
    const Tensor qkv = uniform_tensor({kN, width}, 10), dout = uniform_tensor({kN, kC}, 11);
    const Tensor dqkv0 = uniform_tensor({kN, width}, 12);
    const std::int64_t scratch_n =
        cpu_backend().flash_attention_qkv_scratch(kB, kT, kNH, kNKV, kHD);
    Tensor out({kN, kC}), lse({1, kB * kNH * kT}), scratch({1, scratch_n}), dqkv = dqkv0;
    flash_attention_forward_qkv(out.matrix(), lse.values(), scratch.values(), qkv.matrix(), kB, kT,
                                kNH, kNKV);
    flash_attention_backward_qkv(dqkv.matrix(), scratch.values(), dout.matrix(), qkv.matrix(),
                                 out.matrix(), lse.values(), kB, kT, kNH, kNKV);
    all.push_back({"flash_attention_qkv_forward",
                   {Tensor(out.shape()), Tensor(lse.shape()), Tensor(scratch.shape()), qkv},
                   [](device::Backend& be, const std::vector<View>& v) {
                     be.flash_attention_qkv_forward(v[0], v[1], v[2], v[3], kB, kT, kNH, kNKV);
                   },
                   {{0, out}, {1, lse}}});
    all.push_back({"flash_attention_qkv_backward",
                   {dqkv0, Tensor(scratch.shape()), dout, qkv, out, lse},
                   [](device::Backend& be, const std::vector<View>& v) {
                     be.flash_attention_qkv_backward(v[0], v[1], v[2], v[3], v[4], v[5], kB, kT,
                                                     kNH, kNKV);
                   },
                   {{0, dqkv}}});
  }
  {
    // A ring step's call: kT query rows at position 6 against kTk key rows at position 3, so
    // the first keys are seen by every row and the last by some (the causal edge inside the
    // range), then the partial result merged into a running one.
    constexpr std::int64_t kTk = 7;
    const FlashAttention a{.batch = kB, .heads = kNH, .kv_heads = kNKV, .q_pos = 6, .k_pos = 3};
    const Tensor q = uniform_tensor({kN, kC}, 20), k = uniform_tensor({kB * kTk, kNKV * kHD}, 21);
    const Tensor v = uniform_tensor({kB * kTk, kNKV * kHD}, 22),
                 dout = uniform_tensor({kN, kC}, 23);
    const Tensor dq0 = uniform_tensor({kN, kC}, 24), dk0 = uniform_tensor(k.shape(), 25);
    const Tensor dv0 = uniform_tensor(v.shape(), 26);
    const std::int64_t scratch_n = cpu_backend().flash_attention_scratch(a, kT, kTk, kHD);
    Tensor out({kN, kC}), lse({1, kB * kNH * kT}), scratch({1, scratch_n});
    Tensor dq = dq0, dk = dk0, dv = dv0;
    flash_attention_forward(out.matrix(), lse.values(), scratch.values(), q.matrix(), k.matrix(),
                            v.matrix(), a);
    flash_attention_backward(dq.matrix(), dk.matrix(), dv.matrix(), scratch.values(), dout.matrix(),
                             q.matrix(), k.matrix(), v.matrix(), out.matrix(), lse.values(), a);
    all.push_back({"flash_attention_forward (positions)",
                   {Tensor(out.shape()), Tensor(lse.shape()), Tensor(scratch.shape()), q, k, v},
                   [a](device::Backend& be, const std::vector<View>& x) {
                     be.flash_attention_forward(x[0], x[1], x[2], x[3], x[4], x[5], a);
                   },
                   {{0, out}, {1, lse}}});
    all.push_back({"flash_attention_backward (positions)",
                   {dq0, dk0, dv0, Tensor(scratch.shape()), dout, q, k, v, out, lse},
                   [a](device::Backend& be, const std::vector<View>& x) {
                     be.flash_attention_backward(x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7],
                                                 x[8], x[9], a);
                   },
                   {{0, dq}, {1, dk}, {2, dv}}});
    const Tensor running = uniform_tensor({kN, kC}, 27),
                 running_lse = uniform_tensor(lse.shape(), 28);
    Tensor merged = running, merged_lse = running_lse;
    flash_attention_merge(merged.matrix(), merged_lse.values(), out.matrix(), lse.values(), a);
    all.push_back({"flash_attention_merge",
                   {running, running_lse, out, lse},
                   [a](device::Backend& be, const std::vector<View>& x) {
                     be.flash_attention_merge(x[0], x[1], x[2], x[3], a);
                   },
                   {{0, merged}, {1, merged_lse}}});
  }
  {
    // Rows by index (the mixture of experts' permutations and combine): a gather with factors
    // naming one row twice, and a scatter-add where rows 1 and 3 collect two sources each.
    static const std::vector<std::int64_t> gather_index{5, 0, 0, 3},
        scatter_index{1, 3, 0, 1, 3, 2};
    static const std::vector<float> gather_scale{0.5f, -1.0f, 2.0f, 1.0f},
        scatter_scale{1.0f, 2.0f, -0.5f, 0.25f, 3.0f, 1.0f};
    const Tensor src = uniform_tensor({6, kF}, 30), base = uniform_tensor({4, kF}, 31);
    Tensor gathered({4, kF}), scattered = base;
    for (std::int64_t i = 0; i < 4; ++i) {
      for (std::int64_t c = 0; c < kF; ++c) {
        gathered.matrix()(i, c) = gather_scale[i] * src.matrix()(gather_index[i], c);
      }
    }
    for (std::int64_t i = 0; i < 6; ++i) {
      for (std::int64_t c = 0; c < kF; ++c) {
        scattered.matrix()(scatter_index[i], c) += scatter_scale[i] * src.matrix()(i, c);
      }
    }
    all.push_back({"gather_rows",
                   {Tensor({4, kF}), src},
                   [](device::Backend& be, const std::vector<View>& v) {
                     be.gather_rows(v[0], v[1], gather_index, gather_scale);
                   },
                   {{0, gathered}}});
    all.push_back({"scatter_add_rows",
                   {base, src},
                   [](device::Backend& be, const std::vector<View>& v) {
                     be.scatter_add_rows(v[0], v[1], scatter_index, scatter_scale);
                   },
                   {{0, scattered}}});
  }
  return all;
}

TEST(BackendLayerOps, TheCpuBackendsAreTheOpsAndTheStandInGivesTheSameBits) {
  testing::InvertedBackend stand_in;
  for (const Case& c : cases()) {
    const std::vector<Tensor> cpu = run(cpu_backend(), c.init, c.op);
    for (const auto& [index, want] : c.want) {
      EXPECT_EQ(max_abs_diff(cpu[index].values(), want.values()), 0.0)
          << c.name << ", buffer " << index;
    }
    const std::vector<Tensor> dev = run(stand_in, c.init, c.op);
    for (std::size_t i = 0; i < cpu.size(); ++i) {
      EXPECT_EQ(max_abs_diff(dev[i].values(), cpu[i].values()), 0.0) << c.name << ", buffer " << i;
    }
  }
}

TEST(BackendLayerOps, ActivationsOnStridedViewsLeaveThePaddingAlone) {
  // y and dx live in wider matrices (ld = 2·cols + 3); the columns beyond keep a sentinel.
  constexpr float kSentinel = -7.0f;
  const Tensor x = uniform_tensor({kN, 2 * kF}, 13), dy = uniform_tensor({kN, kF}, 14);
  Tensor wide({kN, 2 * (2 * kF) + 3}, kSentinel);
  const View dx = host_view(wide.matrix()).block(0, 0, kN, 2 * kF);
  cpu_backend().zero(dx);
  cpu_backend().swiglu_backward(dx, host_view(x.matrix()), host_view(dy.matrix()));
  Tensor want({kN, 2 * kF});
  swiglu_backward(want.matrix(), x.matrix(), dy.matrix());
  for (std::int64_t i = 0; i < kN; ++i) {
    for (std::int64_t j = 0; j < wide.dim(1); ++j) {
      const float got = wide.matrix()(i, j);
      if (j < 2 * kF) {
        EXPECT_EQ(got, want.matrix()(i, j)) << i << ", " << j;
      } else {
        EXPECT_EQ(got, kSentinel) << i << ", " << j;
      }
    }
  }
}

TEST(BackendLayerOps, TooSmallSavedBuffersAreRefusedNamingThem) {
  const Tensor qkv({kN, 3 * kC});
  Tensor out({kN, kC}), att({1, 7});
  EXPECT_EQ(test_support::error_of([&] {
              cpu_backend().attention_core_forward(host_view(out.matrix()), host_view(att.matrix()),
                                                   host_view(qkv.matrix()), kB, kT, kNH);
            }),
            "cpu backend: att is fp32 1x7 (ld 7), the op needs 100 packed fp32 elements");
}

// row_dots: a[index[i]]·b[i] summed in double, the stand-in's equal to the CPU's; and an
// index outside the rows it names, or a list of the wrong length, is refused naming it.
TEST(BackendLayerOps, RowDotsAndTheRefusalsOfBadIndices) {
  const Tensor a = uniform_tensor({3, kF}, 40), b = uniform_tensor({4, kF}, 41);
  const std::vector<std::int64_t> index{2, 0, 2, 1};
  const std::vector<float> got =
      cpu_backend().row_dots(host_view(a.matrix()), index, host_view(b.matrix()));
  ASSERT_EQ(got.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    double want = 0;
    for (std::int64_t c = 0; c < kF; ++c) {
      want += static_cast<double>(a.matrix()(index[i], c)) *
              b.matrix()(static_cast<std::int64_t>(i), c);
    }
    EXPECT_EQ(got[i], static_cast<float>(want)) << i;
  }
  testing::InvertedBackend stand_in;
  const std::vector<Tensor> init{a, b};
  std::vector<float> on_device;
  (void)run(stand_in, init, [&](device::Backend& be, const std::vector<View>& v) {
    on_device = be.row_dots(v[0], index, v[1]);
  });
  EXPECT_EQ(on_device, got);
  Tensor dst({4, kF});
  EXPECT_EQ(test_support::error_of([&] {
              cpu_backend().gather_rows(host_view(dst.matrix()), host_view(a.matrix()),
                                        std::vector<std::int64_t>{0, 1, 3, 2}, {});
            }),
            "gather_rows: index 3 at position 2 is outside [0, 3)");
  EXPECT_EQ(test_support::error_of([&] {
              cpu_backend().scatter_add_rows(host_view(a.matrix()), host_view(b.matrix()),
                                             std::vector<std::int64_t>{0, 1}, {});
            }),
            "scatter_add_rows: fp32 4x6 (ld 6) and fp32 3x6 (ld 6) with 2 indices and 0 scales "
            "(an index per row of the first, one type and width)");
}

}  // namespace
}  // namespace meshtp
