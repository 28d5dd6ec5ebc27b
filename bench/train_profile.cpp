#include "bench/train_profile.hpp"

#include <algorithm>

#include "bench/blas_reference.hpp"
#include "core/error.hpp"
#include "core/stats.hpp"
#include "core/trace.hpp"

namespace meshtp::bench {
namespace {

// The last span named `name`, or nullptr.
const TraceSpan* last_span(std::span<const TraceSpan> spans, std::string_view name) {
  const TraceSpan* found = nullptr;
  for (const TraceSpan& s : spans) {
    if (name == s.name && (found == nullptr || s.start_s > found->start_s)) found = &s;
  }
  return found;
}

// This rank's phases of the step whose spans are `spans`; the last entry is the whole step.
std::array<double, kPhaseCount + 1> profile_step(std::span<const TraceSpan> spans) {
  const TraceSpan* forward = last_span(spans, "forward");
  const TraceSpan* optimizer = last_span(spans, "optimizer");
  const TraceSpan* data = last_span(spans, "data");
  MESHTP_CHECK(forward != nullptr && optimizer != nullptr && data != nullptr,
               "bench train: the step recorded no forward, optimizer or data span");
  // The window opens where the step barrier (the last top-level span before forward) ends.
  double begin = data->end_s;
  for (const TraceSpan& s : spans) {
    if (std::string_view(s.name) == "barrier" && s.end_s <= forward->start_s) {
      begin = std::max(begin, s.end_s);
    }
  }
  const PhaseTimes p = attribute_spans(spans, begin, optimizer->end_s);
  std::array<double, kPhaseCount + 1> out{};
  std::copy(p.begin(), p.end(), out.begin());
  const double data_s = data->end_s - data->start_s;
  out[static_cast<std::size_t>(Phase::kData)] += data_s;
  out[kPhaseCount] = optimizer->end_s - begin + data_s;
  return out;
}

}  // namespace

TrainBenchResult run_train_bench(const comm::Communicator& world, const TrainBenchOptions& options,
                                 const std::function<void(const train::StepReport&)>& on_step) {
  MESHTP_CHECK(options.warmup_steps >= 0 && options.steps >= 1,
               "bench train: warm-up steps {} must be ≥ 0 and timed steps {} ≥ 1",
               options.warmup_steps, options.steps);
  train::TrainConfig config = options.config;
  config.steps = options.warmup_steps + options.steps;
  config.eval_every = 0;  // validation only after the last step, outside every window
  config.eval_batches = 1;
  config.checkpoint_dir.clear();
  config.metrics_path.clear();
  config.trace_path.clear();  // the bench owns the tracer
  config.stop_after = 0;
  train::validate(config, world.size());

  layout::ModelShape replica = config.model.shape;
  replica.batch /= config.model.layout.dp;
  // The baseline: BLAS on the host, the backend's own GeMM on a device.
  device::Backend* be = config.model.backend;
  BlasReference blas(replica.batch * replica.seq, replica.hidden, replica.vocab,
                     be != nullptr && be->device_memory() != nullptr ? be : nullptr);

  TrainBenchResult r;
  r.ranks = world.size();
  r.flops_per_rank = replica.step_flops() * config.model.layout.dp / world.size();
  std::vector<std::array<double, kPhaseCount + 1>> samples;
  std::vector<double> blas_s;
  Tracer& tracer = Tracer::instance();
  tracer.clear();
  tracer.enable();
  try {
    const train::TrainSummary summary = train::train(world, config, [&](const train::StepReport& report) {
      r.losses.push_back(report.loss);
      std::array<double, kPhaseCount + 1> mine = profile_step(tracer.spans());
      tracer.clear();
      world.all_reduce(std::span<double>(mine), comm::ReduceOp::kMax);
      double b = blas.time_pass();  // every rank at once, between two steps
      world.all_reduce(std::span<double>(&b, 1), comm::ReduceOp::kMax);
      if (report.step > options.warmup_steps) {
        samples.push_back(mine);
        blas_s.push_back(b);
      }
      if (on_step) on_step(report);
    });
    r.tensor_peak_bytes = summary.tensor_peak_bytes;
    r.max_rss_bytes = summary.max_rss_bytes;
  } catch (...) {
    tracer.disable();
    tracer.clear();
    throw;
  }
  tracer.disable();
  tracer.clear();

  r.steps = static_cast<int>(samples.size());
  std::vector<double> column(samples.size());
  const auto median_of = [&](std::size_t k) {
    for (std::size_t i = 0; i < samples.size(); ++i) column[i] = samples[i][k];
    return median(column);
  };
  for (std::size_t k = 0; k < kPhaseCount; ++k) r.phases[k] = median_of(k);
  r.step_s = median_of(kPhaseCount);
  r.gflops_per_rank = r.flops_per_rank / r.step_s / 1e9;
  r.blas_gflops = blas.flops() / median(blas_s) / 1e9;
  r.ratio_to_blas = r.gflops_per_rank / r.blas_gflops;
  return r;
}

}  // namespace meshtp::bench
