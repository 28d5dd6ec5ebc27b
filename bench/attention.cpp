#include "bench/attention.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "core/error.hpp"
#include "core/stats.hpp"
#include "ops/attention.hpp"
#include "ops/flash_attention.hpp"
#include "tensor/gemm.hpp"
#include "tensor/memory.hpp"
#include "tensor/random.hpp"

namespace meshtp::bench {
namespace {

constexpr double kMaxError = 1e-4;

double timed(const std::function<void()>& f) {
  const double t0 = now_seconds();
  f();
  return now_seconds() - t0;
}

// Packed qkv (B·T, (NH + 2·NKV)·HD) → today's layout (B·T, 3·NH·HD), KV head g repeated for
// query heads g·G … g·G + G − 1.
Tensor repeat_kv(const Tensor& qkv, std::int64_t NH, std::int64_t NKV, std::int64_t HD) {
  const std::int64_t rows = qkv.dim(0), G = NH / NKV, Cq = NH * HD, Ckv = NKV * HD;
  Tensor wide({rows, 3 * Cq});
  copy(qkv.matrix().block(0, 0, rows, Cq), wide.matrix().block(0, 0, rows, Cq));
  for (std::int64_t h = 0; h < NH; ++h) {
    for (std::int64_t part = 1; part <= 2; ++part) {
      copy(qkv.matrix().block(0, Cq + (part - 1) * Ckv + (h / G) * HD, rows, HD),
           wide.matrix().block(0, part * Cq + h * HD, rows, HD));
    }
  }
  return wide;
}

// Today's dqkv of the repeated layout → the packed layout's (dK, dV summed over each group).
Tensor fold_kv(const Tensor& dwide, std::int64_t NH, std::int64_t NKV, std::int64_t HD) {
  const std::int64_t rows = dwide.dim(0), G = NH / NKV, Cq = NH * HD, Ckv = NKV * HD;
  Tensor d({rows, Cq + 2 * Ckv});
  copy(dwide.matrix().block(0, 0, rows, Cq), d.matrix().block(0, 0, rows, Cq));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t h = 0; h < NH; ++h) {
      for (std::int64_t part = 1; part <= 2; ++part) {
        const float* src = dwide.data() + r * 3 * Cq + part * Cq + h * HD;
        float* dst = d.data() + r * (Cq + 2 * Ckv) + Cq + (part - 1) * Ckv + (h / G) * HD;
        for (std::int64_t e = 0; e < HD; ++e) dst[e] += src[e];
      }
    }
  }
  return d;
}

// One variant's buffers and its forward and backward.
struct Runner {
  virtual ~Runner() = default;
  virtual void forward() = 0;
  virtual void backward() = 0;
  virtual const Tensor& out() const = 0;
  virtual Tensor dqkv() const = 0;  // in the packed layout
};

struct FusedRunner final : Runner {
  const Tensor& qkv;
  const Tensor& dout;
  std::int64_t B, T, NH, NKV, HD;
  FlashAttention a;
  Tensor o, lse, scratch, d;
  FusedRunner(const Tensor& qkv_, const Tensor& dout_, const AttentionBenchOptions& opt,
              std::int64_t T_)
      : qkv(qkv_),
        dout(dout_),
        B(opt.batch),
        T(T_),
        NH(opt.heads),
        NKV(opt.kv_heads),
        HD(opt.head_dim),
        a{.batch = B, .heads = NH, .kv_heads = NKV, .block_q = opt.block_q, .block_k = opt.block_k},
        o({B * T, NH * HD}),
        lse({B * NH * T}),
        scratch({flash_attention_scratch_size(a, T, T, HD)}),
        d(qkv.shape()) {}
  void forward() override {
    const ConstMatrixView m = qkv.matrix();
    const std::int64_t rows = B * T, Cq = NH * HD, Ckv = NKV * HD;
    flash_attention_forward(o.matrix(), lse.values(), scratch.values(), m.block(0, 0, rows, Cq),
                            m.block(0, Cq, rows, Ckv), m.block(0, Cq + Ckv, rows, Ckv), a);
  }
  void backward() override {
    const ConstMatrixView m = qkv.matrix();
    const MatrixView dm = d.matrix();
    const std::int64_t rows = B * T, Cq = NH * HD, Ckv = NKV * HD;
    flash_attention_backward(dm.block(0, 0, rows, Cq), dm.block(0, Cq, rows, Ckv),
                             dm.block(0, Cq + Ckv, rows, Ckv), scratch.values(), dout.matrix(),
                             m.block(0, 0, rows, Cq), m.block(0, Cq, rows, Ckv),
                             m.block(0, Cq + Ckv, rows, Ckv), o.matrix(), lse.values(), a);
  }
  const Tensor& out() const override { return o; }
  Tensor dqkv() const override { return d; }
};

// Today's attention: on qkv itself for multi-head attention, on its KV-repeated copy for
// grouped-query attention (the copy counts as this variant's working memory).
struct TodayRunner final : Runner {
  const Tensor& dout;
  std::int64_t B, T, NH, NKV, HD;
  std::optional<Tensor> wide;
  const Tensor& qkv;
  Tensor o, att, scratch, d;
  TodayRunner(const Tensor& qkv_, const Tensor& dout_, const AttentionBenchOptions& opt,
              std::int64_t T_)
      : dout(dout_),
        B(opt.batch),
        T(T_),
        NH(opt.heads),
        NKV(opt.kv_heads),
        HD(opt.head_dim),
        wide(NKV == NH ? std::nullopt : std::optional<Tensor>(repeat_kv(qkv_, NH, NKV, HD))),
        qkv(wide ? *wide : qkv_),
        o({B * T, NH * HD}),
        att({attention_att_size(B, T, NH)}),
        scratch({attention_scratch_size(T)}),
        d(qkv.shape()) {}
  void forward() override { attention_forward(o.matrix(), att.values(), qkv.matrix(), B, T, NH); }
  void backward() override {
    attention_backward(d.matrix(), scratch.values(), dout.matrix(), qkv.matrix(), att.values(), B,
                       T, NH);
  }
  const Tensor& out() const override { return o; }
  Tensor dqkv() const override { return NKV == NH ? d : fold_kv(d, NH, NKV, HD); }
};

