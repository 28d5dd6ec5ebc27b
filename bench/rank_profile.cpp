#include "bench/rank_profile.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "comm/communicator.hpp"
#include "core/error.hpp"
#include "tensor/memory.hpp"

namespace meshtp::bench {
namespace {

// The traffic the ledger counted, summed over group labels, per collective kind.
std::vector<SkippedCollective> counted(int steps) {
  std::vector<SkippedCollective> out;
  for (const layout::CollectiveKind kind : layout::all<layout::CollectiveKind>()) {
    SkippedCollective s{.kind = kind};
    for (int label = -1; label + 1 < comm::CommLedger::kLabels; ++label) {
      const comm::TrafficCount& t = comm::comm_ledger().traffic(kind, label);
      s.launches_per_step += static_cast<double>(t.launches) / steps;
      s.bytes_per_step += static_cast<double>(t.message_bytes) / steps;
    }
    if (s.launches_per_step > 0) out.push_back(s);
  }
  return out;
}

}  // namespace

RankBenchResult run_rank_bench(const RankBenchOptions& options) {
  const layout::Plan& p = options.layout;
  RankBenchResult r;
  r.ranks = p.ranks();
  r.rank = options.rank;
  MESHTP_CHECK(options.rank >= 0 && options.rank < r.ranks,
               "--rank {} is outside the layout's {} ranks (0..{})", options.rank, r.ranks,
               r.ranks - 1);
  // world rank = ((r_dp·pp + r_pp)·d1 + i)·d2 + j (train/pipeline_model.hpp)
  r.pipeline_rank = options.rank / (p.mesh[0] * p.mesh[1]) % p.pp;
  r.predicted_memory =
      plan::rank_memory(options.model, p.as_runtime_runs(options.model), r.pipeline_rank);
  if (options.device_memory_bytes > 0) {
    MESHTP_CHECK(r.predicted_memory.total_bytes() <= options.device_memory_bytes,
                 "rank {} of this layout needs {:.2f} GiB ({}), more than the device's {:.2f} "
                 "GiB: choose a layout with more tensor or pipeline parallelism",
                 options.rank, r.predicted_memory.total_gib(),
                 fmt::format("{}", fmt::streamed(r.predicted_memory)),
                 options.device_memory_bytes / kBytesPerGiB);
  }
  if (options.topology) {
    const plan::LayoutRequest request{
        .topology = *options.topology, .model = options.model, .devices = r.ranks};
    r.priced = plan::evaluate_layout(request, p);
    const plan::LayoutParts parts = plan::parts(*r.priced);
    r.predicted_compute_s = parts.compute_s + parts.optimizer_s;
  }

  TrainBenchOptions o{.warmup_steps = options.warmup_steps, .steps = options.steps};
  o.config.model = {.shape = options.model, .layout = p, .backend = options.backend};
  o.config.precision = options.model.precision;  // what the prediction above priced
  // Alone, a rank receives nothing (another rank's all-gather slots, a pipeline neighbour's
  // activations and gradients stay as they were: comm/alone_transport.hpp), so a layout with
  // sequence parallelism or a pipeline can compute NaNs; the step is timed whole regardless.
  o.config.values_meaningless = true;
  o.config.data = options.data;
  comm::CommLedger& ledger = comm::comm_ledger();
  const bool counting = ledger.count_traffic;
  ledger.reset_traffic();
  ledger.count_traffic = true;
  const auto on_step = [&](const train::StepReport& report) {
    // Count the timed steps only: from the end of the last warm-up step to the last step's.
    if (report.step == options.warmup_steps) ledger.reset_traffic();
    if (report.step == options.warmup_steps + options.steps) {
      r.skipped = counted(options.steps);
      ledger.count_traffic = false;  // the final evaluation is not a step's
    }
  };
  try {
    const comm::Communicator alone =
        comm::Communicator::alone(options.rank, r.ranks, "an alone world");
    const bool device = options.backend != nullptr && options.backend->device_memory() != nullptr;
    r.run = run_train_bench(
        device ? comm::Communicator::host_staged(alone, options.backend->device_memory()) : alone,
        o, on_step);
  } catch (...) {
    ledger.count_traffic = counting;
    throw;
  }
  ledger.count_traffic = counting;
  ledger.reset_traffic();
  r.measured_compute_s = r.run.step_s - r.run.phases[static_cast<std::size_t>(Phase::kData)] -
                         r.run.phases[static_cast<std::size_t>(Phase::kCommWait)];
  r.measured_memory_bytes = static_cast<double>(r.run.tensor_peak_bytes);
  return r;
}

}  // namespace meshtp::bench
