// Group management, requests, the MPI environment and job abort.
#include "comm/communicator.hpp"

#include <vector>

#include "comm/mpi_impl.hpp"

namespace meshtp::comm {

void check_mpi(int rc, std::string_view call, int group_size) {
  if (rc == MPI_SUCCESS) return;
  char reason[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, reason, &length);
  fail("{} failed on a group of {} ranks: {}", call, group_size,
       std::string_view(reason, static_cast<std::size_t>(length)));
}

CommLedger& comm_ledger() {
  static CommLedger ledger;
  return ledger;
}

TrafficCount& CommLedger::traffic(layout::CollectiveKind kind, int label) {
  MESHTP_CHECK(label >= -1 && label + 1 < kLabels, "traffic label {} is outside -1..{}", label,
               kLabels - 2);
  return counts[static_cast<std::size_t>(kind)][static_cast<std::size_t>(label + 1)];
}

// ---- Request ---------------------------------------------------------------------------

Request::Request() = default;
Request::~Request() {
  // A Request dropped while pending would leave MPI writing into freed buffers: complete it
  // — unless the watchdog has declared the job failed, when waiting again would only hang.
  if (pending() && !comm_failed()) {
    try {
      wait();
    } catch (...) {  // destructors must not throw; the error has no one to go to
    }
  }
}
Request::Request(Request&&) noexcept = default;
Request& Request::operator=(Request&& other) noexcept {
  if (this != &other) {
    if (pending() && !comm_failed()) {
      try {
        wait();
      } catch (...) {
      }
    }
    impl_ = std::move(other.impl_);
  }
  return *this;
}

bool Request::pending() const { return impl_ != nullptr; }

Request& Request::then(std::function<void()> on_complete) {
  if (!impl_) {  // already complete: run now
    if (on_complete) on_complete();
    return *this;
  }
  if (impl_->on_complete) {
    auto first = std::move(impl_->on_complete);
    impl_->on_complete = [first = std::move(first), next = std::move(on_complete)] {
      first();
      next();
    };
  } else {
    impl_->on_complete = std::move(on_complete);
  }
  return *this;
}

void Request::wait() {
  if (!impl_) return;
  auto impl = std::move(impl_);
  const double wait_start = now_seconds();
  if (impl->poll) {
    impl->poll(true);
  } else {
    check_mpi(wait_requests(std::span<MPI_Request>(&impl->handle, 1), {}, impl->site),
              "MPI_Wait", impl->comm->size);
  }
  const double end = now_seconds();
  comm_ledger().wait_seconds += end - wait_start;
  comm_ledger().calls += 1;
  Tracer::instance().record(impl->name, SpanKind::kComm, impl->start_s, end);
  Tracer::instance().record("wait", SpanKind::kWait, wait_start, end);
  if (impl->on_complete) impl->on_complete();
}

bool Request::test() {
  if (!impl_) return true;
  int done = 0;
  if (impl_->poll) {
    done = impl_->poll(false) ? 1 : 0;
  } else {
    check_mpi(MPI_Test(&impl_->handle, &done, MPI_STATUS_IGNORE), "MPI_Test", -1);
  }
  if (!done) return false;
  auto impl = std::move(impl_);
  Tracer::instance().record(impl->name, SpanKind::kComm, impl->start_s, now_seconds());
  if (impl->on_complete) impl->on_complete();
  return true;
}

void wait_all(std::span<Request> requests) {
  for (Request& r : requests) r.wait();
}

// ---- the MPI transport's group management ------------------------------------------------

MPI_Datatype mpi_datatype(Element type) {
  switch (type) {
    case Element::kF32: return MPI_FLOAT;
    case Element::kF64: return MPI_DOUBLE;
    case Element::kI32: return MPI_INT;
    case Element::kI64: return MPI_INT64_T;
    case Element::kU8: return MPI_UNSIGNED_CHAR;
    case Element::kBF16: return MPI_UINT16_T;
  }
  return MPI_DATATYPE_NULL;
}

MpiGroup::MpiGroup(MPI_Comm comm, bool owns, std::string group_label)
    : handle(comm), owned(owns), label(std::move(group_label)) {
  MPI_Comm_rank(handle, &rank);
  MPI_Comm_size(handle, &size);
  // Members' world ranks: for messages, and (with how many groups of these members this
  // rank has made before) the group's id, equal on every member as they split in order.
  MPI_Group group = MPI_GROUP_NULL;
  MPI_Group world_group = MPI_GROUP_NULL;
  MPI_Comm_group(handle, &group);
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  std::vector<int> members(static_cast<std::size_t>(size));
  for (int i = 0; i < size; ++i) members[static_cast<std::size_t>(i)] = i;
  world_ranks.resize(members.size());
  MPI_Group_translate_ranks(group, size, members.data(), world_group, world_ranks.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world_group);
  register_group(this);
}

MpiGroup::~MpiGroup() {
  unregister_group(this);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owned && handle != MPI_COMM_NULL && !finalized) MPI_Comm_free(&handle);
}

