#include "plan/memory.hpp"
#include "plan/moe.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <ostream>

#include "core/error.hpp"
#include "core/op_costs.hpp"
#include "layout/pipeline_schedule.hpp"
#include "plan/fc_layers.hpp"

namespace meshtp::plan {

namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

enum class Kind { kAtp, kSequenceParallel, kGemm2d };

Kind kind_of(const layout::Plan& p) {
  if (layout::is_gemm2d(p.strategy)) return Kind::kGemm2d;
  return p.sequence_parallel ? Kind::kSequenceParallel : Kind::kAtp;
}

// Parameters of one block on one rank: the weights 12h² split over all N ranks; QKV's and
// FC1's biases (7h) follow their outputs over d1, the projection's and FC2's (2h) and the
// LayerNorms' (4h) the hidden split over d2 (model/params.cpp, parallel/param_shard.hpp).
// A Llama-family model (layout/model_shape.hpp): Σ in·out for 12h², no biases with SwiGLU,
// RMSNorm's h per norm (over d2) for LayerNorm's 2h.
// Fewer KV heads g than the ATP blocks' N = d1·d2 head blocks: each block holds a copy of its
// one KV head (parallel/param_shard.hpp), QKV's local rows h/N + 2d instead of (h + 2gd)/N.
bool kv_copies(const ModelSpec& m, const layout::Plan& p) {
  return !layout::is_gemm2d(p.strategy) && m.kv() < static_cast<std::int64_t>(p.mesh[0]) * p.mesh[1];
}

// The QKV weight's copied KV rows on one rank beyond its share of the global ones: 2·d·h·
// (N − g)/N (0 without copies).
double kv_copy_params(const ModelSpec& m, const layout::Plan& p) {
  if (!kv_copies(m, p)) return 0.0;
  const double N = static_cast<double>(p.mesh[0]) * p.mesh[1];
  return 2 * static_cast<double>(m.head_dim()) * m.hidden * (N - static_cast<double>(m.kv())) / N;
}

double block_params(const ModelSpec& m, const layout::Plan& p) {
  const double h = m.hidden, d1 = p.mesh[0], d2 = p.mesh[1];
  if (m.is_gpt()) return 12 * h * h / (d1 * d2) + 7 * h / d1 + 6 * h / d2;
  const double biases = m.has_biases() ? static_cast<double>(m.qkv_width() + m.mlp1_width()) / d1 +
                                             2 * h / d2
                                       : 0.0;
  return m.linear_weights() / (d1 * d2) + kv_copy_params(m, p) + biases +
         2.0 * static_cast<double>(m.norm_params()) / d2;
}

// The GeMM weights of one block on one rank (block_params less biases and norms): a dense
// layer's four linears, a MoE layer's attention and its shared experts' MLP (its routed
// experts are the experts' own, plan/moe.hpp).
double gemm_weight_params(const ModelSpec& m, const layout::Plan& p, bool moe_layer) {
  const double h = m.hidden, N = static_cast<double>(p.mesh[0]) * p.mesh[1];
  const double attention = h * static_cast<double>(m.qkv_width()) + h * h;
  const double mlp = moe_layer ? 2 * h * static_cast<double>(m.shared_ffn())  // GeLU: S, S
                               : m.linear_weights() - attention;
  return (attention + mlp) / N + kv_copy_params(m, p);
}

// How many pipeline message buffers and saved stage inputs (each one stream slice) are alive
// at once on this rank, at most, replaying train/pipeline_run.cpp and
// train/pipeline_model.cpp: every receive is posted before the first op, an op allocates its
// output (sent, kept until the end), a forward of stage > 0 copies its input (freed by that
// microbatch's backward), an op's received input is freed after it. Also the most alive
// during a backward op (when ZeRO ≥ 2's transient block gradients exist).
PipelineBuffers rank_pipeline_buffers(const layout::PipelineSchedule& s, int rank) {
  const int S = s.stages();
  const auto has_input = [&](const layout::PipeOp& op) {
    return op.forward ? op.stage > 0 : op.stage + 1 < S;
  };
  const auto has_output = [&](const layout::PipeOp& op) {
    return op.forward ? op.stage + 1 < S : op.stage > 0;
  };
  const std::vector<layout::PipeOp>& ops = s.ops.at(static_cast<std::size_t>(rank));
  int alive = 0, saved = 0, in_flight = 0;
  for (const layout::PipeOp& op : ops) alive += has_input(op) ? 1 : 0;
  PipelineBuffers out{.peak = alive};
  for (const layout::PipeOp& op : ops) {
    alive += has_output(op) ? 1 : 0;
    if (op.forward && op.stage > 0) ++saved;  // the saved input
    in_flight += op.forward ? 1 : 0;
    out.peak = std::max(out.peak, alive + saved);
    out.in_flight = std::max(out.in_flight, in_flight);
    if (!op.forward) out.backward_peak = std::max(out.backward_peak, alive + saved);
    if (!op.forward && op.stage > 0) --saved;
    in_flight -= op.forward ? 0 : 1;
    alive -= has_input(op) ? 1 : 0;
  }
  return out;
}

// The residual stream gathered whole ([n, h], `stream` floats) from this rank's slice
// (`slice` floats), as the head gathers the final LayerNorm and the embedding its gradient
// (model/gpt.cpp → parallel::gather_activation_into → mesh::DTensor::full, mesh/dtensor.cpp):
// the slice is held twice (the DTensor's block, redistribute's working copy), and each
// all-gather over a sharding mesh dim of size p > 1 (inner dim first) holds the received p·L
// and its unpacked copy while the working L is alive. The last step, L = stream/p_outer, is
// the largest: slice + stream/p_outer + 2·stream, transient (the result is copied into the
// head's buffer, counted as the stream). ATP shards the stream over d2 and Megatron-SP over
// t = d1 (p_outer·slice = stream); 2D GeMM over both, d1 outer.
double stream_gather_floats(const layout::Plan& p, double stream, double slice) {
  if (slice >= stream) return 0;  // not sharded: a copy into the head's buffer
  const double outer =
      layout::is_gemm2d(p.strategy) && p.mesh[0] > 1 ? p.mesh[0] : stream / slice;
  return slice + stream / outer + 2 * stream;
}

// The gather of the residual stream this pipeline rank runs outside its stack, at its peak:
// the head's (last stage) in the forward or the embedding's gradient (first stage) in the
// backward, one at a time, in meshtp's runtime (HeadBuffers::kRuntime); 0 elsewhere.
double stream_gather_peak(const ModelSpec& mb, const layout::Plan& p, int pipeline_rank,
                          HeadBuffers head);

// The 2D GeMM algorithms' own buffers (gathered operands, slices in flight, ring buffers,
// partial outputs: gemm2d_workspace_bytes) for one microbatch `mb`. One workspace serves
// every linear of every block (model/gemm2d_block.hpp), so it holds the most any of the
// twelve GeMMs (four linears × three passes) asks for.
double gemm2d_buffer_bytes(const ModelSpec& mb, const layout::Plan& p) {
  if (kind_of(p) != Kind::kGemm2d) return 0;
  double most = 0;
  for (const FcShape& fc : fc_layers(mb)) {
    const layout::LinearPlan& lp = p.linear(fc.layer);
    const Stationary stationary = lp.stationary.value_or(choose_stationary(fc, false));
    const Gemm2dParams& params = lp.gemm2d;
    for (const Pass pass : kPasses) {
      const Gemm2dShape shape =
          fc_gemm(fc, stationary, pass, p.mesh[0], p.mesh[1], mb.element_bytes());
      if (gemm2d_invalid_reason(p.algorithm(fc.layer), shape, params)) continue;
      most = std::max(most, gemm2d_workspace_bytes(p.algorithm(fc.layer), shape, params));
    }
  }
  return most;
}

double stream_gather_peak(const ModelSpec& mb, const layout::Plan& p, int pipeline_rank,
                          HeadBuffers head) {
  if (head != HeadBuffers::kRuntime) return 0;
  const int stages = p.pp * p.virtual_stages;
  bool gathers = false;  // holds the embedding or the head
  for (int k = 0; k < p.virtual_stages; ++k) {
    const int stage = k * p.pp + pipeline_rank;
    gathers = gathers || stage == 0 || stage == stages - 1;
  }
  if (!gathers) return 0;
  const double stream = static_cast<double>(mb.tokens()) * static_cast<double>(mb.hidden);
  return stream_gather_floats(p, stream, block_floats(mb, p).input);
}

// What one layer keeps between its forward and its backward, in elements (a dropout mask's
// byte counts as kDropoutMaskBytes / element_bytes), given what it recomputes:
//   none       kept set, probabilities and layer input
//   selective  the same less the probabilities
//   full       nothing but the layer input
// Megatron-LM (`runtime` megatron) also keeps its dropout (Korthikanti §4.1) where the model
// drops out (megatron_drops_out: the GPT family, not the Llama family): the masks of
// the projection's and FC2's dropouts (one stream slice each, one byte per element) under
// every recomputation but full, and the attention dropout's mask and output on the
// probabilities (as²b bytes and 2·as²b) where the probabilities are kept; under sequence
// parallelism on t > 1 ranks it re-gathers the two LayerNorm outputs in the backward
// (§4.2.2), 2·nh fewer than this runtime, which keeps them gathered (the table's ¹).
struct LayerKept {
  double kept = 0;   // what a layer keeps, less its input
  double whole = 0;  // what a layer re-run under full recomputation holds: kept as with none
};
LayerKept layer_kept(const BlockFloats& f, const ModelSpec& m, const layout::Plan& p,
                     layout::Runtime runtime) {
  const bool megatron = layout::megatron_layers(runtime);
  const bool drops_out = megatron && megatron_drops_out(m);
  const double mask = op_costs::kDropoutMaskBytes / m.element_bytes();
  const double regathered =
      megatron && p.sequence_parallel && !layout::is_gemm2d(p.strategy) && p.mesh[0] > 1
          ? 2 * static_cast<double>(m.tokens()) * m.hidden
          : 0.0;
  const double masks = drops_out ? 2 * f.input * mask : 0.0;
  const double scores = f.scores * (drops_out ? 2 + mask : 1);  // probabilities (+ dropout's)
  const double whole = f.kept - regathered + masks + scores;
  switch (p.recompute) {
    case Recompute::kNone: return {whole, whole};
    case Recompute::kSelective:  // fused attention has no probabilities to drop: it keeps L
      return {p.attention == layout::Attention::kFused ? whole : whole - scores, whole};
    case Recompute::kFull: return {0.0, whole};
  }
  return {};
}

}  // namespace

