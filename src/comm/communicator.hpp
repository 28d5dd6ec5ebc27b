// Communicator: a process group and the collectives meshtp runs on it — the collectives half of
// the runtime's seam (docs/seam.md). The layers call this front; a transport behind it
// (comm/transport.hpp) moves the bytes: Open MPI on host memory, or nothing at all for a rank
// that runs alone (TransportKind below). Algorithms never see which.
//
// Error policy: every size is validated before the transport's call (a mismatch throws
// meshtp::Error naming the sizes, and the CLI then aborts the job so no peer hangs in the
// collective); MPI failures become meshtp::Error with the call, the group size and MPI's
// own message. `<mpi.h>` is included only by the comm layer's .cpp files.
//
// Buffer conventions (count = elements, P = size()):
//   all_reduce(buf)            in place; every rank ends with op over ranks of buf
//   all_gather(send, recv)     recv = [send of rank 0 | … | send of rank P-1], |recv| = P·|send|
//   reduce_scatter(send, recv) |send| = P·|recv|; rank r gets op over ranks of send block r
//   broadcast(buf, root)       in place
//   reduce(send, recv, root)   recv (only read at root, |recv| = |send|) = op over ranks
//   all_to_all(send, recv)     |send| = |recv| = P·block; block j of send goes to rank j,
//                              block i of recv came from rank i
//   all_to_allv(send, send_counts, recv, recv_counts)
//                              P counts each; send holds P blocks packed in rank order, block j
//                              (send_counts[j] elements) going to rank j; recv's block i
//                              (recv_counts[i] elements) came from rank i. Pairwise agreement
//                              (rank i's send_counts[j] = rank j's recv_counts[i]) is the
//                              caller's: exchange the counts first (an all_to_all of them)
// The i-prefixed versions start the same operation and return a Request; the buffers must
// stay alive and untouched until it completes.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/device_memory.hpp"
#include "core/element.hpp"
#include "core/view.hpp"
#include "layout/vocabulary.hpp"

namespace meshtp::comm {

enum class ReduceOp { kSum, kMax };

// A pending non-blocking operation. Move-only; an empty Request is already complete.
// then() attaches a completion step (e.g. unpacking a gathered buffer) that runs exactly
// once, on the first wait() or successful test().
class Request {
 public:
  Request();
  ~Request();
  Request(Request&&) noexcept;
  Request& operator=(Request&&) noexcept;
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  void wait();
  bool test();
  bool pending() const;
  Request& then(std::function<void()> on_complete);

  struct Impl;  // opaque outside the comm layer (mpi_impl.hpp)

