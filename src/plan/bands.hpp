// Bands: how far a price moves when the profile constants it rests on move within what their
// sources say.
//
// A topology file may carry, beside its constants, `ranges`: for a constant, the values its
// sources give, each end named by its source:
//
//   "ranges": [
//     {"constant": "/levels/1/group_gbps", "low": 200, "high": 232,
//      "source": "200: nccl-tests issue #149 (…); 232: …"},
//     {"constant": "/device/gemm/tile/1", "low": 128, "high": 256, "source": "…"}
//   ]
//
// `constant` is a JSON pointer (RFC 6901) into the topology as plan::to_json writes it (the
// file's own form: "/device/elementwise_gbps", "/levels/0/latency_us"); it must name a number,
// and the topology's own value must lie in [low, high]. A range is refused, naming it, when
// its source is empty, low > high, an end is not a positive finite number (an integer where
// the constant is one), the pointer names no number, or the value lies outside.
//
// The band of a price: the price at the topology as given (the value), with every range at
// each of its two ends in turn (the others as given), and at the two corners: every range at
// the end that made the price lower, then every one at the end that made it higher. Low and
// high are the least and the most of these 2k + 3 prices (k ranges), so low ≤ value ≤ high
// by construction; for a price monotone in each constant they are the corners. Nothing here
// is fitted: the ends are the sources' numbers.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace meshtp::plan {

// One profile constant's sourced range (see above).
struct ConstantRange {
  std::string constant;  // JSON pointer into the topology's JSON
  double low = 0;
  double high = 0;
  std::string source;  // where each end comes from
  friend bool operator==(const ConstantRange&, const ConstantRange&) = default;
};

// A price and its band: low ≤ value ≤ high.
struct Band {
  double value = 0;
  double low = 0;
  double high = 0;
  // Whether two bands share a point: neither price is known to beat the other.
  bool overlaps(const Band& other) const { return low <= other.high && other.low <= high; }
};

// The `ranges` array of a topology file: shape and values of each entry checked (`where`
// names the file in errors); checked against the topology's constants by check_ranges.
std::vector<ConstantRange> ranges_from_json(const nlohmann::json& j, const std::string& where);
nlohmann::json to_json(const std::vector<ConstantRange>& ranges);

// Throws naming the range when its constant is not a number of `topology` (plan::to_json of
// it, without "ranges") or its value lies outside [low, high].
void check_ranges(const std::vector<ConstantRange>& ranges, const nlohmann::json& topology,
                  const std::string& where);

// `topology` with the constant of `range` set to `value` (an integer where it is one).
nlohmann::json with_constant(nlohmann::json topology, const ConstantRange& range, double value);

// The band of `price` (a price of a topology's JSON, with the constants of `ranges`) as
// described above. With no ranges, low = value = high.
Band band(const nlohmann::json& topology, const std::vector<ConstantRange>& ranges,
          const std::function<double(const nlohmann::json&)>& price);

}  // namespace meshtp::plan
