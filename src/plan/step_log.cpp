#include "plan/step_log.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <regex>

#include "core/error.hpp"
#include "core/stats.hpp"

namespace meshtp::plan {

namespace {

std::string trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return "";
  const auto e = s.find_last_not_of(" \t\r");
  return std::string(s.substr(b, e - b + 1));
}

}  // namespace

StepLog parse_megatron_log(std::string_view text, const std::string& source) {
  StepLog log;
  log.source = source;
  log.format = "Megatron-LM";
  log.runtime = layout::Runtime::kMegatron;
  std::map<std::string, std::string> args;
  bool in_args = false, saw_args = false;
  const std::regex arg_line(R"(^\s*([A-Za-z_][A-Za-z0-9_]*)\s+\.{2,}\s+(.*)$)");
  const std::regex elapsed(R"(elapsed time per iteration \(ms\):\s*([^\s|]+))");
  std::size_t line_no = 0;
  for (std::size_t pos = 0; pos <= text.size();) {
    const std::size_t end = std::min(text.find('\n', pos), text.size());
    const std::string line(text.substr(pos, end - pos));
    pos = end + 1;
    ++line_no;
    if (line.find("end of arguments") != std::string::npos) {
      in_args = false;
      continue;
    }
    if (line.find("arguments") != std::string::npos && line.find("---") != std::string::npos) {
      in_args = saw_args = true;
      continue;
    }
    std::smatch m;
    if (in_args && std::regex_match(line, m, arg_line)) {
      args[m[1]] = trim(m[2].str());
      continue;
    }
    if (std::regex_search(line, m, elapsed)) {
      const std::string v = m[1];
      double ms = 0;
      const auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), ms);
      MESHTP_CHECK(ec == std::errc() && ptr == v.data() + v.size() && std::isfinite(ms) && ms > 0,
                   "{}:{}: elapsed time per iteration (ms) '{}' is not a positive number",
                   source, line_no, v);
      log.iteration_ms.push_back(ms);
    }
  }
  MESHTP_CHECK(saw_args,
               "{}: no Megatron-LM arguments block ('---- arguments ----' … '---- end of "
               "arguments ----'): the log must hold the run's arguments",
               source);
  MESHTP_CHECK(!log.iteration_ms.empty(),
               "{}: no 'elapsed time per iteration (ms)' line: no step was logged", source);
  const auto integer = [&](const char* key, std::optional<std::int64_t> fallback = std::nullopt) {
    const auto it = args.find(key);
    if (it == args.end() || it->second == "None") {
      MESHTP_CHECK(fallback.has_value(), "{}: argument '{}' is missing from the arguments block",
                   source, key);
      return *fallback;
    }
    std::int64_t v = 0;
    const std::string& s = it->second;
    const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    MESHTP_CHECK(ec == std::errc() && ptr == s.data() + s.size() && v > 0,
                 "{}: argument {}='{}' is not a positive integer", source, key, s);
    return v;
  };
  const auto flag = [&](const char* key) {
    const auto it = args.find(key);
    if (it == args.end()) return false;
    MESHTP_CHECK(it->second == "True" || it->second == "False",
                 "{}: argument {}='{}' is not True or False", source, key, it->second);
    return it->second == "True";
  };
  ModelSpec& model = log.model;
  model.name = "megatron-log";
  model.layers = integer("num_layers");
  model.hidden = integer("hidden_size");
  model.heads = integer("num_attention_heads");
  model.seq = integer("seq_length");
  model.batch = integer("global_batch_size");
  model.vocab = integer("padded_vocab_size", 0);
  model.precision = flag("bf16") ? Precision::kBf16 : flag("fp16") ? Precision::kFp16
                                                                   : Precision::kFp32;
  const std::int64_t micro = integer("micro_batch_size");
  const std::int64_t tp = integer("tensor_model_parallel_size");
  const std::int64_t pp = integer("pipeline_model_parallel_size");
  const std::int64_t world = integer("world_size");
  MESHTP_CHECK(world % (tp * pp) == 0,
               "{}: world_size={} is not a multiple of tensor × pipeline parallel {}×{}", source,
               world, tp, pp);
  const std::int64_t dp = world / (tp * pp);
  MESHTP_CHECK(model.batch % (micro * dp) == 0,
               "{}: global_batch_size={} is not a multiple of micro_batch_size × data parallel "
               "{}×{}",
               source, model.batch, micro, dp);
  layout::Plan& p = log.plan;
  p.dp = static_cast<int>(dp);
  p.pp = static_cast<int>(pp);
  p.mesh = {static_cast<int>(tp), 1};
  p.microbatches = static_cast<int>(model.batch / (micro * dp));
  const std::int64_t per_virtual = integer("num_layers_per_virtual_pipeline_stage", 0);
  if (per_virtual > 0) {
    MESHTP_CHECK(model.layers % (pp * per_virtual) == 0,
                 "{}: num_layers={} is not a multiple of pipeline × layers per virtual stage "
                 "{}×{}",
                 source, model.layers, pp, per_virtual);
    p.virtual_stages = static_cast<int>(model.layers / (pp * per_virtual));
  }
  p.schedule = search_schedule(p.microbatches, p.virtual_stages);
  const auto granularity = args.find("recompute_granularity");
  const std::string g = granularity == args.end() ? "None" : granularity->second;
  MESHTP_CHECK(g == "None" || g == "full" || g == "selective",
               "{}: argument recompute_granularity='{}' is not None, full or selective", source, g);
  p.recompute = g == "full" ? Recompute::kFull
                : g == "selective" ? Recompute::kSelective
                                   : Recompute::kNone;
  model.recompute = p.recompute;
  p.sequence_parallel = flag("sequence_parallel") && tp > 1;
  p.zero = flag("use_distributed_optimizer") && dp > 1 ? 1 : 0;
  log.world_size = static_cast<int>(world);
  std::vector<double> steady = log.iteration_ms;
  if (steady.size() > 1) steady.erase(steady.begin());
  log.step_s = median(steady) * 1e-3;
  return log;
}

