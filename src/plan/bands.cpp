#include "plan/bands.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/json_util.hpp"

namespace meshtp::plan {

namespace {

nlohmann::json::json_pointer pointer_of(const ConstantRange& r, const std::string& where) {
  try {
    return nlohmann::json::json_pointer(r.constant);
  } catch (const nlohmann::json::exception&) {
    fail("{}: constant '{}' is not a JSON pointer (like \"/levels/1/group_gbps\")", where,
         r.constant);
  }
}

}  // namespace

std::vector<ConstantRange> ranges_from_json(const nlohmann::json& j, const std::string& where) {
  MESHTP_CHECK(j.is_array(), "{}: 'ranges' must be an array, got {}", where, j.dump());
  std::vector<ConstantRange> out;
  for (std::size_t i = 0; i < j.size(); ++i) {
    const nlohmann::json& rj = j[i];
    std::string rw = fmt::format("{}, range {}", where, i);
    check_fields(rj, {"constant", "low", "high", "source"}, rw);
    ConstantRange r;
    r.constant = read_string(rj, "constant", rw);
    rw = fmt::format("{}, range {} ('{}')", where, i, r.constant);
    r.low = read_number(rj, "low", rw);
    r.high = read_number(rj, "high", rw);
    MESHTP_CHECK(rj.contains("source") && rj.at("source").is_string() &&
                     !rj.at("source").get<std::string>().empty(),
                 "{}: needs a 'source' naming where low and high come from", rw);
    r.source = rj.at("source").get<std::string>();
    MESHTP_CHECK(std::isfinite(r.low) && std::isfinite(r.high) && r.low > 0,
                 "{}: low={} and high={} must be positive finite numbers", rw, r.low, r.high);
    MESHTP_CHECK(r.low <= r.high, "{}: low={} is above high={}", rw, r.low, r.high);
    (void)pointer_of(r, rw);
    out.push_back(std::move(r));
  }
  return out;
}

nlohmann::json to_json(const std::vector<ConstantRange>& ranges) {
  nlohmann::json out = nlohmann::json::array();
  for (const ConstantRange& r : ranges) {
    out.push_back({{"constant", r.constant}, {"low", r.low}, {"high", r.high},
                   {"source", r.source}});
  }
  return out;
}

void check_ranges(const std::vector<ConstantRange>& ranges, const nlohmann::json& topology,
                  const std::string& where) {
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    const ConstantRange& r = ranges[i];
    const std::string rw = fmt::format("{}, range {} ('{}')", where, i, r.constant);
    const nlohmann::json::json_pointer ptr = pointer_of(r, rw);
    MESHTP_CHECK(topology.contains(ptr) && topology.at(ptr).is_number(),
                 "{}: the topology has no number at '{}'", rw, r.constant);
    const double value = topology.at(ptr).get<double>();
    MESHTP_CHECK(r.low <= value && value <= r.high,
                 "{}: the topology's value {} lies outside low={} … high={}", rw, value, r.low,
                 r.high);
    if (topology.at(ptr).is_number_integer()) {
      MESHTP_CHECK(r.low == std::floor(r.low) && r.high == std::floor(r.high),
                   "{}: low={} and high={} must be integers, as the constant is", rw, r.low,
                   r.high);
    }
    for (std::size_t k = 0; k < i; ++k) {
      MESHTP_CHECK(ranges[k].constant != r.constant, "{}: the constant has a range already",
                   rw);
    }
  }
}

nlohmann::json with_constant(nlohmann::json topology, const ConstantRange& range,
                             double value) {
  const nlohmann::json::json_pointer ptr(range.constant);
  nlohmann::json& at = topology.at(ptr);
  if (at.is_number_integer()) {
    at = static_cast<std::int64_t>(std::llround(value));
  } else {
    at = value;
  }
  return topology;
}

Band band(const nlohmann::json& topology, const std::vector<ConstantRange>& ranges,
          const std::function<double(const nlohmann::json&)>& price) {
  Band b;
  b.value = b.low = b.high = price(topology);
  if (ranges.empty()) return b;
  const auto seen = [&](double t) {
    b.low = std::min(b.low, t);
    b.high = std::max(b.high, t);
  };
  nlohmann::json fast = topology, slow = topology;
  for (const ConstantRange& r : ranges) {
    const double at_low = price(with_constant(topology, r, r.low));
    const double at_high = price(with_constant(topology, r, r.high));
    seen(at_low);
    seen(at_high);
    const bool low_is_faster = at_low <= at_high;
    fast = with_constant(std::move(fast), r, low_is_faster ? r.low : r.high);
    slow = with_constant(std::move(slow), r, low_is_faster ? r.high : r.low);
  }
  seen(price(fast));
  seen(price(slow));
  return b;
}

}  // namespace meshtp::plan
