#include "plan/model_spec.hpp"

#include <fmt/format.h>

#include <limits>
#include <ostream>

#include "core/error.hpp"
#include "core/json_util.hpp"

namespace meshtp::plan {


double ModelSpec::layer_flops() const {
  const double b = batch, s = seq, h = hidden;
  return 72.0 * b * s * h * h + 12.0 * b * s * s * h;
}

double ModelSpec::layer_forward_flops() const { return layer_flops() / 3.0; }

double ModelSpec::layer_params() const {
  const double h = hidden;
  return 12.0 * h * h + 13.0 * h;
}

double ModelSpec::total_params() const {
  return layers * layer_params() + static_cast<double>(vocab) * hidden;
}

void ModelSpec::validate() const {
  const std::string where = fmt::format("model '{}'", name);
  MESHTP_CHECK(layers >= 1, "{}: layers={} must be at least 1", where, layers);
  MESHTP_CHECK(hidden >= 1, "{}: hidden={} must be at least 1", where, hidden);
  MESHTP_CHECK(heads >= 1, "{}: heads={} must be at least 1", where, heads);
  MESHTP_CHECK(vocab >= 0, "{}: vocab={} must not be negative", where, vocab);
  MESHTP_CHECK(batch >= 1, "{}: batch={} must be at least 1", where, batch);
  MESHTP_CHECK(seq >= 1, "{}: seq={} must be at least 1", where, seq);
  MESHTP_CHECK(hidden % heads == 0, "{}: hidden={} is not divisible by heads={}", where, hidden,
               heads);
}

const char* name(Precision p) { return p == Precision::kFp16 ? "fp16" : "fp32"; }

std::ostream& operator<<(std::ostream& os, const ModelSpec& m) {
  return os << fmt::format("model {}: L={} h={} heads={} V={} b={} s={} {} recompute={} "
                           "({:.3g}B params)",
                           m.name, m.layers, m.hidden, m.heads, m.vocab, m.batch, m.seq,
                           name(m.precision), name(m.recompute), m.total_params() / 1e9);
}

nlohmann::json to_json(const ModelSpec& m) {
  return {{"name", m.name},         {"description", m.description},
          {"layers", m.layers},     {"hidden", m.hidden},
          {"heads", m.heads},       {"vocab", m.vocab},
          {"batch", m.batch},       {"seq", m.seq},
          {"precision", name(m.precision)}, {"recompute", name(m.recompute)}};
}

namespace {

int read_int(const nlohmann::json& j, std::string_view key, std::string_view where) {
  const std::int64_t v = read_integer(j, key, where);
  MESHTP_CHECK(v >= std::numeric_limits<int>::min() && v <= std::numeric_limits<int>::max(),
               "{}: {}={} is out of range", where, key, v);
  return static_cast<int>(v);
}

}  // namespace

ModelSpec model_from_json(const nlohmann::json& j, const std::string& source) {
  const std::string where = "model " + source;
  check_fields(j, {"name", "description", "layers", "hidden", "heads", "vocab", "batch", "seq",
                   "precision", "recompute"},
               where);
  ModelSpec m;
  m.name = read_string(j, "name", where);
  m.description = read_optional_string(j, "description", where, "");
  m.layers = read_int(j, "layers", where);
  m.hidden = read_int(j, "hidden", where);
  m.heads = read_int(j, "heads", where);
  m.vocab = j.contains("vocab") ? read_int(j, "vocab", where) : 0;
  m.batch = read_int(j, "batch", where);
  m.seq = read_int(j, "seq", where);
  const std::string precision = read_optional_string(j, "precision", where, "fp16");
  if (precision == "fp16") {
    m.precision = Precision::kFp16;
  } else if (precision == "fp32") {
    m.precision = Precision::kFp32;
  } else {
    fail("{}: precision='{}' must be fp16 or fp32", where, precision);
  }
  try {
    m.recompute = layout::parse_recompute(read_optional_string(j, "recompute", where, "none"));
  } catch (const Error& e) {
    fail("{}: {}", where, e.what());
  }
  m.validate();
  return m;
}

}  // namespace meshtp::plan
