#include "train/zero.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/op_costs.hpp"
#include "core/simulation.hpp"
#include "core/trace.hpp"
#include "ops/adamw.hpp"
#include "ops/kernels.hpp"

namespace meshtp::train {

struct DataParallel::Bucket {
  std::vector<int> params;
  std::int64_t size = 0;  // S_b
  std::int64_t part = 0;  // ⌈S_b/dp⌉ (stage ≥ 1)
  Tensor buffer;          // packed gradients (stage 0: S_b; else part·dp), then gathered values
                          // (stage ≥ 2 blocks: only while a collective uses it)
  Tensor gathered;        // stage 3: the parameters' all-gather, until copied
  Tensor grad;            // stage ≥ 2: this replica's summed (accumulated) part
  Tensor value, m, v;     // stage ≥ 1: this replica's part of the values and moments
  std::span<float> own_grad;  // stage ≥ 1: the summed part (in buffer, or grad)
  comm::Request request;
  const comm::Communicator* group = nullptr;  // dp·cp, or an expert bucket's dp replicas
  int layer = -1;                             // the block (-1: the last bucket)
  comm::Request gather;       // stage 3: the parameters' all-gather (prefetch)
  bool whole = true;          // stage 3: the model holds this bucket's parameters
  int reductions = 0;         // stage ≥ 2: microbatches reduced into `grad` this step
};

namespace {

// f(p, offset in parameter p, offset in the bucket, count) for every piece of the bucket's
// flat range [lo, hi), in order.
template <typename F>
void for_each_piece(const std::vector<Shape>& shapes, const std::vector<int>& params,
                    std::int64_t lo, std::int64_t hi, F&& f) {
  std::int64_t at = 0;
  for (const int p : params) {
    const std::int64_t n = numel(shapes[static_cast<std::size_t>(p)]);
    const std::int64_t a = std::max(lo, at), b = std::min(hi, at + n);
    if (a < b) f(p, a - at, a, b - a);
    at += n;
  }
}

// Packing gradients into a bucket and unpacking values out of it: a data movement, free in
// the simulated build's charged mode where nobody reads the values (core/simulation.hpp).
void copy_floats(const float* from, std::int64_t n, float* to) {
  if (simhooks::skip_values(static_cast<std::size_t>(n) * sizeof(float))) return;
  std::copy_n(from, n, to);
}

}  // namespace

DataParallel::DataParallel(model::Gpt& gpt, const comm::Communicator& dp_group, int zero,
                           const AdamWConfig& adamw, const comm::Communicator* expert_dp)
    : gpt_(gpt), dp_(dp_group), expert_dp_(expert_dp), zero_(zero), adamw_config_(adamw) {
  MESHTP_CHECK(zero >= 0 && zero <= 3, "zero={} must be 0, 1, 2 or 3", zero);
  MESHTP_CHECK(zero == 0 || dp_group.size() > 1,
               "zero={} shards over the data-parallel replicas, but dp=1: use --dp > 1 or --zero 0",
               zero);
  const int layers = model::stage_layers(gpt.config());  // this pipeline stage's blocks
  // Blocks 0…L−1, then (experts folded over tp·cp) block i's expert weights at L+i, then
  // the rest: every bucket but the last is a block's.
  layers_ = layers;
  const int expert_buckets = expert_dp_ != nullptr ? layers : 0;
  buckets_.resize(static_cast<std::size_t>(layers + expert_buckets) + 1);
  for (std::size_t k = 0; k < buckets_.size(); ++k) {
    Bucket& b = buckets_[k];
    const int i = static_cast<int>(k);
    const bool expert = i >= layers && i + 1 < static_cast<int>(buckets_.size());
    b.group = expert ? expert_dp_ : &dp_;
    b.layer = i < layers ? i : (expert ? i - layers : -1);
  }
  for (int p = 0; p < gpt.num_params(); ++p) {
    const int layer = gpt.grad_layer(p);
    const bool expert = expert_dp_ != nullptr && gpt.on_expert_mesh(p);
    MESHTP_CHECK(!expert || layer >= 0,
                 "parameter {} ({}) is an expert weight completed by no block", p, gpt.name(p));
    const int bucket = expert ? layers + layer : (layer < 0 ? layers + expert_buckets : layer);
    Bucket& b = buckets_[static_cast<std::size_t>(bucket)];
    b.params.push_back(p);
    b.size += gpt.grad(p).numel();
  }
  for (int p = 0; p < gpt.num_params(); ++p) shapes_.push_back(gpt.value(p).shape());
  for (std::size_t k = 0; k < buckets_.size(); ++k) {
    Bucket& b = buckets_[k];
    const int dp = b.group->size(), r = b.group->rank();
    if (zero == 0) {
      if (dp > 1) b.buffer = Tensor({b.size});
      continue;
    }
    b.part = (b.size + dp - 1) / dp;
    if (!transient(static_cast<int>(k))) b.buffer = Tensor({b.part * dp});
    b.value = Tensor({b.part});
    b.m = Tensor({b.part});
    b.v = Tensor({b.part});
    if (zero >= 2) b.grad = Tensor({b.part});
    b.own_grad = zero >= 2 ? b.grad.values()
                           : b.buffer.values().subspan(static_cast<std::size_t>(r * b.part),
                                                       static_cast<std::size_t>(b.part));
  }
  if (zero == 0) whole_ = std::make_unique<AdamW>(refs(dp_.size()), adamw);
  if (zero >= 2) {
    // The blocks' gradient accumulators exist only while their backward runs.
    for (int i = 0; transient(i); ++i) {
      for (const int p : buckets_[static_cast<std::size_t>(i)].params) gpt.grad(p) = Tensor();
    }
    for (int layer = 0; layer < layers; ++layer) gpt.rebind(layer);
    gpt.set_before_layer([this](int layer, bool backward) { before_layer(layer, backward); });
  }
}

bool DataParallel::transient(int bucket) const {
  return zero_ >= 2 && bucket + 1 < static_cast<int>(buckets_.size());
}

bool DataParallel::sharded(int bucket) const {
  return zero_ == 3 && bucket + 1 < static_cast<int>(buckets_.size());
}

void DataParallel::parameters_written() {
  if (zero_ != 3) return;
  for (int i = 0; sharded(i); ++i) {
    Bucket& b = buckets_[static_cast<std::size_t>(i)];
    const std::int64_t r = b.group->rank();
    for_each_piece(shapes_, b.params, r * b.part, std::min(b.size, (r + 1) * b.part),
                   [&](int p, std::int64_t offset, std::int64_t at, std::int64_t n) {
                     copy_floats(gpt_.value(p).data() + offset, n,
                                 b.value.data() + (at - r * b.part));
                   });
    release(i);
  }
}

// The bucket's parts all-gathered (the prefetch's, or now) into new whole tensors.
void DataParallel::materialize(int bucket) {
  Bucket& b = buckets_.at(static_cast<std::size_t>(bucket));
  if (b.whole) return;
  if (!b.gather.pending()) start_gather(b);
  {
    const ScopedSpan span("param_allgather_wait", SpanKind::kPhase);
    b.gather.wait();
  }
  std::int64_t at = 0;
  for (const int p : b.params) {
    Tensor& t = gpt_.value(p);
    t = Tensor(shapes_[static_cast<std::size_t>(p)]);
    copy_floats(b.gathered.data() + at, t.numel(), t.data());
    at += t.numel();
  }
  b.gathered = Tensor();
  b.whole = true;
}

int DataParallel::expert_bucket(int layer) const {
  return expert_dp_ != nullptr && layer >= 0 && layer < layers_ ? layers_ + layer : -1;
}

void DataParallel::materialize_layer(int layer) {
  const bool whole = buckets_[static_cast<std::size_t>(layer)].whole &&
                     (expert_bucket(layer) < 0 ||
                      buckets_[static_cast<std::size_t>(expert_bucket(layer))].whole);
  if (whole) return;
  materialize(layer);
  if (expert_bucket(layer) >= 0) materialize(expert_bucket(layer));
  gpt_.rebind(layer);
}

void DataParallel::release(int bucket) {
  Bucket& b = buckets_.at(static_cast<std::size_t>(bucket));
  for (const int p : b.params) gpt_.value(p) = Tensor();
  b.whole = false;
}

void DataParallel::start_gather(Bucket& b) {
  b.gathered = Tensor({b.part * b.group->size()});
  b.gather = b.group->iall_gather(std::span<const float>(b.value.values()), b.gathered.values());
}

void DataParallel::before_layer(int layer, bool backward) {
  if (zero_ == 3) {
    const int next = backward ? layer - 1 : layer + 1;
    for (int i = 0; sharded(i); ++i) {
      const Bucket& b = buckets_[static_cast<std::size_t>(i)];
      if (b.layer != layer && b.layer != next && b.whole) release(i);
    }
    materialize_layer(layer);
    if (next >= 0 && sharded(next)) {
      for (const int k : {next, expert_bucket(next)}) {
        if (k < 0) continue;
        Bucket& b = buckets_[static_cast<std::size_t>(k)];
        if (!b.whole && !b.gather.pending()) start_gather(b);
      }
    }
  }
  if (backward && transient(layer)) {  // fresh zeroed accumulators for this backward
    for (const int k : {layer, expert_bucket(layer)}) {
      if (k < 0) continue;
      for (const int p : buckets_[static_cast<std::size_t>(k)].params) {
        gpt_.grad(p) = Tensor(shapes_[static_cast<std::size_t>(p)]);
      }
    }
    gpt_.rebind(layer);
  }
}

DataParallel::~DataParallel() = default;

std::vector<ParamRef> DataParallel::refs(int dp_factor, bool with_grads) const {
  std::vector<ParamRef> out;
  for (int p = 0; p < gpt_.num_params(); ++p) {
    const bool expert = expert_dp_ != nullptr && gpt_.on_expert_mesh(p);
    out.push_back({gpt_.name(p), &gpt_.value(p), with_grads ? &gpt_.grad(p) : &gpt_.value(p),
                   gpt_.decays(p), gpt_.replicas(p) * (expert ? expert_dp_->size() : dp_factor),
                   gpt_.norm_weight(p)});
  }
  return out;
}

void DataParallel::start(int layer) {
  // Stage ≥ 2: one block's reductions in flight (its expert bucket's too); frees its buffers.
  if (transient(layer) && in_flight_ >= 0) backward_done();
  start_bucket(layer);
  if (expert_bucket(layer) >= 0) start_bucket(expert_bucket(layer));
  if (transient(layer)) in_flight_ = layer;
  // Open MPI advances non-blocking collectives only inside MPI calls; a pure data-parallel
  // backward makes none, so each new bucket also pokes the ones already in flight.
  for (Bucket& other : buckets_) {
    if (other.request.pending()) other.request.test();
  }
}

void DataParallel::start_bucket(int bucket) {
  Bucket& b = buckets_.at(static_cast<std::size_t>(bucket));
  const comm::Communicator& group = *b.group;
  if (zero_ == 0 && group.size() == 1) return;
  if (transient(bucket)) {
    wait_reduction(bucket);  // this block's previous microbatch (normally done already)
    b.buffer = Tensor({b.part * group.size()});
  }
  float* out = b.buffer.data();
  for (const int p : b.params) {
    const Tensor& g = gpt_.grad(p);
    copy_floats(g.data(), g.numel(), out);
    out += g.numel();
  }
  if (transient(bucket)) {
    for (const int p : b.params) gpt_.grad(p) = Tensor();  // whole only until packed
    if (b.reductions > 0) {  // acc_r rides along in slot r: Σ_q buf_q[r] + acc_r
      float* mine = b.buffer.data() + static_cast<std::int64_t>(group.rank()) * b.part;
      const float* acc = b.grad.data();
      if (!simhooks::charge_bytes(op_costs::bytes(b.part, op_costs::kResidualForwardTouches))) {
        for (std::int64_t i = 0; i < b.part; ++i) mine[i] += acc[i];
      }
    }
    ++b.reductions;
  }
  if (zero_ >= 2) {
    b.request = group.ireduce_scatter(std::span<const float>(b.buffer.values()), b.grad.values());
  } else {
    b.request = group.iall_reduce(b.buffer.values());
  }
}

void DataParallel::start_last() {
  const int last = static_cast<int>(buckets_.size()) - 1;
  start_bucket(last);
  for (Bucket& other : buckets_) {
    if (other.request.pending()) other.request.test();
  }
}

void DataParallel::wait_reduction(int bucket) {
  Bucket& b = buckets_.at(static_cast<std::size_t>(bucket));
  if (b.request.pending()) {
    const ScopedSpan span("grad_reduce_scatter_wait", SpanKind::kPhase);
    b.request.wait();
  }
  b.buffer = Tensor();
}

void DataParallel::backward_done() {
  if (in_flight_ < 0) return;
  wait_reduction(in_flight_);
  if (expert_bucket(in_flight_) >= 0) wait_reduction(expert_bucket(in_flight_));
  in_flight_ = -1;
}

void DataParallel::finish() {
  backward_done();
  const ScopedSpan span(zero_ >= 2 ? "grad_reduce_scatter_wait" : "grad_allreduce_wait",
                        SpanKind::kPhase);
  for (Bucket& b : buckets_) {
    b.request.wait();
    b.reductions = 0;         // the next step's first microbatch overwrites the part
    if (zero_ > 0 || b.buffer.empty()) continue;  // the optimizer reads its part there
    const float* in = b.buffer.data();
    for (const int p : b.params) {
      Tensor& g = gpt_.grad(p);
      copy_floats(in, g.numel(), g.data());
      in += g.numel();
    }
  }
}

double DataParallel::grad_norm(const comm::Communicator& world) const {
  if (zero_ == 0) return global_grad_norm(whole_->params(), world);
  double local = 0.0;
  for (const Bucket& b : buckets_) {
    const std::int64_t lo = b.group->rank();
    for_each_piece(shapes_, b.params, lo * b.part, std::min(b.size, (lo + 1) * b.part),
                   [&](int p, std::int64_t offset, std::int64_t at, std::int64_t n) {
                     const float* g = b.own_grad.data() + (at - lo * b.part);
                     if (const Tensor* w = gpt_.norm_weight(p)) {  // replicated KV heads
                       double sum = 0.0;
                       for (std::int64_t i = 0; i < n; ++i) {
                         sum += static_cast<double>(g[i]) * g[i] * (*w)[offset + i];
                       }
                       local += sum / gpt_.replicas(p);
                       return;
                     }
                     local += kernels::fast().moments(g, n).second / gpt_.replicas(p);
                   });
  }
  world.all_reduce(std::span<double>(&local, 1));
  return std::sqrt(local);
}

void DataParallel::clip(double norm, double max_norm) {
  if (zero_ == 0) {
    clip_gradients(whole_->params(), norm, max_norm);
    return;
  }
  if (max_norm <= 0.0 || !(norm > max_norm)) return;
  const auto scale = static_cast<float>(max_norm / norm);
  for (Bucket& b : buckets_) {
    kernels::fast().scale(b.own_grad.data(), static_cast<std::int64_t>(b.own_grad.size()), scale);
  }
}

void DataParallel::step(float lr) {
  if (zero_ == 0) {
    whole_->step(lr);
    return;
  }
  ++steps_;
  // Back into the model: bucket k's gathered values. Stage 2's block buckets gather into a
  // buffer of their own, freed here, and run one behind: at most two whole buffers.
  const auto land = [&](std::size_t k) {
    Bucket& b = buckets_[k];
    {
      const ScopedSpan span("param_allgather_wait", SpanKind::kPhase);
      b.request.wait();
    }
    for_each_piece(shapes_, b.params, 0, b.size,
                   [&](int p, std::int64_t offset, std::int64_t at, std::int64_t n) {
                     copy_floats(b.buffer.data() + at, n, gpt_.value(p).data() + offset);
                   });
    if (transient(static_cast<int>(k))) b.buffer = Tensor();
  };
  for (std::size_t k = 0; k < buckets_.size(); ++k) {
    Bucket& b = buckets_[k];
    const std::int64_t r = b.group->rank();
    const bool part_only = sharded(static_cast<int>(k));  // stage 3: the part is the master
    if (part_only) {
      b.gather.wait();  // a prefetch in flight is stale too
      b.gathered = Tensor();
      if (b.whole) release(static_cast<int>(k));  // stale after this update
    }
    // The update on this replica's part, elementwise as on the whole tensor (adamw.hpp).
    for_each_piece(shapes_, b.params, r * b.part, std::min(b.size, (r + 1) * b.part),
                   [&](int p, std::int64_t offset, std::int64_t at, std::int64_t n) {
                     const auto i = static_cast<std::size_t>(at - r * b.part);
                     const auto count = static_cast<std::size_t>(n);
                     const std::span<float> value = b.value.values().subspan(i, count);
                     if (!part_only) {
                       const auto src = gpt_.value(p).values().subspan(
                           static_cast<std::size_t>(offset), count);
                       copy_floats(src.data(), n, value.data());
                     }
                     adamw_update(value, b.own_grad.subspan(i, count),
                                  b.m.values().subspan(i, count), b.v.values().subspan(i, count),
                                  adamw_config_.at(lr, steps_, gpt_.decays(p)));
                   });
    if (part_only) continue;
    const int i = static_cast<int>(k);
    if (transient(i)) b.buffer = Tensor({b.part * b.group->size()});
    b.request = b.group->iall_gather(std::span<const float>(b.value.values()), b.buffer.values());
    if (transient(i) && k > 0) land(k - 1);  // one behind
  }
  for (std::size_t k = 0; k < buckets_.size(); ++k) {
    const int i = static_cast<int>(k);
    const bool landed = transient(i) && transient(i + 1);
    if (!sharded(i) && !landed) land(k);
  }
}

void DataParallel::export_moments(AdamW& whole) {
  for (Bucket& b : buckets_) {
    Tensor gathered({b.part * b.group->size()});
    for (const bool first : {true, false}) {
      b.group->all_gather(std::span<const float>((first ? b.m : b.v).values()), gathered.values());
      std::vector<Tensor>& out = first ? whole.first_moments() : whole.second_moments();
      for_each_piece(shapes_, b.params, 0, b.size,
                     [&](int p, std::int64_t offset, std::int64_t at, std::int64_t n) {
                       std::copy_n(gathered.data() + at, n,
                                   out[static_cast<std::size_t>(p)].data() + offset);
                     });
    }
  }
  whole.set_steps(steps_);
}

void DataParallel::import_moments(AdamW& whole) {
  for (Bucket& b : buckets_) {
    const std::int64_t r = b.group->rank();
    for_each_piece(shapes_, b.params, r * b.part, std::min(b.size, (r + 1) * b.part),
                   [&](int p, std::int64_t offset, std::int64_t at, std::int64_t n) {
                     const auto u = static_cast<std::size_t>(p);
                     const std::int64_t i = at - r * b.part;
                     std::copy_n(whole.first_moments()[u].data() + offset, n,
                                 b.m.data() + i);
                     std::copy_n(whole.second_moments()[u].data() + offset, n,
                                 b.v.data() + i);
                   });
  }
  steps_ = whole.steps();
}

AdamW& DataParallel::optimizer_to_save() {
  if (zero_ == 0) return *whole_;
  for (int i = 0; i < layers_ && zero_ == 3; ++i) materialize_layer(i);  // read whole
  scratch_ = std::make_unique<AdamW>(refs(1, false), adamw_config_);
  export_moments(*scratch_);
  return *scratch_;
}

void DataParallel::saved() {
  scratch_.reset();
  for (int i = 0; sharded(i); ++i) release(i);
}

AdamW& DataParallel::optimizer_to_load() {
  if (zero_ == 0) return *whole_;
  for (int i = 0; i < layers_ && zero_ == 3; ++i) materialize_layer(i);  // storage to fill
  scratch_ = std::make_unique<AdamW>(refs(1, false), adamw_config_);
  return *scratch_;
}

void DataParallel::loaded() {
  if (zero_ == 0) return;
  import_moments(*scratch_);
  scratch_.reset();
  parameters_written();
}

std::int64_t DataParallel::optimizer_floats() const {
  std::int64_t n = 0;
  for (const Bucket& b : buckets_) n += 2 * (zero_ == 0 ? b.size : b.part);
  return n;
}

std::int64_t DataParallel::gradient_floats() const {
  std::int64_t n = 0;
  for (const Bucket& b : buckets_) {
    for (const int p : b.params) n += gpt_.grad(p).numel();
    n += b.buffer.numel() + b.grad.numel();
  }
  return n;
}

}  // namespace meshtp::train