double MemoryEstimate::total_gib() const { return total_bytes() / kGiB; }

std::ostream& operator<<(std::ostream& os, const MemoryEstimate& m) {
  return os << fmt::format("{:.2f} GiB (params {:.2f}, grads {:.2f}, optimizer {:.2f}, "
                           "activations {:.2f}, buffers {:.2f})",
                           m.total_gib(), m.params_bytes / kGiB, m.grads_bytes / kGiB,
                           m.optimizer_bytes / kGiB, m.activations_bytes / kGiB,
                           m.workspace_bytes / kGiB);
}

nlohmann::json to_json(const MemoryEstimate& m) {
  return {{"params_gib", m.params_bytes / kGiB},
          {"grads_gib", m.grads_bytes / kGiB},
          {"optimizer_gib", m.optimizer_bytes / kGiB},
          {"activations_gib", m.activations_bytes / kGiB},
          {"buffers_gib", m.workspace_bytes / kGiB}};
}

namespace {
// The q | k | v width of a token over the N = d1·d2 ranks, in units of h: 3 for GPT,
// 1 + 2g/a with g KV heads, and with KV heads copied to N > g head blocks h/N + 2d per rank
// (N·(1/N + 2d/h)).
double qkv_width_in_h(const ModelSpec& m, const layout::Plan& p) {
  const double h = static_cast<double>(m.hidden), N = static_cast<double>(p.mesh[0]) * p.mesh[1];
  return kv_copies(m, p) ? 1 + 2 * static_cast<double>(m.head_dim()) * N / h
                         : static_cast<double>(m.qkv_width()) / h;
}
}  // namespace

