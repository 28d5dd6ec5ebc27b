// The simulated device (smpi_device.hpp). Compiled only with MESHTP_SIMULATE.
#include "comm/smpi_device.hpp"

#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/NetZone.hpp>
#include <smpi/smpi.h>
#include <xbt/config.h>

#include <sys/mman.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <algorithm>
#include <map>
#include <string>
#include <unordered_set>

#include "core/simulation.hpp"

namespace meshtp::comm::smpi {
namespace {

constexpr const char* kElementwiseProperty = "meshtp_elementwise_gbps";
constexpr const char* kGemmProperty = "meshtp_gemm";
constexpr const char* kLaunchProperty = "meshtp_launch_us";
constexpr const char* kStepOverheadProperty = "meshtp_step_overhead_us";

struct DeviceState {
  simhooks::Mode mode = simhooks::Mode::kCharged;
  double host_flops = 0;  // the simulated host's speed
  timespec launch{};      // engine: T_launch of one collective (charged mode)
  MPI_Op no_op = MPI_OP_NULL;
  int element_bytes = 4;               // the simulated model's precision (MESHTP_SIM_ELEMENT_BYTES)
  std::unordered_set<void*> reserved;  // large buffers from reserve()
  // Engine: its stand-in buffers, one per (send | receive, size in bytes), kept for the run.
  std::map<std::size_t, void*> stand_in[2];
};

DeviceState& device() {
  static DeviceState d;
  return d;
}

double positive_from_env(const char* name, double fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (*end != '\0' || !(v > 0)) die(std::string(name) + "='" + text + "' is not a positive number");
  return v;
}

simhooks::Mode mode_from_env() {
  const char* text = std::getenv("MESHTP_SIM_MODE");
  const std::string mode = text == nullptr ? "" : text;
  if (mode.empty() || mode == "charged") return simhooks::Mode::kCharged;
  if (mode == "values") return simhooks::Mode::kValues;
  die("MESHTP_SIM_MODE='" + mode + "' is neither 'charged' nor 'values'");
}

// `name` in a property map, or nullptr.
const char* find_property(const std::unordered_map<std::string, std::string>* props,
                          const char* name) {
  if (props == nullptr) return nullptr;
  const auto it = props->find(name);
  return it == props->end() ? nullptr : it->second.c_str();
}

// The platform's property `name`: on this rank's host, else on its zone or an enclosing one
// (topo/simgrid.hpp writes the device's properties on the zone).
const char* platform_property(const char* name) {
  const simgrid::s4u::Host* host = simgrid::s4u::Host::current();
  if (const char* v = find_property(host->get_properties(), name)) return v;
  // Up to the root zone, whose get_parent() SimGrid 3.32 does not guard (a null dereference).
  const simgrid::s4u::NetZone* root = simgrid::s4u::Engine::get_instance()->get_netzone_root();
  for (const simgrid::s4u::NetZone* z = host->get_englobing_zone(); z != nullptr;
       z = z == root ? nullptr : z->get_parent()) {
    if (const char* v = find_property(z->get_properties(), name)) return v;
  }
  return nullptr;
}

// The engine's clock, what PMPI_Wtime returns under smpi/wtime:0 — without PMPI_Wtime's
// SMPI benchmark guard, which reads the thread's CPU clock twice (two system calls) on every
// call: a trace span reads the clock twice per op, and those reads were a third of the MPI
// calls of a simulated step.
double simulated_seconds() { return simgrid::s4u::Engine::get_clock(); }

void advance(double seconds) { smpi_execute_flops(seconds * device().host_flops); }

// Large buffers in charged mode: address space that nothing writes, so no RAM and no page
// tables (SMPI_SHARED_MALLOC would map and populate a shared block over every allocation:
// measured 28 s for 64 ranks × 2 GiB, and one mapping per block against vm.max_map_count).
void* reserve(std::size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) return nullptr;
  device().reserved.insert(p);
  return p;
}
void unreserve(void* p, std::size_t bytes) {
  if (device().reserved.erase(p) == 0) {
    std::free(p);  // allocated by malloc before the hooks were installed
    return;
  }
  munmap(p, bytes);
}

void no_op(void*, void*, int*, MPI_Datatype*) {}

// SMPI's copy step for a delivered message, except for large ones in charged mode: their
// contents are meaningless, and copying them is host work that no simulated device does.
// SMPI hands its copy callback the communication as the activity it is (a CommImpl, whose
// only base is the ActivityImpl: same address), and its own copy step wants it back.
void copy_small_messages(smx_activity_t activity, void* buff, size_t bytes) {
  if (bytes >= static_cast<size_t>(kNoCopyBytes)) return;
  smpi_comm_copy_buffer_callback(reinterpret_cast<simgrid::kernel::activity::CommImpl*>(activity),
                                 buff, bytes);
}

void common_setup() {
  if (sg_cfg_get_boolean("smpi/simulate-computation") != 0) {
    die("run with --cfg=smpi/simulate-computation:no: meshtp charges its compute to the "
        "simulated devices itself (`meshtp simulate` passes every option)");
  }
  device().mode = mode_from_env();
  const char* bytes = std::getenv("MESHTP_SIM_ELEMENT_BYTES");
  const std::string element_bytes = bytes == nullptr ? "4" : bytes;
  if (element_bytes != "2" && element_bytes != "4") {
    die("MESHTP_SIM_ELEMENT_BYTES='" + element_bytes + "' is neither 2 (fp16, bf16) nor 4 (fp32)");
  }
  device().element_bytes = element_bytes == "2" ? 2 : 4;
  if (device().mode == simhooks::Mode::kCharged) {
    smpi_comm_set_copy_data_callback(copy_small_messages);
  }
}

}  // namespace

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "error: simulated meshtp: %s\n", message.c_str());
  std::fflush(stderr);
  PMPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

