#include "model/block.hpp"

#include "ops/cpu_backend.hpp"

#include <algorithm>
#include <functional>

#include "core/error.hpp"
#include "core/parse.hpp"
#include "layout/atp_traffic.hpp"
#include "core/op_costs.hpp"
#include "ops/attention.hpp"
#include "ops/flash_attention.hpp"
#include "ops/gelu.hpp"
#include "ops/linear.hpp"
#include "ops/residual.hpp"
#include "ops/rope.hpp"
#include "ops/swiglu.hpp"
#include "parallel/layernorm_sharded.hpp"

namespace meshtp::model {
namespace {

using parallel::ChunkedLayout;
using parallel::ChunkedMatrix;
using parallel::LinearKind;

const BlockConfig& validated(const BlockConfig& c, const std::vector<int>& mesh_shape) {
  validate_atp_block(c, mesh_shape);
  return c;
}

parallel::Linear2DSpec linear_spec(const BlockConfig& c, LinearKind kind, std::int64_t in,
                                   std::int64_t out, bool heads) {
  const bool sp = c.layout.sequence_parallel;
  return {.kind = kind,
          .in_features = in,
          .out_features = out,
          .rows = c.local_tokens(),
          .chunks = c.layout.chunks,
          .sequence_parallel = sp,
          .scatter_output = heads && !sp && kind == LinearKind::kColumnFirst,
          .gather_input = heads && !sp && kind == LinearKind::kRowFirst};
}

StackBlock::Shards atp_shards(const layout::ModelShape& shape) {
  StackBlock::Shards shards{};
  const auto table = block_param_table(0, shape);
  for (std::size_t p = 0; p < shards.size(); ++p) shards[p] = table[p].shard;
  return shards;
}

// The experts' own mesh (ep, etp) over the N·cp = ep·etp ranks of mesh dim 0 and the
// context-parallel group (BlockConfig::fold_group; mesh dim 0 alone when cp is 1), etp the
// faster-varying coordinate (Megatron-Core's expert rank order, tp before ep): the plan's, or
// (N·cp, 1) — each expert whole — where it leaves ep and etp unset. Empty for a dense block.
std::vector<int> expert_mesh_shape(const BlockConfig& c, const std::vector<int>& mesh_shape) {
  if (!c.shape.is_moe()) return {};
  layout::Plan folded = c.layout;
  folded.mesh = {mesh_shape.at(0), mesh_shape.at(1)};
  folded = folded.as_runtime_runs(c.shape);
  return {folded.ep, folded.expert_tp()};
}

// The load-balancing loss's token set is the tokens of the experts' ranks: dim 0's times the
// context-parallel group's (one replica's microbatch under sequence parallelism; Megatron-Core
// reduces the tokens per expert over tp×cp).
parallel::MoeConfig moe_config(const layout::ModelShape& s) {
  return {.hidden = s.hidden, .experts = s.num_experts, .top_k = s.top_k,
          .ffn = s.expert_ffn(), .capacity_factor = s.capacity_factor,
          .aux_loss_coeff = s.router_aux_loss, .force_balance = s.moe_force_balance};
}

// The dense MLP's widths: FC1's output and FC2's input — the shared experts' S =
// shared_experts·f_e in a MoE block that has them (its routed experts are parallel/moe's).
std::int64_t dense_mlp1_width(const layout::ModelShape& s) {
  return s.shared_experts > 0 ? s.shared_ffn() : s.mlp1_width();
}
std::int64_t dense_mlp2_width(const layout::ModelShape& s) {
  return s.shared_experts > 0 ? s.shared_ffn() : s.ffn();
}

// Grouped-query attention under the unfused core (ops/attention.hpp, multi-head only): a
// sequence's packed q | k | v of NKV KV heads widened to NH heads — query head j reads KV
// head j/G, G = NH/NKV — and back for the gradient, each KV head's summed over its G query
// heads. HD: the head dim. Copies and adds of column blocks on the backend.
void widen_kv(device::Backend& be, const View& mha, const View& gqa, std::int64_t NH,
              std::int64_t NKV, std::int64_t HD) {
  const std::int64_t C = NH * HD, K = NKV * HD, G = NH / NKV, T = gqa.rows;
  std::vector<View> dst{mha.block(0, 0, T, C)}, src{gqa.block(0, 0, T, C)};
  for (std::int64_t j = 0; j < NH; ++j) {
    dst.push_back(mha.block(0, C + j * HD, T, HD));
    src.push_back(gqa.block(0, C + (j / G) * HD, T, HD));
    dst.push_back(mha.block(0, 2 * C + j * HD, T, HD));
    src.push_back(gqa.block(0, C + K + (j / G) * HD, T, HD));
  }
  be.copy_blocks(dst, src);
}

void narrow_kv_grad(device::Backend& be, const View& dgqa, const View& dmha, std::int64_t NH,
                    std::int64_t NKV, std::int64_t HD) {
  const std::int64_t C = NH * HD, K = NKV * HD, G = NH / NKV, T = dgqa.rows;
  be.add(dgqa.block(0, 0, T, C), dmha.block(0, 0, T, C));
  for (std::int64_t j = 0; j < NH; ++j) {
    be.add(dgqa.block(0, C + (j / G) * HD, T, HD), dmha.block(0, C + j * HD, T, HD));
    be.add(dgqa.block(0, C + K + (j / G) * HD, T, HD), dmha.block(0, 2 * C + j * HD, T, HD));
  }
}

// The buffer, or `alias` seen with layout l when the buffer was not needed (no collective
// between the two: the producer writes the consumer's memory).
ChunkedMatrix or_alias(const device::Array& a, const ChunkedLayout& l, const ChunkedMatrix& alias) {
  return a.empty() ? ChunkedMatrix(alias.data(), alias.type(), l)
                   : ChunkedMatrix(a.data(), a.type(), l);
}

// A host rope table's values in the backend's memory.
device::Array upload_table(device::Backend& be, const RopeTable& t) {
  device::Array a = be.alloc(t.cos_sin.numel(), Element::kF32);
  be.upload(a, t.cos_sin.values());
  return a;
}

// Context parallelism's refusals, from the config alone (model/block.hpp).
void validate_cp(const BlockConfig& c, int ranks) {
  const auto& m = c.shape;
  const int cp = c.layout.cp;
  MESHTP_CHECK(m.seq % (2 * cp) == 0,
               "context parallelism: seq={} is not divisible by 2·cp={} (each of the cp={} ranks "
               "holds two of the 2·cp equal zigzag chunks of every sequence)",
               m.seq, 2 * cp, cp);
  MESHTP_CHECK(c.layout.attention == layout::Attention::kFused,
               "cp={}: the context-parallel attention core is flash-style; it needs "
               "attention=fused (--attention fused), got {}",
               cp, c.layout.attention);
  const std::int64_t heads = m.heads / ranks, kv = std::max<std::int64_t>(m.kv() / ranks, 1);
  const int u = layout::cp_a2a_size(c.layout.cp_comm, cp, static_cast<int>(heads));
  MESHTP_CHECK(c.layout.cp_comm != layout::CpComm::kA2a || heads % cp == 0,
               "cp_comm=a2a: the {} heads per tensor-parallel rank (heads={} / d1·d2={}) are not "
               "divisible by cp={} (Ulysses splits them over the cp ranks)",
               heads, m.heads, ranks, cp);
  MESHTP_CHECK(c.layout.cp_comm != layout::CpComm::kA2aRing || u > 1,
               "cp_comm=a2a+ring with cp={}: no all-to-all degree 1 < u < {} divides both cp and "
               "the {} heads per tensor-parallel rank (heads={} / d1·d2={}); use ring or a2a",
               cp, cp, heads, m.heads, ranks);
  MESHTP_CHECK(kv % u == 0 || u % kv == 0,
               "cp_comm={}: the {} KV heads per tensor-parallel rank (kv_heads={} / d1·d2={}) and "
               "the all-to-all's {} ranks: one must divide the other",
               c.layout.cp_comm, kv, m.kv(), ranks, u);
  parallel::validate_context_parallel({.batch = m.batch / c.layout.chunks,
                                       .seq = m.seq,
                                       .heads = heads,
                                       .kv_heads = kv,
                                       .head_dim = m.head_dim()},
                                      c.layout.cp_comm, cp);
}

}  // namespace

std::int64_t cp_token_of_row(const BlockConfig& c, int cp_rank, std::int64_t r) {
  const int cp = c.layout.cp;
  if (cp == 1) return r;
  const std::int64_t bc = c.shape.batch / c.layout.chunks, per_chunk = bc * c.shape.seq / cp;
  const std::int64_t chunk = r / per_chunk;  // the layout's batch chunk
  const parallel::ContextParallelShape shape{.batch = bc, .seq = c.shape.seq};
  return chunk * bc * c.shape.seq + parallel::cp_global_row(shape, cp, cp_rank, r % per_chunk);
}

void validate_atp_block(const BlockConfig& c, const std::vector<int>& mesh_shape) {
  MESHTP_CHECK(mesh_shape.size() == 2, "the block runs on a 2-D mesh (d1, d2), got mesh {}",
               format_mesh_shape(mesh_shape));
  const int d1 = mesh_shape[0], d2 = mesh_shape[1];
  const std::string mesh = format_mesh_shape(mesh_shape);
  MESHTP_CHECK(!layout::is_gemm2d(c.layout.strategy),
               "the ATP block runs atp, megatron and tp1d, not {} (a 2D-GeMM block's)",
               c.layout.strategy);
  c.shape.validate("model");
  MESHTP_CHECK(c.layout.chunks >= 1, "chunks={} must be at least 1", c.layout.chunks);
  // The planner ranks only what this accepts: one check (layout/atp_traffic.hpp).
  if (auto reason = layout::atp_block_invalid_reason(c.shape, d1, d2, c.layout.chunks)) {
    fail("{}", *reason);
  }
  MESHTP_CHECK(c.layout.progress_splits >= 1, "progress splits={} must be at least 1",
               c.layout.progress_splits);
  if (c.layout.sequence_parallel) {
    MESHTP_CHECK(d2 == 1, "sequence parallelism runs on a mesh (N, 1), got mesh {}", mesh);
    const std::int64_t tokens = c.shape.batch / c.layout.chunks * c.shape.seq / c.layout.cp;
    MESHTP_CHECK(tokens % d1 == 0,
                 "sequence parallelism: a chunk's (batch/chunks)·seq{} = {} tokens are not "
                 "divisible by N={} (mesh {})",
                 c.layout.cp > 1 ? fmt::format("/cp={}", c.layout.cp) : "", tokens, d1, mesh);
  }
  if (c.layout.cp > 1) validate_cp(c, d1 * d2);
  // The layer family (layout/model_shape.hpp): KV heads split with the query heads' blocks,
  // or (fewer KV heads than blocks) one KV head copied to each block that reads it.
  const auto& m = c.shape;
  const std::int64_t ranks = static_cast<std::int64_t>(d1) * d2;
  MESHTP_CHECK(m.kv() % ranks == 0 || ranks % m.kv() == 0,
               "kv_heads={} (heads={}) and d1·d2={} (mesh {}): one must divide the other (each "
               "rank holds the KV heads of its own query heads, whole or as a copy)",
               m.kv(), m.heads, ranks, mesh);
  MESHTP_CHECK(m.kv() == m.heads || !m.has_biases(),
               "kv_heads={} < heads={} with activation={}: grouped-query attention runs "
               "without linear biases (activation swiglu)",
               m.kv(), m.heads, m.activation);
  MESHTP_CHECK(m.ffn() % d1 == 0, "ffn_hidden={} is not divisible by d1={} (mesh {})", m.ffn(),
               d1, mesh);
  MESHTP_CHECK(!m.is_moe() || m.is_gpt(),
               "num_experts={}: the runtime's mixture of experts has GPT's layers (kv_heads, "
               "ffn_hidden, activation, norm, position, tie_embeddings at their defaults)",
               m.num_experts);
  if (c.shape.is_moe()) {
    // The experts split over mesh dim 0, whose ranks must hold tokens of their own.
    const auto& s = c.shape;
    MESHTP_CHECK(d2 == 1 && (d1 == 1 || c.layout.sequence_parallel),
                 "num_experts={}: the mixture of experts runs on a mesh N×1 with sequence "
                 "parallelism (each rank its own tokens; the experts split over the N ranks), "
                 "got mesh {}{}",
                 s.num_experts, mesh, c.layout.sequence_parallel ? "" : " without it");
    const std::vector<int> experts = expert_mesh_shape(c, mesh_shape);
    const int ep = experts[0], etp = experts[1], cp = c.layout.cp;
    MESHTP_CHECK(ep * etp == d1 * cp,
                 "ep={} × etp={} = {} ranks, but the experts fold onto the N·cp = {}·{} = {} "
                 "ranks of mesh {} and the context-parallel group (ep·etp must be N·cp)",
                 ep, etp, ep * etp, d1, cp, d1 * cp, mesh);
    MESHTP_CHECK(s.num_experts % ep == 0,
                 "num_experts={} is not divisible by the expert-parallel size ep={} (mesh {})",
                 s.num_experts, ep, mesh);
    MESHTP_CHECK(s.expert_ffn() % etp == 0,
                 "an expert's width {} is not divisible by the expert tensor-parallel size "
                 "etp={} (mesh {})",
                 s.expert_ffn(), etp, mesh);
    MESHTP_CHECK(s.shared_experts == 0 || s.moe_every == 1,
                 "shared_experts={} with moe_every={}: the runtime runs shared experts where "
                 "every layer is MoE (the planner prices both)",
                 s.shared_experts, s.moe_every);
  }
}

Block::Block(const mesh::DeviceMesh& mesh, const BlockConfig& config)
    : StackBlock(mesh, validated(config, mesh.shape()).shape, atp_shards(config.shape),
                 expert_mesh_shape(config, mesh.shape()),
                 config.layout.cp > 1 ? config.fold_group : nullptr),
      config_(config),
      be_(config.backend != nullptr ? config.backend : &cpu_backend()),
      ln_group_(config.layout.sequence_parallel ? nullptr : &mesh.dim_comm(1)),
      local_heads_(config.shape.heads / mesh.size()),
      head_width_(config.shape.hidden / mesh.size()),
      local_kv_(std::max<std::int64_t>(config.shape.kv() / mesh.size(), 1)),
      kv_width_(local_kv_ * config.shape.head_dim()),
      // h + 2·g·d out features, or with KV heads copied T·(h/T + 2d) (param_shard.hpp)
      qkv_(mesh,
           linear_spec(config, LinearKind::kColumnFirst, config.shape.hidden,
                       mesh.size() * (head_width_ + 2 * kv_width_), true),
           *be_),
      proj_(mesh,
            linear_spec(config, LinearKind::kRowFirst, config.shape.hidden, config.shape.hidden,
                        true),
            *be_),
      mlp1_(mesh,
            linear_spec(config, LinearKind::kColumnFirst, config.shape.hidden,
                        dense_mlp1_width(config.shape), false),
            *be_),
      mlp2_(mesh,
            linear_spec(config, LinearKind::kRowFirst, dense_mlp2_width(config.shape),
                        config.shape.hidden, false),
            *be_),
      progress_(config.layout.progress_splits) {
  for (auto* l : {&qkv_, &proj_, &mlp1_, &mlp2_}) l->watch(progress_);
  if (config.shape.is_moe()) {
    moe_ = std::make_unique<parallel::ExpertParallelMoe>(
        moe_config(config.shape),
        parallel::MoeGroups{expert_mesh_->dim_comm(0), expert_mesh_->dim_comm(1),
                            config.layout.cp > 1 ? expert_mesh_->comm() : mesh.dim_comm(0)},
        *be_);
  }
  const std::int64_t rows = stream_layout().rows();
  ln1_mean_ = buffer(rms() ? 0 : rows);  // RMSNorm keeps r (in rstd) only
  ln1_rstd_ = buffer(rows);
  ln2_mean_ = buffer(rms() ? 0 : rows);
  ln2_rstd_ = buffer(rows);
  const double theta = rope_theta_or_default(config.shape.rope_theta);
  if (config.layout.cp > 1) {
    MESHTP_CHECK(config.cp_group != nullptr && config.cp_group->size() == config.layout.cp,
                 "block: cp={} needs a context-parallel group of {} ranks, got {}",
                 config.layout.cp, config.layout.cp,
                 config.cp_group != nullptr ? config.cp_group->size() : 0);
    const std::int64_t s = config.shape.seq, c = s / (2 * config.layout.cp);
    cp_ = std::make_unique<parallel::ContextParallelAttention>(
        parallel::ContextParallelShape{.batch = config.shape.batch / config.layout.chunks,
                                       .seq = s,
                                       .heads = local_heads_,
                                       .kv_heads = local_kv_,
                                       .head_dim = config.shape.head_dim()},
        config.layout.cp_comm, *config.cp_group, *be_);
    if (config.shape.position == layout::Position::kRope) {
      const int r = config.cp_group->rank();
      cp_rope_[0] = upload_table(*be_, rope_table(config.shape.head_dim(), r * c, c, theta));
      cp_rope_[1] = upload_table(
          *be_, rope_table(config.shape.head_dim(), (2 * config.layout.cp - 1 - r) * c, c, theta));
    }
  } else if (config.shape.position == layout::Position::kRope) {
    rope_ = upload_table(*be_, rope_table(config.shape.head_dim(), 0, config.shape.seq, theta));
  }
  operands_ = saved_operand_element();
  if (operands_ != Element::kF32 && config.layout.zero < 3) {
    // The linears' weights: the attention's, and the dense MLP's (a MoE block's shared
    // experts'; its routed experts round theirs per GeMM).
    std::vector<int> weights{kQkvWeight, kProjWeight};
    if (dense_mlp()) {
      weights.push_back(moe_ ? kSharedFc1Weight : kMlp1Weight);
      weights.push_back(moe_ ? kSharedFc2Weight : kMlp2Weight);
    }
    keep_compute_copies(weights, *be_);
  }
  xn1_ = operand_buffer(qkv_.x_layout().size());
  xn1g_ = operand_buffer(qkv_.gathers_input() ? qkv_.xg_layout().size() : 0);
  qkv_out_ = operand_buffer(qkv_.y_layout().size());
  const bool selective = config.layout.recompute == layout::Recompute::kSelective;
  att_ = buffer(selective || fused()
                    ? 0
                    : attention_att_size(config.shape.batch, config.shape.seq, local_heads_));
  if (fused()) {  // O(s) per row and head instead of the s×s probabilities
    lse_ = buffer(local_heads_ * config.local_tokens());
    attn_out_ = operand_buffer(proj_.gathers_input() ? proj_.x_layout().size() : 0);
  }
  attn_g_ = operand_buffer(proj_.xg_layout().size());
  xmid_ = buffer(stream_layout().size());
  xn2_ = operand_buffer(mlp1_.x_layout().size());
  const bool dense = dense_mlp();
  xn2g_ = operand_buffer(dense && mlp1_.gathers_input() ? mlp1_.xg_layout().size() : 0);
  mlp1_y_ = operand_buffer(dense ? mlp1_.y_layout().size() : 0);
  gelu_ = operand_buffer(dense ? mlp2_.x_layout().size() : 0);
}

bool Block::replica_grad(int k) const {
  return k == kQkvWeight && config_.shape.kv() < mesh_->size();
}

bool Block::partial_grad(int k) const {
  if (!config_.layout.sequence_parallel) return false;
  const bool layernorm = k == kLn1Weight || k == kLn1Bias || k == kLn2Weight || k == kLn2Bias;
  return layernorm || (moe_ && (k == kMlp1Bias || k == kMlp2Bias));  // router, output bias
}

BlockWorkspace::BlockWorkspace(const Block& b)
    : qkv_p(b.buffer(b.qkv_.scatters_output() ? b.qkv_.yp_layout().size() : 0)),
      attn(b.operand_buffer(b.proj_.gathers_input() ? b.proj_.x_layout().size() : 0)),
      proj_p(b.buffer(b.proj_.yp_layout().size())),
      proj_y(b.buffer(b.proj_.scatters_output() ? b.proj_.y_layout().size() : 0)),
      mlp2_p(b.buffer(b.dense_mlp() ? b.mlp2_.yp_layout().size() : b.stream_layout().size())),
      mlp2_y(b.buffer(b.dense_mlp() && b.mlp2_.scatters_output() ? b.mlp2_.y_layout().size() : 0)),
      moe_out(b.buffer(b.shared() ? b.stream_layout().size() : 0)),
      dyg(b.buffer(b.dense_mlp() && b.mlp2_.scatters_output() ? b.mlp2_.yp_layout().size() : 0)),
      dgelu(b.buffer(b.dense_mlp() ? b.mlp2_.xg_layout().size() : 0)),
      dmlp1(b.buffer(b.dense_mlp() ? b.mlp1_.yp_layout().size() : 0)),
      dxn_p(b.buffer(b.mlp1_.xg_layout().size())),
      dxn(b.buffer(b.mlp1_.gathers_input() ? b.mlp1_.x_layout().size() : 0)),
      dxmid(b.buffer(b.stream_layout().size())),
      dxmid_g(b.buffer(b.proj_.scatters_output() ? b.proj_.yp_layout().size() : 0)),
      datt_p(b.buffer(b.proj_.xg_layout().size())),
      datt(b.buffer(b.proj_.gathers_input() ? b.proj_.x_layout().size() : 0)),
      dqkv(b.buffer(b.qkv_.y_layout().size())),
      dqkv_g(b.buffer(b.qkv_.scatters_output() ? b.qkv_.yp_layout().size() : 0)),
      att_scratch(b.buffer(
          b.cp_       ? 0  // the context-parallel layer keeps its own
          : b.fused() ? static_cast<std::int64_t>(op_costs::flash_attention_scratch_floats(
                            static_cast<double>(b.config().shape.seq),
                            static_cast<double>(b.config().shape.seq),
                            static_cast<double>(b.config().shape.hidden / b.config().shape.heads),
                            op_costs::kFlashBlockQ, op_costs::kFlashBlockK))
                      : attention_scratch_size(b.config().shape.seq))),
      att(b.buffer(
          b.config().layout.recompute == layout::Recompute::kSelective && !b.fused()
              ? attention_att_size(b.config().shape.batch, b.config().shape.seq, b.local_heads_)
              : 0)),
      ln_scratch(b.be_->alloc(2 * b.stream_layout().chunk_rows, Element::kF64)),
      qkv(b.buffer(b.operands_ == Element::kF32 ? 0 : b.qkv_.y_layout().size())),
      attn_f32(b.buffer(b.operands_ == Element::kF32 ? 0 : b.proj_.x_layout().size())) {
  if (b.local_kv_ != b.local_heads_ && !b.fused()) {  // one sequence's widened q | k | v
    qkv_mha = b.buffer(b.config().shape.seq * 3 * b.head_width_);
    dqkv_mha = b.buffer(b.config().shape.seq * 3 * b.head_width_);
  }
}

ChunkedLayout Block::stream_layout() const { return mlp2_.y_layout(); }

parallel::ActivationShard Block::stream_shard() const {
  if (config_.layout.sequence_parallel)
    return {config_.layout.chunks, {mesh::Shard{1}, mesh::Replicate{}}};
  return {config_.layout.chunks, {mesh::Replicate{}, mesh::Shard{2}}};
}

void Block::bound() {
  // A linear's weight as its GeMMs read it (a bf16 compute copy, or the fp32 value), its bias
  // and gradients the fp32 parameters'.
  const auto bind = [&](parallel::Linear2D& l, int w, int b) {
    const auto view = [](std::span<const float> s) { return s.empty() ? View{} : host_view(s); };
    const auto at = [](const auto& spans, int k) {
      return k < 0 ? std::span<float>{} : spans[static_cast<std::size_t>(k)];
    };
    l.bind(gemm_weight(w), view(at(p_, b)), view(at(g_, w)), view(at(g_, b)));
  };
  bind(qkv_, kQkvWeight, kQkvBias);
  bind(proj_, kProjWeight, kProjBias);
  if (moe_) {
    moe_->bind({p_[kMlp1Bias], p_[kMlp1Weight], p_[kMlp2Weight]},
               {g_[kMlp1Bias], g_[kMlp1Weight], g_[kMlp2Weight]});
    if (shared()) {  // the shared experts' dense MLP; the output bias is the layer's (kMlp2Bias)
      bind(mlp1_, kSharedFc1Weight, kSharedFc1Bias);
      bind(mlp2_, kSharedFc2Weight, -1);
    }
    return;
  }
  bind(mlp1_, kMlp1Weight, kMlp1Bias);
  bind(mlp2_, kMlp2Weight, kMlp2Bias);
}

device::Array Block::buffer(std::int64_t n) const {
  return n > 0 ? be_->alloc(n, Element::kF32) : device::Array();
}

device::Array Block::operand_buffer(std::int64_t n) const {
  return n > 0 ? be_->alloc(n, operands_) : device::Array();
}

View Block::operand_out(const Chunked& m, int i, const device::Array& stage) const {
  const View v = m.chunk_view(i);
  return v.type == Element::kF32 ? v : stage.view(v.rows, v.cols);
}

void Block::store_operand(const Chunked& m, int i, const View& written) const {
  const View v = m.chunk_view(i);
  if (v.data != written.data) be_->copy(v, written);
}

View Block::rows_of(const device::Array& per_row, int i) const {
  if (per_row.empty()) return {};  // RMSNorm keeps no mean
  const std::int64_t nc = stream_layout().chunk_rows;
  return per_row.view(i * nc, 1, nc, nc);
}

// One sequence at a time, so MPI is poked between them while collectives fly.
void Block::attention_forward_chunk(int i, BlockWorkspace& ws) {
  device::Backend& be = *be_;
  const std::int64_t s = config_.shape.seq, bc = config_.shape.batch / config_.layout.chunks;
  const std::int64_t w = head_width_, per_seq = local_heads_ * s * s;
  const std::int64_t pw = w + 2 * kv_width_;  // q | k | v of this rank's heads
  const View qkv = qkv_fp32(ws).chunk_view(i);
  const View out = core_out(ws).chunk_view(i);
  if (cp_) {  // this rank's zigzag rows of the chunk's bc sequences, all cp ranks together
    const std::int64_t lse = cp_->lse_size();
    cp_->forward(out, lse_.view(i * lse, 1, lse, lse), qkv.block(0, 0, qkv.rows, w),
                 qkv.block(0, w, qkv.rows, kv_width_),
                 qkv.block(0, w + kv_width_, qkv.rows, kv_width_));
    return;
  }
  for (std::int64_t q = 0; q < bc; ++q) {
    if (fused()) {
      const std::int64_t rows = local_heads_ * s;  // one sequence's log-sum-exps
      be.flash_attention_qkv_forward(out.block(q * s, 0, s, w),
                                     lse_.view((i * bc + q) * rows, 1, rows, rows),
                                     ws.att_scratch.view(1, ws.att_scratch.count()),
                                     qkv.block(q * s, 0, s, pw), 1, s, local_heads_, local_kv_);
      if (config_.layout.progress_splits > 1) progress_.poke();
      continue;
    }
    const View att = this->att(ws).view((i * bc + q) * per_seq, 1, per_seq, per_seq);
    be.attention_core_forward(out.block(q * s, 0, s, w), att,
                              qkv_mha(ws, qkv.block(q * s, 0, s, pw)), 1, s, local_heads_);
    if (config_.layout.progress_splits > 1) progress_.poke();
  }
}

void Block::attention_backward_chunk(int i, BlockWorkspace& ws) {
  device::Backend& be = *be_;
  const std::int64_t s = config_.shape.seq, bc = config_.shape.batch / config_.layout.chunks;
  const std::int64_t w = head_width_, per_seq = local_heads_ * s * s;
  const std::int64_t pw = w + 2 * kv_width_;
  // The fp32 q | k | v: the saved one, or its bf16 copy widened (exactly) into the workspace.
  const View qkv = qkv_fp32(ws).chunk_view(i);
  store_operand(qkv_fp32(ws), i, view(qkv_out_, qkv_.y_layout()).chunk_view(i));
  const View dqkv = view(ws.dqkv, qkv_.y_layout()).chunk_view(i);
  const View dout =
      or_alias(ws.datt, proj_.x_layout(), view(ws.datt_p, proj_.xg_layout())).chunk_view(i);
  const View scratch =
      ws.att_scratch.empty() ? View{} : ws.att_scratch.view(1, ws.att_scratch.count());
  be.zero(dqkv);
  if (fused()) {  // the probabilities recomputed tile by tile from qkv, the output and L
    // The saved output, or its bf16 copy widened into the workspace.
    store_operand(core_out(ws), i, attn_local(ws).chunk_view(i));
    const View out = core_out(ws).chunk_view(i);
    if (cp_) {
      const std::int64_t lse = cp_->lse_size(), n = qkv.rows, kw = kv_width_;
      cp_->backward(dqkv.block(0, 0, n, w), dqkv.block(0, w, n, kw), dqkv.block(0, w + kw, n, kw),
                    dout, qkv.block(0, 0, n, w), qkv.block(0, w, n, kw),
                    qkv.block(0, w + kw, n, kw), out, lse_.view(i * lse, 1, lse, lse));
      return;
    }
    const std::int64_t rows = local_heads_ * s;
    for (std::int64_t q = 0; q < bc; ++q) {
      be.flash_attention_qkv_backward(
          dqkv.block(q * s, 0, s, pw), scratch, dout.block(q * s, 0, s, w),
          qkv.block(q * s, 0, s, pw), out.block(q * s, 0, s, w),
          lse_.view((i * bc + q) * rows, 1, rows, rows), 1, s, local_heads_, local_kv_);
      if (config_.layout.progress_splits > 1) progress_.poke();
    }
    return;
  }
  // Selective recomputation: the probabilities again, from the same qkv by the same code, so
  // bit for bit those of the forward. Its output lands where the core's did (core_out: attn,
  // already consumed by proj's dW, or the fp32 workspace), with the same values.
  if (config_.layout.recompute == layout::Recompute::kSelective) attention_forward_chunk(i, ws);
  for (std::int64_t q = 0; q < bc; ++q) {
    const View att = this->att(ws).view((i * bc + q) * per_seq, 1, per_seq, per_seq);
    if (ws.dqkv_mha.empty()) {
      be.attention_core_backward(dqkv.block(q * s, 0, s, pw), scratch, dout.block(q * s, 0, s, w),
                                 qkv.block(q * s, 0, s, pw), att, 1, s, local_heads_);
    } else {  // grouped-query: the widened heads' gradient, each KV head's summed
      const View dmha = ws.dqkv_mha.view(s, 3 * w);
      be.zero(dmha);
      be.attention_core_backward(dmha, scratch, dout.block(q * s, 0, s, w),
                                 qkv_mha(ws, qkv.block(q * s, 0, s, pw)), att, 1, s, local_heads_);
      narrow_kv_grad(be, dqkv.block(q * s, 0, s, pw), dmha, local_heads_, local_kv_,
                     w / local_heads_);
    }
    if (config_.layout.progress_splits > 1) progress_.poke();
  }
}

Block::Chunked Block::qkv_fp32(BlockWorkspace& ws) const {
  return view(ws.qkv.empty() ? qkv_out_ : ws.qkv, qkv_.y_layout());
}

Block::Chunked Block::mlp1_fp32(BlockWorkspace& ws) const {
  return view(operands_ == Element::kF32 ? mlp1_y_ : ws.dmlp1, mlp1_.y_layout());
}

Block::Chunked Block::attn_local(BlockWorkspace& ws) const {
  return or_alias(attn_out(ws), proj_.x_layout(), view(attn_g_, proj_.xg_layout()));
}

Block::Chunked Block::core_out(BlockWorkspace& ws) const {
  return ws.attn_f32.empty() ? attn_local(ws) : view(ws.attn_f32, proj_.x_layout());
}

View Block::qkv_mha(BlockWorkspace& ws, const View& qkv) const {
  if (ws.qkv_mha.empty()) return qkv;
  const View mha = ws.qkv_mha.view(qkv.rows, 3 * head_width_);
  widen_kv(*be_, mha, qkv, local_heads_, local_kv_, head_width_ / local_heads_);
  return mha;
}

// RoPE on chunk i's q and k columns (all its tokens: positions 0 … s−1 of each sequence).
// Under context parallelism: its two zigzag halves, each at its chunk's positions.
void Block::rope_chunk(int i, const ChunkedMatrix& qkv, bool backward) {
  const View c = qkv.chunk_view(i);
  const std::int64_t bc = config_.shape.batch / config_.layout.chunks;
  const std::int64_t hd = config_.shape.head_dim();
  const auto table = [hd](const device::Array& t) { return t.view(t.count() / hd, hd); };
  if (cp_ && !cp_rope_[0].empty()) {
    const std::int64_t half = c.rows / 2;  // bc sequences' chunk r, then chunk 2·cp−1−r
    for (int x = 0; x < 2; ++x) {
      const View rows = c.block(x * half, 0, half, c.cols);
      const View t = table(cp_rope_[static_cast<std::size_t>(x)]);
      be_->rope(rows.block(0, 0, half, head_width_), t, bc, local_heads_, backward);
      be_->rope(rows.block(0, head_width_, half, kv_width_), t, bc, local_kv_, backward);
    }
    return;
  }
  if (rope_.empty()) return;
  be_->rope(c.block(0, 0, c.rows, head_width_), table(rope_), bc, local_heads_, backward);
  be_->rope(c.block(0, head_width_, c.rows, kv_width_), table(rope_), bc, local_kv_, backward);
}

void Block::forward(const ChunkedMatrix& y, const ChunkedMatrix& x, BlockWorkspaceBase& base) {
  auto& ws = static_cast<BlockWorkspace&>(base);
  const ChunkedLayout stream = stream_layout();
  MESHTP_CHECK(x.layout() == stream && y.layout() == stream && x.data() != y.data(),
               "Block::forward: x and y must be distinct buffers in the stream layout");
  refresh_compute_copies();
  x_ = x;
  const int C = config_.layout.chunks;
  const std::int64_t h = config_.shape.hidden;
  device::Backend& be = *be_;
  const layout::Norm norm = config_.shape.norm;
  const View ln_scratch = ws.ln_scratch.view(1, ws.ln_scratch.count());
  const ChunkedMatrix xn1 = view(xn1_, qkv_.x_layout());
  const ChunkedMatrix xn1g = or_alias(xn1g_, qkv_.xg_layout(), xn1);
  const ChunkedMatrix qkv_out = qkv_fp32(ws);  // saved after the core, in bf16 or itself
  const ChunkedMatrix qkv_p = or_alias(ws.qkv_p, qkv_.yp_layout(), qkv_out);
  const ChunkedMatrix attn_g = view(attn_g_, proj_.xg_layout());
  const ChunkedMatrix attn = attn_local(ws);
  const ChunkedMatrix proj_p = view(ws.proj_p, proj_.yp_layout());
  const ChunkedMatrix proj_y = or_alias(ws.proj_y, proj_.y_layout(), proj_p);
  const ChunkedMatrix xmid = view(xmid_, stream);
  const ChunkedMatrix xn2 = view(xn2_, mlp1_.x_layout());
  const ChunkedMatrix xn2g = or_alias(xn2g_, mlp1_.xg_layout(), xn2);
  const ChunkedMatrix mlp1_y = mlp1_fp32(ws);  // all-reduced in place, then saved
  const ChunkedMatrix gelu = view(gelu_, mlp2_.x_layout());
  const ChunkedMatrix mlp2_p = view(ws.mlp2_p, mlp2_.yp_layout());
  const ChunkedMatrix mlp2_y = or_alias(ws.mlp2_y, mlp2_.y_layout(), mlp2_p);

  // ---- attention: ln1 → qkv (RS₁ by heads) → core → proj (AG₁, AR₀) → residual
  for (int i = 0; i < C; ++i) {
    const View ln1_out = operand_out(xn1, i, ws.dxn_p);
    parallel::norm_sharded_forward(be, norm, ln1_out, rows_of(ln1_mean_, i), rows_of(ln1_rstd_, i),
                                   x.chunk_view(i), vec(p_[kLn1Weight]), vec(p_[kLn1Bias]), h,
                                   ln_group_, ln_scratch);
    store_operand(xn1, i, ln1_out);
    qkv_.gather_input_start(i, xn1, xn1g);
  }
  for (int i = 0; i < C; ++i) {
    qkv_.gather_input_wait(i);
    qkv_.forward_start(i, xn1g, qkv_p, qkv_out, &progress_);
  }
  for (int i = 0; i < C; ++i) {
    qkv_.forward_wait(i, qkv_out);
    rope_chunk(i, qkv_out, false);
    attention_forward_chunk(i, ws);
    store_operand(attn, i, core_out(ws).chunk_view(i));
    store_operand(view(qkv_out_, qkv_.y_layout()), i, qkv_out.chunk_view(i));
    proj_.gather_input_start(i, attn, attn_g);
  }
  for (int i = 0; i < C; ++i) {
    proj_.gather_input_wait(i);
    proj_.forward_start(i, attn_g, proj_p, proj_y, &progress_);
  }
  // ---- residual + ln2 (fused); the dense MLP's input starts on its way (all-gather under SP)
  for (int i = 0; i < C; ++i) {
    proj_.forward_wait(i, proj_y);
    const View ln2_out = operand_out(xn2, i, ws.dxn_p);
    parallel::residual_norm_sharded_forward(
        be, norm, xmid.chunk_view(i), ln2_out, rows_of(ln2_mean_, i), rows_of(ln2_rstd_, i),
        x.chunk_view(i), proj_y.chunk_view(i), vec(p_[kLn2Weight]), vec(p_[kLn2Bias]), h, ln_group_,
        ln_scratch);
    store_operand(xn2, i, ln2_out);
    if (dense_mlp()) mlp1_.gather_input_start(i, xn2, xn2g);
  }
  // ---- MLP: mlp1 (AR₁) → bias + gelu (fused) → mlp2 (AR₀) → y = base + mlp2(…)
  const auto mlp_forward = [&](const ChunkedMatrix& base) {
    for (int i = 0; i < C; ++i) {
      mlp1_.gather_input_wait(i);
      mlp1_.forward_start(i, xn2g, mlp1_y, mlp1_y, &progress_);
    }
    for (int i = 0; i < C; ++i) {
      mlp1_.forward_wait_without_bias(i);
      const View act = operand_out(gelu, i, ws.dgelu);
      if (swiglu()) {  // this rank's [gate | up] columns (ParamShard::kSwigluWeight)
        be.swiglu_forward(act, mlp1_y.chunk_view(i));
      } else {
        be.bias_gelu(act, mlp1_y.chunk_view(i), mlp1_.output_bias(mlp1_y));
      }
      store_operand(gelu, i, act);
      store_operand(view(mlp1_y_, mlp1_.y_layout()), i, mlp1_y.chunk_view(i));  // with its bias
      mlp2_.forward_start(i, gelu, mlp2_p, mlp2_y, &progress_);
    }
    for (int i = 0; i < C; ++i) {
      mlp2_.forward_wait(i, mlp2_y);
      be.residual(y.chunk_view(i), base.chunk_view(i), mlp2_y.chunk_view(i));
    }
  };
  if (!moe_) {
    mlp_forward(xmid);
    return;
  }
  // ---- MoE: experts (parallel/moe.hpp) + bias → residual; the shared experts' MLP on top
  const ChunkedMatrix moe_y = view(shared() ? ws.moe_out : ws.mlp2_p, stream);
  (void)moe_->forward(moe_y.whole_view(), xn2.whole_view());  // its aux loss acts through backward
  for (int i = 0; i < C; ++i) {
    be.residual(y.chunk_view(i), xmid.chunk_view(i), moe_y.chunk_view(i));
    be.add_bias(y.chunk_view(i), vec(p_[kMlp2Bias]));
  }
  if (shared()) mlp_forward(y);  // y += shared(xn2)
}

void Block::backward(const ChunkedMatrix& dx, const ChunkedMatrix& dy,
                     BlockWorkspaceBase& base) {
  auto& ws = static_cast<BlockWorkspace&>(base);
  const ChunkedLayout stream = stream_layout();
  MESHTP_CHECK(dx.layout() == stream && dy.layout() == stream && x_.data() != nullptr,
               "Block::backward: dx and dy must be in the stream layout, after a forward");
  refresh_compute_copies();
  const int C = config_.layout.chunks;
  const std::int64_t h = config_.shape.hidden;
  device::Backend& be = *be_;
  const layout::Norm norm = config_.shape.norm;
  const View ln_scratch = ws.ln_scratch.view(1, ws.ln_scratch.count());
  const ChunkedMatrix xn1g = or_alias(xn1g_, qkv_.xg_layout(), view(xn1_, qkv_.x_layout()));
  const ChunkedMatrix attn_g = view(attn_g_, proj_.xg_layout());
  const ChunkedMatrix xmid = view(xmid_, stream);
  const ChunkedMatrix xn2g = or_alias(xn2g_, mlp1_.xg_layout(), view(xn2_, mlp1_.x_layout()));
  const ChunkedMatrix mlp1_y = view(mlp1_y_, mlp1_.y_layout());  // fp32, or bf16 as stored
  const ChunkedMatrix gelu = view(gelu_, mlp2_.x_layout());
  const ChunkedMatrix dyg = or_alias(ws.dyg, mlp2_.yp_layout(), dy);
  const ChunkedMatrix dgelu = view(ws.dgelu, mlp2_.xg_layout());  // all-reduced in place
  const ChunkedMatrix dmlp1 = view(ws.dmlp1, mlp1_.yp_layout());
  const ChunkedMatrix dxn_p = view(ws.dxn_p, mlp1_.xg_layout());
  const ChunkedMatrix dxn = or_alias(ws.dxn, mlp1_.x_layout(), dxn_p);
  const ChunkedMatrix dxmid = view(ws.dxmid, stream);
  const ChunkedMatrix dxmid_g = or_alias(ws.dxmid_g, proj_.yp_layout(), dxmid);
  const ChunkedMatrix datt_p = view(ws.datt_p, proj_.xg_layout());
  const ChunkedMatrix datt = or_alias(ws.datt, proj_.x_layout(), datt_p);
  const ChunkedMatrix dqkv = view(ws.dqkv, qkv_.y_layout());
  const ChunkedMatrix dqkv_g = or_alias(ws.dqkv_g, qkv_.yp_layout(), dqkv);

  // Chunk i's second residual and ln2, once ln2's output gradient dxn is complete; then the
  // projection's input gradient starts on its way.
  const auto ln2_backward = [&](int i) {
    be.residual_grad(dxmid.chunk_view(i), dy.chunk_view(i));
    parallel::norm_sharded_backward(be, norm, dxmid.chunk_view(i), vec(g_[kLn2Weight]),
                                    vec(g_[kLn2Bias]), dxn.chunk_view(i), xmid.chunk_view(i),
                                    vec(p_[kLn2Weight]), rows_of(ln2_mean_, i),
                                    rows_of(ln2_rstd_, i), h, ln_group_, ln_scratch);
    proj_.gather_grad_start(i, dxmid, dxmid_g);
  };
  // ---- MLP, reversed: residual → mlp2 → gelu → mlp1; then done(i) once chunk i's dxn is in.
  // The residual y = x_mid + mlp2(…) hands dy to both: mlp2 reads dy itself, x_mid a copy.
  const auto mlp_backward = [&](const std::function<void(int)>& done) {
    for (int i = 0; i < C; ++i) mlp2_.gather_grad_start(i, dy, dyg);
    for (int i = 0; i < C; ++i) {
      mlp2_.gather_grad_wait(i);
      mlp2_.backward_data_start(i, dyg, dgelu, dgelu, &progress_);
    }
    mlp2_.backward_weight(dyg, gelu, &progress_);  // overlaps the dgelu all-reduces
    for (int i = 0; i < C; ++i) {
      mlp2_.backward_data_wait(i);
      be.zero(dmlp1.chunk_view(i));
      if (swiglu()) {
        be.swiglu_backward(dmlp1.chunk_view(i), mlp1_y.chunk_view(i), dgelu.chunk_view(i));
      } else {
        be.gelu_backward(dmlp1.chunk_view(i), mlp1_y.chunk_view(i), dgelu.chunk_view(i));
      }
      mlp1_.backward_data_start(i, dmlp1, dxn_p, dxn, &progress_);
    }
    mlp1_.backward_weight(dmlp1, xn2g, &progress_);
    for (int i = 0; i < C; ++i) {
      mlp1_.backward_data_wait(i);
      done(i);
    }
  };
  if (!moe_) {
    mlp_backward(ln2_backward);
  } else {  // ---- MoE, reversed: residual → bias, experts (+ the shared experts) → ln2
    for (int i = 0; i < C; ++i) be.bias_grad(vec(g_[kMlp2Bias]), dy.chunk_view(i));
    const ChunkedMatrix xn2 = view(xn2_, mlp1_.x_layout());
    if (!shared()) {
      moe_->backward(dxn.whole_view(), dy.whole_view(), xn2.whole_view(), aux_weight_);
      for (int i = 0; i < C; ++i) ln2_backward(i);
    } else {  // ln2's output gradient: the routed experts' plus the shared experts'
      const ChunkedMatrix moe_dx = view(ws.moe_out, stream);
      moe_->backward(moe_dx.whole_view(), dy.whole_view(), xn2.whole_view(), aux_weight_);
      mlp_backward([&](int i) {
        be.add(dxn.chunk_view(i), moe_dx.chunk_view(i));
        ln2_backward(i);
      });
    }
  }
  // ---- attention, reversed: residual → proj (RS₁) → core → qkv (AG₁, AR₀) → ln1 → residual
  for (int i = 0; i < C; ++i) {
    proj_.gather_grad_wait(i);
    proj_.backward_data_start(i, dxmid_g, datt_p, datt, &progress_);
  }
  proj_.backward_weight(dxmid_g, attn_g, &progress_);
  for (int i = 0; i < C; ++i) {
    proj_.backward_data_wait(i);
    attention_backward_chunk(i, ws);
    rope_chunk(i, dqkv, true);
    qkv_.gather_grad_start(i, dqkv, dqkv_g);
  }
  for (int i = 0; i < C; ++i) {
    qkv_.gather_grad_wait(i);
    qkv_.backward_data_start(i, dqkv_g, dxn_p, dxn, &progress_);
  }
  qkv_.backward_weight(dqkv_g, xn1g, &progress_);
  for (int i = 0; i < C; ++i) {
    qkv_.backward_data_wait(i);
    be.residual_grad(dx.chunk_view(i), dxmid.chunk_view(i));
    parallel::norm_sharded_backward(be, norm, dx.chunk_view(i), vec(g_[kLn1Weight]),
                                    vec(g_[kLn1Bias]), dxn.chunk_view(i), x_.chunk_view(i),
                                    vec(p_[kLn1Weight]), rows_of(ln1_mean_, i),
                                    rows_of(ln1_rstd_, i), h, ln_group_, ln_scratch);
  }
}

}  // namespace meshtp::model
