// Chrome trace-event JSON (open in Perfetto or chrome://tracing) of every rank's spans.
//
// One process per rank ("rank r"), one thread per span kind (compute, comm, wait, phase), so
// a communication span drawn under a compute span means they overlapped. Times are µs
// since `origin_s` — each rank passes the now_seconds() it read right after a common
// barrier, which aligns the ranks to within the barrier's skew.
#pragma once

#include <string>

#include "comm/communicator.hpp"

namespace meshtp::train {

// Collective: every rank sends its Tracer spans to rank 0, which writes `path` atomically.
void write_chrome_trace(const std::string& path, const comm::Communicator& world,
                        double origin_s);

}  // namespace meshtp::train
