// Topology and model files: presets, JSON round trips, and the errors users see.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "core/error.hpp"
#include "core/json_util.hpp"
#include "error_of.hpp"
#include "plan/mesh_links.hpp"
#include "plan/presets.hpp"

namespace meshtp::plan {
namespace {

using meshtp::test_support::error_of;

// The message of the meshtp::Error thrown by f, or "" if it does not throw.
TEST(Presets, EveryTopologyLoadsValidatesAndRoundTrips) {
  const std::vector<std::pair<std::string, int>> expected{
      {"pcie-8xa100", 8},       {"dual-nvlink-8xa100", 8}, {"nvswitch-8xa100", 8},
      {"ib-2x8xa100", 16},      {"nvlink-hdr-4x4", 16},    {"torus-4x4", 16},
      {"nvlink-network-64", 64}, {"tpuv4-torus-16x16", 256}};
  for (const auto& [name, devices] : expected) {
    SCOPED_TRACE(name);
    const Topology t = load_topology(name);
    EXPECT_EQ(t.name, name);
    EXPECT_EQ(t.device_count(), devices);
    const Topology back = parse_topology(to_json(t).dump(2), "round trip");
    EXPECT_EQ(back, t);
  }
  // Every listed name resolves (the parametric one with an example N).
  for (const std::string& name : topology_preset_names()) {
    const std::string concrete = name == "nvlink-network-N" ? "nvlink-network-8" : name;
    EXPECT_NO_THROW(load_topology(concrete)) << name;
  }
}

TEST(Presets, EveryModelLoadsAndRoundTrips) {
  const std::vector<std::pair<std::string, int>> hidden{
      {"atp-m1", 2048}, {"atp-m2", 4096}, {"atp-m3", 8192}, {"atp-m4", 12288},
      {"gpt3-175b", 12288}, {"mt-nlg-530b", 20480}};
  for (const auto& [name, h] : hidden) {
    SCOPED_TRACE(name);
    const ModelSpec m = load_model(name);
    EXPECT_EQ(m.hidden, h);
    EXPECT_EQ(parse_model(to_json(m).dump(), "round trip"), m);
  }
  EXPECT_EQ(load_model("atp-m4").heads, 96);
  EXPECT_EQ(load_model("atp-m4").batch, 4);
  EXPECT_EQ(load_model("atp-m4").seq, 2048);
  EXPECT_EQ(load_model("gpt3-175b").layers, 96);
  EXPECT_EQ(load_model("mt-nlg-530b").layers, 105);
  // GPT-3 is 175B parameters: 96·(12h²+13h) + 50257·h = 174.6e9.
  EXPECT_NEAR(load_model("gpt3-175b").total_params() / 1e9, 174.6, 0.1);
  EXPECT_NEAR(load_model("mt-nlg-530b").total_params() / 1e9, 529.6, 0.5);
}

TEST(Presets, ParametricNvlinkNetwork) {
  const Topology t = load_topology("nvlink-network-12");
  ASSERT_EQ(t.levels.size(), 1u);
  EXPECT_EQ(t.levels[0].members, 12);
  for (const char* bad : {"nvlink-network-0", "nvlink-network-x", "nvlink-network-", "nvlink-network-8x"}) {
    EXPECT_NE(error_of([&] { load_topology(bad); }).find("expected nvlink-network-N"),
              std::string::npos)
        << bad;
  }
}

TEST(Presets, UnknownNamesListTheValidOnes) {
  const std::string topo = error_of([] { load_topology("pcie-9xa100"); });
  EXPECT_NE(topo.find("unknown topology 'pcie-9xa100'"), std::string::npos) << topo;
  for (const char* n : {"pcie-8xa100", "torus-4x4", "tpuv4-torus-16x16", "nvlink-network-N"}) {
    EXPECT_NE(topo.find(n), std::string::npos) << topo;
  }
  const std::string model = error_of([] { load_model("gpt4"); });
  EXPECT_NE(model.find("unknown model 'gpt4'"), std::string::npos) << model;
  EXPECT_NE(model.find("atp-m1, atp-m2, atp-m3, atp-m4, bloom-176b, gpt3-175b, korthikanti-1t, "
                       "korthikanti-22b, llama3-405b, llama3-70b, llama3-8b, mixtral-8x22b, "
                       "mixtral-8x7b, mt-nlg-530b, qwen2-57b-a14b"),
            std::string::npos)
      << model;
  EXPECT_NE(error_of([] { load_topology("/nonexistent/x.json"); }).find("/nonexistent/x.json"),
            std::string::npos);
}

TEST(Json, MalformedTextReportsLineAndColumn) {
  // The stray ',' is on line 3, column 14.
  const std::string text = "{\n  \"name\": \"x\",\n  \"levels\": [,]\n}";
  const std::string e = error_of([&] { parse_topology(text, "'x.json'"); });
  EXPECT_NE(e.find("malformed JSON in 'x.json' at line 3, column 14"), std::string::npos) << e;
  // Truncated input: the error is at the end.
  const std::string e2 = error_of([] { parse_model("{\"name\": \"m\",\n \"layers\": 2", "'m'"); });
  EXPECT_NE(e2.find("at line 2, column 13"), std::string::npos) << e2;
  const TextPosition p = position_of("ab\ncd\nef", 7);
  EXPECT_EQ(p.line, 3);
  EXPECT_EQ(p.column, 2);
}

TEST(Json, FileErrorsNameTheFile) {
  const std::string path = ::testing::TempDir() + "/meshtp_bad_topology.json";
  // A missing comma: the unexpected token "levels" ends on line 3, column 8 (nlohmann
  // reports the last character it read).
  std::ofstream(path) << "{\n\"name\": \"t\"\n\"levels\": []}";
  const std::string e = error_of([&] { load_topology(path); });
  EXPECT_NE(e.find(path), std::string::npos) << e;
  EXPECT_NE(e.find("line 3, column 8"), std::string::npos) << e;
}

std::string small_topology(const std::string& level_fields) {
  return R"({"name": "t", "device": {"memory_gib": 80, "tflops": 100},
             "levels": [{"name": "gpu", "members": 4, )" + level_fields + "}]}";
}