BlockFloats block_floats(const ModelSpec& m, const layout::Plan& p) {
  const double s = m.seq, b = m.batch, h = m.hidden, a = m.heads, n = s * b, nh = n * h;
  const double d1 = p.mesh[0], d2 = p.mesh[1], N = d1 * d2;
  // Widths per token in units of h: q|k|v (3 for GPT; 1 + 2g/a with GQA) and the MLP's kept
  // FC1 output and activation output (8 for GPT's 4h + 4h; SwiGLU 2f + f); LayerNorm keeps
  // two statistics per token and norm (4n), RMSNorm one (2n).
  const double q = qkv_width_in_h(m, p), mk = static_cast<double>(m.mlp_kept_width()) / h;
  const double stats = m.norm == layout::Norm::kLayerNorm ? 4 * n : 2 * n;
  BlockFloats f;
  // Unfused attention keeps each sequence's s×s probabilities per head; fused attention
  // (ops/flash_attention.hpp) one log-sum-exp per row and head, and where the projection
  // gathers its input (ATP, d2 > 1) the core's output, which its backward reads.
  const bool fused = p.attention == layout::Attention::kFused;
  f.scores = fused ? a * s * b / N + (kind_of(p) == Kind::kAtp && d2 > 1 ? nh / N : 0)
                   : a * s * s * b / N;
  switch (kind_of(p)) {
    case Kind::kAtp: {
      // model/block.cpp: QKV reduce-scatters (and the projection all-gathers) whole heads
      // only when d2 > 1; otherwise y_p is y and x_g is x, no extra buffer.
      const double split = d2 > 1 ? 1 : 0;
      f.input = nh / d2;
      f.kept = stats + nh * (3 / d2 + q / N + (1 + mk) / d1);
      // proj_p, mlp2_p, dxn_p, dxmid (nh/d2); dgelu, dmlp1, datt_p (9·nh/d1); dqkv (3·nh/N);
      // with d2 > 1: qkv_p, dqkv_g (6·nh/d1), attn, datt (2·nh/N).
      f.workspace = nh * (4 / d2 + (1 + mk) / d1 + q / N + split * (2 * q / d1 + 2 / N));
      break;
    }
    case Kind::kSequenceParallel: {
      const double t = d1, split = t > 1 ? 1 : 0;
      f.input = nh / t;
      f.kept = stats / t + nh * ((4 + q + mk) / t + 2 * split);
      // proj_p, mlp2_p, dxn_p (whole rows: 3·nh); dgelu, dmlp1, dxmid, datt_p, dqkv (13·nh/t);
      // with t > 1: proj_y, mlp2_y, dxn (3·nh/t) and dyg, dxmid_g (2·nh).
      f.workspace = nh * (3 + (2 + q + mk) / t + split * (3 / t + 2));
      break;
    }
    case Kind::kGemm2d:
      // model/gemm2d_block.cpp: every tensor [n/d1, h/d2]; 13 partial LayerNorm rows.
      f.input = nh / N;
      f.kept = stats / d1 + (4 + q + mk) * nh / N;
      f.workspace = (5 + q + mk) * nh / N + 13 * h / d2;
      break;
  }
  // One sequence's attention scratch: its s×s, or the fused core's tiles (core/op_costs.hpp).
  f.workspace += fused ? op_costs::flash_attention_scratch_floats(s, s, h / a, op_costs::kFlashBlockQ,
                                                                  op_costs::kFlashBlockK)
                       : s * s;
  if (p.recompute == Recompute::kSelective && !fused) f.workspace += f.scores;
  // Grouped-query attention under the unfused core: one sequence's q | k | v widened to every
  // query head, and its gradient (model/block.cpp).
  if (m.kv() < m.heads && !fused && !layout::is_gemm2d(p.strategy)) f.workspace += 6 * s * h / N;
  return f;
}

StoredOperands stored_operands(const ModelSpec& m, const layout::Plan& p) {
  // The dense MLP's width: GPT's, or in a MoE layer its shared experts' (0: none, and then
  // no gathered ln2 output for it either).
  const double f = static_cast<double>(m.is_moe() ? m.shared_ffn() : m.ffn());
  // Its FC1 output, stored too (GeLU's input; SwiGLU's [gate | up], 2f): the shared
  // experts' GeLU MLP is S wide.
  const double fc1 = static_cast<double>(m.is_moe() ? m.shared_ffn() : m.mlp1_width());
  const double n = static_cast<double>(m.tokens()), h = static_cast<double>(m.hidden),
               d1 = p.mesh[0], d2 = p.mesh[1];
  const double N = d1 * d2, qkv = n * h * qkv_width_in_h(m, p) / N;  // ATP and SP alike
  const double core = n * h / N;  // this rank's heads' attention output
  switch (kind_of(p)) {
    case Kind::kAtp: {
      const double norm = n * h / d2, act = n * (f + fc1) / d1;
      const double gathered = d2 > 1 ? core : 0.0;  // the pre-gather copy: saved (fused) or not
      const bool fused = p.attention == layout::Attention::kFused;
      return {.kept = 2 * norm + act + qkv + n * h / d1 + (fused ? gathered : 0.0),
              .workspace = qkv + core,
              .workspace_operands = gathered};
    }
    case Kind::kSequenceParallel: {
      const double t = d1, norm = n * h / t, gathered = t > 1 ? n * h : 0.0;
      const double mlp_gathered = f > 0 ? gathered : 0.0;
      return {.kept = 2 * norm + gathered + mlp_gathered + n * (f + fc1) / t + qkv + core,
              .workspace = qkv + core};
    }
    case Kind::kGemm2d: {
      // model/gemm2d_block.cpp: the two norms' outputs, q | k | v, the attention output, FC1's
      // output and the activation, each [n/d1, ·/d2]; the workspace's fp32 q | k | v the
      // core's backward reads (its forward computes into the backward's free buffers).
      return {.kept = 3 * core + qkv + n * (f + fc1) / N, .workspace = qkv};
    }
  }
  return {};
}