void install_device(MPI_Comm) {
  common_setup();
  DeviceState& d = device();
  d.host_flops = simgrid::s4u::Host::current()->get_speed();
  simhooks::Hooks& h = simhooks::hooks();
  h.mode = d.mode;
  h.clock = simulated_seconds;
  h.advance = advance;
  h.gemm = GemmModel(d.host_flops);
  if (const char* gemm = platform_property(kGemmProperty)) {
    // topo/simgrid.cpp's order: peak efficiency units tile_m tile_n split_k_min kernel_us
    // memory_gbps.
    GemmModel g;
    if (std::sscanf(gemm, "%lf %lf %d %d %d %d %lf %lf", &g.peak_tflops, &g.efficiency, &g.units,
                    &g.tile_m, &g.tile_n, &g.split_k_min, &g.kernel_us, &g.memory_gbps) != 8) {
      die(std::string("platform property ") + kGemmProperty + "='" + gemm +
          "' is not 8 numbers (peak efficiency units tile_m tile_n split_k_min kernel_us "
          "memory_gbps)");
    }
    try {
      g.validate(kGemmProperty);
    } catch (const std::exception& e) {
      die(e.what());
    }
    h.gemm = g;
  }
  h.element_bytes = d.element_bytes;
  const char* prop = platform_property(kElementwiseProperty);
  const double gbps = prop != nullptr ? std::strtod(prop, nullptr)
                                      : positive_from_env("MESHTP_SIM_ELEMENTWISE_GBPS", 100.0);
  if (!(gbps > 0)) {
    die(std::string("platform property ") + kElementwiseProperty + "='" + prop +
        "' is not a positive rate");
  }
  h.elementwise_bytes_per_s = gbps * 1e9;
  // Platforms written before the property existed charge nothing.
  const char* step = platform_property(kStepOverheadProperty);
  const double step_us = step != nullptr ? std::strtod(step, nullptr) : 0.0;
  if (!(step_us >= 0) || step_us > 1e6) {
    die(std::string("platform property ") + kStepOverheadProperty + "='" + step +
        "' is not a time in microseconds in [0, 1e6]");
  }
  h.step_overhead_s = step_us * 1e-6;
  if (d.mode == simhooks::Mode::kCharged) {
    h.allocate = reserve;
    h.release = unreserve;
    h.large_bytes = static_cast<std::size_t>(
        positive_from_env("MESHTP_SIM_LARGE_BYTES", static_cast<double>(h.large_bytes)));
  }
}

