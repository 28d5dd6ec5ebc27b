#include "model/gemm2d_block.hpp"

#include "core/error.hpp"
#include "core/parse.hpp"
#include "ops/attention.hpp"
#include "ops/gelu.hpp"
#include "ops/linear.hpp"
#include "ops/residual.hpp"
#include "parallel/layernorm_sharded.hpp"

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

Tensor matrix_buffer(std::int64_t rows, std::int64_t cols) { return Tensor({rows, cols}); }

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
    : StackBlock(mesh, config.shape,
                 gemm2d_param_shards(plan_gemm2d_block(config, mesh.shape()))),
      config_(config),
      plans_(plan_gemm2d_block(config, mesh.shape())),
      nl_(config.shape.batch * config.shape.seq / mesh.size(0)),
      hl_(config.shape.hidden / mesh.size(1)) {
  ln1_mean_ = Tensor({nl_});
  ln1_rstd_ = Tensor({nl_});
  ln2_mean_ = Tensor({nl_});
  ln2_rstd_ = Tensor({nl_});
  xn1_ = matrix_buffer(nl_, hl_);
  qkv_ = matrix_buffer(nl_, 3 * hl_);
  if (config.layout.recompute != layout::Recompute::kSelective) att_ = Tensor({att_size()});
  attn_ = matrix_buffer(nl_, hl_);
  xmid_ = matrix_buffer(nl_, hl_);
  xn2_ = matrix_buffer(nl_, hl_);
  mlp1_ = matrix_buffer(nl_, 4 * hl_);
  gelu_ = matrix_buffer(nl_, 4 * hl_);
}

Gemm2dBlockWorkspace::Gemm2dBlockWorkspace(const Gemm2dBlock& b)
    : proj_y(matrix_buffer(b.nl_, b.hl_)),
      mlp2_y(matrix_buffer(b.nl_, b.hl_)),
      dxmid(matrix_buffer(b.nl_, b.hl_)),
      dgelu(matrix_buffer(b.nl_, 4 * b.hl_)),
      dmlp1(matrix_buffer(b.nl_, 4 * b.hl_)),
      dxn(matrix_buffer(b.nl_, b.hl_)),
      dattn(matrix_buffer(b.nl_, b.hl_)),
      dqkv(matrix_buffer(b.nl_, 3 * b.hl_)),
      att_scratch({attention_scratch_size(b.config_.shape.seq)}),
      row_partial({kRowPartialWidth * b.hl_}),
      att(b.config_.layout.recompute == layout::Recompute::kSelective ? Tensor({b.att_size()})
                                                                      : Tensor()),
      ln_scratch(static_cast<std::size_t>(2 * b.nl_)) {}

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

MatrixView Gemm2dBlock::weight(int p) const {
  const Shape& s = local_shape(p);
  return {p_[static_cast<std::size_t>(p)].data(), s[0], s[1], s[1]};
}
MatrixView Gemm2dBlock::weight_grad(int p) const {
  const Shape& s = local_shape(p);
  return {g_[static_cast<std::size_t>(p)].data(), s[0], s[1], s[1]};
}

void Gemm2dBlock::forward(const parallel::ChunkedMatrix& y_stream,
                          const parallel::ChunkedMatrix& x_stream, BlockWorkspaceBase& base) {
  auto& ws = static_cast<Gemm2dBlockWorkspace&>(base);
  const MatrixView y = y_stream.whole();
  const ConstMatrixView x = x_stream.whole();
  const mesh::DeviceMesh& m = *mesh_;
  const comm::Communicator* row = &m.dim_comm(1);
  const std::int64_t h = config_.shape.hidden;
  x_ = x;
  // x_mid = x + proj(attention(qkv(ln1(x))))
  parallel::layernorm_sharded_forward(xn1_.matrix(), ln1_mean_.values(), ln1_rstd_.values(), x,
                                      p_[kLn1Weight], p_[kLn1Bias], h, row, ws.ln_scratch);
  parallel::gemm2d_linear_forward(m, plans_.qkv, qkv_.matrix(), xn1_.matrix(), weight(kQkvWeight),
                                  ws.gemm);
  add_bias(qkv_.matrix(), p_[kQkvBias]);
  attention_forward(attn_.matrix(), att(ws).values(), qkv_.matrix(),
                    config_.shape.batch / m.size(0), config_.shape.seq,
                    config_.shape.heads / m.size(1));
  parallel::gemm2d_linear_forward(m, plans_.proj, ws.proj_y.matrix(), attn_.matrix(),
                                  weight(kProjWeight), ws.gemm);
  add_bias(ws.proj_y.matrix(), p_[kProjBias]);
  residual_forward(xmid_.matrix(), x, ws.proj_y.matrix());
  // y = x_mid + mlp2(gelu(mlp1(ln2(x_mid))))
  parallel::layernorm_sharded_forward(xn2_.matrix(), ln2_mean_.values(), ln2_rstd_.values(),
                                      xmid_.matrix(), p_[kLn2Weight], p_[kLn2Bias], h, row,
                                      ws.ln_scratch);
  parallel::gemm2d_linear_forward(m, plans_.mlp1, mlp1_.matrix(), xn2_.matrix(),
                                  weight(kMlp1Weight), ws.gemm);
  add_bias(mlp1_.matrix(), p_[kMlp1Bias]);
  gelu_forward(gelu_.matrix(), mlp1_.matrix());
  parallel::gemm2d_linear_forward(m, plans_.mlp2, ws.mlp2_y.matrix(), gelu_.matrix(),
                                  weight(kMlp2Weight), ws.gemm);
  add_bias(ws.mlp2_y.matrix(), p_[kMlp2Bias]);
  residual_forward(y, xmid_.matrix(), ws.mlp2_y.matrix());
}

