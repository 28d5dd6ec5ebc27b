#include "core/trace.hpp"

#include "core/stats.hpp"

namespace meshtp {

Tracer& Tracer::instance() {
  static Tracer tracer;
  return tracer;
}

void Tracer::enable(std::size_t max_spans) {
  enabled_ = true;
  max_spans_ = max_spans;
  spans_.reserve(std::min<std::size_t>(max_spans, 1 << 16));
}

void Tracer::record(const char* name, SpanKind kind, double start_s, double end_s) {
  if (!enabled_) return;
  if (spans_.size() >= max_spans_) {
    ++dropped_;
    return;
  }
  spans_.push_back({name, kind, start_s, end_s});
}

void Tracer::clear() {
  spans_.clear();
  dropped_ = 0;
}

ScopedSpan::ScopedSpan(const char* name, SpanKind kind)
    : name_(name), kind_(kind), start_s_(Tracer::instance().enabled() ? now_seconds() : 0.0) {}

ScopedSpan::~ScopedSpan() {
  Tracer& tracer = Tracer::instance();
  if (tracer.enabled()) tracer.record(name_, kind_, start_s_, now_seconds());
}

const char* to_string(SpanKind kind) {
  switch (kind) {
    case SpanKind::kCompute: return "compute";
    case SpanKind::kComm: return "comm";
    case SpanKind::kWait: return "wait";
    case SpanKind::kPhase: return "phase";
  }
  return "?";
}

}  // namespace meshtp
