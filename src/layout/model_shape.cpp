#include "layout/model_shape.hpp"

#include <fmt/format.h>

#include <limits>
#include <ostream>

#include "core/error.hpp"
#include "core/json_util.hpp"

namespace meshtp::layout {
namespace {
constexpr std::int64_t kMaxSize = std::numeric_limits<std::int32_t>::max();
}  // namespace

void ModelShape::validate(std::string_view where) const {
  // The upper bound keeps every size an int where a kernel or MPI needs one.
  const auto in_range = [&](std::int64_t value, const char* key, std::int64_t min) {
    MESHTP_CHECK(value >= min, "{}: {}={} must be at least {}", where, key, value, min);
    MESHTP_CHECK(value <= kMaxSize, "{}: {}={} must be at most {}", where, key, value, kMaxSize);
  };
  in_range(layers, "layers", 1);
  in_range(hidden, "hidden", 1);
  in_range(heads, "heads", 1);
  in_range(vocab, "vocab", 0);
  in_range(batch, "batch", 1);
  in_range(seq, "seq", 1);
  MESHTP_CHECK(hidden % heads == 0, "{}: hidden={} is not divisible by heads={}", where, hidden,
               heads);
}

std::ostream& operator<<(std::ostream& os, const ModelShape& m) {
  return os << fmt::format("L={} h={} heads={} V={} b={} s={}", m.layers, m.hidden, m.heads,
                           m.vocab, m.batch, m.seq);
}

void write_shape(nlohmann::json& j, const ModelShape& m) {
  j["layers"] = m.layers;
  j["hidden"] = m.hidden;
  j["heads"] = m.heads;
  j["vocab"] = m.vocab;
  j["batch"] = m.batch;
  j["seq"] = m.seq;
}

ModelShape read_shape(const nlohmann::json& j, std::string_view where) {
  ModelShape m;
  m.layers = read_integer(j, "layers", where);
  m.hidden = read_integer(j, "hidden", where);
  m.heads = read_integer(j, "heads", where);
  m.vocab = j.contains("vocab") ? read_integer(j, "vocab", where) : 0;
  m.batch = read_integer(j, "batch", where);
  m.seq = read_integer(j, "seq", where);
  return m;
}

double ModelShape::layer_flops() const {
  const auto b = static_cast<double>(batch), s = static_cast<double>(seq),
             h = static_cast<double>(hidden);
  return 72.0 * b * s * h * h + 12.0 * b * s * s * h;
}

double ModelShape::step_flops() const {
  return static_cast<double>(layers) * layer_flops() + 6.0 * static_cast<double>(tokens()) *
                                                           static_cast<double>(hidden) *
                                                           static_cast<double>(vocab);
}

}  // namespace meshtp::layout
