#include "parallel/moe.hpp"

#include <algorithm>
#include <numeric>
#include <span>

#include "core/error.hpp"
#include "tensor/gemm.hpp"  // Trans, saved_operand_element

namespace meshtp::parallel {
namespace {

std::vector<std::int64_t> times(std::span<const std::int64_t> rows, std::int64_t h) {
  std::vector<std::int64_t> v(rows.begin(), rows.end());
  for (auto& n : v) n *= h;
  return v;
}

std::int64_t sum(std::span<const std::int64_t> v) {
  return std::accumulate(v.begin(), v.end(), std::int64_t{0});
}

}  // namespace

ExpertParallelMoe::ExpertParallelMoe(const MoeConfig& config, MoeGroups groups,
                                     device::Backend& backend)
    : config_(config), groups_(std::move(groups)), be_(&backend) {
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
  operands_ = saved_operand_element();
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
  MESHTP_CHECK(be_->device_memory() == nullptr,
               "moe load: the parameters are copied on the host, and {}'s memory is not the "
               "host's (bind the stack's storage instead)",
               be_->name());
  if (values_.router.empty()) own_storage();
  copy(router_full.values(), values_.router);
  const std::int64_t first = groups_.ep.rank() * local_experts_;
  const std::int64_t col0 = groups_.etp.rank() * local_ffn_;
  for (std::int64_t l = 0; l < local_experts_; ++l) {
    const std::int64_t e = first + l;
    copy(w1_full.matrix().block(e * F + col0, 0, local_ffn_, h),
         host_matrix(w1_v(), "W1").block(l * local_ffn_, 0, local_ffn_, h));
    copy(w2_full.matrix().block(e * h, col0, h, local_ffn_),
         host_matrix(w2_v(), "W2").block(l * h, 0, h, local_ffn_));
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
  x.gathered_of.resize(x.sorted_of.size());
  for (std::size_t g = 0; g < x.sorted_of.size(); ++g) {
    x.gathered_of[static_cast<std::size_t>(x.sorted_of[g])] = static_cast<std::int64_t>(g);
  }
  return x;
}

device::Array ExpertParallelMoe::dispatch_rows(const device::Array& rows) const {
  const std::int64_t h = config_.hidden;
  const Exchange& x = exchange_;
  device::Array received = alloc(sum(x.recv_rows), h);
  const auto send_counts = times(x.send_rows, h), recv_counts = times(x.recv_rows, h);
  groups_.ep.all_to_allv(std::span<const float>(device::floats(rows)),
                         std::span<const std::int64_t>(send_counts), device::floats(received),
                         std::span<const std::int64_t>(recv_counts));
  device::Array gathered;
  if (groups_.etp.size() == 1) {
    gathered = std::move(received);
  } else {  // every peer gets all of this rank's rows: an all-gather of blocks of their own sizes
    const int etp = groups_.etp.size();
    const std::int64_t n = received.count();
    device::Array repeated = be_->alloc(n * etp, Element::kF32);
    std::vector<View> dst, src;
    for (int t = 0; t < etp; ++t) {
      dst.push_back(repeated.view(t * n, 1, n, n));
      src.push_back(received.view(1, n));
    }
    be_->copy_blocks(dst, src);
    const std::vector<std::int64_t> mine(static_cast<std::size_t>(etp), n);
    const auto peer_counts = times(x.peer_rows, h);
    gathered = alloc(sum(x.peer_rows), h);
    groups_.etp.all_to_allv(std::span<const float>(device::floats(repeated)),
                            std::span<const std::int64_t>(mine), device::floats(gathered),
                            std::span<const std::int64_t>(peer_counts));
  }
  const std::int64_t total = gathered.count() / h;
  device::Array sorted = alloc(total, h);
  be_->gather_rows(sorted.view(total, h), gathered.view(total, h), x.gathered_of, {});
  return sorted;
}

device::Array ExpertParallelMoe::combine_rows(const device::Array& expert_major) const {
  const std::int64_t h = config_.hidden;
  const Exchange& x = exchange_;
  const std::int64_t total = expert_major.count() / h;
  device::Array unsorted = alloc(total, h);
  be_->gather_rows(unsorted.view(total, h), expert_major.view(total, h), x.sorted_of, {});
  const std::int64_t mine = sum(x.recv_rows);
  device::Array received;
  if (groups_.etp.size() == 1) {
    received = std::move(unsorted);
  } else {  // each peer's rows back to it, then the etp partial sums added: a reduce-scatter
    const int etp = groups_.etp.size();
    const auto peer_counts = times(x.peer_rows, h);
    const std::vector<std::int64_t> mine_counts(static_cast<std::size_t>(etp), mine * h);
    device::Array partials = be_->alloc(mine * h * etp, Element::kF32);
    groups_.etp.all_to_allv(std::span<const float>(device::floats(unsorted)),
                            std::span<const std::int64_t>(peer_counts), device::floats(partials),
                            std::span<const std::int64_t>(mine_counts));
    received = alloc(mine, h);
    const View sum_v = received.view(mine, h);
    be_->copy(sum_v, partials.view(mine, h));
    for (int t = 1; t < etp; ++t) be_->add(sum_v, partials.view(t * mine * h, mine, h, h));
  }
  device::Array back = alloc(sum(x.send_rows), h);
  const auto send_counts = times(x.recv_rows, h), recv_counts = times(x.send_rows, h);
  groups_.ep.all_to_allv(std::span<const float>(device::floats(received)),
                         std::span<const std::int64_t>(send_counts), device::floats(back),
                         std::span<const std::int64_t>(recv_counts));
  return back;
}

void ExpertParallelMoe::experts_forward(const View& y, const View& pre, const View& act,
                                        const View& x) const {
  const std::int64_t h = config_.hidden, F = local_ffn_;
  const View w1 = w1_v(), w2 = w2_v();
  // A bf16 activation: GeLU writes one expert's rows in fp32 here, a copy rounds them into act.
  device::Array band;
  if (act.type != Element::kF32) {
    std::int64_t most = 0;
    for (std::int64_t e = 0; e < local_experts_; ++e) {
      most = std::max(most, exchange_.offsets[e + 1] - exchange_.offsets[e]);
    }
    band = alloc(most, F);
  }
  for (std::int64_t e = 0; e < local_experts_; ++e) {
    const std::int64_t r0 = exchange_.offsets[e], n = exchange_.offsets[e + 1] - r0;
    if (n == 0) continue;
    const View pre_e = pre.row_band(r0, n), act_e = act.row_band(r0, n);
    be_->gemm(pre_e, x.row_band(r0, n), Trans::kNo, w1.row_band(e * F, F), Trans::kYes);
    if (band.empty()) {
      be_->gelu_forward(act_e, pre_e);
    } else {
      const View fp32 = band.view(n, F);
      be_->gelu_forward(fp32, pre_e);
      be_->copy(act_e, fp32);
    }
    be_->gemm(y.row_band(r0, n), act_e, Trans::kNo, w2.row_band(e * h, h), Trans::kYes);
  }
}

void ExpertParallelMoe::experts_backward(const View& dx, const View& dy, const View& x,
                                         const View& pre, const View& act) const {
  const std::int64_t h = config_.hidden, F = local_ffn_;
  const View w1 = w1_v(), w2 = w2_v();
  const View dw1 = matrix(grads_.w1, local_experts_ * F, h);
  const View dw2 = matrix(grads_.w2, local_experts_ * h, F);
  const std::int64_t rows = exchange_.offsets.back();
  const device::Array dact = alloc(rows, F), dpre = alloc(rows, F);
  be_->zero(dx);
  for (std::int64_t e = 0; e < local_experts_; ++e) {
    const std::int64_t r0 = exchange_.offsets[e], n = exchange_.offsets[e + 1] - r0;
    if (n == 0) continue;
    const View dy_e = dy.row_band(r0, n), w1_e = w1.row_band(e * F, F),
               w2_e = w2.row_band(e * h, h);
    const View dact_e = dact.view(rows, F).row_band(r0, n);
    const View dpre_e = dpre.view(rows, F).row_band(r0, n);
    // dW2 += dyᵀ·A,  dA = dy·W2,  dH = gelu'(H) ⊙ dA,  dW1 += dHᵀ·x,  dx = dH·W1
    be_->gemm(dw2.row_band(e * h, h), dy_e, Trans::kYes, act.row_band(r0, n), Trans::kNo, 1.0f,
              1.0f);
    be_->gemm(dact_e, dy_e, Trans::kNo, w2_e, Trans::kNo);
    be_->zero(dpre_e);
    be_->gelu_backward(dpre_e, pre.row_band(r0, n), dact_e);
    be_->gemm(dw1.row_band(e * F, F), dpre_e, Trans::kYes, x.row_band(r0, n), Trans::kNo, 1.0f,
              1.0f);
    be_->gemm(dx.row_band(r0, n), dpre_e, Trans::kNo, w1_e, Trans::kNo);
  }
}

double ExpertParallelMoe::forward(const View& y, const View& x) {
  const std::int64_t N = x.rows, h = config_.hidden, E = config_.experts;
  MESHTP_CHECK(x.cols == h && y.cols == h && y.rows == N,
               "moe forward: x is {} and y {} for hidden={}", describe(x), describe(y), h);
  {  // routing is host data: the logits come to the host
    const device::Array logits = alloc(N, E);
    be_->gemm(logits.view(N, E), x, Trans::kNo, router_v(), Trans::kYes);
    const std::vector<float> host = be_->download(logits);
    routing_ = moe_route(ConstMatrixView{host.data(), N, E, E}, config_.top_k,
                         config_.capacity_factor, config_.force_balance);
  }
  global_counts_ = routing_.counts;
  groups_.tokens.all_reduce(std::span<std::int64_t>(global_counts_));
  std::int64_t tokens = N;
  groups_.tokens.all_reduce(std::span<std::int64_t>(&tokens, 1));
  global_tokens_ = tokens;

  dispatch_ = moe_dispatch(routing_);
  exchange_ = plan_exchange(dispatch_);
  const std::int64_t dispatched = dispatch_.rows(), k = config_.top_k;
  gate_of_row_.assign(static_cast<std::size_t>(dispatched), 0.0f);
  for (std::int64_t a = 0; a < N * k; ++a) {
    const std::int64_t row = dispatch_.row_of[static_cast<std::size_t>(a)];
    if (row >= 0)
      gate_of_row_[static_cast<std::size_t>(row)] = routing_.gate[static_cast<std::size_t>(a)];
  }
  {  // scoped: each buffer lives only until the next one is made from it
    const device::Array xp = alloc(dispatched, h);
    if (x.type == Element::kF32) {
      be_->gather_rows(xp.view(dispatched, h), x, dispatch_.token_of, {});  // xp[r] = x[token]
    } else {  // a block's bf16 ln2 output: its rows gathered from an fp32 copy (exact)
      const device::Array wide = alloc(N, h);
      be_->copy(wide.view(N, h), x);
      be_->gather_rows(xp.view(dispatched, h), wide.view(N, h), dispatch_.token_of, {});
    }
    xq_ = dispatch_rows(xp);
  }
  const std::int64_t rows = exchange_.offsets.back();
  if (operands_ != Element::kF32) {  // kept in bf16: rounded once, the fp32 rows freed
    device::Array stored = be_->alloc(rows * h, operands_);
    be_->copy(stored.view(rows, h), xq_.view(rows, h));
    xq_ = std::move(stored);
  }
  pre_ = alloc(rows, local_ffn_);
  act_ = be_->alloc(rows * local_ffn_, operands_);
  {
    const device::Array yq = alloc(rows, h);
    experts_forward(yq.view(rows, h), pre_.view(rows, local_ffn_), act_.view(rows, local_ffn_),
                    xq_.view(rows, h));
    yp_ = combine_rows(yq);
  }
  // y[n] = Σ_j g_nj · yp[row_nj] (a token with every assignment dropped gets 0)
  be_->zero(y);
  be_->scatter_add_rows(y, yp_.view(dispatched, h), dispatch_.token_of, gate_of_row_);
  return moe_aux_loss(routing_, global_counts_, global_tokens_, config_.aux_loss_coeff);
}

void ExpertParallelMoe::backward(const View& dx, const View& dy, const View& x, double aux_weight) {
  const std::int64_t N = routing_.tokens, h = config_.hidden, E = config_.experts;
  MESHTP_CHECK(dy.rows == N && dx.rows == N && x.rows == N && dy.cols == h && dx.cols == h,
               "moe backward: dy has {} rows, dx {} and x {}; forward saw {} tokens", dy.rows,
               dx.rows, x.rows, N);
  MESHTP_CHECK(!grads_.w1.empty(), "moe backward: no gradient storage bound");
  const std::int64_t dispatched = dispatch_.rows(), k = config_.top_k;
  // The combine's backward: dyp[r] = g·dy[token of r], and ∂L/∂g = dy[token]·yp[r] (0 for a
  // dropped assignment), to the host for the router's backward.
  std::vector<float> dgate(static_cast<std::size_t>(N * k), 0.0f);
  {
    const std::vector<float> dots = be_->row_dots(dy, dispatch_.token_of, yp_.view(dispatched, h));
    for (std::int64_t a = 0; a < N * k; ++a) {
      const std::int64_t row = dispatch_.row_of[static_cast<std::size_t>(a)];
      if (row >= 0) dgate[static_cast<std::size_t>(a)] = dots[static_cast<std::size_t>(row)];
    }
  }
  device::Array dyq;
  {  // scoped as in forward: the backward's peak is the experts' (dy, dx, dA, dH of the rows)
    const device::Array dyp = alloc(dispatched, h);
    be_->gather_rows(dyp.view(dispatched, h), dy, dispatch_.token_of, gate_of_row_);
    dyq = dispatch_rows(dyp);
  }
  const std::int64_t rows = exchange_.offsets.back();
  device::Array dxq = alloc(rows, h);
  experts_backward(dxq.view(rows, h), dyq.view(rows, h), xq_.view(rows, h),
                   pre_.view(rows, local_ffn_), act_.view(rows, local_ffn_));
  dyq = device::Array();
  be_->zero(dx);
  {  // dx[token of r] += dxp[r]
    const device::Array dxp = combine_rows(dxq);
    dxq = device::Array();
    be_->scatter_add_rows(dx, dxp.view(dispatched, h), dispatch_.token_of, {});
  }
  // The router, on the host's routing: dlogits there, then its two GeMMs on the backend.
  Tensor dlogits({N, E});
  moe_router_backward(dlogits.matrix(), routing_, dgate, global_counts_, global_tokens_,
                      config_.aux_loss_coeff, aux_weight);
  device::Array dl = alloc(N, E);
  be_->upload(dl, dlogits.values());
  be_->gemm(dx, dl.view(N, E), Trans::kNo, router_v(), Trans::kNo, 1.0f, 1.0f);
  be_->gemm(matrix(grads_.router, E, h), dl.view(N, E), Trans::kYes, x, Trans::kNo, 1.0f, 1.0f);
}

}  // namespace meshtp::parallel