Request MpiTransport::start(const char* op_name, int peer) const {
  Request r;
  r.impl_ = std::make_unique<Request::Impl>(op_name, group_, peer);
  return r;
}

MPI_Request* MpiTransport::handle_of(Request& r) { return &r.impl_->handle; }

std::shared_ptr<Transport> MpiTransport::split(int color, int key, std::string label) const {
  MPI_Comm handle = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split(group_->handle, color, key, &handle), "MPI_Comm_split", group_->size);
  if (label.empty()) label = "a group split from " + group_->label;
  return std::make_shared<MpiTransport>(std::make_shared<MpiGroup>(handle, true, std::move(label)));
}

int MpiTransport::ranks_on_this_node() const {
  MPI_Comm node = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(group_->handle, MPI_COMM_TYPE_SHARED, group_->rank,
                                MPI_INFO_NULL, &node),
            "MPI_Comm_split_type", group_->size);
  int size = 1;
  MPI_Comm_size(node, &size);
  MPI_Comm_free(&node);
  return size;
}

bool MpiTransport::same_group(const Transport& other) const {
  const auto* mpi = dynamic_cast<const MpiTransport*>(&other);
  if (mpi == nullptr) return false;
  int result = MPI_UNEQUAL;
  check_mpi(MPI_Comm_compare(group_->handle, mpi->group_->handle, &result), "MPI_Comm_compare",
            group_->size);
  return result == MPI_IDENT || result == MPI_CONGRUENT;
}

void MpiTransport::barrier() {
  run_collective(
      *group_, "barrier", "MPI_Barrier", [&] { return MPI_Barrier(group_->handle); },
      [&](MPI_Request* r) { return MPI_Ibarrier(group_->handle, r); });
}

Request MpiTransport::ibarrier() {
  Request r = start("ibarrier");
  check_mpi(MPI_Ibarrier(group_->handle, handle_of(r)), "MPI_Ibarrier", group_->size);
  return r;
}

// ---- Communicator: the front ----------------------------------------------------------

Buffer buffer_of(const View& v) {
  MESHTP_CHECK(v.contiguous() && v.rows >= 0 && v.cols >= 0,
               "a message must be a packed view, not {}", describe(v));
  return {v.data, v.type, static_cast<std::size_t>(v.rows * v.cols)};
}

ConstBuffer const_buffer_of(const View& v) {
  const Buffer b = buffer_of(v);
  return {b.data, b.type, b.count};
}

const char* to_string(TransportKind kind) {
  switch (kind) {
    case TransportKind::kMpi: return "mpi";
    case TransportKind::kAlone: return "alone";
    case TransportKind::kHostStaged: return "host-staged";
    case TransportKind::kNccl: return "nccl";
  }
  return "?";
}

Communicator::Communicator(std::shared_ptr<Transport> transport)
    : transport_(std::move(transport)) {
  MESHTP_CHECK(transport_ != nullptr, "a communicator needs a transport");
}

Communicator Communicator::world() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  MESHTP_CHECK(initialized, "MPI is not initialised: create a comm::Environment first");
  return Communicator(
      std::make_shared<MpiTransport>(std::make_shared<MpiGroup>(MPI_COMM_WORLD, false, "the world")));
}