 private:
  std::unique_ptr<Impl> impl_;
  friend class MpiTransport;
  friend struct RequestAccess;
};

void wait_all(std::span<Request> requests);

// What this rank sent with one collective kind on groups of one label, while counting.
struct TrafficCount {
  std::int64_t launches = 0;       // calls that sent something (a group of one sends nothing)
  std::int64_t message_bytes = 0;  // Σ message n over those calls (exact)
  double sent_bytes = 0;           // Σ layout::sent_bytes(kind, P, n) over those calls
};

// Time spent inside blocking collectives and Request::wait on this process: the
// "waiting on communication" figure of the layer benchmarks. With count_traffic on, also the
// bytes this rank sends, per collective kind and group label (DeviceMesh labels its dim-d
// group d; other groups are -1), as layout/gemm2d_traffic.hpp defines them: the message n of
// all_gather is the gathered buffer, of reduce_scatter the scattered one, of the others the
// buffer sent; receives send nothing. Off by default: one branch per call.
struct CommLedger {
  static constexpr int kLabels = 4;  // -1 and mesh dims 0, 1, 2
  double wait_seconds = 0.0;
  std::int64_t calls = 0;
  bool count_traffic = false;
  std::array<std::array<TrafficCount, kLabels>, layout::all<layout::CollectiveKind>().size()>
      counts{};
  TrafficCount& traffic(layout::CollectiveKind kind, int label);  // label in -1..kLabels-2
  const TrafficCount& traffic(layout::CollectiveKind kind, int label) const {
    return const_cast<CommLedger&>(*this).traffic(kind, label);
  }
  void reset_traffic() { counts = {}; }
};
CommLedger& comm_ledger();

// What a transport moves: a buffer whose element type travels as a value, so one virtual
// call serves every type (the templates below make them from spans).
struct Buffer {
  void* data = nullptr;
  Element type = Element::kF32;
  std::size_t count = 0;
};
struct ConstBuffer {
  const void* data = nullptr;
  Element type = Element::kF32;
  std::size_t count = 0;
};
template <typename T> Buffer buffer_of(std::span<T> s) { return {s.data(), element_of<T>(), s.size()}; }
template <typename T> ConstBuffer buffer_of(std::span<const T> s) {
  return {s.data(), element_of<T>(), s.size()};
}

// A view (core/view.hpp) as a message: its rows·cols elements, which must be packed
// (contiguous); a strided view is refused, naming it. What the layers on the seam send.
Buffer buffer_of(const View& v);
ConstBuffer const_buffer_of(const View& v);

// Which transport carries a group's messages (comm/transport.hpp):
//   kMpi    Open MPI on host memory: every rank a process of the job;
//   kAlone  no peer: this process plays one rank of a group it is alone in. Every operation is
//           validated and counted (comm_ledger's traffic, as kMpi counts it) but moves nothing:
//           a receive keeps what its buffer held, a collective leaves this rank's own part
//           (all_gather its own slot, reduce_scatter its own block, all_reduce its own values).
//           `meshtp bench rank` runs one rank of a big layout on it and prices the counted
//           traffic apart.
//   kHostStaged  buffers in device memory (a GPU's), moved by a host transport through
//           page-locked host copies (host_staged_transport.cpp): any number of ranks may share
//           one device;
//   kNccl   buffers in device memory, moved by NCCL on a stream of its own
//           (nccl_transport.cpp): one rank per device.
enum class TransportKind { kMpi, kAlone, kHostStaged, kNccl };
const char* to_string(TransportKind kind);  // "mpi", "alone", "host-staged", "nccl"

class Transport;  // comm/transport.hpp: the implementations' interface

// True when this meshtp was built with NCCL (meshtp_comm_nccl).
bool nccl_available();

// A process group and its collectives: the front every distributed layer calls. It validates
// every size (the same checks whatever the transport), counts traffic, then hands the call to
// its transport.
class Communicator {
 public:
  // MPI_COMM_WORLD (requires an Environment).
  static Communicator world();
  // Rank `rank` of a group of `size` whose other members do not exist (kAlone, above).
  static Communicator alone(int rank, int size, std::string label = "an alone group");
  // The group of `host` (an mpi or alone one) for buffers in `memory` (kHostStaged, above):
  // every buffer in `memory` is staged; a host buffer (DeviceMemory::holds false: a loss, a
  // norm, a count) travels as it is. Its splits are staged too.
  static Communicator host_staged(const Communicator& host, std::shared_ptr<DeviceMemory> memory);
  // The group of `host` (mpi) over NCCL on this rank's current CUDA device (kNccl, above); the
  // NCCL id travels over `host`. `compute_stream` (a cudaStream_t) is the stream the layers
  // compute on: each collective waits for the work queued there, and work queued there after
  // a blocking collective sees its result. Throws, naming the reason, when meshtp was built
  // without NCCL or there is no GPU. Collective over `host`. Defined in the target
  // meshtp_comm_nccl (nccl_transport.cpp, or no_nccl.cpp without NCCL), so that only what
  // runs on GPUs loads NCCL. `memory` tells device buffers from host ones: host buffers (a
  // loss, a norm, a count) travel over `host`, since NCCL moves device memory only.
  static Communicator nccl(const Communicator& host, void* compute_stream,
                           std::shared_ptr<DeviceMemory> memory);

  int rank() const;
  int size() const;
  TransportKind transport() const;

  // Ranks with equal color form a group, ordered by key (ties by current rank). Collective.
  // `label` names the group in watchdog errors (e.g. "mesh 2x2 dim 1"). An alone group cannot
  // split (it does not know the others' colors): it throws.
  Communicator split(int color, int key, std::string label = {}) const;
  const std::string& label() const;

  template <typename T> void all_reduce(std::span<T> buf, ReduceOp op = ReduceOp::kSum) const {
    all_reduce(buffer_of(buf), op);
  }
  template <typename T> void all_gather(std::span<const T> send, std::span<T> recv) const {
    all_gather(buffer_of(send), buffer_of(recv));
  }
  template <typename T>
  void reduce_scatter(std::span<const T> send, std::span<T> recv,
                      ReduceOp op = ReduceOp::kSum) const {
    reduce_scatter(buffer_of(send), buffer_of(recv), op);
  }
  template <typename T> void broadcast(std::span<T> buf, int root) const {
    broadcast(buffer_of(buf), root);
  }
  template <typename T>
  void reduce(std::span<const T> send, std::span<T> recv, int root,
              ReduceOp op = ReduceOp::kSum) const {
    reduce(buffer_of(send), buffer_of(recv), root, op);
  }
  template <typename T> void all_to_all(std::span<const T> send, std::span<T> recv) const {
    all_to_all(buffer_of(send), buffer_of(recv));
  }
  template <typename T>
  void all_to_allv(std::span<const T> send, std::span<const std::int64_t> send_counts,
                   std::span<T> recv, std::span<const std::int64_t> recv_counts) const {
    all_to_allv(buffer_of(send), send_counts, buffer_of(recv), recv_counts);
  }
  template <typename T> void send(std::span<const T> buf, int dest, int tag = 0) const {
    send(buffer_of(buf), dest, tag);
  }
  template <typename T> void recv(std::span<T> buf, int source, int tag = 0) const {
    recv(buffer_of(buf), source, tag);
  }
  template <typename T>
  void sendrecv(std::span<const T> send, int dest, std::span<T> recv, int source,
                int tag = 0) const {
    sendrecv(buffer_of(send), dest, buffer_of(recv), source, tag);
  }
  void barrier() const;

