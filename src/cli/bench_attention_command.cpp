// meshtp bench attention — the fused causal attention (ops/flash_attention.hpp) against
// today's attention (ops/attention.hpp) in the same process: validated first (the fused out
// and dqkv equal today's), then forward and backward ms (medians; max over ranks when several
// run at once), their ratio, and each one's working memory (bench/attention.hpp).
//
//   meshtp bench attention --seq 2048 --heads 8 --kv-heads 8 --head-dim 64 --batch 1
//   meshtp bench attention --seq 32768 --heads 1 --kv-heads 1 --no-baseline   (O(T) memory)
#include <fmt/format.h>

#include <array>
#include <nlohmann/json.hpp>

#include "bench/attention.hpp"
#include "cli/commands.hpp"
#include "core/error.hpp"
#include "ops/kernels.hpp"
#include "tensor/memory.hpp"

namespace meshtp::cli {
namespace {

struct BenchAttentionArgs {
  bench::AttentionBenchOptions o;
  std::int64_t kv_heads = 0;  // not given: as many as --heads
  const CLI::Option* kv_heads_option = nullptr;
  bool json = false, no_baseline = false;
};

double mib(std::int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

void run_bench_attention(BenchAttentionArgs a) {
  a.o.baseline = !a.no_baseline;
  a.o.kv_heads = a.kv_heads_option->count() > 0 ? a.kv_heads : a.o.heads;
  bench::AttentionBenchSample s = bench::run_attention_bench(a.o);
  std::array<double, 4> t{s.fused.forward_s, s.fused.backward_s, s.today.forward_s,
                          s.today.backward_s};
  world().all_reduce(std::span<double>(t), comm::ReduceOp::kMax);
  s.fused.forward_s = t[0];
  s.fused.backward_s = t[1];
  s.today.forward_s = t[2];
  s.today.backward_s = t[3];
  const double fused_s = s.fused.forward_s + s.fused.backward_s;
  const double today_s = s.today.forward_s + s.today.backward_s;
  const double speedup = a.o.baseline && fused_s > 0 ? today_s / fused_s : 0.0;
  const auto& o = a.o;
  std::ostream& os = out();
  if (a.json) {
    const auto variant = [](const bench::AttentionVariant& v) {
      return nlohmann::json{{"forward_s", v.forward_s},
                            {"backward_s", v.backward_s},
                            {"working_bytes", v.working_bytes},
                            {"peak_bytes", v.peak_bytes},
                            {"gflop", v.flops / 1e9}};
    };
    nlohmann::json j{{"bench", "attention"},
                     {"batch", o.batch},
                     {"seq", o.seq},
                     {"heads", o.heads},
                     {"kv_heads", o.kv_heads},
                     {"head_dim", o.head_dim},
                     {"block_q", o.block_q},
                     {"block_k", o.block_k},
                     {"ranks", world().size()},
                     {"kernels", kernels::fast().name},
                     {"iterations", s.iterations},
                     {"checked_seq", s.checked_seq},
                     {"max_relative_error", s.max_relative_error},
                     {"shared_bytes", s.shared_bytes},
                     {"fused", variant(s.fused)},
                     {"max_rss_bytes", max_rss_bytes()}};
    if (o.baseline) {
      j["today"] = variant(s.today);
      j["speedup"] = speedup;
    }
    os << j.dump() << '\n';
    return;
  }
  os << fmt::format(
      "causal attention core: B={} s={} NH={} NKV={} HD={} fp32, {} rank(s) at once; fused tiles "
      "{}x{}; median of {} iterations (max over ranks)\n",
      o.batch, o.seq, o.heads, o.kv_heads, o.head_dim, world().size(), o.block_q, o.block_k,
      s.iterations);
  os << fmt::format("check: fused vs today's, out and dqkv at s={}: max relative error {:.1e}\n",
                    s.checked_seq, s.max_relative_error);
  os << fmt::format("{:<8} {:>10} {:>10} {:>10} {:>8} {:>14} {:>12}\n", "op", "fwd ms", "bwd ms",
                    "total ms", "GFLOP", "working MiB", "peak MiB");
  const auto row = [&](const char* name, const bench::AttentionVariant& v) {
    os << fmt::format("{:<8} {:>10.2f} {:>10.2f} {:>10.2f} {:>8.2f} {:>14.2f} {:>12.1f}\n", name,
                      v.forward_s * 1e3, v.backward_s * 1e3, (v.forward_s + v.backward_s) * 1e3,
                      v.flops / 1e9, mib(v.working_bytes), mib(v.peak_bytes));
  };
  row("fused", s.fused);
  if (o.baseline) {
    row("today", s.today);
    os << fmt::format("speedup (today / fused, forward + backward): {:.2f}x\n", speedup);
  } else {
    os << fmt::format(
        "today's attention not run (--no-baseline): its att and scratch would be "
        "{:.1f} MiB\n",
        mib(static_cast<std::int64_t>(sizeof(float)) * (o.batch * o.heads + 1) * o.seq * o.seq));
  }
  os << fmt::format(
      "shared buffers (qkv, dout, out, dqkv) {:.1f} MiB; process max RSS {:.1f} MiB\n",
      mib(s.shared_bytes), mib(max_rss_bytes()));
}

}  // namespace

void add_bench_attention_command(CLI::App& app) {
  CLI::App* bench = app.get_subcommand("bench");  // registered by add_bench_command
  auto args = std::make_shared<BenchAttentionArgs>();
  CLI::App* c = bench->add_subcommand(
      "attention",
      "Fused causal attention vs today's attention core: validated, then forward "
      "and backward ms, their ratio and each one's memory");
  c->add_option("--seq", args->o.seq, "Tokens per sequence")->capture_default_str();
  c->add_option("--heads", args->o.heads, "Query heads")->capture_default_str();
  args->kv_heads_option =
      c->add_option("--kv-heads", args->kv_heads,
                    "Key/value heads, dividing --heads (default: --heads, multi-head attention)");
  c->add_option("--head-dim", args->o.head_dim, "Head dim")->capture_default_str();
  c->add_option("--batch", args->o.batch, "Sequences")->capture_default_str();
  c->add_option("--block-q", args->o.block_q, "Fused op: query rows per tile")
      ->capture_default_str();
  c->add_option("--block-k", args->o.block_k, "Fused op: keys per tile")->capture_default_str();
  c->add_option("--seconds", args->o.target_seconds, "Target time per variant")
      ->capture_default_str();
  c->add_option("--min-iterations", args->o.min_iterations, "Timed iterations at least")
      ->capture_default_str();
  c->add_flag("--no-baseline", args->no_baseline,
              "Time the fused op only (today's T×T buffers would not fit); validate on the first "
              "--check-seq tokens");
  c->add_option("--check-seq", args->o.check_seq, "Tokens validated with --no-baseline")
      ->capture_default_str();
  c->add_flag("--json", args->json, "One JSON object");
  c->callback([args] { run_bench_attention(*args); });
}

}  // namespace meshtp::cli
