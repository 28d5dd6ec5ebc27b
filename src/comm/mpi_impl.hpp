// Private to the comm layer: the MPI handles behind Communicator and Request, the dtype and
// reduce-op translation tables, and the validation run before every MPI call.
#pragma once

#include <mpi.h>
#ifdef MESHTP_SIMULATE
#include "comm/smpi_routing.hpp"  // the simulated build's collectives and world
#endif

#include <climits>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/transport.hpp"
#include "comm/watchdog.hpp"
#include "core/error.hpp"
#include "core/stats.hpp"
#include "core/trace.hpp"

namespace meshtp::comm {

// One MPI communicator and what the watchdog knows of it.
struct MpiGroup {
  // Fills the watchdog's view of the group: world ranks, id, label; registers it.
  MpiGroup(MPI_Comm comm, bool owns, std::string group_label);
  ~MpiGroup();
  MpiGroup(const MpiGroup&) = delete;
  MpiGroup& operator=(const MpiGroup&) = delete;

  MPI_Comm handle = MPI_COMM_NULL;
  bool owned = false;  // split results are freed by us; the world is not
  int rank = 0;
  int size = 1;
  // For the watchdog (watchdog.hpp): what to call the group in a message, its members'
  // world ranks, an id equal on every member, and how many collectives this rank has
  // started on it (the members start them in the same order).
  std::string label;
  std::vector<int> world_ranks;
  std::uint64_t id = 0;
  std::int64_t started = 0;
};

// Open MPI on host memory: today's collectives, one file per operation.
class MpiTransport final : public Transport {
 public:
  explicit MpiTransport(std::shared_ptr<MpiGroup> group) : group_(std::move(group)) {}

  TransportKind kind() const override { return TransportKind::kMpi; }
  int rank() const override { return group_->rank; }
  int size() const override { return group_->size; }
  const std::string& label() const override { return group_->label; }
  std::shared_ptr<Transport> split(int color, int key, std::string label) const override;
  int ranks_on_this_node() const override;
  bool same_group(const Transport& other) const override;

  void all_reduce(Buffer buf, ReduceOp op) override;
  void all_gather(ConstBuffer send, Buffer recv) override;
  void reduce_scatter(ConstBuffer send, Buffer recv, ReduceOp op) override;
  void broadcast(Buffer buf, int root) override;
  void reduce(ConstBuffer send, Buffer recv, int root, ReduceOp op) override;
  void all_to_all(ConstBuffer send, Buffer recv) override;
  void all_to_allv(ConstBuffer send, std::span<const std::int64_t> send_counts, Buffer recv,
                   std::span<const std::int64_t> recv_counts) override;
  void send(ConstBuffer buf, int dest, int tag) override;
  void recv(Buffer buf, int source, int tag) override;
  void sendrecv(ConstBuffer send, int dest, Buffer recv, int source, int tag) override;
  void barrier() override;

  Request iall_reduce(Buffer buf, ReduceOp op) override;
  Request iall_gather(ConstBuffer send, Buffer recv) override;
  Request ireduce_scatter(ConstBuffer send, Buffer recv, ReduceOp op) override;
  Request ibroadcast(Buffer buf, int root) override;
  Request iall_to_all(ConstBuffer send, Buffer recv) override;
  Request iall_to_allv(ConstBuffer send, std::span<const std::int64_t> send_counts, Buffer recv,
                       std::span<const std::int64_t> recv_counts) override;
  Request isend(ConstBuffer buf, int dest, int tag) override;
  Request irecv(Buffer buf, int source, int tag) override;
  Request ibarrier() override;

