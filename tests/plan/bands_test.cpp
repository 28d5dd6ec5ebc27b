// Bands (plan/bands.hpp): sourced ranges read and refused, and every priced step carries a
// band with low ≤ value ≤ high.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.hpp"
#include "plan/bands.hpp"
#include "plan/layout_search.hpp"
#include "plan/presets.hpp"
#include "plan/topology.hpp"

namespace meshtp::plan {
namespace {

nlohmann::json topology_with(nlohmann::json ranges) {
  nlohmann::json j = to_json(load_topology("nvswitch-8xa100"));
  j["ranges"] = std::move(ranges);
  return j;
}

std::string refusal(const nlohmann::json& ranges) {
  try {
    (void)topology_from_json(topology_with(ranges), "'t.json'");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

nlohmann::json range(double low, double high, const char* source = "a paper, Table 1") {
  return {{"constant", "/levels/0/group_gbps"}, {"low", low}, {"high", high}, {"source", source}};
}

TEST(Bands, ARangeIsReadAndWrittenBack) {
  const double value = load_topology("nvswitch-8xa100").levels[0].group_gbps;
  const Topology t = topology_from_json(topology_with(nlohmann::json::array({range(value / 2, value)})), "'t.json'");
  ASSERT_EQ(t.ranges.size(), 1u);
  EXPECT_EQ(t.ranges[0].low, value / 2);
  EXPECT_EQ(topology_from_json(to_json(t), "again"), t);
}

// What a topology whose ranges are these is refused with ("" when it is not).
std::string refused(std::initializer_list<nlohmann::json> ranges) {
  nlohmann::json list = nlohmann::json::array();
  for (const nlohmann::json& r : ranges) list.push_back(r);
  return refusal(list);
}

bool says(const std::string& message, const std::string& what) {
  return message.find(what) != std::string::npos;
}

TEST(Bands, BadRangesAreRefusedNamingThem) {
  const double value = load_topology("nvswitch-8xa100").levels[0].group_gbps;
  // Every message names the file and the constant.
  EXPECT_TRUE(says(refused({range(value, value / 2)}),
                   "topology 't.json', range 0 ('/levels/0/group_gbps'): low="));
  EXPECT_TRUE(says(refused({range(value, value / 2)}), "is above high="));
  nlohmann::json no_source = range(value / 2, value);
  no_source.erase("source");
  EXPECT_TRUE(says(refused({no_source}), "needs a 'source'"));
  EXPECT_TRUE(says(refused({range(value / 2, value, "")}), "needs a 'source'"));
  EXPECT_TRUE(says(refused({range(value * 2, value * 3)}), "lies outside"));
  EXPECT_TRUE(says(refused({range(0, value)}), "positive"));
  nlohmann::json missing = range(1, 2);
  missing["constant"] = "/levels/7/group_gbps";
  EXPECT_TRUE(says(refused({missing}), "has no number at '/levels/7/group_gbps'"));
  nlohmann::json not_pointer = range(1, 2);
  not_pointer["constant"] = "levels.0.group_gbps";
  EXPECT_TRUE(says(refused({not_pointer}), "is not a JSON pointer"));
  EXPECT_TRUE(says(refused({range(value / 2, value), range(value / 2, value)}),
                   "has a range already"));
  EXPECT_TRUE(says(refusal(range(1, 2)), "'ranges' must be an array"));
}

TEST(Bands, BandOfAMonotonePriceIsItsCorners) {
  const nlohmann::json t = {{"a", 2.0}, {"b", 10}};
  const std::vector<ConstantRange> ranges = {{"/a", 1, 4, "s"}, {"/b", 8, 16, "s"}};
  // Faster with more of a, slower with more of b.
  const Band b = band(t, ranges, [](const nlohmann::json& j) {
    return j.at("b").get<double>() / j.at("a").get<double>();
  });
  EXPECT_DOUBLE_EQ(b.value, 5);
  EXPECT_DOUBLE_EQ(b.low, 2);    // a 4, b 8
  EXPECT_DOUBLE_EQ(b.high, 16);  // a 1, b 16
  EXPECT_TRUE(b.overlaps({.value = 16, .low = 16, .high = 20}));
  EXPECT_FALSE(b.overlaps({.value = 17, .low = 16.5, .high = 20}));
  // An integer constant stays an integer at its ends.
  EXPECT_TRUE(with_constant(t, ranges[1], 16).at("b").is_number_integer());
}

LayoutRequest table5_175b() {
  ModelSpec m = load_model("gpt3-175b");
  m.batch = 64;
  m.recompute = Recompute::kFull;
  return {.topology = load_topology("dgx-a100-8x8"),
          .model = m,
          .devices = 64,
          .runtime = layout::Runtime::kMegatron};
}

TEST(Bands, EvaluateGivesABandAroundTheStep) {
  const LayoutRequest r = table5_175b();
  ASSERT_FALSE(r.topology.ranges.empty());
  const layout::Plan p{.dp = 1,
                       .pp = 8,
                       .microbatches = 64,
                       .schedule = layout::Schedule::kInterleaved,
                       .virtual_stages = 3,
                       .recompute = Recompute::kFull,
                       .mesh = {8, 1}};
  const LayoutCandidate c = evaluate_layout(r, p);
  EXPECT_LT(c.t_step_s_low, c.t_step_s);
  EXPECT_GT(c.t_step_s_high, c.t_step_s);
  const nlohmann::json j = evaluation_to_json(c, r.topology.memory_gib);
  EXPECT_EQ(j.at("t_step_s_low").get<double>(), c.t_step_s_low);
  EXPECT_EQ(j.at("t_step_s_high").get<double>(), c.t_step_s_high);
  // Without ranges the band is the value.
  LayoutRequest bare = r;
  bare.topology.ranges.clear();
  const LayoutCandidate d = evaluate_layout(bare, p);
  EXPECT_EQ(d.t_step_s, c.t_step_s);
  EXPECT_EQ(d.t_step_s_low, d.t_step_s);
  EXPECT_EQ(d.t_step_s_high, d.t_step_s);
}

TEST(Bands, EverySearchedRowCarriesItsBand) {
  LayoutRequest r = table5_175b();
  r.topology = load_topology("dgx-a100-1x8");
  r.devices = 8;
  r.model = load_model("korthikanti-22b");
  const LayoutSearch s = search_layouts(r, 6);
  ASSERT_FALSE(s.ranked.empty());
  const nlohmann::json j = to_json(s, 6);
  for (const nlohmann::json& row : j.at("layouts")) {
    const double t = row.at("t_step_s"), low = row.at("t_step_s_low"),
                 high = row.at("t_step_s_high");
    EXPECT_LE(low, t);
    EXPECT_LE(t, high);
    EXPECT_LT(low, high);
    EXPECT_TRUE(row.at("band_overlaps").is_array());
  }
  // The exhaustive ranking prices no bands: each row's band is its value.
  for (const LayoutCandidate& c : search_layouts(r)) {
    EXPECT_EQ(c.t_step_s_low, c.t_step_s);
    EXPECT_EQ(c.t_step_s_high, c.t_step_s);
  }
  // Overlaps are symmetric.
  const std::vector<std::vector<int>> o = band_overlaps(s, 6);
  for (std::size_t i = 0; i < o.size(); ++i) {
    for (const int k : o[i]) {
      const std::vector<int>& back = o[static_cast<std::size_t>(k - 1)];
      EXPECT_NE(std::find(back.begin(), back.end(), static_cast<int>(i) + 1), back.end());
    }
  }
}

}  // namespace
}  // namespace meshtp::plan