StepLog parse_meshtp_metrics(std::string_view text, const std::string& source) {
  StepLog log;
  log.source = source;
  log.format = "meshtp --metrics";
  log.runtime = layout::Runtime::kMeshtp;
  std::optional<nlohmann::json> run;
  std::size_t run_line = 0, line_no = 0;
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t end = std::min(text.find('\n', pos), text.size());
    const std::string line = trim(text.substr(pos, end - pos));
    const bool terminated = end < text.size();
    pos = end + 1;
    ++line_no;
    if (line.empty()) continue;
    const nlohmann::json row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    MESHTP_CHECK(row.is_object(), "{}:{}: not a JSON object{}", source, line_no,
                 terminated ? "" : " (the last line is cut short: a truncated file?)");
    MESHTP_CHECK(row.contains("step") && row["step"].is_number_integer(),
                 "{}:{}: no integer \"step\": not a line of meshtp train --metrics", source,
                 line_no);
    if (row.contains("run")) {
      const nlohmann::json& r = row["run"];
      MESHTP_CHECK(r.is_object() && r.contains("format") && r["format"] == "meshtp-metrics",
                   "{}:{}: \"run\" is not a meshtp-metrics record (its format: {})", source,
                   line_no, r.is_object() && r.contains("format") ? r["format"].dump() : "none");
      MESHTP_CHECK(r.contains("version") && r["version"] == 1,
                   "{}:{}: metrics version {} is not the one this meshtp reads (1)", source,
                   line_no, r.contains("version") ? r["version"].dump() : "none");
      if (!run) {
        run = r;
        run_line = line_no;
      } else {
        MESHTP_CHECK(*run == r,
                     "{}:{}: this run's model or layout differs from line {}'s: one file, one "
                     "layout",
                     source, line_no, run_line);
      }
    }
    const double s =
        row.contains("step_s") && row["step_s"].is_number() ? row["step_s"].get<double>() : 0;
    MESHTP_CHECK(std::isfinite(s) && s > 0, "{}:{}: step {} has no positive \"step_s\"", source,
                 line_no, row["step"].dump());
    log.iteration_ms.push_back(s * 1e3);
  }
  MESHTP_CHECK(!log.iteration_ms.empty(), "{}: no step line: the run logged no step", source);
  MESHTP_CHECK(run.has_value(),
               "{}: no line carries the run's model and layout (\"run\", written by meshtp train "
               "--metrics since metrics version 1): rerun train with this meshtp",
               source);
  const std::string where = fmt::format("{}:{} run", source, run_line);
  try {
    const nlohmann::json& r = *run;
    for (const char* key : {"model", "plan", "ranks", "precision"}) {
      MESHTP_CHECK(r.contains(key), "{}: no \"{}\"", where, key);
    }
    ModelSpec& model = log.model;
    static_cast<layout::ModelShape&>(model) = layout::read_shape(r["model"], where);
    model.name = "meshtp-metrics";
    MESHTP_CHECK(r["precision"].is_string(), "{}: precision {} is not a name", where,
                 r["precision"].dump());
    model.precision = parse_precision(r["precision"].get<std::string>(), where + " precision");
    log.plan = layout::plan_from_json(r["plan"], where);
    model.recompute = log.plan.recompute;
    model.attention = log.plan.attention;
    MESHTP_CHECK(r["ranks"].is_number_integer() && r["ranks"].get<std::int64_t>() >= 1 &&
                     r["ranks"].get<std::int64_t>() <= (1 << 24),
                 "{}: ranks {} is not a positive integer", where, r["ranks"].dump());
    log.world_size = r["ranks"].get<int>();
    log.plan.check_ranks(log.world_size, where);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: {}", where, e.what());
  }
  std::vector<double> steady = log.iteration_ms;
  if (steady.size() > 1) steady.erase(steady.begin());
  log.step_s = median(steady) * 1e-3;
  return log;
}