Communicator Communicator::alone(int rank, int size, std::string label) {
  return Communicator(alone_transport(rank, size, std::move(label)));
}

Communicator Communicator::host_staged(const Communicator& host,
                                       std::shared_ptr<DeviceMemory> memory) {
  return Communicator(host_staged_transport(host.transport_, std::move(memory)));
}

int Communicator::rank() const { return transport_->rank(); }
int Communicator::size() const { return transport_->size(); }
TransportKind Communicator::transport() const { return transport_->kind(); }
const std::string& Communicator::label() const { return transport_->label(); }

void Communicator::set_traffic_label(int label) {
  MESHTP_CHECK(label >= -1 && label + 1 < CommLedger::kLabels,
               "traffic label {} is outside -1..{}", label, CommLedger::kLabels - 2);
  transport_->traffic_label = label;
}

Communicator Communicator::split(int color, int key, std::string label) const {
  MESHTP_CHECK(color >= 0, "split color must be non-negative, got {}", color);
  return Communicator(transport_->split(color, key, std::move(label)));
}

int Communicator::ranks_on_this_node() const { return transport_->ranks_on_this_node(); }

bool Communicator::runs_alone() const { return transport_->runs_alone(); }

Communicator Communicator::alone_group(int rank, int size, std::string label) const {
  return Communicator(transport_->alone_group(rank, size, std::move(label)));
}

bool Communicator::same_group(const Communicator& other) const {
  return transport_->same_group(*other.transport_);
}

void Communicator::count(layout::CollectiveKind kind, std::size_t bytes) const {
  if (!comm_ledger().count_traffic || transport_->size() == 1) return;
  TrafficCount& c = comm_ledger().traffic(kind, transport_->traffic_label);
  c.launches += 1;
  c.message_bytes += static_cast<std::int64_t>(bytes);
  c.sent_bytes += layout::sent_bytes(kind, transport_->size(), static_cast<double>(bytes));
}

namespace {

std::size_t bytes_of(std::size_t count, Element type) { return count * element_size(type); }

void check_same_type(Element send, Element recv, std::string_view call) {
  MESHTP_CHECK(send == recv, "{}: send holds {} and receive {} elements; one call moves one type",
               call, to_string(send), to_string(recv));
}

// MPI has no bf16 arithmetic: bf16 buffers travel as 2-byte words (gathers, broadcasts,
// transfers) and are never summed here; gradients reduce in fp32.
void check_reducible(Element type, std::string_view call) {
  MESHTP_CHECK(type != Element::kBF16,
               "{}: cannot reduce {} elements (no bf16 arithmetic in the transport); reduce "
               "an fp32 copy",
               call, to_string(type));
}

void check_rank(int peer, int size, std::string_view call, std::string_view role) {
  MESHTP_CHECK(peer >= 0 && peer < size, "{}: {} rank {} is outside a group of size {}", call,
               role, peer, size);
}

void check_all_gather(ConstBuffer send, Buffer recv, int size, std::string_view call) {
  check_same_type(send.type, recv.type, call);
  MESHTP_CHECK(recv.count == send.count * static_cast<std::size_t>(size),
               "{}: receive buffer holds {} elements but {} ranks × {} sent need {}", call,
               recv.count, size, send.count, send.count * static_cast<std::size_t>(size));
}

void check_reduce_scatter(ConstBuffer send, Buffer recv, int size, std::string_view call) {
  check_same_type(send.type, recv.type, call);
  MESHTP_CHECK(send.count == recv.count * static_cast<std::size_t>(size),
               "{}: send buffer holds {} elements but {} ranks × {} received need {}", call,
               send.count, size, recv.count, recv.count * static_cast<std::size_t>(size));
}

void check_all_to_all(ConstBuffer send, Buffer recv, int size, std::string_view call) {
  check_same_type(send.type, recv.type, call);
  const auto p = static_cast<std::size_t>(size);
  MESHTP_CHECK(send.count == recv.count && send.count % p == 0,
               "{}: send holds {} and receive {} elements; both must be the same multiple of "
               "the group size {}",
               call, send.count, recv.count, size);
}

// all_to_allv's counts: P of each, none negative, summing to the buffers' sizes. An alone
// rank also keeps what it sends itself, so its own pair must agree.
void check_all_to_allv(ConstBuffer send, std::span<const std::int64_t> send_counts, Buffer recv,
                       std::span<const std::int64_t> recv_counts, int rank, int size,
                       std::string_view call) {
  check_same_type(send.type, recv.type, call);
  const auto p = static_cast<std::size_t>(size);
  MESHTP_CHECK(send_counts.size() == p && recv_counts.size() == p,
               "{}: {} send counts and {} receive counts for a group of {}", call,
               send_counts.size(), recv_counts.size(), size);
  std::int64_t send_total = 0, recv_total = 0;
  for (std::size_t r = 0; r < p; ++r) {
    MESHTP_CHECK(send_counts[r] >= 0 && recv_counts[r] >= 0,
                 "{}: negative count for rank {} (send {}, receive {})", call, r, send_counts[r],
                 recv_counts[r]);
    send_total += send_counts[r];
    recv_total += recv_counts[r];
  }
  MESHTP_CHECK(static_cast<std::size_t>(send_total) == send.count &&
                   static_cast<std::size_t>(recv_total) == recv.count,
               "{}: the counts sum to {} sent and {} received, but the buffers hold {} and {}",
               call, send_total, recv_total, send.count, recv.count);
  MESHTP_CHECK(send_counts[rank] == recv_counts[rank],
               "{}: rank {} sends itself {} elements but expects {} from itself", call, rank,
               send_counts[rank], recv_counts[rank]);
}

}  // namespace

