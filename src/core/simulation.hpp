// Simulation hooks: how the layers below the comm layer charge their work to a simulated
// device instead of doing it, when meshtp runs inside SimGrid's SMPI.
//
// The simulated build (cmake -DMESHTP_SIMULATE=ON → build-sim/, docs/simulation.md) compiles
// the same sources; under smpirun every rank is a simulated device of a SimGrid platform.
// core, tensor and ops never see SMPI (nothing below comm includes <mpi.h>): they call the
// functions here, whose behaviour the comm layer's SMPI glue (comm/smpi_glue.cpp) installs
// when MPI starts. In the Open MPI build nothing is installed: mode() is kReal, every charge_*
// returns false ("do the work") and the clock is the wall clock.
//
//   mode      where                           work         simulated time charged
//   kReal     Open MPI build                  done         — (wall clock)
//   kValues   simulated, MESHTP_SIM_MODE=values  done      nothing: only communication moves the
//                                                          clock (checks the simulated build's
//                                                          values)
//   kCharged  simulated (the default there)   skipped      gemm: the device's GemmModel of its
//                                                          shape (2·m·n·k/F when flat);
//                                                          elementwise ops: bytes touched at
//                                                          the elementwise rate
//
// In kCharged the VALUES ARE MEANINGLESS (nothing is computed and large buffers are never
// even written): only times are a product. Code that validates values (a benchmark's check
// against the serial reference, a NaN guard) asks values_meaningless() and skips, visibly.
//
// A charge is made at an op's entry point, once per call (one line: `if (simhooks::charge_…)
// return;`, or `if (simhooks::skip_values(bytes)) return;` for a copy), never inside a loop. The
// byte counts use the same reads + writes per element as the planner (core/op_costs.hpp), so the
// simulator and the planner charge the same work.
#pragma once

#include <cstddef>

#include "core/gemm_model.hpp"