StepLog parse_step_log(std::string_view text, const std::string& source) {
  const auto first = text.find_first_not_of(" \t\r\n");
  MESHTP_CHECK(first != std::string_view::npos, "{}: the file is empty: no step was logged",
               source);
  if (first != std::string_view::npos && text[first] == '{') {
    return parse_meshtp_metrics(text, source);
  }
  return parse_megatron_log(text, source);
}

namespace {

double step_at(const LayoutRequest& r, const nlohmann::json& topology, const layout::Plan& plan,
               const std::string& where) {
  LayoutRequest at = r;
  at.topology = topology_from_json(topology, where);
  return evaluate_layout(at, plan).t_step_s;
}

}  // namespace

ConstantFit fit_step_constant(const LayoutRequest& request, const layout::Plan& plan,
                              double measured_s, const std::string& constant) {
  MESHTP_CHECK(std::isfinite(measured_s) && measured_s > 0,
               "the measured step {} s must be positive", measured_s);
  const std::vector<ConstantRange>& ranges = request.topology.ranges;
  MESHTP_CHECK(!ranges.empty(),
               "topology '{}' has no sourced ranges ('ranges', docs/validation.md \"Bands\"): "
               "nothing to fit",
               request.topology.name);
  Topology bare = request.topology;
  bare.ranges.clear();
  const nlohmann::json base = to_json(bare);
  const std::string where = fmt::format("'{}' being fitted", request.topology.name);
  const auto is_integer = [&](const ConstantRange& r) {
    return base.at(nlohmann::json::json_pointer(r.constant)).is_number_integer();
  };
  const ConstantRange* chosen = nullptr;
  if (constant.empty()) {
    double widest = -1;
    for (const ConstantRange& r : ranges) {
      if (is_integer(r)) continue;
      const double spread = std::abs(step_at(request, with_constant(base, r, r.high), plan, where) -
                                     step_at(request, with_constant(base, r, r.low), plan, where));
      if (spread > widest) {
        widest = spread;
        chosen = &r;
      }
    }
    MESHTP_CHECK(chosen != nullptr, "topology '{}': every range is an integer choice; nothing "
                 "to fit", request.topology.name);
  } else {
    for (const ConstantRange& r : ranges) {
      if (r.constant == constant) chosen = &r;
    }
    MESHTP_CHECK(chosen != nullptr, "--fit {}: topology '{}' has no range for it (its ranges: {})",
                 constant, request.topology.name, [&] {
                   std::string names;
                   for (const ConstantRange& r : ranges) names += (names.empty() ? "" : ", ") + r.constant;
                   return names;
                 }());
    MESHTP_CHECK(!is_integer(*chosen),
                 "--fit {}: an integer constant is a choice, not a rate; fit another", constant);
  }
  ConstantFit fit;
  fit.range = *chosen;
  fit.given = base.at(nlohmann::json::json_pointer(chosen->constant)).get<double>();
  fit.measured_s = measured_s;
  fit.priced_given_s = step_at(request, base, plan, where);
  const auto price = [&](double v) {
    return step_at(request, with_constant(base, *chosen, v), plan, where);
  };
  // Bisection in log value over [low/8, 8·high]: the step is monotone in a rate.
  double a = chosen->low / 8, b = chosen->high * 8;
  double ta = price(a), tb = price(b);
  const bool falling = tb < ta;  // a faster link or device: a shorter step
  const auto beyond = [&](double t) { return falling ? t < measured_s : t > measured_s; };
  if (!beyond(tb)) {
    fit.fitted = b;
    fit.priced_fitted_s = tb;
    return fit;
  }
  if (beyond(ta)) {
    fit.fitted = a;
    fit.priced_fitted_s = ta;
    return fit;
  }
  for (int i = 0; i < 60 && b / a > 1 + 1e-9; ++i) {
    const double mid = std::sqrt(a * b), tm = price(mid);
    if (beyond(tm)) {
      b = mid;
      tb = tm;
    } else {
      a = mid;
      ta = tm;
    }
  }
  const bool take_a = std::abs(ta - measured_s) <= std::abs(tb - measured_s);
  fit.fitted = take_a ? a : b;
  fit.priced_fitted_s = take_a ? ta : tb;
  return fit;
}

}  // namespace meshtp::plan
