#include "tensor/memory.hpp"

#include <sys/resource.h>

#include <fstream>
#include <string>

namespace meshtp {
namespace {
std::atomic<std::int64_t> g_current{0};
std::atomic<std::int64_t> g_peak{0};
}  // namespace

void detail::note_tensor_alloc(std::int64_t bytes) {
  const std::int64_t now = g_current.fetch_add(bytes) + bytes;
  std::int64_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
}

void detail::note_tensor_free(std::int64_t bytes) { g_current.fetch_sub(bytes); }

std::int64_t tensor_bytes() { return g_current.load(); }
std::int64_t tensor_peak_bytes() { return g_peak.load(); }
void reset_tensor_peak() { g_peak.store(g_current.load()); }

std::int64_t max_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<std::int64_t>(usage.ru_maxrss) * 1024;  // Linux: kilobytes
}

double available_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  double kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024.0;
  }
  return 0.0;
}

}  // namespace meshtp