double layer_activation_bytes(const ModelSpec& m, const layout::Plan& p,
                              layout::Runtime runtime) {
  const BlockFloats f = block_floats(m, p);
  layout::Plan none = p;
  none.recompute = Recompute::kNone;
  return (layer_kept(f, m, none, runtime).kept + f.input) * m.element_bytes();
}

std::vector<PipelineBuffers> pipeline_buffers(const layout::Plan& p) {
  p.validate();  // names a bad plan's fields before the schedule does
  if (p.pp == 1 && p.virtual_stages == 1) return {};
  const layout::PipelineSchedule schedule =
      layout::make_schedule(p.schedule, p.pp, p.microbatches, p.virtual_stages);
  std::vector<PipelineBuffers> out;
  for (int r = 0; r < p.pp; ++r) out.push_back(rank_pipeline_buffers(schedule, r));
  return out;
}

MemoryEstimate rank_memory(const ModelSpec& model, const layout::Plan& p, int pipeline_rank,
                           HeadBuffers head, layout::Runtime runtime) {
  return rank_memory(model, p, pipeline_rank, head, pipeline_buffers(p), runtime);
}

namespace {

MemoryEstimate combine(double a, const MemoryEstimate& x, double b, const MemoryEstimate& y) {
  const auto mix = [&](double u, double v) { return std::max(0.0, a * u + b * v); };
  return {.params_bytes = mix(x.params_bytes, y.params_bytes),
          .grads_bytes = mix(x.grads_bytes, y.grads_bytes),
          .optimizer_bytes = mix(x.optimizer_bytes, y.optimizer_bytes),
          .activations_bytes = mix(x.activations_bytes, y.activations_bytes),
          .workspace_bytes = mix(x.workspace_bytes, y.workspace_bytes)};
}

// A MoE model (plan/moe.hpp): its dense layers and its MoE layers' attention (and shared
// experts) as the dense model prices them — the attention alone extrapolated from MLPs of f_e
// and 2·f_e, 2·M(f_e) − M(2·f_e), part by part — weighted by the share of MoE layers, plus
// the experts: E/ep experts of f_e/etp per MoE layer (parameters, gradients and AdamW, ZeRO
// sharding them over edp), what they keep for the backward (top_k assignments per token:
// moe_floats, × the microbatches in flight as the dense layers' kept sets) and the exchange
// buffers. Balanced routing (the imbalance is priced in time, not memory).
// meshtp's context-parallel core: the layer's buffers while one block's core runs, beyond the
// flash-attention scratch a block keeps without it (the layer's is per call).
double cp_core_extra_floats(const ModelSpec& mb, const layout::Plan& p, layout::Runtime runtime) {
  if (p.cp == 1 || runtime != layout::Runtime::kMeshtp) return 0.0;
  return cp_layer_floats(mb, p) -
         op_costs::flash_attention_scratch_floats(
             static_cast<double>(mb.seq), static_cast<double>(mb.seq),
             static_cast<double>(mb.hidden) / static_cast<double>(mb.heads),
             op_costs::kFlashBlockQ, op_costs::kFlashBlockK);
}

// The MoE layers a pipeline rank holds: its share of them, rounded up.
std::int64_t moe_layers_on_rank(const ModelSpec& model, const layout::Plan& p, int pipeline_rank) {
  const double frac = static_cast<double>(model.moe_layers()) / static_cast<double>(model.layers);
  const double stage_layers = p.uneven()
                                  ? p.stage_layers(static_cast<int>(model.layers), pipeline_rank)
                                  : static_cast<double>(model.layers) / p.pp;
  return static_cast<std::int64_t>(std::ceil(stage_layers * frac));
}

MemoryEstimate moe_rank_memory(const ModelSpec& model, const layout::Plan& p, int pipeline_rank,
                               HeadBuffers head, std::span<const PipelineBuffers> pipeline,
                               layout::Runtime runtime) {
  check_moe(model, p);
  const double frac = static_cast<double>(model.moe_layers()) / static_cast<double>(model.layers);
  const auto dense = [&](std::int64_t ffn) {
    return rank_memory(dense_part(model, ffn), p, pipeline_rank, head, pipeline, runtime);
  };
  const std::int64_t fe = model.expert_ffn();
  const MemoryEstimate attention =
      model.shared_experts > 0 ? dense(model.shared_ffn())
                               : combine(2, dense(fe), -1, dense(2 * fe));
  MemoryEstimate out = frac < 1 ? combine(1 - frac, dense(model.ffn_hidden), frac, attention)
                                : attention;
  const int v = p.virtual_stages;
  const std::int64_t moe_layers = moe_layers_on_rank(model, p, pipeline_rank);
  const double e = model.element_bytes(), edp = expert_dp(p);
  const double params = expert_params_per_rank(model, p, moe_layers);
  out.params_bytes += e * (p.zero == 3 ? params / edp : params);
  out.grads_bytes += e * (p.zero >= 2 ? params / edp : params);
  if (p.zero < 2 && edp > 1) out.workspace_bytes += e * params;  // the reduction's buckets
  out.optimizer_bytes +=
      p.zero == 0 ? params * (model.precision != Precision::kFp32 ? 12 : 8) : params / edp * 12;
  ModelSpec mb = model;
  mb.batch = model.batch / (p.dp * p.microbatches);
  const MoeFloats f = moe_floats(mb, p, 1.0);
  const bool full = p.recompute == Recompute::kFull;
  const bool megatron_pipeline = layout::megatron_layers(runtime) && (p.pp > 1 || v > 1);
  const double in_flight =
      megatron_pipeline ? pipeline[static_cast<std::size_t>(pipeline_rank)].in_flight : 1;
  const double kept_layers =
      full ? 1 : (megatron_pipeline ? in_flight * static_cast<double>(moe_layers) / v
                                    : static_cast<double>(moe_layers));
  out.activations_bytes += e * kept_layers * f.kept;
  // The experts' exchange and scratch live only inside a MoE layer's forward or backward; the
  // head's and the embedding's gather of the residual stream only outside the stack, and the
  // context-parallel core's buffers only inside the attention (each counted in the dense
  // part): the peak holds the larger, not all.
  const double scratch = std::max(0.0, f.buffers - stream_gather_peak(mb, p, pipeline_rank, head) -
                                           cp_core_extra_floats(mb, p, runtime));
  out.workspace_bytes += e * scratch;
  if (p.zero >= 2 && runtime == layout::Runtime::kMeshtp && moe_layers > 0) {
    // As the dense blocks (rank_memory's backward_only): during a block's backward its
    // experts' gradient whole, stage 3 also its experts' weights whole (the next one's gather
    // is copied out and freed before the peak: measured, tiny-moe dp 4 and dp 2 × cp 2); and
    // once its backward is done, the gradient's send buffer (train/zero.hpp), when the
    // experts' backward buffers are freed: the peak holds the larger of the two, not both
    // (measured: the peak inside the experts' backward, at their dA/dH; counting both priced
    // tiny-moe dp 2 × pp 2 ZeRO-2 and 3 10% and 14% high).
    const double block = params / static_cast<double>(moe_layers);
    out.grads_bytes += e * block;
    out.workspace_bytes += e * std::max(0.0, block - scratch);
    if (p.zero == 3) out.params_bytes += e * block;
  }
  // Full recomputation in meshtp's runtime keeps one block object per kind of layer
  // (model/layer_blocks.hpp): with dense and MoE layers both, a dense block and a MoE block,
  // each holding a layer's activations while it re-runs. The mix above counted one block,
  // (1 − frac) of a dense one and frac of a MoE one's attention: add the other share of each.
  if (full && runtime == layout::Runtime::kMeshtp && frac > 0 && frac < 1) {
    const auto rerun = [&](std::int64_t ffn) {
      ModelSpec d = dense_part(model, ffn);
      d.batch = mb.batch;
      return layer_kept(block_floats(d, p), d, p, runtime).whole;
    };
    const double dense_block = rerun(model.ffn_hidden);
    const double attention_block = 2 * rerun(fe) - rerun(2 * fe);
    out.activations_bytes += e * (frac * dense_block + (1 - frac) * attention_block);
  }
  // Under sequence parallelism (t > 1) a dense MLP all-gathers its input over the t ranks —
  // meshtp's runtime keeps the gathered copy (Megatron-LM's re-gathers it: not counted) —,
  // gathers its output gradient (n·h) and holds its output whole before the reduce-scatter
  // (n·h) beside the scattered output (n·h/t); the experts take each rank's own tokens and
  // write their output in the stream's own n·h/t (model/block.cpp BlockWorkspace): the dense
  // part above counted the gathered input and 2·n·h + n·h/t of buffers, per microbatch's
  // tokens n·h, for MoE layers too.
  // Shared experts are such a dense MLP (model/block.cpp), and meshtp's runtime keeps the
  // routed experts' output (their input gradient in the backward) apart: n·h/t.
  const int t = p.mesh[0];
  if (p.sequence_parallel && t > 1 && !layout::is_gemm2d(p.strategy) &&
      model.shared_experts == 0) {
    const double nh = static_cast<double>(mb.tokens()) * static_cast<double>(mb.hidden) * frac;
    if (runtime == layout::Runtime::kMeshtp) out.activations_bytes -= e * kept_layers * nh;
    out.workspace_bytes -= e * 2 * nh;
  }
  if (model.shared_experts > 0 && runtime == layout::Runtime::kMeshtp) {
    out.workspace_bytes += e * static_cast<double>(mb.tokens()) * mb.hidden / t;
  }
  return out;
}

// Transformer layers in each of pipeline rank r's v chunks (chunk k runs stage k·pp + r).
// Even stages: layers / (pp·v) each. Uneven stages (Plan::stage_layers) whose count does not
// split over v: the first rank's missing layers come out of its first chunks, the last rank's
// out of its last ones — the Llama 3 paper's layout (§3.3.2: one layer fewer on the first and
// last stage, so "the first model chunk on the first stage has only the embedding, and the
// last model chunk on the last stage has only output projection and loss"; Megatron-LM's
// --account-for-embedding/loss-in-pipeline-split); any other rank ⌈layers / v⌉ first.
std::vector<int> chunk_layers(int layers, const layout::Plan& p, int r) {
  const int v = p.virtual_stages;
  if (!p.uneven()) return std::vector<int>(static_cast<std::size_t>(v), layers / (p.pp * v));
  const int stage = p.stage_layers(layers, r), base = stage / v, more = stage % v;
  std::vector<int> out(static_cast<std::size_t>(v), base);
  // `more` chunks hold base + 1: the last ones on the first rank, the first ones elsewhere.
  const bool first = r == 0 && r + 1 < p.pp;
  for (int i = 0; i < more; ++i) out[static_cast<std::size_t>(first ? v - 1 - i : i)] += 1;
  return out;
}

// The most layers that (microbatch, chunk) pairs forwarded and not yet backwarded hold at once
// on pipeline rank r (Megatron-LM's schedule, pipeline_buffers' replay), each pair its chunk's
// layers. Equal chunks: in_flight of them.
double in_flight_chunk_layers(const layout::Plan& p, int r, const std::vector<int>& chunk,
                              int in_flight) {
  if (std::adjacent_find(chunk.begin(), chunk.end(), std::not_equal_to<>()) == chunk.end()) {
    return static_cast<double>(in_flight) * chunk.front();
  }
  const layout::PipelineSchedule s =
      layout::make_schedule(p.schedule, p.pp, p.microbatches, p.virtual_stages);
  int alive = 0, most = 0;
  for (const layout::PipeOp& op : s.ops.at(static_cast<std::size_t>(r))) {
    const int layers = chunk.at(static_cast<std::size_t>(op.stage / p.pp));
    alive += op.forward ? layers : -layers;
    most = std::max(most, alive);
  }
  return most;
}

}  // namespace

