// The trace file is valid JSON with one process per rank and the recorded spans.
#include "train/chrome_trace.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/atomic_file.hpp"
#include "core/stats.hpp"
#include "core/trace.hpp"

namespace meshtp::train {
namespace {

TEST(ChromeTrace, GathersEveryRanksSpansIntoOneFile) {
  const auto world = comm::Communicator::world();
  const std::string path =
      (std::filesystem::temp_directory_path() / "meshtp_trace_test.json").string();
  Tracer& tracer = Tracer::instance();
  tracer.clear();
  world.barrier();
  const double origin = now_seconds();
  tracer.enable();
  { const ScopedSpan step("step", SpanKind::kPhase); }
  std::vector<float> x(4, 1.0f);
  world.all_reduce(std::span<float>(x));
  tracer.disable();
  write_chrome_trace(path, world, origin);
  tracer.clear();
  if (world.rank() == 0) {
    const auto trace = nlohmann::json::parse(read_file(path));
    int processes = 0;
    int steps = 0;
    int all_reduces = 0;
    for (const auto& e : trace.at("traceEvents")) {
      if (e.at("name") == "process_name") ++processes;
      if (e.at("name") == "step") ++steps;
      if (e.at("name") == "all_reduce") {
        ++all_reduces;
        EXPECT_EQ(e.at("cat"), "comm");
        EXPECT_GE(e.at("dur").get<double>(), 0.0);
        EXPECT_GE(e.at("ts").get<double>(), 0.0);
      }
    }
    EXPECT_EQ(processes, world.size());
    EXPECT_EQ(steps, world.size());
    EXPECT_EQ(all_reduces, world.size());
    std::filesystem::remove(path);
  }
  world.barrier();
}

}  // namespace
}  // namespace meshtp::train
