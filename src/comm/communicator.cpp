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

void Communicator::Impl::count_sent(layout::CollectiveKind kind, std::size_t bytes) const {
  if (size == 1) return;
  TrafficCount& c = comm_ledger().traffic(kind, traffic_label);
  c.launches += 1;
  c.message_bytes += static_cast<std::int64_t>(bytes);
  c.sent_bytes += layout::sent_bytes(kind, size, static_cast<double>(bytes));
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
  check_mpi(wait_requests(std::span<MPI_Request>(&impl->handle, 1), {}, impl->site), "MPI_Wait",
            impl->comm->size);
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
  check_mpi(MPI_Test(&impl_->handle, &done, MPI_STATUS_IGNORE), "MPI_Test", -1);
  if (!done) return false;
  auto impl = std::move(impl_);
  Tracer::instance().record(impl->name, SpanKind::kComm, impl->start_s, now_seconds());
  if (impl->on_complete) impl->on_complete();
  return true;
}

void wait_all(std::span<Request> requests) {
  for (Request& r : requests) r.wait();
}

// ---- Communicator ----------------------------------------------------------------------

Communicator::Impl::Impl(MPI_Comm comm, bool owns, std::string group_label)
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

Communicator::Impl::~Impl() {
  unregister_group(this);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owned && handle != MPI_COMM_NULL && !finalized) MPI_Comm_free(&handle);
}

Communicator::Communicator(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

Communicator Communicator::world() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  MESHTP_CHECK(initialized, "MPI is not initialised: create a comm::Environment first");
  return Communicator(std::make_shared<Impl>(MPI_COMM_WORLD, false, "the world"));
}

int Communicator::rank() const { return impl_->rank; }
int Communicator::size() const { return impl_->size; }

void Communicator::set_traffic_label(int label) {
  MESHTP_CHECK(label >= -1 && label + 1 < CommLedger::kLabels,
               "traffic label {} is outside -1..{}", label, CommLedger::kLabels - 2);
  impl_->traffic_label = label;
}

Communicator Communicator::split(int color, int key, std::string label) const {
  MESHTP_CHECK(color >= 0, "split color must be non-negative, got {}", color);
  MPI_Comm handle = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split(impl_->handle, color, key, &handle), "MPI_Comm_split", impl_->size);
  if (label.empty()) label = "a group split from " + impl_->label;
  return Communicator(std::make_shared<Impl>(handle, true, std::move(label)));
}

const std::string& Communicator::label() const { return impl_->label; }

int Communicator::ranks_on_this_node() const {
  MPI_Comm node = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(impl_->handle, MPI_COMM_TYPE_SHARED, impl_->rank,
                                MPI_INFO_NULL, &node),
            "MPI_Comm_split_type", impl_->size);
  int size = 1;
  MPI_Comm_size(node, &size);
  MPI_Comm_free(&node);
  return size;
}

bool Communicator::same_group(const Communicator& other) const {
  int result = MPI_UNEQUAL;
  check_mpi(MPI_Comm_compare(impl_->handle, other.impl_->handle, &result), "MPI_Comm_compare",
            impl_->size);
  return result == MPI_IDENT || result == MPI_CONGRUENT;
}

void Communicator::barrier() const {
  run_collective(
      *impl_, "barrier", "MPI_Barrier", [&] { return MPI_Barrier(impl_->handle); },
      [&](MPI_Request* r) { return MPI_Ibarrier(impl_->handle, r); });
}

Request Communicator::ibarrier() const {
  Request r;
  r.impl_ = std::make_unique<Request::Impl>("ibarrier", impl_);
  check_mpi(MPI_Ibarrier(impl_->handle, &r.impl_->handle), "MPI_Ibarrier", impl_->size);
  return r;
}

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
