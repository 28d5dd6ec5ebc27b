#include "layout/model_shape.hpp"

#include <optional>

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <utility>
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
  MESHTP_CHECK(rope_theta == 0 || (rope_theta > 1 && rope_theta <= 1e12),
               "{}: rope_theta={} must be 0 (the default, 10000) or in (1, 1e12]", where,
               rope_theta);
  MESHTP_CHECK(rope_theta == 0 || position == Position::kRope,
               "{}: rope_theta={} applies to position=rope, not position={}", where, rope_theta,
               name(position));
  // Mixture of experts: every MoE field names its value; a dense model has them at 0.
  in_range(num_experts, "num_experts", 0);
  in_range(moe_every, "moe_every", 1);
  if (!is_moe()) {
    const std::pair<const char*, std::int64_t> moe[] = {
        {"top_k", top_k}, {"moe_ffn_hidden", moe_ffn_hidden}, {"shared_experts", shared_experts}};
    for (const auto& [key, value] : moe) {
      MESHTP_CHECK(value == 0, "{}: {}={} without experts (num_experts=0 is a dense model)", where,
                   key, value);
    }
    MESHTP_CHECK(!moe_force_balance,
                 "{}: moe_force_balance=true without experts (num_experts=0)", where);
    MESHTP_CHECK(capacity_factor == 0 && router_aux_loss == 0 && moe_every == 1,
                 "{}: capacity_factor={}, router_aux_loss={}, moe_every={} without experts "
                 "(num_experts=0 is a dense model)",
                 where, capacity_factor, router_aux_loss, moe_every);
    return;
  }
  in_range(top_k, "top_k", 1);
  MESHTP_CHECK(top_k <= num_experts, "{}: top_k={} must be at most num_experts={}", where, top_k,
               num_experts);
  in_range(moe_ffn_hidden, "moe_ffn_hidden", 0);
  in_range(shared_experts, "shared_experts", 0);
  MESHTP_CHECK(moe_every <= layers, "{}: moe_every={} must be at most layers={}", where,
               moe_every, layers);
  MESHTP_CHECK(std::isfinite(capacity_factor) && (capacity_factor == 0 || capacity_factor >= 1),
               "{}: capacity_factor={} must be 0 (dropless) or at least 1", where,
               capacity_factor);
  MESHTP_CHECK(std::isfinite(router_aux_loss) && router_aux_loss >= 0,
               "{}: router_aux_loss={} must be a non-negative number", where, router_aux_loss);
}

ModelShape ModelShape::without_experts() const {
  ModelShape d = *this;
  const ModelShape dense{};
  d.num_experts = dense.num_experts;
  d.top_k = dense.top_k;
  d.moe_ffn_hidden = dense.moe_ffn_hidden;
  d.shared_experts = dense.shared_experts;
  d.moe_every = dense.moe_every;
  d.capacity_factor = dense.capacity_factor;
  d.router_aux_loss = dense.router_aux_loss;
  d.moe_force_balance = dense.moe_force_balance;
  return d;
}

double ModelShape::expert_weights() const {
  const double per = activation == Activation::kSwiglu ? 3.0 : 2.0;
  return per * static_cast<double>(hidden) * static_cast<double>(expert_ffn());
}

double ModelShape::expert_params() const {
  return expert_weights() + (has_biases() ? static_cast<double>(expert_ffn() + hidden) : 0.0);
}

double ModelShape::attention_weights() const {
  const auto h = static_cast<double>(hidden);
  return h * static_cast<double>(qkv_width()) + h * h;
}

double ModelShape::moe_token_weights() const {
  return attention_weights() +
         static_cast<double>(top_k + shared_experts) * expert_weights() +
         static_cast<double>(hidden) * static_cast<double>(num_experts);
}