ModelSpec cp_rank_model(ModelSpec model, const layout::Plan& p) {
  MESHTP_CHECK(p.cp >= 1 && model.seq % p.cp == 0, "seq={} does not split over cp={}", model.seq,
               p.cp);
  model.seq /= p.cp;
  return model;
}

double cp_layer_floats(const ModelSpec& mb, const layout::Plan& p) {
  if (p.cp == 1) return 0.0;
  const double N = static_cast<double>(p.mesh[0]) * p.mesh[1];
  // Rows of one batch chunk (all of them: under sequence parallelism the core runs on the
  // gathered rows), the width of this rank's query heads, and per a2a member its KV heads'.
  const double R = static_cast<double>(mb.batch * mb.seq) / p.chunks, w = mb.hidden / N;
  const auto heads = static_cast<int>(mb.heads / static_cast<std::int64_t>(N));
  const std::int64_t kv = std::max<std::int64_t>(mb.kv() / static_cast<std::int64_t>(N), 1);
  const int u = layout::cp_a2a_size(p.cp_comm, p.cp, heads);
  const double lk = static_cast<double>((kv % u == 0 ? kv / u : 1) * mb.head_dim());
  if (u == 1) {  // forward: the block and the next (2·R·lk each), a partial output (R/2 × w);
                 // backward: those two blocks and two accumulators
    return std::max(8 * R * lk, 4 * R * lk + R * w / 2);
  }
  const double qkv = R * (w + 2 * u * lk), grads = qkv, all = R * (3 * w + 2 * u * lk);
  const double ring = 8 * u * R * lk;  // on the u·R rows after the all-to-all
  const double forward = std::max({2 * qkv, qkv + R * w + ring / 2 + R * w / (2 * u),
                                   qkv + R * w + 2 * R * w});
  const double backward = std::max({2 * all, all + grads + ring, all + 3 * grads});
  return std::max(forward, backward);
}

