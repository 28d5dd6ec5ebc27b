// Communicator: a process group and the collectives meshtp runs on it, over Open MPI.
//
// Error policy: every size is validated before the MPI call (a mismatch throws
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
  friend class Communicator;
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

class Communicator {
 public:
  // MPI_COMM_WORLD (requires an Environment).
  static Communicator world();

  int rank() const;
  int size() const;

  // Ranks with equal color form a group, ordered by key (ties by current rank). Collective.
  // `label` names the group in watchdog errors (e.g. "mesh 2x2 dim 1").
  Communicator split(int color, int key, std::string label = {}) const;
  const std::string& label() const;

  template <typename T> void all_reduce(std::span<T> buf, ReduceOp op = ReduceOp::kSum) const;
  template <typename T> void all_gather(std::span<const T> send, std::span<T> recv) const;
  template <typename T>
  void reduce_scatter(std::span<const T> send, std::span<T> recv,
                      ReduceOp op = ReduceOp::kSum) const;
  template <typename T> void broadcast(std::span<T> buf, int root) const;
  template <typename T>
  void reduce(std::span<const T> send, std::span<T> recv, int root,
              ReduceOp op = ReduceOp::kSum) const;
  template <typename T> void all_to_all(std::span<const T> send, std::span<T> recv) const;
  template <typename T> void send(std::span<const T> buf, int dest, int tag = 0) const;
  template <typename T> void recv(std::span<T> buf, int source, int tag = 0) const;
  template <typename T>
  void sendrecv(std::span<const T> send, int dest, std::span<T> recv, int source,
                int tag = 0) const;
  void barrier() const;

  template <typename T>
  [[nodiscard]] Request iall_reduce(std::span<T> buf, ReduceOp op = ReduceOp::kSum) const;
  template <typename T>
  [[nodiscard]] Request iall_gather(std::span<const T> send, std::span<T> recv) const;
  template <typename T>
  [[nodiscard]] Request ireduce_scatter(std::span<const T> send, std::span<T> recv,
                                        ReduceOp op = ReduceOp::kSum) const;
  template <typename T> [[nodiscard]] Request ibroadcast(std::span<T> buf, int root) const;
  template <typename T>
  [[nodiscard]] Request iall_to_all(std::span<const T> send, std::span<T> recv) const;
  template <typename T>
  [[nodiscard]] Request isend(std::span<const T> buf, int dest, int tag = 0) const;
  template <typename T> [[nodiscard]] Request irecv(std::span<T> buf, int source, int tag = 0) const;
  [[nodiscard]] Request ibarrier() const;

  // How many members of this group share this rank's node (memory). Collective.
  int ranks_on_this_node() const;

  // Same group (compares membership and order, not handle identity).
  bool same_group(const Communicator& other) const;
  // Files this group's traffic under `label` in comm_ledger() (shared by copies).
  void set_traffic_label(int label);

  struct Impl;  // opaque outside the comm layer (mpi_impl.hpp)

 private:
  explicit Communicator(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
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