void Communicator::all_reduce(Buffer buf, ReduceOp op) const {
  check_reducible(buf.type, "all_reduce");
  if (buf.count == 0) return;
  count(layout::CollectiveKind::kAllReduce, bytes_of(buf.count, buf.type));
  transport_->all_reduce(buf, op);
}

Request Communicator::iall_reduce(Buffer buf, ReduceOp op) const {
  check_reducible(buf.type, "iall_reduce");
  if (buf.count == 0) return Request{};  // complete
  count(layout::CollectiveKind::kAllReduce, bytes_of(buf.count, buf.type));
  return transport_->iall_reduce(buf, op);
}

void Communicator::all_gather(ConstBuffer send, Buffer recv) const {
  check_all_gather(send, recv, size(), "all_gather");
  count(layout::CollectiveKind::kAllGather, bytes_of(recv.count, recv.type));
  transport_->all_gather(send, recv);
}

Request Communicator::iall_gather(ConstBuffer send, Buffer recv) const {
  check_all_gather(send, recv, size(), "iall_gather");
  count(layout::CollectiveKind::kAllGather, bytes_of(recv.count, recv.type));
  return transport_->iall_gather(send, recv);
}

void Communicator::reduce_scatter(ConstBuffer send, Buffer recv, ReduceOp op) const {
  check_reducible(send.type, "reduce_scatter");
  check_reduce_scatter(send, recv, size(), "reduce_scatter");
  count(layout::CollectiveKind::kReduceScatter, bytes_of(send.count, send.type));
  transport_->reduce_scatter(send, recv, op);
}

Request Communicator::ireduce_scatter(ConstBuffer send, Buffer recv, ReduceOp op) const {
  check_reducible(send.type, "ireduce_scatter");
  check_reduce_scatter(send, recv, size(), "ireduce_scatter");
  count(layout::CollectiveKind::kReduceScatter, bytes_of(send.count, send.type));
  return transport_->ireduce_scatter(send, recv, op);
}

void Communicator::broadcast(Buffer buf, int root) const {
  check_rank(root, size(), "broadcast", "root");
  count(layout::CollectiveKind::kBroadcast, bytes_of(buf.count, buf.type));
  transport_->broadcast(buf, root);
}

Request Communicator::ibroadcast(Buffer buf, int root) const {
  check_rank(root, size(), "ibroadcast", "root");
  count(layout::CollectiveKind::kBroadcast, bytes_of(buf.count, buf.type));
  return transport_->ibroadcast(buf, root);
}

