// Where a step's time goes: trace spans (core/trace.hpp) of one rank's step turned into
// exclusive time per phase.
//
// Every span has a phase by its name (phase_of_span); spans nest (RAII scopes on one
// thread), and a span's exclusive time is its duration minus its children's. Phases:
//
//   gemm           meshtp::gemm of the linear layers           span "gemm"
//   attention      the attention core, its per-head GeMMs too  "attention" (and gemm in it)
//   elementwise    LayerNorm, GeLU, bias, residual, copies     "layernorm", "gelu", "bias", …
//   embedding/head token/position embedding, LM head, loss     "embedding", "lm_head" (+ gemm)
//   comm wait      blocked in a collective or Request::wait,   "wait", "all_reduce", …,
//                  or issuing / progressing a non-blocking one "comm_issue", "progress"
//   optimizer      gradient norm, clipping, AdamW              "optimizer"
//   data           sampling the batch                          "data"
//   other          time inside the window no span claims (the loop's own work)
//
// Spans of non-blocking collectives ("iall_reduce", …) run from start to completion while
// the rank computes: they overlap other spans instead of nesting, and are skipped (the
// rank's blocked part is their "wait" span). A gemm inside an attention or LM-head span
// belongs to that phase, so "gemm" is exactly the linear layers' products.
//
// Worked example: spans forward[0,10] ⊃ layernorm[0,1], gemm[1,5], attention[5,9] ⊃
// gemm[5,7] + wait[7,8]; window [0,10] →
//   elementwise 1, gemm 4, attention (9−5) − 1 (wait) = 3, comm wait 1, other 10 − 9 = 1.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <span>
#include <string_view>

#include "core/trace.hpp"

namespace meshtp::bench {

enum class Phase {
  kGemm,
  kAttention,
  kElementwise,
  kEmbeddingHead,
  kCommWait,
  kOptimizer,
  kData,
  kOther,
};
inline constexpr std::size_t kPhaseCount = 8;
const char* to_string(Phase phase);  // "gemm", "attention", …, "other"

using PhaseTimes = std::array<double, kPhaseCount>;  // seconds, indexed by Phase

// The phase of a span's own time; nullopt for a pure container ("step", "forward", …:
// its own time is "other") and for a non-blocking collective's in-flight span (skipped).
struct SpanRole {
  std::optional<Phase> phase;
  bool skip = false;          // in-flight span: ignored entirely
  bool claims_gemm = false;   // gemm spans inside it count as its phase
};
SpanRole role_of_span(std::string_view name);

// Exclusive time per phase of the spans lying inside [begin_s, end_s]; the window's time no
// span claims is kOther. Spans must come from one thread (properly nested); a span that
// crosses its parent's end is clipped to it.
PhaseTimes attribute_spans(std::span<const TraceSpan> spans, double begin_s, double end_s);

}  // namespace meshtp::bench