TEST(Json, BadValuesAreNamed) {
  EXPECT_NE(error_of([] { parse_topology(small_topology(R"("group_gbps": 0)"), "'t'"); })
                .find("group_gbps=0 must be positive"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_topology(small_topology(R"("group_gbps": -5)"), "'t'"); })
                .find("group_gbps=-5 must be positive"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_topology(small_topology(R"("group_gbps": 5, "p2p_gbps": 0)"), "'t'");
            }).find("p2p_gbps=0 must be positive"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_topology(small_topology(R"("group_gbps": 5, "p2p_gbps": [[0, 1], [1, 0]])"),
                             "'t'");
            }).find("p2p_gbps has 2 rows, expected 4"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_topology(small_topology(R"("group_gbps": 5, "memebers": 2)"),
                                         "'t'"); })
                .find("unknown field 'memebers'"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_topology(small_topology(R"("group_gbps": "fast")"), "'t'"); })
                .find("field 'group_gbps' must be a number, got \"fast\""),
            std::string::npos);
  const std::string calibrated = R"({"name": "t", "device": {"memory_gib": 80, "tflops": 100},
      "levels": [{"members": 4, "group_gbps": 5}],
      "calibration": {"groups": [{"size": 2, "stride": 1,
                                  "all_gather": {"bw_gbps": -1}}]}})";
  EXPECT_NE(error_of([&] { parse_topology(calibrated, "'t'"); }).find("bw_gbps=-1 must be "
                                                                      "positive"),
            std::string::npos);
  const auto with_measured = [](const std::string& measured) {
    return R"({"name": "t", "device": {"memory_gib": 80, "tflops": 100},
      "levels": [{"members": 4, "group_gbps": 5}],
      "calibration": {"groups": [{"size": 2, "stride": 1,
                                  "all_gather": {"bw_gbps": 1, "measured": )" +
           measured + "}}]}}";
  };
  EXPECT_NE(error_of([&] {
              parse_topology(with_measured("[[4096, 3], [1024, 2]]"), "'t'");
            }).find("measured[1] has bytes=1024 after 4096: sizes must ascend"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              parse_topology(with_measured("[[4096, 0]]"), "'t'");
            }).find("measured[0] (4096 bytes) has 0 us, outside 0.01 to 1e10 us"),
            std::string::npos);
  EXPECT_NE(error_of([&] { parse_topology(with_measured("[[4096]]"), "'t'"); })
                .find("measured[0] must be a pair [bytes, us] (an integer and a number), got "
                      "[4096]"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              parse_topology(with_measured("{\"4096\": 3}"), "'t'");
            }).find("measured must be an array of [bytes, us] pairs"),
            std::string::npos);
  // Measured times survive a round trip.
  const Topology m = parse_topology(with_measured("[[4096, 3.5], [65536, 20]]"), "'t'");
  ASSERT_TRUE(m.calibration.groups.at(0).all_gather);
  EXPECT_EQ(m.calibration.groups[0].all_gather->measured,
            (std::vector<MeasuredTime>{{4096, 3.5}, {65536, 20}}));
  EXPECT_EQ(parse_topology(to_json(m).dump(), "'round trip'"), m);
  // A topology of 4 devices whose calibration is `fields`.
  const auto with_calibration = [](const std::string& fields) {
    return R"({"name": "t", "device": {"memory_gib": 80, "tflops": 100},
      "levels": [{"members": 4, "group_gbps": 5}], "calibration": {)" +
           fields + "}}";
  };
  // The step overhead: checked, kept, and what step_overhead_s() gives (0 when absent).
  const auto with_step = [&](const std::string& us) {
    return with_calibration(R"("step_overhead_us": )" + us);
  };
  EXPECT_NE(error_of([&] {
              parse_topology(with_step("-3"), "'t'");
            }).find("calibration step_overhead_us=-3 must be in [0, 1e6]"),
            std::string::npos);
  const Topology stepped = parse_topology(with_step("42.5"), "'t'");
  EXPECT_DOUBLE_EQ(stepped.step_overhead_s(), 42.5e-6);
  EXPECT_EQ(parse_topology(to_json(stepped).dump(), "'round trip'"), stepped);
  EXPECT_EQ(m.step_overhead_s(), 0);
  // A mesh's measured dim sharing: checked, kept, and what mesh_links gives that mesh only.
  const auto with_sharing = [&](const std::string& meshes) {
    return with_calibration(R"("meshes": )" + meshes);
  };
  EXPECT_NE(error_of([&] {
              parse_topology(with_sharing(R"([{"mesh": [2, 2], "sharing": 1.5}])"), "'t'");
            }).find("calibration mesh 2x2: sharing=1.5 must be in [0, 1]"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              parse_topology(with_sharing(R"([{"mesh": [1, 4], "sharing": 0.5}])"), "'t'");
            }).find("calibration mesh 1x4: both dims need at least 2 ranks"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              parse_topology(with_sharing(R"([{"mesh": [4]}])"), "'t'");
            }).find("'mesh' must be two integers [d1, d2], got [4]"),
            std::string::npos);
  const Topology shared =
      parse_topology(with_sharing(R"([{"mesh": [2, 2], "sharing": 0.75}])"), "'t'");
  EXPECT_EQ(parse_topology(to_json(shared).dump(), "'round trip'"), shared);
  EXPECT_EQ(mesh_links(shared, 2, 2).dim_sharing, 0.75);
  EXPECT_EQ(mesh_links(shared, 4, 1).dim_sharing, 0);
  EXPECT_EQ(mesh_links(shared, 2, 2).concurrent(2, 1), 2.75);
  // Host-staged traffic (no GPU-to-GPU transport): both dims share one resource on a mesh
  // whose dims both communicate, unless a measured sharing says otherwise; round-trips.
  const auto staged = [](const std::string& value) {
    return R"({"name": "t", "device": {"memory_gib": 80, "tflops": 100}, "host_staged": )" +
           value + R"(, "levels": [{"members": 4, "group_gbps": 5}]})";
  };
  EXPECT_NE(error_of([&] { parse_topology(staged("1"), "'t'"); })
                .find("'host_staged' must be true or false, got 1"),
            std::string::npos);
  const Topology host = parse_topology(staged("true"), "'t'");
  EXPECT_TRUE(host.host_staged);
  EXPECT_EQ(parse_topology(to_json(host).dump(), "'round trip'"), host);
  EXPECT_EQ(mesh_links(host, 2, 2).dim_sharing, 1);
  EXPECT_EQ(mesh_links(host, 4, 1).dim_sharing, 0);
  EXPECT_FALSE(parse_topology(staged("false"), "'t'").host_staged);
  EXPECT_FALSE(to_json(parse_topology(staged("false"), "'t'")).contains("host_staged"));
  const auto with_gemm = [](const std::string& gemm) {
    return R"({"name": "t", "device": {"memory_gib": 80, "tflops": 100, "gemm": )" + gemm +
           R"(}, "levels": [{"members": 4, "group_gbps": 5}]})";
  };
  EXPECT_NE(error_of([&] {
              parse_topology(with_gemm(R"({"peak_tflops": 312, "efficiency": 1.5, "units": 108})"),
                             "'t'");
            }).find("device gemm: gemm efficiency=1.5 must be in (0, 1]"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              parse_topology(with_gemm(R"({"peak_tflops": 312, "efficiency": 0.8, "units": 0})"),
                             "'t'");
            }).find("units=0 must be at least 1"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              parse_topology(with_gemm(R"({"peak_tflops": 312, "efficiency": 0.8, "units": 108,
                                           "tile": [128]})"),
                             "'t'");
            }).find("'tile' must be two integers [tile_m, tile_n], got [128]"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              parse_topology(with_gemm(R"({"peak_tflops": 312, "efficiency": 0.8, "units": 108,
                                           "tiles": [128, 256]})"),
                             "'t'");
            }).find("unknown field 'tiles'"),
            std::string::npos);
  const std::string model = R"({"name": "m", "layers": 2, "hidden": 1000, "heads": 3,
                                "batch": 1, "seq": 8})";
  EXPECT_NE(error_of([&] { parse_model(model, "'m'"); })
                .find("hidden=1000 is not divisible by heads=3"),
            std::string::npos);
}