MemoryEstimate rank_memory(const ModelSpec& model, const layout::Plan& p, int pipeline_rank,
                           HeadBuffers head, std::span<const PipelineBuffers> pipeline,
                           layout::Runtime runtime) {
  // This runtime under a 2-byte precision: what it keeps in fp32 (parameters, gradients,
  // AdamW's moments with no separate master, every activation and buffer) priced as an fp32
  // run's, less the 2 bytes an element its blocks' saved GeMM inputs do not take (one layer's
  // per kept layer, or under full recomputation the one re-run block per chunk).
  if (!layout::megatron_layers(runtime) && model.precision != Precision::kFp32) {
    ModelSpec fp32 = model;
    fp32.precision = Precision::kFp32;
    MemoryEstimate m = rank_memory(fp32, p, pipeline_rank, head, pipeline, runtime);
    ModelSpec mb = model;
    mb.batch = model.batch / (p.dp * p.microbatches);
    ModelSpec dense_mb = mb;  // a dense layer's (every layer's, in a dense model)
    dense_mb.num_experts = 0;
    const StoredOperands stored = stored_operands(dense_mb, p);
    const double saved = 4 - mb.element_bytes();  // bytes an element stored in 2 does not take
    const auto kept = [&](std::int64_t layers) {  // layers whose saved inputs are held at once
      return p.recompute == Recompute::kFull ? (layers > 0 ? 1.0 : 0.0)
                                             : static_cast<double>(layers);
    };
    for (const int k : chunk_layers(static_cast<int>(model.layers), p, pipeline_rank)) {
      m.activations_bytes -= saved * stored.kept * kept(k);
    }
    if (model.is_moe()) {  // a MoE layer's in place of a dense one's, and its experts' inputs
      const double moe_layer = stored_operands(mb, p).kept - stored.kept;
      m.activations_bytes -= saved * (moe_layer + moe_floats(mb, p, 1.0).operands) *
                             kept(moe_layers_on_rank(model, p, pipeline_rank));
    }
    m.workspace_bytes += (4 * stored.workspace - saved * stored.workspace_operands) *
                         p.virtual_stages;  // one per chunk's stack
    // The blocks' bf16 compute copies of their GeMM weights (model/layer_blocks.hpp), but
    // under ZeRO-3: one per block object, every layer's, or under full recomputation one per
    // kind of layer in each chunk's stack.
    if (p.zero < 3) {
      const double dense = gemm_weight_params(model, p, false);
      const double moe = model.is_moe() ? gemm_weight_params(model, p, true) : 0.0;
      const auto moe_layers =
          static_cast<double>(model.is_moe() ? moe_layers_on_rank(model, p, pipeline_rank) : 0);
      double layers = 0, full = 0;  // every layer's copies; one block object's per kind
      for (const int k : chunk_layers(static_cast<int>(model.layers), p, pipeline_rank)) {
        layers += k;
        const bool both_kinds = model.is_moe() && model.moe_every > 1 && k > 1;
        if (k > 0) full += !model.is_moe() ? dense : both_kinds ? dense + moe : moe;
      }
      const double copies =
          p.recompute == Recompute::kFull ? full : dense * (layers - moe_layers) + moe * moe_layers;
      m.params_bytes += mb.element_bytes() * copies;
    }
    // And the head's weight's, on the rank holding the last stage (model/gpt.hpp head_weight:
    // whole under every ZeRO stage, so copied under every one).
    if (pipeline_rank == p.pp - 1 && model.vocab > 0) {
      const double vocab_rows =
          std::ceil(static_cast<double>(model.vocab) / (p.mesh[0] * p.mesh[1]));
      m.params_bytes += mb.element_bytes() * vocab_rows * static_cast<double>(model.hidden);
    }
    return m;
  }
  if (model.is_moe()) return moe_rank_memory(model, p, pipeline_rank, head, pipeline, runtime);
  p.validate();
  const int v = p.virtual_stages, stages = p.pp * v;
  MESHTP_CHECK(pipeline_rank >= 0 && pipeline_rank < p.pp, "pipeline rank {} of pp={}",
               pipeline_rank, p.pp);
  // Uneven stages (v = 1): this rank's own count (Plan::stage_layers throws naming a bad split).
  MESHTP_CHECK(p.uneven() || model.layers % stages == 0,
               "layers={} do not split into pp={} × virtual stages={}", model.layers, p.pp, v);
  MESHTP_CHECK(model.batch % (p.dp * p.microbatches) == 0,
               "batch={} does not split into dp={} × microbatches={}", model.batch, p.dp,
               p.microbatches);
  ModelSpec mb = model;  // one microbatch of one replica
  mb.batch = model.batch / (p.dp * p.microbatches);
  const double e = mb.element_bytes(), h = mb.hidden, n = static_cast<double>(mb.tokens());
  const double d1 = p.mesh[0], d2 = p.mesh[1], tp = d1 * d2;
  const double vocab_rows = std::ceil(mb.vocab / tp);  // vocabulary-parallel wte and logits
  const BlockFloats f = block_floats(mb, p);
  const double stream = head == HeadBuffers::kRuntime ? n * h : n * h / tp;  // [n, h] whole
  // Layers per chunk (chunk_layers), and the largest.
  const std::vector<int> chunk = chunk_layers(static_cast<int>(model.layers), p, pipeline_rank);
  const int layers = *std::max_element(chunk.begin(), chunk.end());
  const bool full = p.recompute == Recompute::kFull;
  // Megatron-LM with a pipeline: a chunk's (microbatch) in flight keeps its kept sets (none
  // under full recomputation) and layer inputs; the one block re-run under full
  // recomputation is counted once per rank, with the buffers.
  const bool megatron_pipeline = layout::megatron_layers(runtime) && (p.pp > 1 || v > 1);
  MESHTP_CHECK((p.pp == 1 && v == 1) || pipeline.size() == static_cast<std::size_t>(p.pp),
               "internal: pipeline buffers of {} ranks for pp={}", pipeline.size(), p.pp);
  const int in_flight =
      megatron_pipeline ? pipeline[static_cast<std::size_t>(pipeline_rank)].in_flight : 0;
  // kFull: the stack's one block, re-run before each layer's backward, holds what a layer
  // keeps without recomputation while it runs; Megatron-LM's dropout and re-gathered
  // LayerNorm outputs: layer_kept. This runtime counts that block with the activations (its
  // stack holds it); Megatron-LM's re-run is counted with the buffers, once per rank: it is
  // not kept from the forward for the backward (Korthikanti Table 2's 2·sbhL leaves it out).
  const LayerKept kept = layer_kept(f, mb, p, runtime);
  const bool megatron = layout::megatron_layers(runtime);
  const double rerun_block = full ? kept.whole : 0.0;
  const auto kept_blocks = [&](int k) {
    return chunk[static_cast<std::size_t>(k)] * kept.kept + (megatron ? 0.0 : rerun_block);
  };
  // The (microbatch, chunk) pairs in flight, counted in layers: each pair keeps its chunk's.
  const double in_flight_layers =
      megatron_pipeline ? in_flight_chunk_layers(p, pipeline_rank, chunk, in_flight) : 0.0;

  // train/zero.hpp's buckets: one per block, and the last (embeddings, final LayerNorm and,
  // under Megatron-SP, the blocks' LayerNorm parameters, 4h/d2 each: reduced after the stack).
  const double block = block_params(mb, p);
  const double norms = 2.0 * static_cast<double>(mb.norm_params());  // a block's two: 4h (GPT)
  const double ln = p.sequence_parallel && !layout::is_gemm2d(p.strategy) ? norms / d2 : 0;
  MemoryEstimate out;
  double params = 0, whole_params = 0, activations = 0, buffers = 0, stacks = 0, last_bucket = 0;
  bool gathers_stream = false;  // holds the embedding or the head
  // A stack's buffers: two gradient streams and one block's workspace, and with copied KV
  // heads (model/stack.cpp) a layer's copied QKV gradient, its global KV rows' sum and each
  // element's share of the norm.
  double stack_buffers = 2 * f.input + f.workspace;
  if (kv_copies(mb, p)) {
    const double local = (h / (d1 * d2) + 2 * static_cast<double>(mb.head_dim())) * h;
    stack_buffers += 2 * local + static_cast<double>(mb.qkv_width() - mb.hidden) * h;
  }
  if (megatron) buffers += stack_buffers;
  for (int k = 0; k < v; ++k) {
    const int stage = k * p.pp + pipeline_rank;
    const bool first = stage == 0, last = stage == stages - 1;
    const int layers_k = chunk[static_cast<std::size_t>(k)];
    const double blocks = layers_k * block;
    // The embedding table (first), the head's (last: the same table when tied and one
    // stage holds both), learned positions (first), the final norm (last).
    const double tables = (first ? 1 : 0) + (last && (!first || !mb.tie_embeddings) ? 1 : 0);
    // (Whole under context parallelism: s = seq·cp rows.)
    const double positions =
        mb.position == layout::Position::kLearned ? static_cast<double>(mb.seq) * p.cp * h : 0.0;
    const double extras = tables * vocab_rows * h + (first ? positions : 0) +
                          (last ? static_cast<double>(mb.norm_params()) / d2 : 0);
    params += blocks + extras;
    last_bucket += extras + layers_k * ln;
    // ZeRO-3 keeps a block's parameters whole only while it runs: the running one in the
    // running chunk, the last one run in every other.
    whole_params += extras + layers_k * ln + (layers_k > 0 ? block - ln : 0.0);
    // The stack: kept sets, layer inputs (one more: the output), two gradient streams, one
    // workspace; under Megatron-SP the LayerNorm gradients' partial sums (4h per layer).
    activations += megatron_pipeline ? f.input : kept_blocks(k) + (layers_k + 1) * f.input;
    // This runtime's stacks (one per chunk, train/pipeline_model.cpp) each own a workspace;
    // Megatron-LM's chunks are modules whose forward and backward temporaries come from one
    // allocator and live only while a layer runs, and a rank runs one layer at a time: one
    // set per rank (counted after the loop).
    if (!megatron) buffers += stack_buffers;
    if (p.sequence_parallel && !layout::is_gemm2d(p.strategy)) stacks += norms * layers_k;
    // The embedding's output and the head's gathered final LayerNorm, logits (model/gpt.cpp).
    if (first) activations += stream;
    if (last) activations += f.input + stream + n * vocab_rows;
    if (first || last) buffers += stream;  // the gradient of the gathered stream
    gathers_stream = gathers_stream || first || last;
    if (last) buffers += 2 * h / d2;      // the final LayerNorm's partial gradients
  }
  // One gather at a time (the head's in the forward, the embedding's in the backward).
  if (gathers_stream) buffers += stream_gather_peak(mb, p, pipeline_rank, head);
  // ZeRO ≥ 2: during a block's backward (only then) its gradient whole and, once packed, its
  // send buffer (train/zero.hpp): the peak is both at once, the previous block's reduction
  // already waited.
  const double backward_only = p.zero >= 2 ? 2 * (block - ln) : 0;
  // Megatron-LM's selective recomputation re-runs the attention dropout with the softmax:
  // its mask and output live beside the recomputed probabilities (in the workspace).
  if (megatron && megatron_drops_out(mb) && p.recompute == Recompute::kSelective) {
    buffers += f.scores * (1 + op_costs::kDropoutMaskBytes / e);
  }
  if (megatron) buffers += rerun_block;
  if (megatron_pipeline) {
    activations += in_flight_layers * (kept.kept + f.input);
    // DeepSpeed's PipelineEngine keeps each pipe buffer's output until its backward (pipe/
    // engine.py _exec_forward_pass stores pipe_buffers['outputs'], _exec_backward_pass clears
    // it): with tensor parallelism the partitioned stage output (one 1/t slice of the stream,
    // PartitionedTensor; its whole data is freed), else the whole output; at least 2 buffers
    // (pipe/schedule.py TrainSchedule.num_pipe_buffers: max(2, min(stages − stage_id, m))).
    if (runtime == layout::Runtime::kDeepSpeed && pipeline_rank + 1 < p.pp) {
      const double pipe_buffers = std::max(2, std::min(p.pp - pipeline_rank, p.microbatches));
      activations += pipe_buffers * f.input / (d1 * d2);
    }
    // Its point-to-point ops are blocking: one activation and one gradient received and
    // sent at a time.
    buffers += 4 * f.input;
  } else if (p.pp > 1 || v > 1) {
    const PipelineBuffers pipe = pipeline[static_cast<std::size_t>(pipeline_rank)];
    buffers +=
        std::max(pipe.peak * f.input, pipe.backward_peak * f.input + backward_only) - backward_only;
    const bool any_inner = v > 1 || pipeline_rank + 1 < p.pp;
    if (any_inner) buffers += f.input;  // the discarded output of a rematerialised forward
  }
  out.params_bytes = e * (p.zero == 3 ? whole_params : params);
  // AdamW: two fp32 moments per parameter, plus the fp32 master of mixed precision; ZeRO ≥ 1
  // keeps those, and the value being updated, for 1/dp of the parameters (train/zero.hpp).
  // Gradients: whole accumulators, and with dp > 1 the buckets one more copy (the
  // all-reduce's, or stage 1's reduce-scatter input and all-gather output). ZeRO ≥ 2 keeps
  // 1/dp of every gradient (the summed parts), the last bucket whole with its buffer, and a
  // block's whole gradient and send buffer only during its backward (backward_only); stage 3
  // also the running block's parameters whole (whole_params) and the next one's gather.
  // The ranks sharing a replica's parameters: dp, times cp (context parallelism's ranks hold
  // the same parameters; Megatron-LM's distributed optimizer shards over both).
  const double dp = static_cast<double>(p.dp) * p.cp;
  if (p.zero == 0) {
    out.optimizer_bytes = params * (mb.precision != Precision::kFp32 ? 12 : 8);
  } else {
    out.optimizer_bytes = params / dp * 12;
  }
  if (p.zero >= 2) {
    out.grads_bytes = e * (params / dp + last_bucket + stacks + backward_only / 2);
    buffers += last_bucket + backward_only / 2;
    if (p.zero == 3 && layers > 1) buffers += block - ln;  // the prefetched block's gather
  } else {
    out.grads_bytes = e * (params + stacks);
    if (p.dp * p.cp > 1) buffers += params;
    // DeepSpeed's BF16_Optimizer (bf16, ZeRO 0–1): beside the bf16 gradients, an fp32
    // accumulator of every parameter of the rank (bf16_optimizer.py fp32_groups_gradients,
    // grad_acc_dtype fp32: engine.py get_data_types), kept the whole step.
    if (runtime == layout::Runtime::kDeepSpeed && mb.precision == Precision::kBf16) {
      out.grads_bytes += 4 * params;
    }
  }
  // meshtp's context-parallel core: the layer's buffers while one block's core runs; the
  // block keeps no flash-attention scratch of its own then (the layer's is per call).
  buffers += cp_core_extra_floats(mb, p, runtime);
  out.activations_bytes = e * activations;
  out.workspace_bytes = e * buffers + gemm2d_buffer_bytes(mb, p);
  return out;
}

MemoryEstimate peak_rank_memory(const ModelSpec& model, const layout::Plan& p, HeadBuffers head,
                                layout::Runtime runtime) {
  return peak_rank_memory(model, p, head, pipeline_buffers(p), runtime);
}

MemoryEstimate peak_rank_memory(const ModelSpec& model, const layout::Plan& p, HeadBuffers head,
                                std::span<const PipelineBuffers> pipeline,
                                layout::Runtime runtime) {
  MemoryEstimate best;
  for (int r = 0; r < p.pp; ++r) {
    const MemoryEstimate m = rank_memory(model, p, r, head, pipeline, runtime);
    if (r == 0 || m.total_bytes() > best.total_bytes()) best = m;
  }
  return best;
}

}  // namespace meshtp::plan
