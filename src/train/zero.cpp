#include "train/zero.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/op_costs.hpp"
#include "core/simulation.hpp"
#include "core/trace.hpp"

namespace meshtp::train {

struct DataParallel::Bucket {
  std::vector<int> params;
  std::int64_t size = 0;  // S_b
  std::int64_t part = 0;  // ⌈S_b/dp⌉ (stage ≥ 1)
  // In the model's backend's memory:
  device::Array buffer;       // packed gradients (stage 0: S_b; else part·dp), then gathered
                              // values (stage ≥ 2 blocks: only while a collective uses it)
  device::Array gathered;     // stage 3: the parameters' all-gather, until copied
  device::Array grad;         // stage ≥ 2: this replica's summed (accumulated) part
  device::Array value, m, v;  // stage ≥ 1: this replica's part of the values and moments
  device::Array own_grad;     // stage ≥ 1: the summed part (a slice of buffer, or grad)
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

// n elements of `a` from `offset`, as a 1 × n view.
View run_of(const device::Array& a, std::int64_t offset, std::int64_t n) {
  return a.view(offset, 1, n, n);
}

// to[to_at, +n) = from[from_at, +n): packing gradients into a bucket and unpacking values out
// of it, a data movement on the backend (on the CPU free in the simulated build's charged
// mode, where nobody reads the values: core/simulation.hpp).
void copy_run(device::Backend& be, const device::Array& to, std::int64_t to_at,
              const device::Array& from, std::int64_t from_at, std::int64_t n) {
  if (n > 0) be.copy(run_of(to, to_at, n), run_of(from, from_at, n));
}

}  // namespace

DataParallel::DataParallel(model::Gpt& gpt, const comm::Communicator& dp_group, int zero,
                           const AdamWConfig& adamw, const comm::Communicator* expert_dp)
    : gpt_(gpt),
      be_(gpt.backend()),
      dp_(dp_group),
      expert_dp_(expert_dp),
      zero_(zero),
      adamw_config_(adamw) {
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
    b.size += gpt.grad(p).count();
  }
  for (int p = 0; p < gpt.num_params(); ++p) shapes_.push_back(gpt.local_shape(p));
  for (std::size_t k = 0; k < buckets_.size(); ++k) {
    Bucket& b = buckets_[k];
    const int dp = b.group->size(), r = b.group->rank();
    if (zero == 0) {
      if (dp > 1) b.buffer = zeroed(b.size);
      continue;
    }
    b.part = (b.size + dp - 1) / dp;
    if (!transient(static_cast<int>(k))) b.buffer = zeroed(b.part * dp);
    b.value = zeroed(b.part);
    b.m = zeroed(b.part);
    b.v = zeroed(b.part);
    if (zero >= 2) b.grad = zeroed(b.part);
    b.own_grad = zero >= 2 ? b.grad : b.buffer.slice(r * b.part, b.part);
  }
  if (zero == 0) whole_ = std::make_unique<AdamW>(be_, refs(dp_.size()), adamw);
  if (zero >= 2) {
    // The blocks' gradient accumulators exist only while their backward runs.
    for (int i = 0; transient(i); ++i) {
      for (const int p : buckets_[static_cast<std::size_t>(i)].params) gpt.grad(p) = {};
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
                     copy_run(be_, b.value, at - r * b.part, gpt_.value(p), offset, n);
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
    device::Array& t = gpt_.value(p);
    t = be_.alloc(numel(shapes_[static_cast<std::size_t>(p)]), Element::kF32);
    copy_run(be_, t, 0, b.gathered, at, t.count());
    at += t.count();
  }
  b.gathered = {};
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
  for (const int p : b.params) gpt_.value(p) = {};
  b.whole = false;
}

void DataParallel::start_gather(Bucket& b) {
  b.gathered = zeroed(b.part * b.group->size());
  b.gather = b.group->iall_gather(std::span<const float>(device::floats(b.value)),
                                  device::floats(b.gathered));
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
        gpt_.grad(p) = gpt_.zeroed(p);
      }
    }
    gpt_.rebind(layer);
  }
}

DataParallel::~DataParallel() = default;

device::Array DataParallel::zeroed(std::int64_t count) const {
  device::Array a = be_.alloc(count, Element::kF32);
  be_.zero(a);
  return a;
}

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
    b.buffer = zeroed(b.part * group.size());
  }
  std::int64_t at = 0;
  for (const int p : b.params) {
    const device::Array& g = gpt_.grad(p);
    copy_run(be_, b.buffer, at, g, 0, g.count());
    at += g.count();
  }
  if (transient(bucket)) {
    for (const int p : b.params) gpt_.grad(p) = {};  // whole only until packed
    if (b.reductions > 0) {  // acc_r rides along in slot r: Σ_q buf_q[r] + acc_r
      // Simulated build, charged mode: the add's time instead (core/simulation.hpp).
      if (!simhooks::charge_bytes(op_costs::bytes(b.part, op_costs::kResidualForwardTouches))) {
        be_.add(run_of(b.buffer, static_cast<std::int64_t>(group.rank()) * b.part, b.part),
                run_of(b.grad, 0, b.part));
      }
    }
    ++b.reductions;
  }
  if (zero_ >= 2) {
    b.request = group.ireduce_scatter(std::span<const float>(device::floats(b.buffer)),
                                      device::floats(b.grad));
  } else {
    b.request = group.iall_reduce(device::floats(b.buffer));
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
  b.buffer = {};
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
    std::int64_t at = 0;
    for (const int p : b.params) {
      const device::Array& g = gpt_.grad(p);
      copy_run(be_, g, 0, b.buffer, at, g.count());
      at += g.count();
    }
  }
}

