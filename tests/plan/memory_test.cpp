// Memory model: the runtime's kept activations are Korthikanti et al.'s per-layer formulas
// without dropout; recomputation, pipeline buffers and ZeRO move the right terms.
#include <gtest/gtest.h>

#include <cmath>
#include <utility>

#include "core/error.hpp"
#include "plan/memory.hpp"
#include "plan/presets.hpp"

namespace meshtp::plan {
namespace {

using layout::Runtime;

ModelSpec gpt(int batch) {
  ModelSpec m = load_model("gpt3-175b");
  m.batch = batch;
  m.recompute = Recompute::kNone;
  return m;
}

layout::Plan tp(int d1, int d2, bool sp = false) {
  return {.mesh = {d1, d2}, .sequence_parallel = sp};
}

// The LayerNorm statistics (mean and 1/σ of both LayerNorms, 4 per token) the paper leaves out.
double ln_stats_bytes(const ModelSpec& m, double shards) {
  return 4.0 * m.seq * m.batch / shards * m.element_bytes();
}

TEST(Memory, MegatronTensorParallelIsKorthikantiWithoutDropout) {
  // Korthikanti §4.2.1 Eq. 2: sbh·(10 + 24/t + 5as/(ht)) bytes in fp16, of which dropout
  // takes 2·sbh (two masks) and 3·as²b/t (the attention mask and output).
  const ModelSpec m = gpt(1);
  const double s = m.seq, b = m.batch, h = m.hidden, a = m.heads;
  for (const int t : {1, 2, 8, 64}) {
    const double paper = s * b * h * (10 + 24.0 / t + 5 * a * s / (h * t));
    const double dropout = 2 * s * b * h + 3 * a * s * s * b / t;
    EXPECT_NEAR(layer_activation_bytes(m, tp(t, 1)) - ln_stats_bytes(m, 1), paper - dropout,
                1e-6 * paper)
        << t;
  }
}

TEST(Memory, SequenceParallelKeepsTheGatheredLayerNormOutputs) {
  // §4.2.2: sbh/t·(34 + 5as/h), less dropout, plus the two all-gathered LayerNorm outputs.
  const ModelSpec m = gpt(1);
  const double s = m.seq, b = m.batch, h = m.hidden, a = m.heads, t = 8;
  const double paper = s * b * h / t * (34 + 5 * a * s / h);
  const double dropout = (2 * s * b * h + 3 * a * s * s * b) / t;
  EXPECT_NEAR(layer_activation_bytes(m, tp(8, 1, true)) - ln_stats_bytes(m, t),
              paper - dropout + 4 * s * b * h, 1e-6 * paper);
}

// Megatron-LM (`--runtime megatron`) drops out: every Table 2 form of Korthikanti et al.
// exactly, per layer, plus the LayerNorm statistics.
TEST(Memory, MegatronLayerIsKorthikantiTable2) {
  const ModelSpec m = gpt(4);
  const double s = m.seq, b = m.batch, h = m.hidden, a = m.heads, sbh = s * b * h;
  const auto megatron = [&](const layout::Plan& p) {
    return layer_activation_bytes(m, p, layout::Runtime::kMegatron);
  };
  for (const int t : {1, 2, 8, 64}) {
    // §4.2.1 Eq. 2: tensor parallel, sbh·(10 + 24/t + 5as/(ht)).
    EXPECT_NEAR(megatron(tp(t, 1)) - ln_stats_bytes(m, 1),
                sbh * (10 + 24.0 / t + 5 * a * s / (h * t)), 1e-9 * sbh)
        << t;
  }
  // §4.2.2: with sequence parallelism sbh/t·(34 + 5as/h).
  EXPECT_NEAR(megatron(tp(8, 1, true)) - ln_stats_bytes(m, 8),
              sbh / 8 * (34 + 5 * a * s / h), 1e-9 * sbh);
}

// What rank_memory counts for a layer stack of L layers on Megatron-LM, no pipeline, against
// Table 2's forms (L times a layer): none, selective (sbhL·(10 + 24/t) and, with sequence
// parallelism, sbhL·34/t) and full (2·sbhL), each with the stack's extra terms named.
TEST(Memory, MegatronStackIsKorthikantiTable2) {
  ModelSpec m = gpt(4);
  m.vocab = 0;  // no head, no embedding: the stack alone
  const double s = m.seq, b = m.batch, h = m.hidden, a = m.heads, L = m.layers, t = 8;
  const double sbh = s * b * h, e = m.element_bytes();
  const auto activations = [&](bool sp, Recompute r) {
    layout::Plan p = tp(8, 1, sp);
    p.recompute = r;
    return rank_memory(m, p, 0, HeadBuffers::kSharded, layout::Runtime::kMegatron)
        .activations_bytes;
  };
  // The stack also keeps its output (one more layer input) and the head's input (one stream
  // slice each), and the embedding's output and the gathered final LayerNorm (sharded over
  // the t ranks: HeadBuffers::kSharded).
  const auto extra = [&](bool sp) { return 2 * (sp ? sbh / t : sbh) * e + 2 * sbh / t * e; };
  const auto stats = [&](bool sp) { return L * ln_stats_bytes(m, sp ? t : 1); };
  EXPECT_NEAR(activations(false, Recompute::kNone) - extra(false) - stats(false),
              sbh * L * (10 + 24 / t + 5 * a * s / (h * t)), 1e-9 * sbh * L);
  EXPECT_NEAR(activations(false, Recompute::kSelective) - extra(false) - stats(false),
              sbh * L * (10 + 24 / t), 1e-9 * sbh * L);
  EXPECT_NEAR(activations(true, Recompute::kNone) - extra(true) - stats(true),
              sbh * L / t * (34 + 5 * a * s / h), 1e-9 * sbh * L);
  EXPECT_NEAR(activations(true, Recompute::kSelective) - extra(true) - stats(true),
              sbh * L / t * 34, 1e-9 * sbh * L);
  // Full: 2·sbhL. The one layer re-run before its backward holds what a layer keeps without
  // recomputation while it runs (the paper's Table 2 leaves it out): counted with the buffers.
  EXPECT_NEAR(activations(false, Recompute::kFull) - extra(false), 2 * sbh * L, 1e-9 * sbh * L);
  const auto buffers = [&](Recompute r) {
    layout::Plan p = tp(8, 1);
    p.recompute = r;
    return rank_memory(m, p, 0, HeadBuffers::kSharded, layout::Runtime::kMegatron)
        .workspace_bytes;
  };
  const double layer = layer_activation_bytes(m, tp(8, 1), layout::Runtime::kMegatron);
  EXPECT_NEAR(buffers(Recompute::kFull) - buffers(Recompute::kNone), layer - sbh * e,
              1e-9 * sbh * L);
}

// Megatron-LM's Llama-family layers drop nothing out (megatron_drops_out: the Llama recipes'
// --attention-dropout 0.0 --hidden-dropout 0.0, PyTorch's dropout at p = 0 keeping no mask):
// without sequence parallelism a layer keeps what this runtime's (which has no dropout)
// keeps; GPT's differ by Korthikanti §4.1's dropout, 2·sbh + 3·as²b/t bytes; with sequence
// parallelism Llama's differ only by the two re-gathered norm outputs (§4.2.2), 2·sbh bytes.
TEST(Memory, MegatronLlamaLayersKeepNoDropout) {
  EXPECT_TRUE(megatron_drops_out(load_model("gpt3-175b")));
  EXPECT_FALSE(megatron_drops_out(load_model("llama3-8b")));
  EXPECT_FALSE(megatron_drops_out(load_model("mixtral-8x7b")));
  ModelSpec llama = load_model("llama3-405b");
  llama.batch = 1;
  llama.seq = 8192;
  const ModelSpec g = gpt(1);
  const auto layer = [](const ModelSpec& m, const layout::Plan& p, layout::Runtime r) {
    return layer_activation_bytes(m, p, r);
  };
  for (const int t : {1, 8}) {
    EXPECT_DOUBLE_EQ(layer(llama, tp(t, 1), layout::Runtime::kMegatron),
                     layer(llama, tp(t, 1), layout::Runtime::kMeshtp))
        << t;
    const double s = g.seq, b = g.batch, h = g.hidden, a = g.heads;
    EXPECT_NEAR(layer(g, tp(t, 1), layout::Runtime::kMegatron) -
                    layer(g, tp(t, 1), layout::Runtime::kMeshtp),
                2 * s * b * h + 3 * a * s * s * b / t, 1e-9 * s * b * h)
        << t;
  }
  const double sbh = static_cast<double>(llama.seq) * llama.batch * llama.hidden;
  EXPECT_NEAR(layer(llama, tp(8, 1, true), layout::Runtime::kMeshtp) -
                  layer(llama, tp(8, 1, true), layout::Runtime::kMegatron),
              2 * sbh * llama.element_bytes(), 1e-9 * sbh);
}

// Megatron-LM's model chunks (interleaved, v per rank) share one allocator and a rank runs one
// layer at a time: one set of a layer's backward buffers (two gradient streams and the
// workspace, block_floats) per rank, whatever v, beside its four blocking point-to-point
// stream slices. A middle rank (no embedding, no head) on one replica: nothing else.
// Llama 3 405B's layers on tp 8 with sequence parallelism and the fused core, cut to `layers`
// layers of `seq` tokens, a batch of `batch` in as many microbatches over pp 4.
std::pair<ModelSpec, layout::Plan> llama_on_pp4(std::int64_t seq, int layers, int batch) {
  ModelSpec m = load_model("llama3-405b");
  m.seq = seq;
  m.layers = layers;
  m.batch = batch;
  layout::Plan p = tp(8, 1, true);
  p.attention = layout::Attention::kFused;
  p.pp = 4;
  p.microbatches = batch;
  return {m, p};
}

TEST(Memory, MegatronChunksShareOneBackwardWorkspace) {
  auto [m, p] = llama_on_pp4(8192, 16, 8);
  ModelSpec mb = m;
  mb.batch = 1;
  const BlockFloats f = block_floats(mb, p);
  const double expected = m.element_bytes() * (2 * f.input + f.workspace + 4 * f.input);
  for (const int v : {1, 2, 4}) {
    p.virtual_stages = v;
    p.schedule = v > 1 ? layout::Schedule::kInterleaved : layout::Schedule::k1F1B;
    for (const int r : {1, 2}) {
      EXPECT_NEAR(rank_memory(m, p, r, HeadBuffers::kSharded, layout::Runtime::kMegatron)
                      .workspace_bytes,
                  expected, 1e-9 * expected)
          << "v=" << v << " rank " << r;
    }
  }
}

// The Llama 3 paper's uneven interleaved layout (§3.3.2): one layer fewer on the first and
// last stage, so the first chunk of the first stage holds only the embedding and the last
// chunk of the last stage only the head. 6 layers on pp 4 × v 2 (1 + 2 + 2 + 1): rank 0's
// chunks hold 0 and 1 layers, rank 3's 1 and 0, the middle ranks' 1 and 1. Megatron-LM's
// interleaved schedule with 4 microbatches warms up with all 8 (microbatch, chunk) forwards
// on rank 0 ((pp − 1)·2 + (v − 1)·pp = 10 ≥ 8, schedules.py get_pp_rank_microbatches): 4 of
// them on the embedding's chunk (no layer) and 4 on a one-layer chunk: 4 layers' activations,
// not 8; and rank 0 holds one layer's parameters, not two.
TEST(Memory, MegatronUnevenInterleavedChunksHoldTheirOwnLayers) {
  auto [m, p] = llama_on_pp4(4096, 6, 4);
  p.virtual_stages = 2;
  p.schedule = layout::Schedule::kInterleaved;
  p.first_stage_layers = 1;
  p.last_stage_layers = 1;
  ModelSpec mb = m;
  mb.batch = 1;
  const double e = m.element_bytes();
  const double layer = layer_activation_bytes(mb, p, layout::Runtime::kMegatron);
  const BlockFloats f = block_floats(mb, p);
  const double stream = static_cast<double>(mb.tokens()) * mb.hidden / 8;  // sharded
  const MemoryEstimate r0 = rank_memory(m, p, 0, HeadBuffers::kSharded, layout::Runtime::kMegatron);
  const MemoryEstimate r1 = rank_memory(m, p, 1, HeadBuffers::kSharded, layout::Runtime::kMegatron);
  // In flight: 4 layers; each chunk's output slice; the embedding's output (sharded).
  EXPECT_NEAR(r0.activations_bytes, 4 * layer + e * (2 * f.input + stream), 1e-9 * layer);
  // Rank 1: 2·(pp − 2) + pp = 8 ≥ 8 pairs in flight, each one layer.
  EXPECT_NEAR(r1.activations_bytes, 8 * layer + e * 2 * f.input, 1e-9 * layer);
  const double table = std::ceil(static_cast<double>(m.vocab) / 8) * m.hidden * e;
  EXPECT_NEAR(r0.params_bytes - table, r1.params_bytes / 2, 1e-9 * r1.params_bytes);
}

TEST(Memory, AtpTwoDimensionalSharding) {
  // Per rank, elements: input, LN1 out, LN2 in/out over d2; q|k|v over N; projection input,
  // FC1 out, GeLU out over d1; probabilities over N.
  const ModelSpec m = gpt(2);
  const double s = m.seq, b = m.batch, h = m.hidden, a = m.heads;
  const double elements = s * b * h * (4.0 / 4 + 3.0 / 8 + 9.0 / 2) + a * s * s * b / 8;
  EXPECT_NEAR(layer_activation_bytes(m, tp(2, 4)) - ln_stats_bytes(m, 1), 2 * elements,
              1e-6 * elements);
}

// 16 bytes a parameter in both precisions and both runtimes: Megatron-LM keeps the weights
// and gradients in the model's precision beside fp32 masters and moments; this runtime keeps
// fp32 weights (its masters), gradients and moments whatever the precision, and under a
// 2-byte precision a 2-byte compute copy of its blocks' and its head's GeMM weights (18
// bytes those).
TEST(Memory, SixteenBytesPerParameterInBothPrecisions) {
  ModelSpec m = gpt(1);
  for (const Precision p : {Precision::kFp16, Precision::kBf16, Precision::kFp32}) {
    m.precision = p;
    for (const Runtime runtime : {Runtime::kMeshtp, Runtime::kMegatron}) {
      const MemoryEstimate e = rank_memory(m, tp(8, 1), 0, HeadBuffers::kRuntime, runtime);
      const double per_rank = m.total_params() / 8;
      const double copies = runtime == Runtime::kMeshtp && p != Precision::kFp32
                                ? 2.0 * (12 * m.hidden * m.hidden * m.layers / 8 +
                                         std::ceil(m.vocab / 8.0) * m.hidden)
                                : 0.0;
      const double weight_bytes = runtime == Runtime::kMeshtp ? 4 : m.element_bytes();
      // Within 0.2%: the position embedding and some biases and LayerNorms are not split.
      EXPECT_NEAR(e.params_bytes + e.grads_bytes + e.optimizer_bytes, 16 * per_rank + copies,
                  2e-3 * 16 * per_rank);
      EXPECT_NEAR(e.params_bytes, weight_bytes * per_rank + copies, 2e-3 * weight_bytes * per_rank);
    }
  }
}

// This runtime under bf16 stores its blocks' saved GeMM inputs in bf16 and everything else in
// fp32 (model/block.hpp): an fp32 run's memory less 2 bytes an element of stored_operands per
// kept layer (ATP: ln1's and ln2's outputs, the activation, q | k | v, the attention output
// gathered; sequence parallelism: the norms' gathered too; 2D-GeMM blocks: theirs), plus the
// running block's fp32 q | k | v and attention output, less 2 bytes an element of the
// attention output's pre-gather copy (d2 > 1), plus 2 bytes a parameter of its blocks' GeMM
// weights' compute copies (not under ZeRO-3) and its head's; Megatron-LM's is all in the
// model's precision.
TEST(Memory, Bf16StoresTheSavedGemmInputsAndTheRestInFp32) {
  ModelSpec m = gpt(4);
  for (const layout::Plan& p : {tp(4, 1), tp(4, 1, true), tp(2, 2)}) {
    ModelSpec fp32 = m, bf16 = m;
    fp32.precision = Precision::kFp32;
    bf16.precision = Precision::kBf16;
    const MemoryEstimate a = rank_memory(fp32, p, 0), b = rank_memory(bf16, p, 0);
    const StoredOperands s = stored_operands(bf16, p);
    const double n = static_cast<double>(m.tokens()), h = m.hidden, f = m.ffn();
    const double t = p.mesh[0], d2 = p.mesh[1];
    const double qkv = 3 * n * h / (t * d2);  // q | k | v of this rank's heads
    const double core = n * h / (t * d2);     // their attention output
    const double pre_gather = d2 > 1 ? core : 0.0;
    ASSERT_EQ(p.attention, layout::Attention::kUnfused);
    const double mlp = n * (f + 4 * h) / t;  // the activation and FC1's output, [n, 4h/t] each
    EXPECT_DOUBLE_EQ(s.kept, p.sequence_parallel ? 2 * n * h / t + 2 * n * h + mlp + qkv + core
                                                 : 2 * n * h / d2 + mlp + qkv + n * h / t);
    EXPECT_DOUBLE_EQ(s.workspace, qkv + core);  // the running block's in fp32
    EXPECT_DOUBLE_EQ(s.workspace_operands, pre_gather);
    EXPECT_DOUBLE_EQ(a.activations_bytes - b.activations_bytes, 2 * s.kept * m.layers);
    const double copies = 2 * 12 * h * h / (t * d2) * m.layers;
    const double head = 2 * std::ceil(static_cast<double>(m.vocab) / (t * d2)) * h;
    EXPECT_DOUBLE_EQ(b.params_bytes + b.grads_bytes + b.optimizer_bytes + b.workspace_bytes -
                         (a.params_bytes + a.grads_bytes + a.optimizer_bytes + a.workspace_bytes),
                     4 * (qkv + core) - 2 * pre_gather + copies + head);
    // ZeRO-3 keeps no copies; full recomputation one block's (its one block object).
    layout::Plan zero3 = p, full = p;
    zero3.zero = 3;
    zero3.dp = 2;
    full.recompute = Recompute::kFull;
    ModelSpec fp32_dp = fp32, bf16_dp = bf16;
    fp32_dp.batch = bf16_dp.batch = 2 * m.batch;
    EXPECT_DOUBLE_EQ(
        rank_memory(bf16_dp, zero3, 0).params_bytes - rank_memory(fp32_dp, zero3, 0).params_bytes,
        head);  // the head's copy: its weight is whole under every stage
    EXPECT_DOUBLE_EQ(
        rank_memory(bf16, full, 0).params_bytes - rank_memory(fp32, full, 0).params_bytes,
        copies / m.layers + head);
    // The fused core keeps its own output beside the gathered one where it gathers (d2 > 1).
    layout::Plan fused = p;
    fused.attention = layout::Attention::kFused;
    EXPECT_DOUBLE_EQ(stored_operands(bf16, fused).kept, s.kept + pre_gather);
  }
  // 2D-GeMM blocks: ln1's and ln2's outputs, q | k | v, the attention output, FC1's and
  // GeLU's outputs, each [n/d1, ·/d2]; the running block's q | k | v widened to fp32 for the
  // core.
  for (const layout::Plan& base : {tp(2, 2), tp(4, 1), tp(1, 2)}) {
    layout::Plan gemm2d = base;
    gemm2d.strategy = layout::Strategy::kSumma;
    const double N = gemm2d.mesh[0] * gemm2d.mesh[1];
    const double n = static_cast<double>(m.tokens()), h = m.hidden, f = m.ffn();
    const StoredOperands s = stored_operands(m, gemm2d);
    EXPECT_DOUBLE_EQ(s.kept, (2 * n * h + 3 * n * h + n * h + n * f + 4 * n * h) / N);
    EXPECT_DOUBLE_EQ(s.workspace, 3 * n * h / N);
    EXPECT_DOUBLE_EQ(s.workspace_operands, 0.0);
  }
  // A MoE layer (sequence parallelism on 4): both norms' outputs, ln1's gathered, q | k | v
  // and the attention output; with a shared expert its MLP's gathered input, FC1's output
  // and activation.
  {
    ModelSpec moe = m;
    moe.num_experts = 4;
    moe.top_k = 2;
    moe.moe_ffn_hidden = 2 * m.hidden;
    const double n = static_cast<double>(m.tokens()), h = m.hidden, t = 4;
    const double attention = 2 * n * h / t + n * h + 3 * n * h / t + n * h / t;
    EXPECT_DOUBLE_EQ(stored_operands(moe, tp(4, 1, true)).kept, attention);
    moe.shared_experts = 1;
    EXPECT_DOUBLE_EQ(stored_operands(moe, tp(4, 1, true)).kept,
                     attention + n * h + 2 * n * static_cast<double>(moe.shared_ffn()) / t);
  }
  // Against Megatron-LM's count in the same precision: this runtime keeps its layer inputs
  // and x_mid in fp32 (4 bytes where Megatron-LM keeps 2) but no dropout masks (GPT drops out
  // under Megatron-LM), so its activations come out a little below: 0.948 here.
  ModelSpec half = m;
  half.precision = Precision::kBf16;
  const double ratio =
      rank_memory(half, tp(4, 1), 0).activations_bytes /
      rank_memory(half, tp(4, 1), 0, HeadBuffers::kRuntime, Runtime::kMegatron).activations_bytes;
  EXPECT_GT(ratio, 0.90);
  EXPECT_LT(ratio, 1.0);
}

TEST(Memory, RecomputationShrinksActivations) {
  ModelSpec m = gpt(8);
  layout::Plan p = tp(8, 1, true);
  const BlockFloats f = block_floats(m, p);
  const auto activations = [&](Recompute r) {
    p.recompute = r;
    return rank_memory(m, p, 0).activations_bytes;
  };
  // This runtime keeps fp32 activations but the saved GeMM inputs in the model's precision.
  const double stored = stored_operands(m, p).kept, L = m.layers;
  const double e = 4, saved = 4 - m.element_bytes();
  const double none = activations(Recompute::kNone);
  const double selective = activations(Recompute::kSelective);
  const double full = activations(Recompute::kFull);
  EXPECT_NEAR(none - selective, L * f.scores * e, 1e-6 * none);  // §5: no probabilities
  // Full: every layer's input, one block's kept set.
  EXPECT_NEAR(none - full, (L - 1) * ((f.kept + f.scores) * e - stored * saved), 1e-6 * none);
  EXPECT_LT(full, selective);
  EXPECT_LT(selective, none);
}

TEST(Memory, PipelineStagesHoldTheirLayersAndTheMessagesInFlight) {
  ModelSpec m = load_model("tiny");
  m.layers = 4;
  m.batch = 8;
  const layout::Plan one = tp(1, 1);
  layout::Plan pipe = one;
  pipe.pp = 2;
  pipe.microbatches = 2;
  pipe.schedule = layout::Schedule::k1F1B;
  const double stream = block_floats([&] { ModelSpec mb = m; mb.batch = 4; return mb; }(), one)
                            .input * m.element_bytes();
  // 1F1B, p = 2, m = 2, rank 0: B0, B1 posted (2), F0 sends (3), F1 sends (4), B0 frees one.
  // Rank 1: F0, F1 posted (2); F0 keeps its input (3) — 4 with B0's output — then frees.
  const MemoryEstimate r0 = rank_memory(m, pipe, 0), r1 = rank_memory(m, pipe, 1);
  EXPECT_GT(r0.workspace_bytes, 4 * stream);
  EXPECT_GT(r1.workspace_bytes, 4 * stream);
  // Each stage holds half the blocks' parameters (plus its end of the embedding).
  const double whole = rank_memory(m, one, 0).params_bytes;
  EXPECT_LT(r0.params_bytes, 0.75 * whole);
  EXPECT_LT(r1.params_bytes, 0.75 * whole);
  EXPECT_EQ(peak_rank_memory(m, pipe).total_bytes(),
            std::max(r0.total_bytes(), r1.total_bytes()));
  pipe.pp = 3;
  EXPECT_THROW(rank_memory(m, pipe, 0), Error);  // 4 layers do not split into 3 stages
}

TEST(Memory, ZeroShardsOptimizerStateThenParameters) {
  ModelSpec m = load_model("small");
  layout::Plan p = tp(1, 1);
  p.dp = 4;
  const auto at = [&](int zero) {
    p.zero = zero;
    return rank_memory(m, p, 0);
  };
  const MemoryEstimate z0 = at(0), z1 = at(1), z2 = at(2), z3 = at(3);
  EXPECT_NEAR(z1.optimizer_bytes, z0.optimizer_bytes * 12 / 8 / 4, 1.0);  // moments + values
  EXPECT_EQ(z2.optimizer_bytes, z1.optimizer_bytes);
  EXPECT_EQ(z2.params_bytes, z0.params_bytes);
  EXPECT_LT(z3.params_bytes, z2.params_bytes);  // 1 of 4 blocks whole at a time
  // ZeRO ≥ 2 (train/zero.hpp): gradients 1/dp of every parameter, the last bucket (wte,
  // wpe, final LayerNorm) whole, and one block's whole gradient during its backward; the
  // buckets shrink to the last one's buffer plus one block's send buffer.
  const double h = m.hidden, block = 12 * h * h + 13 * h, e = 4;
  const double last = m.vocab * h + m.seq * h + 2 * h, params = m.layers * block + last;
  EXPECT_DOUBLE_EQ(z0.params_bytes, e * params);
  EXPECT_DOUBLE_EQ(z2.grads_bytes, e * (params / 4 + last + block));
  EXPECT_DOUBLE_EQ(z3.grads_bytes, z2.grads_bytes);
  EXPECT_DOUBLE_EQ(z1.workspace_bytes - z2.workspace_bytes, e * (params - last - block));
  EXPECT_DOUBLE_EQ(z3.workspace_bytes - z2.workspace_bytes, e * block);  // the next gather
}

}  // namespace
}  // namespace meshtp::plan
