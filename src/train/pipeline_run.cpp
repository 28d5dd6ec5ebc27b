#include "train/pipeline_run.hpp"

#include <map>
#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "core/stats.hpp"
#include "ops/cpu_backend.hpp"
#include "tensor/tensor.hpp"

namespace meshtp::train {
namespace {

// A message into stage `stage` for microbatch i: forward activations (into F(i, stage)) or
// backward gradients (into B(i, stage)).
int tag_of(bool forward, int microbatch, int stage, int stages) {
  return (microbatch * stages + stage) * 2 + (forward ? 0 : 1);
}

}  // namespace

PipelineRunStats run_pipeline(const layout::PipelineSchedule& s, const comm::Communicator& group,
                              const PipelineStages& fns) {
  MESHTP_CHECK(group.size() == s.ranks, "pipeline: the schedule has pp={} ranks, the group {}",
               s.ranks, group.size());
  device::Backend& be = fns.backend != nullptr ? *fns.backend : cpu_backend();
  // Zeroed: over an alone group (one rank of a big layout) a receive leaves it as it was.
  const auto message = [&] {
    device::Array a = be.alloc(fns.message_floats, Element::kF32);
    be.zero(a);
    return a;
  };
  const int me = group.rank(), S = s.stages();
  const std::vector<layout::PipeOp>& ops = s.ops[static_cast<std::size_t>(me)];
  // Post every receive up front.
  std::map<std::tuple<bool, int, int>, std::pair<device::Array, comm::Request>> inbox;
  for (const layout::PipeOp& op : ops) {
    const bool has_input = op.forward ? op.stage > 0 : op.stage + 1 < S;
    if (!has_input) continue;
    const int from = s.rank_of(op.forward ? op.stage - 1 : op.stage + 1);
    auto& [buffer, request] = inbox[{op.forward, op.microbatch, op.stage}];
    buffer = message();
    request =
        group.irecv(device::floats(buffer), from, tag_of(op.forward, op.microbatch, op.stage, S));
  }
  std::vector<std::pair<device::Array, comm::Request>> outbox;
  outbox.reserve(ops.size());
  // A consumed input's buffer becomes the next output's: a fresh buffer's first pages and its
  // first point-to-point transfer cost several ms per MiB on a VM, on the critical path
  // (docs/pipeline.md, "Measured bubble"); reusing one holds no more memory than freeing it
  // and allocating the next (at most one buffer between an op and the next).
  device::Array spare;
  group.barrier();
  const double start = now_seconds();
  PipelineRunStats stats;
  for (const layout::PipeOp& op : ops) {
    std::span<const float> in;
    const auto it = inbox.find({op.forward, op.microbatch, op.stage});
    if (it != inbox.end()) {
      it->second.second.wait();
      in = device::floats(it->second.first);
    }
    const bool has_output = op.forward ? op.stage + 1 < S : op.stage > 0;
    device::Array out = !has_output      ? device::Array()
                        : !spare.empty() ? std::move(spare)
                                         : message();
    spare = {};
    const std::span<float> out_span = out.empty() ? std::span<float>() : device::floats(out);
    const double t0 = now_seconds();
    if (op.forward) {
      fns.forward(op.microbatch, op.stage, in, out_span);
    } else {
      fns.backward(op.microbatch, op.stage, in, out_span);
    }
    stats.busy_seconds += now_seconds() - t0;
    if (has_output) {
      const int next = op.forward ? op.stage + 1 : op.stage - 1;
      outbox.emplace_back(std::move(out), comm::Request());
      outbox.back().second =
          group.isend(std::span<const float>(device::floats(outbox.back().first)), s.rank_of(next),
                      tag_of(op.forward, op.microbatch, next, S));
    }
    if (it != inbox.end()) spare = std::move(it->second.first);  // consumed
  }
  stats.seconds = now_seconds() - start;
  for (auto& [buffer, request] : outbox) request.wait();
  return stats;
}

}  // namespace meshtp::train
