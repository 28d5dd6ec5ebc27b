// The planner's memory model (plan/memory.hpp) against what a training run allocates: for the
// `tiny` and `tiny-llama` presets on every layout of the world — recompute none/selective/full × pp
// 1/2 × ZeRO 0–3 × every (dp, d1, d2) that fills the ranks, plus Megatron-SP and a 2D GeMM mesh —
// each rank's predicted bytes are within 10% of its measured tensor high-water mark
// (TrainSummary::tensor_peak_bytes) over a step and an evaluation. On 4 ranks (the 2D and
// 4-way meshes) the sweep skips what 1 and 2 ranks cover (selective, ZeRO 1 and 2) to stay
// a few seconds. Measured: every ATP layout within 2% (the model counts the runtime's tensors
// one by one); the five 2D GeMM algorithms on 2x2 at 0.93–0.98 (their buffers counted as the
// largest one GeMM asks for; the runtime's one workspace keeps each buffer slot's largest).
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <span>
#include <string>

#include "plan/memory.hpp"
#include "plan/presets.hpp"
#include "train/trainer.hpp"

namespace meshtp::train {
namespace {

namespace fs = std::filesystem;
using layout::Recompute;
using layout::Schedule;

std::vector<layout::Plan> layouts(int n, Recompute recompute) {
  std::vector<layout::Plan> out;
  for (const int pp : {1, 2}) {
    if (n % pp != 0) continue;
    for (int dp = 1; dp <= n / pp; ++dp) {
      if (n / pp % dp != 0) continue;
      const int tp = n / pp / dp;
      for (int d1 = 1; d1 <= tp; ++d1) {
        if (tp % d1 != 0) continue;
        for (int zero = 0; zero <= (dp > 1 ? 3 : 0); ++zero) {
          if (n > 2 && zero == 1) zero = 3;  // 4 ranks: stages 1 and 2 are covered on 2
          layout::Plan p{.dp = dp,
                         .pp = pp,
                         .microbatches = pp == 1 ? 1 : 2,
                         .schedule = zero % 2 == 0 ? Schedule::k1F1B : Schedule::kGpipe,
                         .zero = zero,
                         .recompute = recompute,
                         .mesh = {d1, tp / d1}};
          out.push_back(p);
          if (tp / d1 == 1 && d1 > 1 && zero == 0) {
            p.sequence_parallel = true;  // Megatron-SP keeps its LayerNorm outputs gathered
            out.push_back(p);
          }
        }
      }
    }
  }
  if (n == 4) {  // a 2D GeMM block (every tensor [n/d1, h/d2]), each algorithm
    for (const auto strategy :
         {layout::Strategy::kSumma, layout::Strategy::kMeshSlice, layout::Strategy::kWang,
          layout::Strategy::kCollective, layout::Strategy::kCannon}) {
      layout::Plan p{.recompute = recompute, .mesh = {2, 2}, .strategy = strategy};
      if (strategy == layout::Strategy::kMeshSlice) {
        for (layout::LinearPlan& l : p.linears) l.gemm2d.slices = 2;
      }
      out.push_back(p);
    }
  }
  return out;
}

class MemoryModel : public ::testing::Test {
 protected:
  void SetUp() override {
    int pid = static_cast<int>(::getpid());
    world_.broadcast(std::span<int>(&pid, 1), 0);
    dir_ = fs::temp_directory_path() / fmt::format("meshtp_memory_{}_{}", world_.size(), pid);
    if (world_.rank() == 0) {
      fs::create_directories(dir_);
      std::ofstream text(dir_ / "corpus.txt");
      for (int i = 0; i < 400; ++i) text << "memory, measured " << i * 7919 % 1000 << " times\n";
    }
    world_.barrier();
  }
  void TearDown() override {
    world_.barrier();
    if (world_.rank() == 0) fs::remove_all(dir_);
  }
  // One training step of `shape` on `layout` over the corpus: its tensor high-water mark.
  TrainSummary one_step(const layout::ModelShape& shape, const layout::Plan& layout,
                        Precision precision = Precision::kFp32) {
    TrainConfig c;
    c.model = {.shape = shape, .layout = layout};
    c.precision = precision;
    c.steps = 1;
    c.warmup = 1;
    c.eval_every = 0;
    c.eval_batches = 1;
    c.data = (dir_ / "corpus.txt").string();
    return train(world_, c, [](const StepReport&) {});
  }
  comm::Communicator world_ = comm::Communicator::world();
  fs::path dir_;
};

TEST_F(MemoryModel, PredictedWithinFifteenPercentOfTheMeasuredHighWaterMark) {
  // tiny, and tiny-llama (RMSNorm, SwiGLU, RoPE, grouped-query attention, an untied head) on
  // the ATP layouts (the 2D GeMM blocks run GPT layers only).
  // tiny-llama with 2 KV heads: copied to each head block on 4 ranks.
  for (const std::string model : {"tiny", "tiny-llama", "tiny-llama kv_heads=2"}) {
    plan::ModelSpec spec = plan::load_model(model.substr(0, model.find(' ')));
    if (model.find("kv_heads=2") != std::string::npos) spec.kv_heads = 2;
    spec.precision = plan::Precision::kFp32;
    int runs = 0;
    double worst = 1.0;
    for (const Recompute recompute : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
      // 4 ranks: selective recomputation moves one buffer, covered on 1 and 2 ranks.
      if (world_.size() > 2 && recompute == Recompute::kSelective) continue;
      for (const layout::Plan& p : layouts(world_.size(), recompute)) {
        if (layout::is_gemm2d(p.strategy) && !spec.is_gpt()) continue;
        layout::ModelShape shape = spec;
        shape.vocab = 256;
        const TrainSummary s = one_step(shape, p);
        const int pipeline_rank = world_.rank() / (p.mesh[0] * p.mesh[1]) % p.pp;
        const double predicted = plan::rank_memory(spec, p, pipeline_rank).total_bytes();
        const double ratio = predicted / static_cast<double>(s.tensor_peak_bytes);
        EXPECT_NEAR(ratio, 1.0, 0.10)
            << fmt::format("{}", fmt::streamed(p)) << " on rank " << world_.rank() << ": predicted "
            << predicted << " B, measured " << s.tensor_peak_bytes << " B";
        worst = std::max(worst, std::max(ratio, 1.0 / ratio));
        if (world_.rank() == 0) {
          std::cout << fmt::format("{:.3f}  {} {}\n", ratio, model, fmt::streamed(p));
        }
        ++runs;
      }
    }
    EXPECT_GT(runs, 2);
    if (world_.rank() == 0) {
      std::cout << model << ": " << runs << " layouts, worst ratio " << worst << '\n';
    }
  }
}

// bf16 storage (model/block.hpp: the blocks' saved GeMM inputs in bf16, everything else fp32;
// parallel/moe.hpp: the experts' too) as the memory model prices it for this runtime under
// bf16 (plan::stored_operands, MoeFloats::operands), on the same layouts without and with
// full recomputation (tiny-moe, with a shared expert, and with every other layer dense: the
// layouts its experts run on, 1x1 and N x 1 under sequence parallelism, its routing forced
// to balance, which the model prices — the data's own
// routing moved the measured peak by up to 16% on a rank, in fp32 as in bf16): within 10% on
// every rank, and less than the fp32 run's wherever the model prices bf16 5% or more below
// fp32 (the GeMM weights' bf16 compute copies can outweigh what the operands save).
TEST_F(MemoryModel, Bf16StoragePredictedWithinTenPercent) {
  for (const std::string model :
       {"tiny", "tiny-llama", "tiny-moe", "tiny-moe shared", "tiny-moe every 2"}) {
    plan::ModelSpec spec = plan::load_model(model.substr(0, model.find(' ')));
    spec.precision = Precision::kBf16;
    if (model.ends_with("shared")) spec.shared_experts = 1;  // a dense MLP beside the experts
    if (model.ends_with("every 2")) {  // layers 0 and 2 MoE: one of each kind on 2 stages too
      spec.moe_every = 2;              // (the model's ⌈n/moe_every⌉ per stage, exact here)
      spec.layers = 4;
    }
    int runs = 0;
    for (const Recompute recompute : {Recompute::kNone, Recompute::kFull}) {
      for (const layout::Plan& p : layouts(world_.size(), recompute)) {
        if (layout::is_gemm2d(p.strategy) && !spec.is_gpt()) continue;
        if (spec.is_moe() && p.mesh[0] * p.mesh[1] > 1 && !p.sequence_parallel) continue;
        layout::ModelShape shape = spec;
        shape.vocab = 256;
        shape.moe_force_balance = spec.is_moe();
        const TrainSummary s = one_step(shape, p, Precision::kBf16);
        const int pipeline_rank = world_.rank() / (p.mesh[0] * p.mesh[1]) % p.pp;
        const double predicted =
            plan::rank_memory(spec, p.as_runtime_runs(spec), pipeline_rank).total_bytes();
        const double ratio = predicted / static_cast<double>(s.tensor_peak_bytes);
        EXPECT_NEAR(ratio, 1.0, 0.10)
            << model << " " << fmt::format("{}", fmt::streamed(p)) << " on rank " << world_.rank()
            << ": predicted " << predicted << " B, measured " << s.tensor_peak_bytes << " B";
        // bf16 operands take 2 bytes less an element, the weights' compute copies 2 more a
        // parameter: where the model prices a saving of 5% or more on every pipeline rank,
        // the run saves too (decided alike on every rank: the fp32 run is collective).
        plan::ModelSpec fp32 = spec;
        fp32.precision = Precision::kFp32;
        bool saves = true;
        for (int r = 0; r < p.pp; ++r) {
          saves =
              saves && plan::rank_memory(spec, p.as_runtime_runs(spec), r).total_bytes() <
                           0.95 * plan::rank_memory(fp32, p.as_runtime_runs(fp32), r).total_bytes();
        }
        if (saves) {
          EXPECT_LT(s.tensor_peak_bytes, one_step(shape, p).tensor_peak_bytes)
              << model << " " << fmt::format("{}", fmt::streamed(p));
        }
        if (world_.rank() == 0) {
          std::cout << fmt::format("{:.3f}  bf16 {} {}\n", ratio, model, fmt::streamed(p));
        }
        ++runs;
      }
    }
    EXPECT_GE(runs, 2);  // on 1 rank: 1x1 without and with full recomputation
  }
}

// Context parallelism: each cp rank's s/cp tokens (plan::cp_rank_model) and the
// context-parallel core's buffers (plan::cp_layer_floats), for tiny-llama and tiny (learned
// positions: the whole table) with the ring, the all-to-all and both, alone and with tensor
// (and sequence) parallelism, pipeline stages and ZeRO over dp·cp.
TEST_F(MemoryModel, ContextParallelPredictedWithinTenPercent) {
  const int n = world_.size();
  if (n < 2) GTEST_SKIP() << "context parallelism needs 2 ranks or more";
  using C = layout::CpComm;
  std::vector<layout::Plan> plans{{.attention = layout::Attention::kFused, .cp = n},
                                  {.attention = layout::Attention::kFused,
                                   .cp = n,
                                   .cp_comm = C::kA2a}};
  if (n == 4) {
    plans.push_back({.attention = layout::Attention::kFused, .cp = 4, .cp_comm = C::kA2aRing});
    plans.push_back({.mesh = {2, 1},
                     .sequence_parallel = true,
                     .attention = layout::Attention::kFused,
                     .cp = 2});
    plans.push_back({.pp = 2,
                     .microbatches = 2,
                     .schedule = Schedule::k1F1B,
                     .attention = layout::Attention::kFused,
                     .cp = 2,
                     .cp_comm = C::kA2a});
    plans.push_back({.dp = 2, .zero = 2, .attention = layout::Attention::kFused, .cp = 2});
  }
  double worst = 1.0;
  for (const std::string model : {"tiny-llama", "tiny"}) {
    plan::ModelSpec spec = plan::load_model(model);
    spec.precision = plan::Precision::kFp32;
    spec.vocab = 256;
    for (const layout::Plan& p : plans) {
      if (model == "tiny" && p.cp_comm != C::kRing && spec.heads % p.cp != 0) continue;
      const TrainSummary s = one_step(spec, p);
      const int pipeline_rank = world_.rank() / (p.mesh[0] * p.mesh[1] * p.cp) % p.pp;
      const double predicted =
          plan::rank_memory(plan::cp_rank_model(spec, p), p, pipeline_rank).total_bytes();
      const double ratio = predicted / static_cast<double>(s.tensor_peak_bytes);
      EXPECT_NEAR(ratio, 1.0, 0.10)
          << model << ' ' << fmt::format("{}", fmt::streamed(p)) << " on rank " << world_.rank()
          << ": predicted " << predicted << " B, measured " << s.tensor_peak_bytes << " B";
      worst = std::max(worst, std::max(ratio, 1.0 / ratio));
      if (world_.rank() == 0) {
        std::cout << fmt::format("{:.3f}  {} {}\n", ratio, model, fmt::streamed(p));
      }
    }
  }
  if (world_.rank() == 0) std::cout << "context parallelism: worst ratio " << worst << '\n';
}

// A mixture of experts folded over tp·cp with ZeRO 1–3 (dp 2 × cp 2): the experts' state
// sharded over dp, the rest over dp·cp (train/zero.hpp), priced as the runtime runs the plan.
TEST_F(MemoryModel, MixtureOfExpertsUnderContextParallelZeroPredictedWithinTenPercent) {
  if (world_.size() != 4) GTEST_SKIP() << "dp 2 × cp 2 needs 4 ranks";
  plan::ModelSpec spec = plan::load_model("tiny-moe");
  spec.precision = plan::Precision::kFp32;
  spec.vocab = 256;
  double worst = 1.0;
  for (const int zero : {1, 2, 3}) {
    const layout::Plan p{.dp = 2, .zero = zero, .attention = layout::Attention::kFused, .cp = 2};
    const TrainSummary s = one_step(spec, p);
    const double predicted =
        plan::rank_memory(plan::cp_rank_model(spec, p), p.as_runtime_runs(spec), 0).total_bytes();
    const double ratio = predicted / static_cast<double>(s.tensor_peak_bytes);
    EXPECT_NEAR(ratio, 1.0, 0.10) << "zero=" << zero << " on rank " << world_.rank()
                                  << ": predicted " << predicted << " B, measured "
                                  << s.tensor_peak_bytes << " B";
    worst = std::max(worst, std::max(ratio, 1.0 / ratio));
    if (world_.rank() == 0) std::cout << fmt::format("{:.3f}  tiny-moe zero={} dp 2 × cp 2\n", ratio, zero);
  }
  if (world_.rank() == 0) std::cout << "MoE under cp with ZeRO: worst ratio " << worst << '\n';
}

}  // namespace
}  // namespace meshtp::train