struct Inputs {
  Tensor qkv, dout;
  Inputs(const AttentionBenchOptions& o, std::int64_t T)
      : qkv(uniform_tensor({o.batch * T, (o.heads + 2 * o.kv_heads) * o.head_dim}, 61)),
        dout(uniform_tensor({o.batch * T, o.heads * o.head_dim}, 62)) {}
};

// Fused against today's on T tokens per sequence: the max relative error of out and dqkv.
double validate(const AttentionBenchOptions& o, std::int64_t T) {
  const Inputs in(o, T);
  FusedRunner fused(in.qkv, in.dout, o, T);
  TodayRunner today(in.qkv, in.dout, o, T);
  for (Runner* r : {static_cast<Runner*>(&fused), static_cast<Runner*>(&today)}) {
    r->forward();
    r->backward();
  }
  return std::max(max_relative_error(fused.out().values(), today.out().values()),
                  max_relative_error(fused.dqkv().values(), today.dqkv().values()));
}

}  // namespace

AttentionBenchSample run_attention_bench(const AttentionBenchOptions& o) {
  MESHTP_CHECK(o.batch >= 1 && o.seq >= 1 && o.heads >= 1 && o.kv_heads >= 1 && o.head_dim >= 1,
               "bench attention: --batch {}, --seq {}, --heads {}, --kv-heads {}, --head-dim {} "
               "must all be positive",
               o.batch, o.seq, o.heads, o.kv_heads, o.head_dim);
  MESHTP_CHECK(o.heads % o.kv_heads == 0,
               "bench attention: --heads {} is not a multiple of --kv-heads {}", o.heads,
               o.kv_heads);
  MESHTP_CHECK(o.block_q >= 1 && o.block_k >= 1,
               "bench attention: --block-q {} and --block-k {} must be positive", o.block_q,
               o.block_k);
  MESHTP_CHECK(o.target_seconds > 0 && o.min_iterations >= 1,
               "bench attention: --seconds {} and iterations {} must be positive", o.target_seconds,
               o.min_iterations);
  AttentionBenchSample s;
  // Validate first: on the whole shape when today's attention runs, else on a prefix.
  s.checked_seq = o.baseline ? o.seq : std::min(o.seq, o.check_seq);
  s.max_relative_error = validate(o, s.checked_seq);
  MESHTP_CHECK(s.max_relative_error <= kMaxError,
               "bench attention: the fused attention differs from today's by {} (max relative "
               "error of out and dqkv, s={}), more than {}",
               s.max_relative_error, s.checked_seq, kMaxError);

  const std::int64_t shared_before = tensor_bytes();
  const Inputs in(o, o.seq);
  // qkv and dout, and the out and dqkv each variant allocates alike
  s.shared_bytes = 2 * (tensor_bytes() - shared_before);
  const auto make = [&](bool fused) -> std::unique_ptr<Runner> {
    if (fused) return std::make_unique<FusedRunner>(in.qkv, in.dout, o, o.seq);
    return std::make_unique<TodayRunner>(in.qkv, in.dout, o, o.seq);
  };
  // Memory: each variant alone, built and run once (its warm-up), its working bytes being what
  // it allocated beyond out and dqkv (counted in shared_bytes), its peak with the inputs.
  // Then the timing runs both, interleaved.
  std::vector<bool> kinds{true};
  if (o.baseline) kinds.push_back(false);
  double once = 0;
  for (const bool fused : kinds) {
    AttentionVariant& v = fused ? s.fused : s.today;
    const std::int64_t before = tensor_bytes();
    reset_tensor_peak();
    const ComputeLedger ledger = compute_ledger();
    {
      const std::unique_ptr<Runner> r = make(fused);
      v.working_bytes = tensor_bytes() - before -
                        static_cast<std::int64_t>(sizeof(float)) *
                            (r->out().numel() + in.qkv.numel());  // less its out and dqkv
      once += timed([&] {
        r->forward();
        r->backward();
      });
      v.flops = compute_ledger().flops - ledger.flops;
    }
    v.peak_bytes = tensor_peak_bytes() - shared_before;
  }
  std::vector<std::unique_ptr<Runner>> runners;
  for (const bool fused : kinds) runners.push_back(make(fused));
  const int iterations =
      std::clamp(static_cast<int>(o.target_seconds / std::max(once, 1e-6)), o.min_iterations, 100);
  std::vector<std::vector<double>> fwd(runners.size()), bwd(runners.size());
  for (int i = 0; i < iterations; ++i) {
    for (std::size_t k = 0; k < runners.size(); ++k) {
      fwd[k].push_back(timed([&] { runners[k]->forward(); }));
      bwd[k].push_back(timed([&] { runners[k]->backward(); }));
    }
  }
  s.iterations = iterations;
  for (std::size_t k = 0; k < runners.size(); ++k) {
    AttentionVariant& v = kinds[k] ? s.fused : s.today;
    v.forward_s = median(fwd[k]);
    v.backward_s = median(bwd[k]);
  }
  return s;
}

}  // namespace meshtp::bench