  template <typename T>
  [[nodiscard]] Request iall_reduce(std::span<T> buf, ReduceOp op = ReduceOp::kSum) const {
    return iall_reduce(buffer_of(buf), op);
  }
  template <typename T>
  [[nodiscard]] Request iall_gather(std::span<const T> send, std::span<T> recv) const {
    return iall_gather(buffer_of(send), buffer_of(recv));
  }
  template <typename T>
  [[nodiscard]] Request ireduce_scatter(std::span<const T> send, std::span<T> recv,
                                        ReduceOp op = ReduceOp::kSum) const {
    return ireduce_scatter(buffer_of(send), buffer_of(recv), op);
  }
  template <typename T> [[nodiscard]] Request ibroadcast(std::span<T> buf, int root) const {
    return ibroadcast(buffer_of(buf), root);
  }
  template <typename T>
  [[nodiscard]] Request iall_to_all(std::span<const T> send, std::span<T> recv) const {
    return iall_to_all(buffer_of(send), buffer_of(recv));
  }
  template <typename T>
  [[nodiscard]] Request iall_to_allv(std::span<const T> send,
                                     std::span<const std::int64_t> send_counts, std::span<T> recv,
                                     std::span<const std::int64_t> recv_counts) const {
    return iall_to_allv(buffer_of(send), send_counts, buffer_of(recv), recv_counts);
  }
  template <typename T>
  [[nodiscard]] Request isend(std::span<const T> buf, int dest, int tag = 0) const {
    return isend(buffer_of(buf), dest, tag);
  }
  template <typename T> [[nodiscard]] Request irecv(std::span<T> buf, int source, int tag = 0) const {
    return irecv(buffer_of(buf), source, tag);
  }
  [[nodiscard]] Request ibarrier() const;

  // The same operations on type-erased buffers (what the templates call). Send and receive
  // buffers of one call have one element type.
  void all_reduce(Buffer buf, ReduceOp op) const;
  void all_gather(ConstBuffer send, Buffer recv) const;
  void reduce_scatter(ConstBuffer send, Buffer recv, ReduceOp op) const;
  void broadcast(Buffer buf, int root) const;
  void reduce(ConstBuffer send, Buffer recv, int root, ReduceOp op) const;
  void all_to_all(ConstBuffer send, Buffer recv) const;
  void all_to_allv(ConstBuffer send, std::span<const std::int64_t> send_counts, Buffer recv,
                   std::span<const std::int64_t> recv_counts) const;
  void send(ConstBuffer buf, int dest, int tag) const;
  void recv(Buffer buf, int source, int tag) const;
  void sendrecv(ConstBuffer send, int dest, Buffer recv, int source, int tag) const;
  [[nodiscard]] Request iall_reduce(Buffer buf, ReduceOp op) const;
  [[nodiscard]] Request iall_gather(ConstBuffer send, Buffer recv) const;
  [[nodiscard]] Request ireduce_scatter(ConstBuffer send, Buffer recv, ReduceOp op) const;
  [[nodiscard]] Request ibroadcast(Buffer buf, int root) const;
  [[nodiscard]] Request iall_to_all(ConstBuffer send, Buffer recv) const;
  [[nodiscard]] Request iall_to_allv(ConstBuffer send, std::span<const std::int64_t> send_counts,
                                     Buffer recv, std::span<const std::int64_t> recv_counts) const;
  [[nodiscard]] Request isend(ConstBuffer buf, int dest, int tag) const;
  [[nodiscard]] Request irecv(Buffer buf, int source, int tag) const;

  // How many members of this group share this rank's node (memory). Collective.
  int ranks_on_this_node() const;

  // Same group (compares membership and order, not handle identity).
  bool same_group(const Communicator& other) const;
  // Played alone: an alone group, or a device group staged over one (kAlone above). Such a
  // group cannot split (its peers' colors are unknown); alone_group gives the group of `size`
  // in which this rank is `rank`, of the same kind (staged through the same memory).
  bool runs_alone() const;
  Communicator alone_group(int rank, int size, std::string label) const;
  // Files this group's traffic under `label` in comm_ledger() (shared by copies).
  void set_traffic_label(int label);

  explicit Communicator(std::shared_ptr<Transport> transport);

 private:
  void count(layout::CollectiveKind kind, std::size_t bytes) const;
  std::shared_ptr<Transport> transport_;
};

// Owns MPI's lifetime: MPI_Init_thread in the constructor, MPI_Finalize in the destructor.
// Every Communicator must be destroyed before it.
class Environment {
 public:
  Environment(int& argc, char**& argv);
  ~Environment();
  Environment(const Environment&) = delete;
  Environment& operator=(const Environment&) = delete;
};

// Kills every rank of the job (MPI_Abort on the world) with this exit code.
[[noreturn]] void abort_job(int exit_code);

}  // namespace meshtp::comm
