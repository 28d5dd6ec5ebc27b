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
  in_range(kv_heads, "kv_heads", 0);
  in_range(ffn_hidden, "ffn_hidden", 0);
  MESHTP_CHECK(kv_heads <= heads, "{}: kv_heads={} must be at most heads={}", where, kv_heads,
               heads);
  MESHTP_CHECK(heads % kv() == 0,
               "{}: heads={} is not divisible by kv_heads={} (each KV head serves a whole group "
               "of query heads)",
               where, heads, kv_heads);
  in_range(ffn(), "ffn_hidden (4·hidden when 0)", 1);
}

double ModelShape::linear_weights() const {
  const auto h = static_cast<double>(hidden);
  return h * static_cast<double>(qkv_width()) + h * h + h * static_cast<double>(mlp1_width()) +
         static_cast<double>(ffn()) * h;
}

bool ModelShape::is_gpt() const {
  return kv() == heads && ffn() == 4 * hidden && activation == Activation::kGelu &&
         norm == Norm::kLayerNorm && position == Position::kLearned && tie_embeddings;
}

void ModelShape::require_gpt(std::string_view where) const {
  const auto refuse = [&](const std::string& field) {
    fail("{}: {}: meshtp's runtime runs GPT layers only (multi-head attention, a GeLU MLP of "
         "4·hidden, LayerNorm, learned positions, a tied head); the planner prices this model "
         "(meshtp plan), training it is not implemented yet",
         where, field);
  };
  if (kv() != heads) refuse(fmt::format("kv_heads={} (heads={})", kv_heads, heads));
  if (ffn() != 4 * hidden) refuse(fmt::format("ffn_hidden={} (4·hidden={})", ffn(), 4 * hidden));
  if (activation != Activation::kGelu) refuse(fmt::format("activation={}", activation));
  if (norm != Norm::kLayerNorm) refuse(fmt::format("norm={}", norm));
  if (position != Position::kLearned) refuse(fmt::format("position={}", position));
  if (!tie_embeddings) refuse("tie_embeddings=false");
}

std::ostream& operator<<(std::ostream& os, const ModelShape& m) {
  os << fmt::format("L={} h={} heads={} V={} b={} s={}", m.layers, m.hidden, m.heads, m.vocab,
                    m.batch, m.seq);
  if (!m.is_gpt()) {
    os << fmt::format(" kv={} ffn={} {} {} {}{}", m.kv(), m.ffn(), m.activation, m.norm,
                      m.position, m.tie_embeddings ? "" : " untied");
  }
  return os;
}

void write_shape(nlohmann::json& j, const ModelShape& m) {
  j["layers"] = m.layers;
  j["hidden"] = m.hidden;
  j["heads"] = m.heads;
  j["vocab"] = m.vocab;
  j["batch"] = m.batch;
  j["seq"] = m.seq;
  // The family's keys only where they are not GPT's: a GPT model's JSON is as before.
  if (m.kv_heads != 0) j["kv_heads"] = m.kv_heads;
  if (m.ffn_hidden != 0) j["ffn_hidden"] = m.ffn_hidden;
  if (m.activation != Activation::kGelu) j["activation"] = name(m.activation);
  if (m.norm != Norm::kLayerNorm) j["norm"] = name(m.norm);
  if (m.position != Position::kLearned) j["position"] = name(m.position);
  if (!m.tie_embeddings) j["tie_embeddings"] = false;
}

ModelShape read_shape(const nlohmann::json& j, std::string_view where) {
  ModelShape m;
  m.layers = read_integer(j, "layers", where);
  m.hidden = read_integer(j, "hidden", where);
  m.heads = read_integer(j, "heads", where);
  m.vocab = j.contains("vocab") ? read_integer(j, "vocab", where) : 0;
  m.batch = read_integer(j, "batch", where);
  m.seq = read_integer(j, "seq", where);
  if (j.contains("kv_heads")) m.kv_heads = read_integer(j, "kv_heads", where);
  if (j.contains("ffn_hidden")) m.ffn_hidden = read_integer(j, "ffn_hidden", where);
  // An unknown name: "model 'x': activation: unknown activation 'relu' (valid: gelu, swiglu)".
  const auto read_named = [&]<typename E>(const char* key, E& out) {
    if (!j.contains(key)) return;
    const std::string text = read_string(j, key, where);
    try {
      out = parse<E>(text);
    } catch (const Error& e) {
      fail("{}: {}: {}", where, key, e.what());
    }
  };
  read_named("activation", m.activation);
  read_named("norm", m.norm);
  read_named("position", m.position);
  if (j.contains("tie_embeddings")) {
    MESHTP_CHECK(j["tie_embeddings"].is_boolean(), "{}: tie_embeddings={} must be true or false",
                 where, j["tie_embeddings"].dump());
    m.tie_embeddings = j["tie_embeddings"].get<bool>();
  }
  return m;
}

double ModelShape::layer_flops() const {
  const auto b = static_cast<double>(batch), s = static_cast<double>(seq),
             h = static_cast<double>(hidden);
  const double w = linear_weights();
  // GPT's as the papers write it (72·b·s·h², the same value to the last bit as before).
  const double linears = w == 12.0 * h * h ? 72.0 * b * s * h * h : 6.0 * b * s * w;
  return linears + 12.0 * b * s * s * h;
}

double ModelShape::step_flops() const {
  return static_cast<double>(layers) * layer_flops() + 6.0 * static_cast<double>(tokens()) *
                                                           static_cast<double>(hidden) *
                                                           static_cast<double>(vocab);
}

}  // namespace meshtp::layout
