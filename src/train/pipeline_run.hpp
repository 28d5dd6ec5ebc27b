// The one interpreter of pipeline schedules (layout/pipeline_schedule.hpp): this rank of the
// pipeline group runs its op list in order; activations go forward and gradients backward
// point to point, non-blocking.
//
//   F(i, s): input  = stage s−1's output for microbatch i (received; stage 0: none)
//            output → stage s+1 (isend; last stage: none)
//   B(i, s): dout   = stage s+1's input gradient for microbatch i (received; last: none)
//            din    → stage s−1 (isend; stage 0: none)
//
// Every receive this rank will ever need is posted before the first op (one buffer per
// message, tag = (direction, microbatch, stage)), so a message lands while the receiver still
// computes; an op waits only for its own input. Sends complete at the end. Memory: one
// activation buffer per (microbatch, stage) message, fine for benchmarks and small models; an
// op's output reuses the buffer of the input the op before it consumed, when there is one.
//
// The stages' work is the caller's: forward(i, s, in, out) and backward(i, s, dout, din),
// spans of `message_floats` (empty where the schedule has no neighbour); `out` and `din` hold
// stale values on entry (a reused buffer): the stage writes every element it sends.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "comm/communicator.hpp"
#include "device/backend.hpp"
#include "layout/pipeline_schedule.hpp"

namespace meshtp::train {

struct PipelineStages {
  std::int64_t message_floats = 0;
  // Where the messages (the stream between stages and its gradient) live: the stages'
  // backend, whose memory `group` moves; null: the CPU's.
  device::Backend* backend = nullptr;
  std::function<void(int microbatch, int stage, std::span<const float> in, std::span<float> out)>
      forward;
  std::function<void(int microbatch, int stage, std::span<const float> dout,
                     std::span<float> din)>
      backward;
};

struct PipelineRunStats {
  double seconds = 0;       // this rank: from the (barrier-aligned) start to its last op's end
  double busy_seconds = 0;  // inside forward/backward
};

// Collective over `group` (size = schedule.ranks).
PipelineRunStats run_pipeline(const layout::PipelineSchedule& schedule,
                              const comm::Communicator& group, const PipelineStages& stages);

}  // namespace meshtp::train
