#include "layout/vocabulary.hpp"

#include <fmt/ranges.h>

#include "core/error.hpp"

namespace meshtp::layout {

void fail_unknown(std::string_view what, std::string_view text,
                  std::span<const std::string_view> names) {
  fail("unknown {} '{}' (valid: {})", what, text, fmt::join(names, ", "));
}

Algorithm algorithm_of(Strategy s) {
  MESHTP_CHECK(is_gemm2d(s), "strategy {} is not a 2D GeMM algorithm", name(s));
  return parse<Algorithm>(name(s));
}

Strategy strategy_of(Algorithm a) { return parse<Strategy>(name(a)); }

Stationary choose_stationary(std::int64_t tokens, std::int64_t in, std::int64_t out,
                             bool allow_weight) {
  const std::int64_t x = tokens * in, y = tokens * out, w = in * out;
  if (y >= x && (y >= w || !allow_weight)) return Stationary::kOutput;
  if (x >= w || !allow_weight) return Stationary::kInput;
  return Stationary::kWeight;
}

double sent_bytes(CollectiveKind kind, int p, double n) {
  switch (kind) {
    case CollectiveKind::kNone:
      return 0;
    case CollectiveKind::kSendRecv:
      return n;
    case CollectiveKind::kAllReduce:
      return 2.0 * (p - 1) * n / p;
    default:
      return (p - 1) * n / p;
  }
}

}  // namespace meshtp::layout
