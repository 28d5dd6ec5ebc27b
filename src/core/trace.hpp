// Trace spans: what this process was doing when, for a Chrome trace-event timeline.
//
// Recording is off by default and costs one branch per span then. When on, the comm layer
// records every collective (blocking: its duration; non-blocking: start to completion, plus
// the time blocked in wait) and meshtp::gemm records every local product, so a timeline
// shows whether communication overlapped computation. Names are string literals (never
// copied). A cap bounds memory on long runs; spans past it are counted, not stored.
#pragma once

#include <cstdint>
#include <vector>

namespace meshtp {

enum class SpanKind { kCompute, kComm, kWait, kPhase };

struct TraceSpan {
  const char* name = "";
  SpanKind kind = SpanKind::kCompute;
  double start_s = 0.0;  // core/stats.hpp now_seconds() clock
  double end_s = 0.0;
};

class Tracer {
 public:
  static Tracer& instance();

  void enable(std::size_t max_spans = 1'000'000);
  void disable() { enabled_ = false; }
  bool enabled() const { return enabled_; }

  void record(const char* name, SpanKind kind, double start_s, double end_s);
  const std::vector<TraceSpan>& spans() const { return spans_; }
  std::int64_t dropped() const { return dropped_; }
  void clear();

 private:
  bool enabled_ = false;
  std::size_t max_spans_ = 0;
  std::vector<TraceSpan> spans_;
  std::int64_t dropped_ = 0;
};

// Records [construction, destruction) when tracing is on.
class ScopedSpan {
 public:
  ScopedSpan(const char* name, SpanKind kind);
  ~ScopedSpan();
  ScopedSpan(const ScopedSpan&) = delete;
  ScopedSpan& operator=(const ScopedSpan&) = delete;

 private:
  const char* name_;
  SpanKind kind_;
  double start_s_;
};

const char* to_string(SpanKind kind);  // "compute", "comm", "wait", "phase"

}  // namespace meshtp
