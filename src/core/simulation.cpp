#include "core/simulation.hpp"

#include <cstdlib>
#include <new>


namespace meshtp::sim {

Hooks& hooks() {
  static Hooks installed;
  return installed;
}

const char* to_string(Mode mode) {
  switch (mode) {
    case Mode::kReal: return "real";
    case Mode::kValues: return "values";
    case Mode::kCharged: return "charged";
  }
  return "?";
}

bool charge(double flops, double bytes) {
  Hooks& h = hooks();
  if (h.mode != Mode::kCharged) return false;
  double seconds = 0.0;
  if (flops > 0.0 && h.gemm_flops_per_s > 0.0) seconds += flops / h.gemm_flops_per_s;
  if (bytes > 0.0 && h.elementwise_bytes_per_s > 0.0) seconds += bytes / h.elementwise_bytes_per_s;
  if (seconds <= 0.0 || h.advance == nullptr) return true;
  h.charged_s += seconds;
  h.advance(seconds);
  return true;
}

bool charge_flops(double flops) { return charge(flops, 0.0); }
bool charge_bytes(double bytes) { return charge(0.0, bytes); }

bool skip_values(std::size_t bytes) {
  return hooks().mode == Mode::kCharged && bytes >= kNoCopyBytes;
}

void* allocate(std::size_t bytes) {
  const Hooks& h = hooks();
  void* p = h.allocate != nullptr && bytes >= h.large_bytes ? h.allocate(bytes)
                                                            : std::malloc(bytes > 0 ? bytes : 1);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

void release(void* p, std::size_t bytes) {
  const Hooks& h = hooks();
  // The hook's release frees only its own buffers (it tells them from malloc's), so a buffer
  // allocated before the hooks were installed is freed correctly too.
  if (h.release != nullptr && bytes >= h.large_bytes) {
    h.release(p, bytes);
    return;
  }
  std::free(p);
}

}  // namespace meshtp::sim
