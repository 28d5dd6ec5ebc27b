#include "parallel/moe.hpp"

#include <numeric>
#include <span>

#include "core/error.hpp"
#include "tensor/gemm.hpp"

namespace meshtp::parallel {
namespace {

std::span<const float> rows_of(ConstMatrixView m) {
  MESHTP_CHECK(m.contiguous(), "moe: a {}×{} block with leading dimension {} is not contiguous",
               m.rows, m.cols, m.ld);
  return {m.data, static_cast<std::size_t>(m.rows * m.cols)};
}

std::vector<std::int64_t> times(std::span<const std::int64_t> rows, std::int64_t h) {
  std::vector<std::int64_t> v(rows.begin(), rows.end());
  for (auto& n : v) n *= h;
  return v;
}

std::int64_t sum(std::span<const std::int64_t> v) {
  return std::accumulate(v.begin(), v.end(), std::int64_t{0});
}

}  // namespace

ExpertParallelMoe::ExpertParallelMoe(const MoeConfig& config, MoeGroups groups)
    : config_(config), groups_(std::move(groups)) {
  const int ep = groups_.ep.size(), etp = groups_.etp.size();
  MESHTP_CHECK(config.hidden >= 1 && config.ffn >= 1 && config.experts >= 1,
               "moe: hidden={}, ffn={} and experts={} must be positive", config.hidden,
               config.ffn, config.experts);
  MESHTP_CHECK(config.top_k >= 1 && config.top_k <= config.experts,
               "moe: top_k={} must be between 1 and experts={}", config.top_k, config.experts);
  MESHTP_CHECK(config.experts % ep == 0,
               "moe: experts={} is not divisible by the expert-parallel size ep={}",
               config.experts, ep);
  MESHTP_CHECK(config.ffn % etp == 0,
               "moe: an expert's ffn={} is not divisible by the expert tensor-parallel size "
               "etp={}",
               config.ffn, etp);
  MESHTP_CHECK(config.capacity_factor >= 0.0, "moe: capacity_factor={} must be ≥ 0 (0: dropless)",
               config.capacity_factor);
  local_experts_ = config.experts / ep;
  local_ffn_ = config.ffn / etp;
}

void ExpertParallelMoe::own_storage() {
  const std::int64_t h = config_.hidden, E = config_.experts;
  router = Tensor({E, h});
  w1 = Tensor({local_experts_ * local_ffn_, h});
  w2 = Tensor({local_experts_ * h, local_ffn_});
  router_grad = Tensor(router.shape());
  w1_grad = Tensor(w1.shape());
  w2_grad = Tensor(w2.shape());
  values_ = {router.values(), w1.values(), w2.values()};
  grads_ = {router_grad.values(), w1_grad.values(), w2_grad.values()};
}

void ExpertParallelMoe::bind(Storage values, Storage grads) {
  const std::int64_t h = config_.hidden;
  const std::int64_t sizes[] = {config_.experts * h, local_experts_ * local_ffn_ * h,
                                local_experts_ * h * local_ffn_};
  const char* names[] = {"the router", "W1", "W2"};
  const std::span<float> v[] = {values.router, values.w1, values.w2};
  const std::span<float> g[] = {grads.router, grads.w1, grads.w2};
  for (int i = 0; i < 3; ++i) {
    const auto want = static_cast<std::size_t>(sizes[i]);
    MESHTP_CHECK(v[i].size() == want && (g[i].size() == want || g[i].empty()),
                 "moe bind: {} has {} values and {} gradients, this rank's shard {}", names[i],
                 v[i].size(), g[i].size(), want);
  }
  values_ = values;
  grads_ = grads;
}

void ExpertParallelMoe::load(const Tensor& router_full, const Tensor& w1_full,
                             const Tensor& w2_full) {
  const std::int64_t h = config_.hidden, E = config_.experts, F = config_.ffn;
  MESHTP_CHECK(router_full.shape() == Shape({E, h}) && w1_full.shape() == Shape({E * F, h}) &&
                   w2_full.shape() == Shape({E * h, F}),
               "moe load: router {}, W1 {}, W2 {} for experts={}, hidden={}, ffn={} (expected "
               "[E, h], [E·F, h], [E·h, F])",
               to_string(router_full.shape()), to_string(w1_full.shape()),
               to_string(w2_full.shape()), E, h, F);
  if (values_.router.empty()) own_storage();
  copy(router_full.values(), values_.router);
  const std::int64_t first = groups_.ep.rank() * local_experts_;
  const std::int64_t col0 = groups_.etp.rank() * local_ffn_;
  for (std::int64_t l = 0; l < local_experts_; ++l) {
    const std::int64_t e = first + l;
    copy(w1_full.matrix().block(e * F + col0, 0, local_ffn_, h),
         w1_v().block(l * local_ffn_, 0, local_ffn_, h));
    copy(w2_full.matrix().block(e * h, col0, h, local_ffn_),
         w2_v().block(l * h, 0, h, local_ffn_));
  }
}

ExpertParallelMoe::Exchange ExpertParallelMoe::plan_exchange(const MoeDispatch& dispatch) const {
  const int ep = groups_.ep.size(), etp = groups_.etp.size();
  const std::int64_t El = local_experts_, E = config_.experts;
  std::vector<std::int64_t> kept(static_cast<std::size_t>(E));
  for (std::int64_t e = 0; e < E; ++e) kept[e] = dispatch.offsets[e + 1] - dispatch.offsets[e];
  // recv[s·El + l]: rows source s sends for local expert l.
  std::vector<std::int64_t> recv(kept.size());
  groups_.ep.all_to_all(std::span<const std::int64_t>(kept), std::span<std::int64_t>(recv));
  // gathered[(t·ep + s)·El + l]: the same, as etp peer t received them.
  std::vector<std::int64_t> gathered(recv.size() * static_cast<std::size_t>(etp));
  groups_.etp.all_gather(std::span<const std::int64_t>(recv), std::span<std::int64_t>(gathered));

  Exchange x;
  x.send_rows.assign(static_cast<std::size_t>(ep), 0);
  x.recv_rows.assign(static_cast<std::size_t>(ep), 0);
  x.peer_rows.assign(static_cast<std::size_t>(etp), 0);
  for (int p = 0; p < ep; ++p)
    for (std::int64_t l = 0; l < El; ++l) {
      x.send_rows[p] += kept[p * El + l];
      x.recv_rows[p] += recv[p * El + l];
    }
  x.offsets.assign(static_cast<std::size_t>(El + 1), 0);
  for (int t = 0; t < etp; ++t)
    for (int s = 0; s < ep; ++s)
      for (std::int64_t l = 0; l < El; ++l) {
        const std::int64_t n = gathered[(t * ep + s) * El + l];
        x.peer_rows[t] += n;
        x.offsets[l + 1] += n;
      }
  std::partial_sum(x.offsets.begin(), x.offsets.end(), x.offsets.begin());
  // Gathered order is (t, s, l, i); expert-major is (l, t, s, i).
  std::vector<std::int64_t> next(x.offsets.begin(), x.offsets.end() - 1);
  x.sorted_of.reserve(static_cast<std::size_t>(x.offsets.back()));
  for (int t = 0; t < etp; ++t)
    for (int s = 0; s < ep; ++s)
      for (std::int64_t l = 0; l < El; ++l)
        for (std::int64_t i = 0; i < gathered[(t * ep + s) * El + l]; ++i)
          x.sorted_of.push_back(next[l]++);
  return x;
}

Tensor ExpertParallelMoe::dispatch_rows(ConstMatrixView rows) const {
  const std::int64_t h = config_.hidden;
  const Exchange& x = exchange_;
  Tensor received({sum(x.recv_rows), h});
  const auto send_counts = times(x.send_rows, h), recv_counts = times(x.recv_rows, h);
  groups_.ep.all_to_allv(rows_of(rows), std::span<const std::int64_t>(send_counts),
                         received.values(), std::span<const std::int64_t>(recv_counts));
  Tensor gathered;
  if (groups_.etp.size() == 1) {
    gathered = std::move(received);
  } else {  // every peer gets all of this rank's rows: an all-gather of blocks of their own sizes
    const auto etp = static_cast<std::size_t>(groups_.etp.size());
    std::vector<float> repeated;
    repeated.reserve(received.values().size() * etp);
    for (std::size_t t = 0; t < etp; ++t)
      repeated.insert(repeated.end(), received.values().begin(), received.values().end());
    const std::vector<std::int64_t> mine(etp, received.numel());
    const auto peer_counts = times(x.peer_rows, h);
    gathered = Tensor({sum(x.peer_rows), h});
    groups_.etp.all_to_allv(std::span<const float>(repeated), std::span<const std::int64_t>(mine),
                            gathered.values(), std::span<const std::int64_t>(peer_counts));
  }
  Tensor sorted({gathered.dim(0), h});
  for (std::int64_t g = 0; g < gathered.dim(0); ++g)
    std::copy_n(&gathered.matrix()(g, 0), h, &sorted.matrix()(x.sorted_of[g], 0));
  return sorted;
}

Tensor ExpertParallelMoe::combine_rows(ConstMatrixView expert_major) const {
  const std::int64_t h = config_.hidden;
  const Exchange& x = exchange_;
  Tensor unsorted({expert_major.rows, h});
  for (std::int64_t g = 0; g < expert_major.rows; ++g)
    std::copy_n(&expert_major(x.sorted_of[g], 0), h, &unsorted.matrix()(g, 0));
  const std::int64_t mine = sum(x.recv_rows);
  Tensor received;
  if (groups_.etp.size() == 1) {
    received = std::move(unsorted);
  } else {  // each peer's rows back to it, then the etp partial sums added: a reduce-scatter
    const auto etp = static_cast<std::size_t>(groups_.etp.size());
    const auto peer_counts = times(x.peer_rows, h);
    const std::vector<std::int64_t> mine_counts(etp, mine * h);
    std::vector<float> partials(static_cast<std::size_t>(mine * h) * etp);
    groups_.etp.all_to_allv(std::span<const float>(unsorted.values()),
                            std::span<const std::int64_t>(peer_counts),
                            std::span<float>(partials),
                            std::span<const std::int64_t>(mine_counts));
    received = Tensor({mine, h});
    const std::span<float> out = received.values();
    for (std::size_t t = 0; t < etp; ++t)
      for (std::size_t i = 0; i < out.size(); ++i) out[i] += partials[t * out.size() + i];
  }
  Tensor back({sum(x.send_rows), h});
  const auto send_counts = times(x.recv_rows, h), recv_counts = times(x.send_rows, h);
  groups_.ep.all_to_allv(std::span<const float>(received.values()),
                         std::span<const std::int64_t>(send_counts), back.values(),
                         std::span<const std::int64_t>(recv_counts));
  return back;
}

double ExpertParallelMoe::forward(MatrixView y, ConstMatrixView x) {
  const std::int64_t N = x.rows, h = config_.hidden, E = config_.experts;
  MESHTP_CHECK(x.cols == h && y.cols == h && y.rows == N,
               "moe forward: x is {}×{} and y {}×{} for hidden={}", x.rows, x.cols, y.rows,
               y.cols, h);
  Tensor logits({N, E});
  gemm(x, Trans::kNo, router_v(), Trans::kYes, logits.matrix());
  routing_ = moe_route(logits.matrix(), config_.top_k, config_.capacity_factor,
                       config_.force_balance);
  global_counts_ = routing_.counts;
  groups_.tokens.all_reduce(std::span<std::int64_t>(global_counts_));
  std::int64_t tokens = N;
  groups_.tokens.all_reduce(std::span<std::int64_t>(&tokens, 1));
  global_tokens_ = tokens;

  dispatch_ = moe_dispatch(routing_);
  exchange_ = plan_exchange(dispatch_);
  {  // scoped: each buffer lives only until the next one is made from it
    Tensor xp({dispatch_.rows(), h});
    moe_permute(xp.matrix(), x, dispatch_);
    xq_ = dispatch_rows(xp.matrix());
  }
  const std::int64_t rows = exchange_.offsets.back();
  pre_ = Tensor({rows, local_ffn_});
  act_ = Tensor({rows, local_ffn_});
  {
    Tensor yq({rows, h});
    expert_mlp_forward(yq.matrix(), pre_.matrix(), act_.matrix(), xq_.matrix(), w1_v(), w2_v(),
                       exchange_.offsets);
    yp_ = combine_rows(yq.matrix());
  }
  moe_combine(y, yp_.matrix(), routing_, dispatch_);
  return moe_aux_loss(routing_, global_counts_, global_tokens_, config_.aux_loss_coeff);
}

void ExpertParallelMoe::backward(MatrixView dx, ConstMatrixView dy, ConstMatrixView x,
                                 double aux_weight) {
  const std::int64_t N = routing_.tokens, h = config_.hidden, E = config_.experts;
  MESHTP_CHECK(dy.rows == N && dx.rows == N && x.rows == N && dy.cols == h && dx.cols == h,
               "moe backward: dy has {} rows, dx {} and x {}; forward saw {} tokens", dy.rows,
               dx.rows, x.rows, N);
  MESHTP_CHECK(!grads_.w1.empty(), "moe backward: no gradient storage bound");
  std::vector<float> dgate(static_cast<std::size_t>(N * config_.top_k));
  Tensor dyq;
  {  // scoped as in forward: the backward's peak is the experts' (dy, dx, dA, dH of the rows)
    Tensor dyp({dispatch_.rows(), h});
    moe_combine_backward(dyp.matrix(), dgate, dy, yp_.matrix(), routing_, dispatch_);
    dyq = dispatch_rows(dyp.matrix());
  }
  const std::int64_t rows = exchange_.offsets.back();
  Tensor dxq({rows, h});
  {
    Tensor dact({rows, local_ffn_}), dpre({rows, local_ffn_});
    const MatrixView dw1{grads_.w1.data(), local_experts_ * local_ffn_, h, h};
    const MatrixView dw2{grads_.w2.data(), local_experts_ * h, local_ffn_, local_ffn_};
    expert_mlp_backward(dxq.matrix(), dw1, dw2, dact.matrix(), dpre.matrix(), dyq.matrix(),
                        xq_.matrix(), pre_.matrix(), act_.matrix(), w1_v(), w2_v(),
                        exchange_.offsets);
  }
  dyq = Tensor();
  zero(dx);
  moe_permute_backward(dx, combine_rows(dxq.matrix()).matrix(), dispatch_);

  Tensor dlogits({N, E});
  moe_router_backward(dlogits.matrix(), routing_, dgate, global_counts_, global_tokens_,
                      config_.aux_loss_coeff, aux_weight);
  gemm(dlogits.matrix(), Trans::kNo, router_v(), Trans::kNo, dx, 1.0f, 1.0f);
  gemm(dlogits.matrix(), Trans::kYes, x, Trans::kNo, MatrixView{grads_.router.data(), E, h, h},
       1.0f, 1.0f);
}

}  // namespace meshtp::parallel