void Gemm2dBlock::backward(const parallel::ChunkedMatrix& dx_stream,
                           const parallel::ChunkedMatrix& dy_stream, BlockWorkspaceBase& base) {
  auto& ws = static_cast<Gemm2dBlockWorkspace&>(base);
  const MatrixView dx = dx_stream.whole();
  const ConstMatrixView dy = dy_stream.whole();
  const mesh::DeviceMesh& m = *mesh_;
  const comm::Communicator* row = &m.dim_comm(1);
  const std::int64_t h = config_.shape.hidden;
  // Row-partial gradients (sums over this rank's tokens) go to ws.row_partial first.
  ws.row_partial.fill(0.0f);
  std::array<std::span<float>, kBlockParams> part{};
  std::size_t offset = 0;
  for (const auto& [p, width] : kRowPartial) {
    const auto n = static_cast<std::size_t>(width * hl_);
    part[static_cast<std::size_t>(p)] = ws.row_partial.values().subspan(offset, n);
    offset += n;
  }

  // y = x_mid + mlp2(gelu(mlp1(ln2(x_mid))))
  MatrixView dxmid = ws.dxmid.matrix();
  residual_backward_copy(dxmid, {dy.data, nl_, hl_, dy.ld});
  add_bias_grad(part[kMlp2Bias], dy);
  ws.dgelu.fill(0.0f);
  parallel::gemm2d_linear_backward(m, plans_.mlp2, ws.dgelu.matrix(), weight_grad(kMlp2Weight), dy,
                                   gelu_.matrix(), weight(kMlp2Weight), ws.gemm);
  ws.dmlp1.fill(0.0f);
  gelu_backward(ws.dmlp1.matrix(), mlp1_.matrix(), ws.dgelu.matrix());
  add_bias_grad(part[kMlp1Bias], ws.dmlp1.matrix());
  ws.dxn.fill(0.0f);
  parallel::gemm2d_linear_backward(m, plans_.mlp1, ws.dxn.matrix(), weight_grad(kMlp1Weight),
                                   ws.dmlp1.matrix(), xn2_.matrix(), weight(kMlp1Weight), ws.gemm);
  parallel::layernorm_sharded_backward(dxmid, part[kLn2Weight], part[kLn2Bias], ws.dxn.matrix(),
                                       xmid_.matrix(), p_[kLn2Weight], ln2_mean_.values(),
                                       ln2_rstd_.values(), h, row, ws.ln_scratch);
  // x_mid = x + proj(attention(qkv(ln1(x))))
  add_bias_grad(part[kProjBias], dxmid);
  ws.dattn.fill(0.0f);
  parallel::gemm2d_linear_backward(m, plans_.proj, ws.dattn.matrix(), weight_grad(kProjWeight),
                                   dxmid, attn_.matrix(), weight(kProjWeight), ws.gemm);
  ws.dqkv.fill(0.0f);
  // Selective recomputation: the probabilities again, by the same code from the same qkv (bit
  // for bit the forward's); attn gets its own values back (proj's dW has consumed it).
  if (config_.layout.recompute == layout::Recompute::kSelective) {
    attention_forward(attn_.matrix(), att(ws).values(), qkv_.matrix(),
                      config_.shape.batch / m.size(0), config_.shape.seq,
                      config_.shape.heads / m.size(1));
  }
  attention_backward(ws.dqkv.matrix(), ws.att_scratch.values(), ws.dattn.matrix(), qkv_.matrix(),
                     att(ws).values(), config_.shape.batch / m.size(0), config_.shape.seq,
                     config_.shape.heads / m.size(1));
  add_bias_grad(part[kQkvBias], ws.dqkv.matrix());
  ws.dxn.fill(0.0f);
  parallel::gemm2d_linear_backward(m, plans_.qkv, ws.dxn.matrix(), weight_grad(kQkvWeight),
                                   ws.dqkv.matrix(), xn1_.matrix(), weight(kQkvWeight), ws.gemm);
  // dx = dx_mid (residual) + ln1's backward; dx may alias dy, which is no longer read.
  residual_backward_copy({dx.data, nl_, hl_, dx.ld}, dxmid);
  parallel::layernorm_sharded_backward(dx, part[kLn1Weight], part[kLn1Bias], ws.dxn.matrix(), x_,
                                       p_[kLn1Weight], ln1_mean_.values(), ln1_rstd_.values(), h,
                                       row, ws.ln_scratch);

  m.dim_comm(0).all_reduce(ws.row_partial.values());
  for (const auto& [p, width] : kRowPartial) {
    const auto i = static_cast<std::size_t>(p);
    for (std::size_t j = 0; j < part[i].size(); ++j) g_[i][j] += part[i][j];
  }
}

}  // namespace meshtp::model
