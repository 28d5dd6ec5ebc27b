#include "train/chrome_trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "core/atomic_file.hpp"
#include "core/simulation.hpp"
#include "core/trace.hpp"

namespace meshtp::train {
namespace {

int thread_of(SpanKind kind) { return static_cast<int>(kind); }

// This rank's events as comma-separated JSON objects (names are fixed identifiers, so no
// escaping is needed).
std::string events_of_this_rank(int rank, double origin_s) {
  std::string out = fmt::format(
      R"({{"name":"process_name","ph":"M","pid":{0},"args":{{"name":"rank {0}"}}}})", rank);
  for (const SpanKind kind :
       {SpanKind::kCompute, SpanKind::kComm, SpanKind::kWait, SpanKind::kPhase}) {
    out += fmt::format(
        R"(,{{"name":"thread_name","ph":"M","pid":{},"tid":{},"args":{{"name":"{}"}}}})", rank,
        thread_of(kind), to_string(kind));
  }
  for (const TraceSpan& s : Tracer::instance().spans()) {
    out += fmt::format(R"(,{{"name":"{}","cat":"{}","ph":"X","ts":{:.3f},"dur":{:.3f},"pid":{},"tid":{}}})",
                       s.name, to_string(s.kind), (s.start_s - origin_s) * 1e6,
                       (s.end_s - s.start_s) * 1e6, rank, thread_of(s.kind));
  }
  return out;
}

}  // namespace

void write_chrome_trace(const std::string& path, const comm::Communicator& world,
                        double origin_s) {
  const std::string mine = events_of_this_rank(world.rank(), origin_s);
  std::int64_t my_size = static_cast<std::int64_t>(mine.size());
  std::vector<std::int64_t> sizes(static_cast<std::size_t>(world.size()));
  world.all_gather(std::span<const std::int64_t>(&my_size, 1), std::span<std::int64_t>(sizes));
  constexpr int kTag = 7401;
  // In pieces smaller than simhooks::kNoCopyBytes: the simulated build's charged mode delivers
  // larger messages without their contents (core/simulation.hpp), and the trace is the one
  // thing a simulated rank sends whose values matter. Messages of one sender and tag arrive
  // in order.
  static constexpr std::size_t kPiece = simhooks::kNoCopyBytes - 1;
  const auto pieces = [](std::size_t bytes, auto&& each) {
    for (std::size_t at = 0; at < bytes; at += kPiece) each(at, std::min(kPiece, bytes - at));
  };
  if (world.rank() != 0) {
    const auto* data = reinterpret_cast<const unsigned char*>(mine.data());
    pieces(mine.size(), [&](std::size_t at, std::size_t n) {
      world.send(std::span<const unsigned char>(data + at, n), 0, kTag);
    });
    return;
  }
  std::string json = R"({"displayTimeUnit":"ms","traceEvents":[)" + mine;
  for (int r = 1; r < world.size(); ++r) {
    std::string theirs(static_cast<std::size_t>(sizes[r]), '\0');
    auto* data = reinterpret_cast<unsigned char*>(theirs.data());
    pieces(theirs.size(), [&](std::size_t at, std::size_t n) {
      world.recv(std::span<unsigned char>(data + at, n), r, kTag);
    });
    json += ',';
    json += theirs;
  }
  json += "]}\n";
  write_file_atomically(path, json);
}

}  // namespace meshtp::train
