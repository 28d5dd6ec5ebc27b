#include "core/simulation.hpp"

#include <algorithm>
#include <cstdlib>
#include <new>

namespace meshtp::simhooks {

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

namespace {

// Occupy this rank's device for `seconds` of GeMM time plus `bytes` (fp32 counts) at the
// elementwise rate; true in kCharged (the caller skips the work).
bool charge_seconds(double seconds, double bytes, int element_bytes = hooks().element_bytes) {
  Hooks& h = hooks();
  if (h.mode != Mode::kCharged) return false;
  if (bytes > 0.0 && h.elementwise_bytes_per_s > 0.0) {
    seconds += bytes / 4.0 * element_bytes / h.elementwise_bytes_per_s;  // fp32 counts
  }
  if (seconds <= 0.0 || h.advance == nullptr) return true;
  h.charged_s += seconds;
  h.advance(seconds);
  return true;
}

}  // namespace

bool charge(double flops, double bytes) {
  const Hooks& h = hooks();
  if (h.mode != Mode::kCharged) return false;
  const double rate = h.gemm.flops_per_s();
  return charge_seconds(flops > 0.0 && rate > 0.0 ? flops / rate : 0.0, bytes);
}

bool charge_flops(double flops) { return charge(flops, 0.0); }
bool charge_bytes(double bytes) { return charge(0.0, bytes); }
bool charge_fp32_bytes(double bytes) { return charge_seconds(0.0, bytes, 4); }

bool charge_gemm(double m, double n, double k) {
  const Hooks& h = hooks();
  if (h.mode != Mode::kCharged) return false;
  if (h.gemm.flops_per_s() <= 0.0) return charge_seconds(0.0, 0.0);
  return charge_seconds(h.gemm.seconds(m, n, k, h.element_bytes), 0.0);
}

bool charge_attention(double seq, double head_dim, double pairs, bool backward, double bytes) {
  const Hooks& h = hooks();
  if (h.mode != Mode::kCharged) return false;
  if (h.gemm.flops_per_s() <= 0.0) return charge_seconds(0.0, bytes);
  return charge_seconds(attention_seconds(h.gemm, seq, head_dim, pairs, h.element_bytes, backward),
                        bytes);
}

void advance_seconds(double seconds) { (void)charge_seconds(seconds, 0.0); }

void charge_step_overhead() { (void)charge_seconds(hooks().step_overhead_s, 0.0); }

bool skip_values(std::size_t bytes) {
  return hooks().mode == Mode::kCharged && bytes >= kNoCopyBytes;
}

void* allocate(std::size_t bytes) {
  const Hooks& h = hooks();
  // Cache-line aligned (64 bytes, one AVX-512 vector), so the vector kernels (ops/kernels.hpp)
  // never load across two lines: from malloc (16-byte aligned) every 64-byte load straddled
  // two, and the AVX-512 LayerNorm forward on 4096x1024 took about twice as long. free()
  // releases both.
  constexpr std::size_t kAlign = 64;
  void* p = h.allocate != nullptr && bytes >= h.large_bytes
                ? h.allocate(bytes)
                : std::aligned_alloc(kAlign, (std::max<std::size_t>(bytes, 1) + kAlign - 1) /
                                                 kAlign * kAlign);
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

}  // namespace meshtp::simhooks