void Communicator::reduce(ConstBuffer send, Buffer recv, int root, ReduceOp op) const {
  check_rank(root, size(), "reduce", "root");
  check_reducible(send.type, "reduce");
  if (rank() == root) {
    check_same_type(send.type, recv.type, "reduce");
    MESHTP_CHECK(recv.count == send.count,
                 "reduce: root's receive buffer holds {} elements, send holds {}", recv.count,
                 send.count);
  }
  count(layout::CollectiveKind::kReduce, bytes_of(send.count, send.type));
  transport_->reduce(send, recv, root, op);
}

void Communicator::all_to_all(ConstBuffer send, Buffer recv) const {
  check_all_to_all(send, recv, size(), "all_to_all");
  count(layout::CollectiveKind::kAllToAll, bytes_of(send.count, send.type));
  transport_->all_to_all(send, recv);
}

Request Communicator::iall_to_all(ConstBuffer send, Buffer recv) const {
  check_all_to_all(send, recv, size(), "iall_to_all");
  count(layout::CollectiveKind::kAllToAll, bytes_of(send.count, send.type));
  return transport_->iall_to_all(send, recv);
}

void Communicator::all_to_allv(ConstBuffer send, std::span<const std::int64_t> send_counts,
                               Buffer recv, std::span<const std::int64_t> recv_counts) const {
  check_all_to_allv(send, send_counts, recv, recv_counts, rank(), size(), "all_to_allv");
  count(layout::CollectiveKind::kAllToAll, bytes_of(send.count, send.type));
  transport_->all_to_allv(send, send_counts, recv, recv_counts);
}

Request Communicator::iall_to_allv(ConstBuffer send, std::span<const std::int64_t> send_counts,
                                   Buffer recv, std::span<const std::int64_t> recv_counts) const {
  check_all_to_allv(send, send_counts, recv, recv_counts, rank(), size(), "iall_to_allv");
  count(layout::CollectiveKind::kAllToAll, bytes_of(send.count, send.type));
  return transport_->iall_to_allv(send, send_counts, recv, recv_counts);
}

void Communicator::send(ConstBuffer buf, int dest, int tag) const {
  check_rank(dest, size(), "send", "destination");
  count(layout::CollectiveKind::kSendRecv, bytes_of(buf.count, buf.type));
  transport_->send(buf, dest, tag);
}

void Communicator::recv(Buffer buf, int source, int tag) const {
  check_rank(source, size(), "recv", "source");
  transport_->recv(buf, source, tag);
}

void Communicator::sendrecv(ConstBuffer send, int dest, Buffer recv, int source, int tag) const {
  check_rank(dest, size(), "sendrecv", "destination");
  check_rank(source, size(), "sendrecv", "source");
  check_same_type(send.type, recv.type, "sendrecv");
  count(layout::CollectiveKind::kSendRecv, bytes_of(send.count, send.type));
  transport_->sendrecv(send, dest, recv, source, tag);
}

Request Communicator::isend(ConstBuffer buf, int dest, int tag) const {
  check_rank(dest, size(), "isend", "destination");
  count(layout::CollectiveKind::kSendRecv, bytes_of(buf.count, buf.type));
  return transport_->isend(buf, dest, tag);
}

Request Communicator::irecv(Buffer buf, int source, int tag) const {
  check_rank(source, size(), "irecv", "source");
  return transport_->irecv(buf, source, tag);
}

void Communicator::barrier() const { transport_->barrier(); }
Request Communicator::ibarrier() const { return transport_->ibarrier(); }

// ---- Environment -----------------------------------------------------------------------

Environment::Environment(int& argc, char**& argv) {
  int provided = 0;
  check_mpi(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread",
            -1);
  // Errors come back as codes, which check_mpi turns into exceptions with context.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  watchdog_init();
}

Environment::~Environment() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  watchdog_finalize();
  MPI_Finalize();
}

void abort_job(int exit_code) {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::exit(exit_code);
}

}  // namespace meshtp::comm