void install_engine() {
  common_setup();
  DeviceState& d = device();
  PMPI_Op_create(no_op, 1, &d.no_op);
  const char* prop = platform_property(kLaunchProperty);
  const double us = prop != nullptr ? std::strtod(prop, nullptr) : 0.0;
  if (!(us >= 0) || us > 1e12) {
    die(std::string("platform property ") + kLaunchProperty + "='" + prop +
        "' is not a launch time in microseconds >= 0");
  }
  if (d.mode == simhooks::Mode::kCharged) {
    const auto ns = static_cast<long long>(std::llround(us * 1e3));
    d.launch.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
    d.launch.tv_nsec = static_cast<long>(ns % 1'000'000'000);
  }
}

void engine_launch() {
  const timespec& t = device().launch;
  // smpi_nanosleep: the actor sleeps on the simulated clock (no CPU of the host is taken).
  if (t.tv_sec > 0 || t.tv_nsec > 0) smpi_nanosleep(&t, nullptr);
}

void copy_unless_meaningless(void* dst, const void* src, std::size_t bytes) {
  if (device().mode == simhooks::Mode::kCharged &&
      bytes >= static_cast<std::size_t>(kNoCopyBytes)) {
    return;
  }
  std::memcpy(dst, src, bytes);
}

Scratch::Scratch(std::size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  data_ = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
               -1, 0);
  if (data_ == MAP_FAILED) die("cannot reserve " + std::to_string(bytes) + " bytes of scratch");
}

Scratch::~Scratch() {
  if (data_ != nullptr) munmap(data_, bytes_);
}

// A stand-in buffer of exactly `bytes`, allocated once per (role, size) and never freed (it
// is address space: SMPI never writes a page of it, and SMPI's local shared-malloc mode
// cannot free a partially shared block). It is SMPI's "partially shared" allocation with no
// shared part, i.e. one private block covering it all: SMPI's Datatype::copy skips a copy
// whose source or destination is a shared allocation holding exactly one private block of
// exactly the copied size. That is what makes SMPI's collective algorithms copy nothing:
// ring reduce-scatter's copy of the whole send buffer into its accumulator, ring
// all-gather's copy of the own block, the copy of the result out.
void* stand_in(int role, std::size_t bytes) {
  void*& p = device().stand_in[role][bytes];
  if (p == nullptr) {
    std::size_t no_shared_part[2] = {0, 0};
    p = SMPI_PARTIAL_SHARED_MALLOC(bytes, no_shared_part, 0);
  }
  return p;
}

EngineBuffers engine_buffers(const void* send, void* recv, std::size_t send_bytes,
                             std::size_t recv_bytes) {
  const DeviceState& d = device();
  if (d.mode != simhooks::Mode::kCharged ||
      std::max(send_bytes, recv_bytes) < static_cast<std::size_t>(kNoCopyBytes)) {
    return {send, recv};
  }
  // MPI_IN_PLACE becomes a separate send buffer when its size is given: SMPI copies an
  // in-place all-reduce or reduce-scatter's input into a temporary of its own first.
  const bool own_send = send != nullptr && send_bytes > 0;
  return {own_send ? stand_in(0, send_bytes) : send,
          recv == nullptr || recv_bytes == 0 ? recv : stand_in(1, recv_bytes)};
}

MPI_Datatype wire_type(MPI_Datatype type, int count) {
  const DeviceState& d = device();
  if (type != MPI_FLOAT || d.mode != simhooks::Mode::kCharged || d.element_bytes != 2 ||
      2.0 * count < static_cast<double>(kNoCopyBytes)) {
    return type;
  }
  return MPI_UINT16_T;
}

MPI_Op engine_op(MPI_Op op, MPI_Datatype type, int count) {
  if (op == MPI_OP_NULL || device().mode != simhooks::Mode::kCharged) return op;
  int size = 0;
  PMPI_Type_size(type, &size);
  return static_cast<double>(size) * count >= kNoCopyBytes ? device().no_op : op;
}

}  // namespace meshtp::comm::smpi