 private:
  // A pending request on this group (counts towards its sequence unless peer ≥ 0).
  Request start(const char* op_name, int peer = -1) const;
  static MPI_Request* handle_of(Request& r);
  std::shared_ptr<MpiGroup> group_;
};

// How a transport other than MPI makes a Request (communicator.hpp's Request is opaque).
struct RequestAccess {
  static Request make(std::unique_ptr<Request::Impl> impl) {
    Request r;
    r.impl_ = std::move(impl);
    return r;
  }
};

// A blocking wait the watchdog may have to explain: which operation, on which group, and
// either the collective's sequence number on the group or the point-to-point peer.
struct WaitSite {
  const char* op = "";
  const MpiGroup* comm = nullptr;
  std::int64_t seq = 0;  // collectives: number of this one on the group (1-based)
  int peer = -1;         // point-to-point: the other rank (group rank); -1 for collectives
};

struct Request::Impl {
  // A collective (counts towards the group's sequence) or, with peer ≥ 0, a transfer.
  Impl(const char* op_name, const std::shared_ptr<MpiGroup>& group, int peer = -1)
      : name(op_name), start_s(now_seconds()), comm(group),
        site{op_name, group.get(), peer < 0 ? ++group->started : 0, peer} {}
  // An operation of a transport that completes by its own test (NCCL: a CUDA event):
  // poll(false) says whether it is complete, poll(true) waits for it (or throws, naming why
  // not). `comm` stays empty.
  Impl(const char* op_name, std::function<bool(bool wait)> poll_fn)
      : poll(std::move(poll_fn)), name(op_name), start_s(now_seconds()) {}
  MPI_Request handle = MPI_REQUEST_NULL;
  std::function<bool(bool wait)> poll;
  std::function<void()> on_complete;
  const char* name;  // for the trace: the span runs from start to completion
  double start_s;
  std::shared_ptr<MpiGroup> comm;  // keeps the group alive for the watchdog
  WaitSite site;
};

// ---- the watchdog (watchdog.cpp) ------------------------------------------------------

namespace detail {
extern double comm_timeout_s;  // set_comm_timeout's value; 0: off
}  // namespace detail

// True when waits are watched (built in and a timeout set). Built without the watchdog it is
// a constant false: every wait is the plain MPI call.
inline bool watchdog_active() {
#ifdef MESHTP_COMM_WATCHDOG_OFF
  return false;
#else
  return detail::comm_timeout_s > 0;
#endif
}

// Completes every request (statuses filled if `statuses` is not empty) and returns MPI's
// code — for MPI_ERR_IN_STATUS, the first failed request's. Watched, it throws meshtp::Error
// naming `site` and the ranks that did not arrive once the deadline passes; unwatched, it is
// MPI_Waitall.
[[nodiscard]] int wait_requests(std::span<MPI_Request> requests, std::span<MPI_Status> statuses,
                   const WaitSite& site);

// The world duplicate the watchdog's queries travel on; made by Environment (collective).
void watchdog_init();
void watchdog_finalize();

// Every live group by id, so a query about group g can be answered by any member.
void register_group(MpiGroup* group);
void unregister_group(MpiGroup* group);

// The datatype a point-to-point message of `count` elements of `type` travels as: `type`,
// except in the simulated build (comm/smpi_glue.hpp wire_type: a simulated fp16 model's
// large float messages move 2 bytes per element).
inline MPI_Datatype wire_type(MPI_Datatype type, int count) {
#ifdef MESHTP_SIMULATE
  return smpi::wire_type(type, count);
#else
  (void)count;
  return type;
#endif
}
// The one dtype table, by element (bf16 moves as 2-byte words: never reduced here).
MPI_Datatype mpi_datatype(Element type);

// The one reduce-op table.
inline MPI_Op mpi_op(ReduceOp op) { return op == ReduceOp::kSum ? MPI_SUM : MPI_MAX; }

// Throws meshtp::Error naming the call and MPI's reason when rc is not MPI_SUCCESS.
void check_mpi(int rc, std::string_view call, int group_size);

// Element counts travel as int in MPI-3.
inline int as_count(std::size_t n, std::string_view call) {
  MESHTP_CHECK(n <= static_cast<std::size_t>(INT_MAX),
               "{}: {} elements exceed MPI's int count limit", call, n);
  return static_cast<int>(n);
}


// Adds the lifetime of a blocking call to the communication ledger and the trace.
class LedgerScope {
 public:
  explicit LedgerScope(const char* name) : name_(name), start_(now_seconds()) {}
  ~LedgerScope() {
    const double end = now_seconds();
    comm_ledger().wait_seconds += end - start_;
    comm_ledger().calls += 1;
    Tracer::instance().record(name_, SpanKind::kComm, start_, end);
  }
  LedgerScope(const LedgerScope&) = delete;
  LedgerScope& operator=(const LedgerScope&) = delete;

 private:
  const char* name_;
  double start_;
};

// A blocking collective: the MPI blocking call `blocking()` when the watchdog is off, else
// its non-blocking form `start(&request)` and a watched wait. Counts towards the group's
// sequence either way, so sequence numbers stay equal on every member.
template <typename Blocking, typename Start>
void run_collective(MpiGroup& comm, const char* op, const char* mpi_name,
                    Blocking&& blocking, Start&& start) {
  const LedgerScope timed(op);
  const WaitSite site{op, &comm, ++comm.started, -1};
  if (!watchdog_active()) {
    check_mpi(blocking(), mpi_name, comm.size);
    return;
  }
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(start(&request), mpi_name, comm.size);
  check_mpi(wait_requests(std::span<MPI_Request>(&request, 1), {}, site), mpi_name, comm.size);
}

}  // namespace meshtp::comm