double DataParallel::grad_norm(const comm::Communicator& world) const {
  if (zero_ == 0) return global_grad_norm(be_, whole_->params(), world);
  std::vector<NormShare> shares;
  for (const Bucket& b : buckets_) {
    const std::int64_t lo = b.group->rank();
    for_each_piece(shapes_, b.params, lo * b.part, std::min(b.size, (lo + 1) * b.part),
                   [&](int p, std::int64_t offset, std::int64_t at, std::int64_t n) {
                     shares.push_back({b.own_grad.slice(at - lo * b.part, n), gpt_.replicas(p),
                                       gpt_.norm_weight(p), offset});
                   });
  }
  double local = squared_norm_shares(be_, shares);
  world.all_reduce(std::span<double>(&local, 1));
  return std::sqrt(local);
}

void DataParallel::clip(double norm, double max_norm) {
  if (zero_ == 0) {
    clip_gradients(be_, whole_->params(), norm, max_norm);
    return;
  }
  if (max_norm <= 0.0 || !(norm > max_norm)) return;
  const auto scale = static_cast<float>(max_norm / norm);
  for (Bucket& b : buckets_) {
    if (!b.own_grad.empty()) be_.scale(b.own_grad, scale);
  }
}

void DataParallel::step(float lr) {
  update(lr);
  gpt_.parameters_changed();  // the blocks' bf16 compute copies are made again
}

void DataParallel::update(float lr) {
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
                     copy_run(be_, gpt_.value(p), offset, b.buffer, at, n);
                   });
    if (transient(static_cast<int>(k))) b.buffer = {};
  };
  for (std::size_t k = 0; k < buckets_.size(); ++k) {
    Bucket& b = buckets_[k];
    const std::int64_t r = b.group->rank();
    const bool part_only = sharded(static_cast<int>(k));  // stage 3: the part is the master
    if (part_only) {
      b.gather.wait();  // a prefetch in flight is stale too
      b.gathered = {};
      if (b.whole) release(static_cast<int>(k));  // stale after this update
    }
    // The update on this replica's part, elementwise as on the whole tensor (adamw.hpp).
    std::vector<AdamWTensor> pieces;
    for_each_piece(shapes_, b.params, r * b.part, std::min(b.size, (r + 1) * b.part),
                   [&](int p, std::int64_t offset, std::int64_t at, std::int64_t n) {
                     const std::int64_t i = at - r * b.part;
                     if (!part_only) copy_run(be_, b.value, i, gpt_.value(p), offset, n);
                     pieces.push_back({b.value.slice(i, n), b.own_grad.slice(i, n), b.m.slice(i, n),
                                       b.v.slice(i, n), gpt_.decays(p)});
                   });
    adamw_update(be_, pieces, adamw_config_, lr, steps_);
    if (part_only) continue;
    const int i = static_cast<int>(k);
    if (transient(i)) b.buffer = zeroed(b.part * b.group->size());
    b.request = b.group->iall_gather(std::span<const float>(device::floats(b.value)),
                                     device::floats(b.buffer));
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
    const device::Array gathered = zeroed(b.part * b.group->size());
    for (const bool first : {true, false}) {
      b.group->all_gather(std::span<const float>(device::floats(first ? b.m : b.v)),
                          device::floats(gathered));
      std::vector<device::Array>& out = first ? whole.first_moments() : whole.second_moments();
      for_each_piece(shapes_, b.params, 0, b.size,
                     [&](int p, std::int64_t offset, std::int64_t at, std::int64_t n) {
                       copy_run(be_, out[static_cast<std::size_t>(p)], offset, gathered, at, n);
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
                     copy_run(be_, b.m, i, whole.first_moments()[u], offset, n);
                     copy_run(be_, b.v, i, whole.second_moments()[u], offset, n);
                   });
  }
  steps_ = whole.steps();
}

AdamW& DataParallel::optimizer_to_save() {
  if (zero_ == 0) return *whole_;
  for (int i = 0; i < layers_ && zero_ == 3; ++i) materialize_layer(i);  // read whole
  scratch_ = std::make_unique<AdamW>(be_, refs(1, false), adamw_config_);
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
  scratch_ = std::make_unique<AdamW>(be_, refs(1, false), adamw_config_);
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
    for (const int p : b.params) n += gpt_.grad(p).count();
    n += b.buffer.count() + b.grad.count();
  }
  return n;
}

}  // namespace meshtp::train