namespace meshtp::simhooks {

enum class Mode { kReal, kValues, kCharged };

struct Hooks {
  Mode mode = Mode::kReal;
  double (*clock)() = nullptr;           // simulated seconds since the simulation started
  void (*advance)(double seconds) = nullptr;  // occupy this rank's device for that long
  // Large buffers (Tensor storage of at least large_bytes). kCharged reserves address space
  // that nothing ever writes (no RAM, no page tables until touched), so 256 ranks of a GPT-3
  // layer fit in this machine's memory.
  void* (*allocate)(std::size_t bytes) = nullptr;
  void (*release)(void* p, std::size_t bytes) = nullptr;
  std::size_t large_bytes = std::size_t{1} << 20;
  // The device's GeMM time by shape (core/gemm_model.hpp): the topology's `device.gemm`, or
  // flat at the host's speed — the planner's model of the same device.
  GemmModel gemm;
  double elementwise_bytes_per_s = 0;  // the device's streaming rate for elementwise ops
  // The runtime's host time per local GeMM call of a 2D GeMM beyond the GeMM (the topology's
  // calibration.step_overhead_us; plan::gemm2d_estimate adds the same to each call).
  double step_overhead_s = 0;
  // The simulated model's bytes per element (fp16/bf16: 2, fp32: 4). The runtime holds fp32;
  // kCharged charges elementwise traffic and moves large messages (comm/smpi_device.hpp
  // wire_type) at this size, as the planner prices the model's precision.
  int element_bytes = 4;
  double charged_s = 0;                // total time charged so far (a ledger)
  // Layer folding (`meshtp simulate --fold-layers`, kCharged only): see fold_layers().
  bool fold_layers = false;
};

// This process's (simulated rank's) hooks. Set once, at MPI start-up, by the comm layer.
Hooks& hooks();

inline Mode mode() { return hooks().mode; }
inline bool simulated() { return hooks().mode != Mode::kReal; }
inline bool values_meaningless() { return hooks().mode == Mode::kCharged; }
const char* to_string(Mode mode);  // "real", "values", "charged"

// Charge work to this rank's simulated device. Returns true when the caller must skip the
// work (kCharged: the time was charged instead); false means "do it" (kReal, kValues).
// The op's own trace span (core/trace.hpp ScopedSpan, on the simulated clock) shows the charge.
bool charge_flops(double flops);                 // work known by its FLOPs, at the flat rate
bool charge_gemm(double m, double n, double k);  // one local GeMM, by its shape
bool charge_bytes(double bytes);             // elementwise traffic, counted in fp32 bytes
                                             // (op_costs.hpp), charged at element_bytes
bool charge(double flops, double bytes);     // both
bool charge_fp32_bytes(double bytes);        // elementwise traffic that stays fp32 whatever
                                             // the precision (the optimizer's state)
// One step of a pipelined 2D GeMM (tensor/gemm.hpp's gemm_in_bands, once per call): its host
// time beyond the GeMM, step_overhead_s. Nothing is skipped: the step's GeMM charges itself.
void charge_step_overhead();
// The attention core of `pairs` (sequence, head) pairs (core/gemm_model.hpp's products) and
// its softmax's `bytes`.
bool charge_attention(double seq, double head_dim, double pairs, bool backward, double bytes);

// Layer folding. A block stack's blocks are identical: the same shapes, the same collectives
// on the same groups, the same charges. With folding on (kCharged and hooks().fold_layers),
// model::Stack runs its first block of each forward and backward and charges every further
// block the simulated time the first took (advance_seconds; core/stats.hpp now_seconds is
// the simulated clock), instead of running it — what a
// 96-layer pipeline step costs to simulate then grows with the stages, not the layers.
// Everything around the blocks still runs: each block's hooks (data-parallel buckets started
// as its backward ends, ZeRO-3 gathers), the embedding, the head, the optimizer over every
// parameter. What it leaves out: a later block's own interference with traffic outside the
// stack (it is charged as the first block's time). docs/simulation.md measures its error.
inline bool fold_layers() { return hooks().mode == Mode::kCharged && hooks().fold_layers; }
void advance_seconds(double seconds);  // occupy this rank's device, counted as charged

// Storage for buffers: the hook's for large ones in kCharged, malloc otherwise.
void* allocate(std::size_t bytes);
void release(void* p, std::size_t bytes);
// Data movements (and messages: comm/smpi_device.hpp) of at least this many bytes are skipped
// in kCharged. Small enough that no copy into a large reserved buffer touches its pages (a
// 2D GeMM moves slices of a few hundred KiB one at a time), large enough that the small
// buffers of bookkeeping still carry their values.
inline constexpr std::size_t kNoCopyBytes = std::size_t{64} << 10;

// True when writing `bytes` of values is work for nothing: kCharged and at least kNoCopyBytes
// (values are meaningless there). Every data movement that is not communication asks this at
// its entry and returns: filling a buffer, copying or slicing a tensor, packing blocks for a
// collective and unpacking them, redistribute's copies. They are free, not charged: the
// planner prices no copies (only the elementwise ops of core/op_costs.hpp), so both count
// the same work. Skipping also keeps the reserved storage of large buffers untouched (no RAM).
bool skip_values(std::size_t bytes);

}  // namespace meshtp::simhooks

namespace meshtp {

// Work repeated identically (a block stack's layers: the same shapes, collectives and
// charges), as its caller declares it; whether to fold it is the simulation's policy
// (simhooks::fold_layers above), not the caller's. run(work) runs it — or, folded, times the
// first run on the simulated clock and charges every later one that time instead of running.
class RepeatedWork {
 public:
  bool folded() const { return folded_; }
  template <class Work>
  void run(Work&& work) {
    if (!folded_) {
      work();
    } else if (first_s_ >= 0) {
      simhooks::advance_seconds(first_s_);
    } else {
      const double t0 = simhooks::hooks().clock();  // folding is on: the simulated clock is set
      work();
      first_s_ = simhooks::hooks().clock() - t0;
    }
  }

 private:
  bool folded_ = simhooks::fold_layers();
  double first_s_ = -1;
};

}  // namespace meshtp
