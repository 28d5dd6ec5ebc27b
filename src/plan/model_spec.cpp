#include "plan/model_spec.hpp"

#include <fmt/format.h>

#include <ostream>
#include <utility>

#include "core/error.hpp"
#include "core/json_util.hpp"
#include "core/text.hpp"

namespace meshtp::plan {

double ModelSpec::layer_params() const {
  const double h = hidden;
  if (is_gpt()) return 12.0 * h * h + 13.0 * h;
  const double biases =
      has_biases() ? static_cast<double>(qkv_width() + hidden + mlp1_width() + hidden) : 0.0;
  return linear_weights() + biases + 2.0 * static_cast<double>(norm_params());
}

double ModelSpec::moe_layer_params() const {
  const double biases = has_biases() ? static_cast<double>(qkv_width() + hidden) : 0.0;
  return attention_weights() + biases + 2.0 * static_cast<double>(norm_params()) +
         moe_mlp_params();
}

double ModelSpec::total_params() const {
  const double tables = tie_embeddings ? 1 : 2;  // the embedding, and an untied head's own
  const auto moe = static_cast<double>(moe_layers());
  return (layers - moe) * layer_params() + (moe > 0 ? moe * moe_layer_params() : 0.0) +
         tables * static_cast<double>(vocab) * hidden;
}

double ModelSpec::active_params() const {
  const auto moe = static_cast<double>(moe_layers());
  const double idle = static_cast<double>(num_experts - top_k) * expert_params();
  return total_params() - moe * idle;
}

void ModelSpec::validate() const { validate(fmt::format("model '{}'", name)); }

bool megatron_drops_out(const layout::ModelShape& m) { return m.norm == layout::Norm::kLayerNorm; }

std::ostream& operator<<(std::ostream& os, const ModelSpec& m) {
  return os << "model " << m.name << ": " << static_cast<const layout::ModelShape&>(m)
            << fmt::format(" {} recompute={} ({:.3g}B params)", name(m.precision),
                           name(m.recompute), m.total_params() / 1e9);
}

nlohmann::json to_json(const ModelSpec& m) {
  nlohmann::json j{{"name", m.name}, {"description", m.description}};
  layout::write_shape(j, m);
  j["precision"] = name(m.precision);
  j["recompute"] = name(m.recompute);
  return j;
}

ModelSpec model_from_json(const nlohmann::json& j, const std::string& source) {
  const std::string where = "model " + source;
  check_fields(j, layout::shape_keys({"name", "description", "precision", "recompute"}), where);
  ModelSpec m;
  static_cast<layout::ModelShape&>(m) = layout::read_shape(j, where);
  m.name = read_string(j, "name", where);
  check_name(where + ": name", m.name);
  m.description = read_optional_string(j, "description", where, "");
  m.precision =
      parse_precision(read_optional_string(j, "precision", where, "fp16"), where + ": precision");
  try {
    m.recompute = layout::parse_recompute(read_optional_string(j, "recompute", where, "none"));
  } catch (const Error& e) {
    fail("{}: {}", where, e.what());
  }
  m.validate();
  return m;
}

ModelSpec ShapeOverrides::apply(ModelSpec spec) const {
  constexpr std::int64_t kMax = std::int64_t{1} << 24;
  const std::pair<const char*, std::int64_t> given[] = {{"--batch", batch},
                                                        {"--seq", seq},
                                                        {"--hidden", hidden},
                                                        {"--heads", heads},
                                                        {"--layers", layers}};
  for (const auto& [name, value] : given) {
    MESHTP_CHECK(value <= kMax, "{}={} is too large (at most {})", name, value, kMax);
  }
  if (batch > 0) spec.batch = batch;
  if (seq > 0) spec.seq = seq;
  if (hidden > 0) spec.hidden = hidden;
  if (heads > 0) spec.heads = heads;
  if (layers > 0) spec.layers = layers;
  return spec;
}

}  // namespace meshtp::plan
