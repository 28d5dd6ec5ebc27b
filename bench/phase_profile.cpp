#include "bench/phase_profile.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace meshtp::bench {
namespace {

// Blocking collectives (comm/mpi_impl.hpp LedgerScope names): the rank waits in them.
// Also the rank's time issuing non-blocking collectives and driving them (parallel/
// chunked_collective.cpp), where MPI may move the data.
constexpr std::string_view kBlocking[] = {
    "wait",   "all_reduce", "all_gather", "reduce_scatter", "broadcast",  "barrier", "all_to_all",
    "reduce", "send",       "recv",       "sendrecv",       "comm_issue", "progress"};
// Their non-blocking twins: in flight from start to completion, overlapping other spans.
constexpr std::string_view kInFlight[] = {"iall_reduce", "iall_gather", "ireduce_scatter",
                                          "ibroadcast",  "ibarrier",    "iall_to_all",
                                          "isend",       "irecv"};
constexpr std::string_view kElementwise[] = {"layernorm", "gelu", "bias", "residual", "copy"};

bool in(std::string_view name, std::span<const std::string_view> names) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

const char* to_string(Phase phase) {
  switch (phase) {
    case Phase::kGemm: return "gemm";
    case Phase::kAttention: return "attention";
    case Phase::kElementwise: return "elementwise";
    case Phase::kEmbeddingHead: return "embedding/head";
    case Phase::kCommWait: return "comm wait";
    case Phase::kOptimizer: return "optimizer";
    case Phase::kData: return "data";
    case Phase::kOther: return "other";
  }
  return "?";
}

SpanRole role_of_span(std::string_view name) {
  if (name == "gemm") return {.phase = Phase::kGemm};
  if (name == "attention") return {.phase = Phase::kAttention, .claims_gemm = true};
  if (name == "embedding" || name == "lm_head") {
    return {.phase = Phase::kEmbeddingHead, .claims_gemm = true};
  }
  if (in(name, kElementwise)) return {.phase = Phase::kElementwise};
  if (in(name, kBlocking)) return {.phase = Phase::kCommWait};
  if (in(name, kInFlight)) return {.phase = std::nullopt, .skip = true};
  if (name == "optimizer") return {.phase = Phase::kOptimizer};
  if (name == "data") return {.phase = Phase::kData};
  return {};  // a container: "step", "forward", "backward", "grad_allreduce_wait", …
}

PhaseTimes attribute_spans(std::span<const TraceSpan> spans, double begin_s, double end_s) {
  struct Item {
    TraceSpan span;
    SpanRole role;
    double self = 0.0;
    std::optional<Phase> gemm_owner;  // the nearest claiming ancestor's phase
  };
  std::vector<Item> items;
  for (const TraceSpan& s : spans) {
    if (s.start_s < begin_s || s.end_s > end_s) continue;
    const SpanRole role = role_of_span(s.name);
    if (!role.skip) items.push_back({.span = s, .role = role, .self = 0.0, .gemm_owner = {}});
  }
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    return a.span.start_s != b.span.start_s ? a.span.start_s < b.span.start_s
                                            : a.span.end_s > b.span.end_s;
  });
  PhaseTimes out{};
  double top_level = 0.0;
  std::vector<std::size_t> open;  // indices of the enclosing spans, innermost last
  for (std::size_t i = 0; i < items.size(); ++i) {
    Item& it = items[i];
    while (!open.empty() && items[open.back()].span.end_s <= it.span.start_s) open.pop_back();
    if (!open.empty()) {
      Item& parent = items[open.back()];
      it.span.end_s = std::min(it.span.end_s, parent.span.end_s);
      it.gemm_owner = parent.role.claims_gemm ? parent.role.phase : parent.gemm_owner;
    }
    const double duration = it.span.end_s - it.span.start_s;
    it.self += duration;
    if (open.empty()) {
      top_level += duration;
    } else {
      items[open.back()].self -= duration;
    }
    open.push_back(i);
  }
  for (const Item& it : items) {
    Phase p = it.role.phase.value_or(Phase::kOther);
    if (p == Phase::kGemm && it.gemm_owner) p = *it.gemm_owner;
    out[static_cast<std::size_t>(p)] += it.self;
  }
  out[static_cast<std::size_t>(Phase::kOther)] += std::max(0.0, (end_s - begin_s) - top_level);
  return out;
}

}  // namespace meshtp::bench
