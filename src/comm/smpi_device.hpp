// The simulated device behind a rank of the simulated build (MESHTP_SIMULATE): installs
// core/simulation.hpp's hooks from the SMPI platform and the environment. Private to the
// comm layer.
//
//   MESHTP_SIM_MODE=charged (default) | values   core/simulation.hpp's kCharged / kValues
//   GeMM rate          the simulated host's speed (the platform's <host speed=…>, FLOP/s)
//   elementwise rate   the platform property `meshtp_elementwise_gbps` (host or zone, as
//                      topo/simgrid.hpp writes it), else MESHTP_SIM_ELEMENTWISE_GBPS, else
//                      100 GB/s (the planner's default for topologies without one)
//   large buffers      Tensor storage ≥ MESHTP_SIM_LARGE_BYTES (default 1 MiB) in charged mode
//                      is reserved address space that nothing writes (no RAM used)
//   launch cost        the platform property `meshtp_launch_us` (the topology's launch_us,
//                      topo/simgrid.hpp), else 0: in charged mode each communication engine
//                      waits it before every collective it runs (engine_launch below)
//
// The simulated binary must run with --cfg=smpi/simulate-computation:no (it charges compute
// itself; SMPI would otherwise add the host CPU time spent between MPI calls).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <string>

#include "core/simulation.hpp"

namespace meshtp::comm::smpi {

// Ends the whole simulation with "error: simulated meshtp: <message>" (a device or engine
// rank that cannot go on: bad platform properties, an unknown communicator).
[[noreturn]] void die(const std::string& message);

// On a device rank, after MPI start-up.
void install_device(MPI_Comm devices);
// On an engine rank, after MPI start-up.
void install_engine();
// On an engine rank, before each collective: T_launch, the fixed cost of one collective call
// that the planner's ring model charges, T = T_launch + (P−1)·(L + shard/B)
// (plan/mesh_links.hpp). The engine sleeps it (charged mode; nothing in values mode): the
// collective starts T_launch after its command, and the engine's host — the device — keeps
// computing meanwhile, as a GPU's compute stream does while a collective kernel is launched.
// Every member's engine waits it, so a lone collective takes T_launch + the algorithm's time,
// what the planner prices; like the planner's, the launches of one engine's collectives add
// up and the engines of different mesh dims overlap them.
void engine_launch();
// The reduction an engine applies: `op` itself, except in charged mode for buffers of at
// least kNoCopyBytes, where a no-op (values are meaningless there, and reducing 256 ranks'
// buffers for real would be the host's work, not the simulated devices').
MPI_Op engine_op(MPI_Op op, MPI_Datatype type, int count);

// The buffers an engine hands SMPI for a collective of these sizes. In charged mode, for
// messages of at least kNoCopyBytes, stand-ins of exactly those sizes instead of the device's
// buffers (address space nothing writes, registered with SMPI so that its collective
// algorithms skip their internal copies; an in-place send gets its own stand-in): the device's
// buffers are never touched and no engine touches a large page. Otherwise the buffers
// themselves.
struct EngineBuffers {
  const void* send;
  void* recv;
};
EngineBuffers engine_buffers(const void* send, void* recv, std::size_t send_bytes,
                             std::size_t recv_bytes);

// memcpy, except in charged mode for buffers of at least kNoCopyBytes (meaningless there).
void copy_unless_meaningless(void* dst, const void* src, std::size_t bytes);

// A temporary buffer for an engine: reserved address space, so it costs RAM only where the
// collective writes it (nothing, for large buffers in charged mode).
class Scratch {
 public:
  explicit Scratch(std::size_t bytes);
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  void* data() const { return data_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// Messages at least this large are never copied in charged mode; it is also SMPI's
// smpi/send-is-detached-thresh, below which SMPI copies a send into a buffer of its own that
// the copy step frees — those are copied as usual.
inline constexpr int kNoCopyBytes = static_cast<int>(simhooks::kNoCopyBytes);

}  // namespace meshtp::comm::smpi