TEST(Docs, TheReadmeExampleParsesAndItsCalibrationApplies) {
  // The first ```json block of topologies/README.md is the documented full example.
  std::ifstream in(std::string(MESHTP_SOURCE_DIR) + "/topologies/README.md");
  ASSERT_TRUE(in) << "cannot open topologies/README.md";
  std::stringstream text;
  text << in.rdbuf();
  const std::string readme = text.str();
  const auto start = readme.find("```json\n");
  ASSERT_NE(start, std::string::npos);
  const auto end = readme.find("```", start + 8);
  const Topology t = parse_topology(readme.substr(start + 8, end - start - 8), "README");
  EXPECT_EQ(t.device_count(), 16);
  EXPECT_EQ(t.effective_tflops(), 210);
  EXPECT_EQ(t.elementwise_gbps, 1600);
  EXPECT_EQ(t.effective_elementwise_gbps(), 1450);
  ASSERT_NE(t.calibrated_group(8, 2), nullptr);
  EXPECT_EQ(t.calibrated_group(8, 2)->all_gather->bw_gbps, 11.8);
  EXPECT_EQ(t.calibrated_group(2, 1)->all_gather->bw_gbps, 180.0);
  EXPECT_EQ(t.calibrated_group(2, 2), nullptr);
}

}  // namespace
}  // namespace meshtp::plan
