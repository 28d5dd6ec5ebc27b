#include "model/gemm2d_block.hpp"

#include "core/error.hpp"
#include "core/parse.hpp"
#include "ops/attention.hpp"
#include "ops/cpu_backend.hpp"
#include "parallel/layernorm_sharded.hpp"
#include "tensor/gemm.hpp"

namespace meshtp::model {
namespace {

using layout::Stationary;
using parallel::Gemm2dLinearPlan;
using parallel::ParamShard;

// The row-partial gradients of a block (LayerNorm and bias: sums over this rank's tokens),
// packed in one buffer for one all-reduce over mesh dim 0: parameter, width in units of hl.
constexpr std::pair<int, int> kRowPartial[] = {
    {kLn1Weight, 1}, {kLn1Bias, 1}, {kQkvBias, 3},  {kProjBias, 1},
    {kLn2Weight, 1}, {kLn2Bias, 1}, {kMlp1Bias, 4}, {kMlp2Bias, 1},
};
constexpr int kRowPartialWidth = 13;

}  // namespace

Gemm2dBlockPlans plan_gemm2d_block(const BlockConfig& c, const std::vector<int>& mesh_shape) {
  MESHTP_CHECK(mesh_shape.size() == 2, "the 2D-GeMM block runs on a 2-D mesh (Nr, Nc), got mesh {}",
               format_mesh_shape(mesh_shape));
  const int nr = mesh_shape[0], nc = mesh_shape[1];
  const std::string mesh = format_mesh_shape(mesh_shape);
  MESHTP_CHECK(layout::is_gemm2d(c.layout.strategy),
               "the 2D-GeMM block runs the 2D GeMM strategies, not {}", c.layout.strategy);
  c.shape.validate("model");
  MESHTP_CHECK(!c.shape.is_moe(),
               "num_experts={}: a mixture-of-experts model runs on the ATP block's 1D layouts "
               "(megatron or atp on a mesh N×1 with sequence parallelism), not {}",
               c.shape.num_experts, c.layout.strategy);
  MESHTP_CHECK(c.shape.batch % nr == 0,
               "batch={} is not divisible by Nr={} (mesh {}): mesh rows hold whole sequences",
               c.shape.batch, nr, mesh);
  MESHTP_CHECK(c.shape.heads % nc == 0,
               "heads={} is not divisible by Nc={} (mesh {}): mesh columns hold whole heads",
               c.shape.heads, nc, mesh);
  const std::int64_t n = c.shape.batch * c.shape.seq, h = c.shape.hidden;
  const auto plan = [&](layout::Linear l, std::int64_t k, std::int64_t m) {
    const layout::LinearPlan& x = c.layout.linear(l);
    try {
      MESHTP_CHECK(x.stationary != Stationary::kWeight,
                   "stationary weight is not supported by the 2D-GeMM block: its output is "
                   "transposed (the weight-stationary pair); use input, output or auto");
      return parallel::plan_gemm2d_linear(nr, nc, n, k, m,
                                          {.stationary = x.stationary,
                                           .algo = c.layout.algorithm(l),
                                           .params = x.gemm2d,
                                           .progress_splits = c.layout.progress_splits});
    } catch (const Error& e) {
      fail("{} linear (mesh {}): {}", l, mesh, e.what());
    }
  };
  using layout::Linear;
  return {.qkv = plan(Linear::kQkv, h, 3 * h),
          .proj = plan(Linear::kProj, h, h),
          .mlp1 = plan(Linear::kMlp1, h, 4 * h),
          .mlp2 = plan(Linear::kMlp2, 4 * h, h)};
}

namespace {

ParamShard gemm2d_param_shard(const Gemm2dBlockPlans& plans, int p) {
  const auto stores_w = [](const Gemm2dLinearPlan& l) {
    return l.stationary == Stationary::kInput;  // W [M, K]; kOutput stores V = Wᵀ
  };
  switch (p) {
    case kQkvWeight:
      return stores_w(plans.qkv) ? ParamShard::kGemm2dQkvWeight : ParamShard::kGemm2dQkvWeightT;
    case kProjWeight:
      return stores_w(plans.proj) ? ParamShard::kColumnFirstWeight : ParamShard::kGemm2dWeightT;
    case kMlp1Weight:
      return stores_w(plans.mlp1) ? ParamShard::kColumnFirstWeight : ParamShard::kGemm2dWeightT;
    case kMlp2Weight:
      return stores_w(plans.mlp2) ? ParamShard::kColumnFirstWeight : ParamShard::kGemm2dWeightT;
    case kQkvBias:
      return ParamShard::kGemm2dQkvBias;
    case kProjBias:
    case kMlp1Bias:
    case kMlp2Bias:
      return ParamShard::kGemm2dBias;
    default:
      return ParamShard::kHidden;  // LayerNorm: h over mesh dim 1
  }
}

}  // namespace

StackBlock::Shards gemm2d_param_shards(const Gemm2dBlockPlans& plans) {
  StackBlock::Shards shards{};
  for (int p = 0; p < kBlockParams; ++p) {
    shards[static_cast<std::size_t>(p)] = gemm2d_param_shard(plans, p);
  }
  return shards;
}

Gemm2dBlock::Gemm2dBlock(const mesh::DeviceMesh& mesh, const BlockConfig& config)
    : StackBlock(mesh, config.shape, gemm2d_param_shards(plan_gemm2d_block(config, mesh.shape()))),
      config_(config),
      be_(config.backend != nullptr ? config.backend : &cpu_backend()),
      plans_(plan_gemm2d_block(config, mesh.shape())),
      nl_(config.shape.batch * config.shape.seq / mesh.size(0)),
      hl_(config.shape.hidden / mesh.size(1)),
      operands_(saved_operand_element()) {
  if (stores_bf16() && config.layout.zero < 3) {
    const int weights[] = {kQkvWeight, kProjWeight, kMlp1Weight, kMlp2Weight};
    keep_compute_copies(weights, *be_);
  }
  ln1_mean_ = alloc(nl_);
  ln1_rstd_ = alloc(nl_);
  ln2_mean_ = alloc(nl_);
  ln2_rstd_ = alloc(nl_);
  xn1_ = operand_alloc(nl_ * hl_);
  qkv_ = operand_alloc(nl_ * 3 * hl_);
  if (config.layout.recompute != layout::Recompute::kSelective) att_ = alloc(att_size());
  attn_ = operand_alloc(nl_ * hl_);
  xmid_ = alloc(nl_ * hl_);
  xn2_ = operand_alloc(nl_ * hl_);
  mlp1_ = operand_alloc(nl_ * 4 * hl_);
  gelu_ = operand_alloc(nl_ * 4 * hl_);
}

device::Array Gemm2dBlock::alloc(std::int64_t count) const {
  return be_->alloc(count, Element::kF32);
}

device::Array Gemm2dBlock::operand_alloc(std::int64_t count) const {
  return be_->alloc(count, operands_);
}

Gemm2dBlockWorkspace::Gemm2dBlockWorkspace(const Gemm2dBlock& b)
    : proj_y(b.alloc(b.nl_ * b.hl_)),
      mlp2_y(b.alloc(b.nl_ * b.hl_)),
      dxmid(b.alloc(b.nl_ * b.hl_)),
      dgelu(b.alloc(b.nl_ * 4 * b.hl_)),
      dmlp1(b.alloc(b.nl_ * 4 * b.hl_)),
      dxn(b.alloc(b.nl_ * b.hl_)),
      dattn(b.alloc(b.nl_ * b.hl_)),
      dqkv(b.alloc(b.nl_ * 3 * b.hl_)),
      att_scratch(b.alloc(b.be_->attention_scratch(b.config_.shape.batch / b.mesh_->size(0),
                                                   b.config_.shape.seq,
                                                   b.config_.shape.heads / b.mesh_->size(1)))),
      row_partial(b.alloc(kRowPartialWidth * b.hl_)),
      att(b.config_.layout.recompute == layout::Recompute::kSelective ? b.alloc(b.att_size())
                                                                      : device::Array()),
      qkv(b.stores_bf16() ? b.alloc(b.nl_ * 3 * b.hl_) : device::Array()),
      ln_scratch(b.be_->alloc(2 * b.nl_, Element::kF64)),
      gemm(*b.be_) {}

parallel::ChunkedLayout Gemm2dBlock::stream_layout() const {
  return {.chunk_rows = nl_, .cols = hl_, .chunks = 1, .pieces = 1};
}

parallel::ActivationShard Gemm2dBlock::stream_shard() const {
  return {1, {mesh::Shard{1}, mesh::Shard{2}}};
}

std::int64_t Gemm2dBlock::att_size() const {
  return attention_att_size(config_.shape.batch / mesh_->size(0), config_.shape.seq,
                            config_.shape.heads / mesh_->size(1));
}

View Gemm2dBlock::weight(int p) const { return gemm_weight(p); }
View Gemm2dBlock::weight_grad(int p) const {
  const Shape& s = local_shape(p);
  return View::packed(g_[static_cast<std::size_t>(p)].data(), Element::kF32, s[0], s[1]);
}
View Gemm2dBlock::vector(int p) const { return host_view(p_[static_cast<std::size_t>(p)]); }

void Gemm2dBlock::forward(const parallel::ChunkedMatrix& y_stream,
                          const parallel::ChunkedMatrix& x_stream, BlockWorkspaceBase& base) {
  auto& ws = static_cast<Gemm2dBlockWorkspace&>(base);
  device::Backend& be = *be_;
  refresh_compute_copies();
  const View y = y_stream.whole_view(), x = x_stream.whole_view();
  const mesh::DeviceMesh& m = *mesh_;
  const comm::Communicator* row = &m.dim_comm(1);
  const std::int64_t h = config_.shape.hidden;
  const std::int64_t b = config_.shape.batch / m.size(0), heads = config_.shape.heads / m.size(1);
  const View sums = ws.ln_scratch.view(1, 2 * nl_);
  const auto stats = [](const device::Array& a) { return a.view(1, a.count()); };
  x_ = x;
  // A saved GeMM input computed in fp32: into itself, or under bf16 storage into `stage` (a
  // backward buffer the forward leaves free), then rounded into place by store().
  const auto fp32_of = [&](const device::Array& saved, const device::Array& stage,
                           std::int64_t cols) { return rows(stores_bf16() ? stage : saved, cols); };
  const auto store = [&](const device::Array& saved, const View& written) {
    const View v = rows(saved, written.cols);
    if (v.data != written.data) be.copy(v, written);
  };
  // x_mid = x + proj(attention(qkv(ln1(x))))
  const View xn1 = fp32_of(xn1_, ws.dxn, hl_);
  parallel::norm_sharded_forward(be, layout::Norm::kLayerNorm, xn1, stats(ln1_mean_),
                                 stats(ln1_rstd_), x, vector(kLn1Weight), vector(kLn1Bias), h, row,
                                 sums);
  store(xn1_, xn1);
  const View qkv = fp32_of(qkv_, ws.dqkv, 3 * hl_), attn = fp32_of(attn_, ws.dattn, hl_);
  parallel::gemm2d_linear_forward(m, plans_.qkv, qkv, rows(xn1_, hl_), weight(kQkvWeight), ws.gemm);
  be.add_bias(qkv, vector(kQkvBias));
  be.attention_core_forward(attn, stats(att(ws)), qkv, b, config_.shape.seq, heads);
  store(qkv_, qkv);
  store(attn_, attn);
  const View proj_y = rows(ws.proj_y, hl_);
  parallel::gemm2d_linear_forward(m, plans_.proj, proj_y, rows(attn_, hl_), weight(kProjWeight),
                                  ws.gemm);
  be.add_bias(proj_y, vector(kProjBias));
  be.residual(rows(xmid_, hl_), x, proj_y);
  // y = x_mid + mlp2(gelu(mlp1(ln2(x_mid))))
  const View xn2 = fp32_of(xn2_, ws.dxn, hl_);
  parallel::norm_sharded_forward(be, layout::Norm::kLayerNorm, xn2, stats(ln2_mean_),
                                 stats(ln2_rstd_), rows(xmid_, hl_), vector(kLn2Weight),
                                 vector(kLn2Bias), h, row, sums);
  store(xn2_, xn2);
  const View mlp1 = fp32_of(mlp1_, ws.dmlp1, 4 * hl_), gelu = fp32_of(gelu_, ws.dgelu, 4 * hl_);
  parallel::gemm2d_linear_forward(m, plans_.mlp1, mlp1, rows(xn2_, hl_), weight(kMlp1Weight),
                                  ws.gemm);
  be.add_bias(mlp1, vector(kMlp1Bias));
  be.gelu_forward(gelu, mlp1);
  store(gelu_, gelu);
  store(mlp1_, mlp1);
  const View mlp2_y = rows(ws.mlp2_y, hl_);
  parallel::gemm2d_linear_forward(m, plans_.mlp2, mlp2_y, rows(gelu_, 4 * hl_), weight(kMlp2Weight),
                                  ws.gemm);
  be.add_bias(mlp2_y, vector(kMlp2Bias));
  be.residual(y, rows(xmid_, hl_), mlp2_y);
}

void Gemm2dBlock::backward(const parallel::ChunkedMatrix& dx_stream,
                           const parallel::ChunkedMatrix& dy_stream, BlockWorkspaceBase& base) {
  auto& ws = static_cast<Gemm2dBlockWorkspace&>(base);
  device::Backend& be = *be_;
  refresh_compute_copies();
  const View dx = dx_stream.whole_view(), dy = dy_stream.whole_view();
  const mesh::DeviceMesh& m = *mesh_;
  const comm::Communicator* row = &m.dim_comm(1);
  const std::int64_t h = config_.shape.hidden;
  const std::int64_t b = config_.shape.batch / m.size(0), heads = config_.shape.heads / m.size(1);
  const View sums = ws.ln_scratch.view(1, 2 * nl_);
  const auto stats = [](const device::Array& a) { return a.view(1, a.count()); };
  // Row-partial gradients (sums over this rank's tokens) go to ws.row_partial first.
  const View row_partial = ws.row_partial.view(1, kRowPartialWidth * hl_);
  be.zero(row_partial);
  std::array<View, kBlockParams> part{};
  std::int64_t offset = 0;
  for (const auto& [p, width] : kRowPartial) {
    part[static_cast<std::size_t>(p)] = row_partial.block(0, offset, 1, width * hl_);
    offset += width * hl_;
  }
  const View dxmid = rows(ws.dxmid, hl_), dgelu = rows(ws.dgelu, 4 * hl_);
  const View dmlp1 = rows(ws.dmlp1, 4 * hl_), dxn = rows(ws.dxn, hl_);
  const View dattn = rows(ws.dattn, hl_), dqkv = rows(ws.dqkv, 3 * hl_);

  // y = x_mid + mlp2(gelu(mlp1(ln2(x_mid))))
  be.residual_grad(dxmid, dy);
  be.bias_grad(part[kMlp2Bias], dy);
  be.zero(dgelu);
  parallel::gemm2d_linear_backward(m, plans_.mlp2, dgelu, weight_grad(kMlp2Weight), dy,
                                   rows(gelu_, 4 * hl_), weight(kMlp2Weight), ws.gemm);
  be.zero(dmlp1);
  be.gelu_backward(dmlp1, rows(mlp1_, 4 * hl_), dgelu);
  be.bias_grad(part[kMlp1Bias], dmlp1);
  be.zero(dxn);
  parallel::gemm2d_linear_backward(m, plans_.mlp1, dxn, weight_grad(kMlp1Weight), dmlp1,
                                   rows(xn2_, hl_), weight(kMlp1Weight), ws.gemm);
  parallel::norm_sharded_backward(be, layout::Norm::kLayerNorm, dxmid, part[kLn2Weight],
                                  part[kLn2Bias], dxn, rows(xmid_, hl_), vector(kLn2Weight),
                                  stats(ln2_mean_), stats(ln2_rstd_), h, row, sums);
  // x_mid = x + proj(attention(qkv(ln1(x))))
  be.bias_grad(part[kProjBias], dxmid);
  be.zero(dattn);
  parallel::gemm2d_linear_backward(m, plans_.proj, dattn, weight_grad(kProjWeight), dxmid,
                                   rows(attn_, hl_), weight(kProjWeight), ws.gemm);
  be.zero(dqkv);
  // The core reads an fp32 q | k | v: the saved one, or its bf16 copy widened (exactly).
  const View qkv = rows(stores_bf16() ? ws.qkv : qkv_, 3 * hl_);
  if (stores_bf16()) be.copy(qkv, rows(qkv_, 3 * hl_));
  // Selective recomputation: the probabilities again, by the same code from the same qkv (bit
  // for bit the forward's); attn gets its own values back (proj's dW has consumed it), or
  // under bf16 storage the output goes to proj_y, free in the backward, and is not read.
  if (config_.layout.recompute == layout::Recompute::kSelective) {
    be.attention_core_forward(rows(stores_bf16() ? ws.proj_y : attn_, hl_), stats(att(ws)), qkv, b,
                              config_.shape.seq, heads);
  }
  be.attention_core_backward(dqkv, stats(ws.att_scratch), dattn, qkv, stats(att(ws)), b,
                             config_.shape.seq, heads);
  be.bias_grad(part[kQkvBias], dqkv);
  be.zero(dxn);
  parallel::gemm2d_linear_backward(m, plans_.qkv, dxn, weight_grad(kQkvWeight), dqkv,
                                   rows(xn1_, hl_), weight(kQkvWeight), ws.gemm);
  // dx = dx_mid (residual) + ln1's backward; dx may alias dy, which is no longer read.
  be.residual_grad(dx, dxmid);
  parallel::norm_sharded_backward(be, layout::Norm::kLayerNorm, dx, part[kLn1Weight],
                                  part[kLn1Bias], dxn, x_, vector(kLn1Weight), stats(ln1_mean_),
                                  stats(ln1_rstd_), h, row, sums);

  m.dim_comm(0).all_reduce(comm::buffer_of(row_partial), comm::ReduceOp::kSum);
  for (const auto& [p, width] : kRowPartial) {
    const auto i = static_cast<std::size_t>(p);
    be.add(host_view(g_[i]), part[i]);
  }
}

}  // namespace meshtp::model