double ModelShape::moe_mlp_params() const {
  return static_cast<double>(num_experts + shared_experts) * expert_params() +
         static_cast<double>(hidden) * static_cast<double>(num_experts);
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

std::optional<std::string> ModelShape::non_gpt_field() const {
  if (kv() != heads) return fmt::format("kv_heads={} (heads={})", kv_heads, heads);
  if (ffn() != 4 * hidden) return fmt::format("ffn_hidden={} (4·hidden={})", ffn(), 4 * hidden);
  if (activation != Activation::kGelu) return fmt::format("activation={}", activation);
  if (norm != Norm::kLayerNorm) return fmt::format("norm={}", norm);
  if (position != Position::kLearned) return fmt::format("position={}", position);
  if (!tie_embeddings) return std::string("tie_embeddings=false");
  return std::nullopt;
}

void ModelShape::require_gpt(std::string_view where) const {
  if (const auto field = non_gpt_field()) {
    fail("{}: {}: this runtime runs GPT layers only (multi-head attention, a GeLU MLP of "
         "4·hidden, LayerNorm, learned positions, a tied head); the planner prices this model "
         "(meshtp plan), and `meshtp train` and `bench train` run the Llama family on the ATP "
         "blocks (docs/long_context.md)",
         where, *field);
  }
}

void ModelShape::require_dense(std::string_view where) const {
  MESHTP_CHECK(!is_moe(),
               "{}: num_experts={}: this command runs dense models only; `meshtp train` and "
               "`bench train` run mixtures of experts (docs/moe.md)",
               where, num_experts);
}

std::ostream& operator<<(std::ostream& os, const ModelShape& m) {
  os << fmt::format("L={} h={} heads={} V={} b={} s={}", m.layers, m.hidden, m.heads, m.vocab,
                    m.batch, m.seq);
  if (!m.is_gpt()) {
    os << fmt::format(" kv={} ffn={} {} {} {}{}", m.kv(), m.ffn(), m.activation, m.norm,
                      m.position, m.tie_embeddings ? "" : " untied");
  }
  if (m.is_moe()) {
    os << fmt::format(" experts={} top{} f_e={}{}{}", m.num_experts, m.top_k, m.expert_ffn(),
                      m.shared_experts > 0 ? fmt::format(" shared={}", m.shared_experts) : "",
                      m.moe_every > 1 ? fmt::format(" every {}", m.moe_every) : "");
  }
  return os;
}

std::vector<std::string_view> shape_keys(std::initializer_list<std::string_view> extra) {
  std::vector<std::string_view> keys{"layers", "hidden", "heads", "vocab", "batch", "seq"};
  keys.insert(keys.end(), std::begin(kFamilyKeys), std::end(kFamilyKeys));
  keys.insert(keys.end(), extra.begin(), extra.end());
  return keys;
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
  if (m.rope_theta != 0) j["rope_theta"] = m.rope_theta;
  if (m.is_moe()) {
    j["num_experts"] = m.num_experts;
    j["top_k"] = m.top_k;
    if (m.moe_ffn_hidden != 0) j["moe_ffn_hidden"] = m.moe_ffn_hidden;
    if (m.shared_experts != 0) j["shared_experts"] = m.shared_experts;
    if (m.moe_every != 1) j["moe_every"] = m.moe_every;
    if (m.capacity_factor != 0) j["capacity_factor"] = m.capacity_factor;
    if (m.router_aux_loss != 0) j["router_aux_loss"] = m.router_aux_loss;
    if (m.moe_force_balance) j["moe_force_balance"] = true;
  }
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
  if (j.contains("rope_theta")) m.rope_theta = read_number(j, "rope_theta", where);
  if (j.contains("num_experts")) m.num_experts = read_integer(j, "num_experts", where);
  if (j.contains("top_k")) m.top_k = read_integer(j, "top_k", where);
  if (j.contains("moe_ffn_hidden")) m.moe_ffn_hidden = read_integer(j, "moe_ffn_hidden", where);
  if (j.contains("shared_experts")) m.shared_experts = read_integer(j, "shared_experts", where);
  if (j.contains("moe_every")) m.moe_every = read_integer(j, "moe_every", where);
  if (j.contains("capacity_factor")) m.capacity_factor = read_number(j, "capacity_factor", where);
  if (j.contains("router_aux_loss")) m.router_aux_loss = read_number(j, "router_aux_loss", where);
  if (j.contains("moe_force_balance")) {
    MESHTP_CHECK(j["moe_force_balance"].is_boolean(),
                 "{}: moe_force_balance={} must be true or false", where,
                 j["moe_force_balance"].dump());
    m.moe_force_balance = j["moe_force_balance"].get<bool>();
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

double ModelShape::moe_layer_flops() const {
  const auto b = static_cast<double>(batch), s = static_cast<double>(seq),
             h = static_cast<double>(hidden);
  return 6.0 * b * s * moe_token_weights() + 12.0 * b * s * s * h;
}

double ModelShape::layers_flops() const {
  const auto moe = static_cast<double>(moe_layers());
  return (static_cast<double>(layers) - moe) * layer_flops() + (moe > 0 ? moe * moe_layer_flops() : 0.0);
}

double ModelShape::step_flops() const {
  return layers_flops() + 6.0 * static_cast<double>(tokens()) *
                                                           static_cast<double>(hidden) *
                                                           static_cast<double>(vocab);
}

}  // namespace meshtp::layout
