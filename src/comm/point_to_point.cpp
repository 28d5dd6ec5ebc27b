// send / recv / sendrecv and their non-blocking forms: the ring steps of Cannon and Wang.
//
// recv checks that exactly the expected number of elements arrived, so a size mismatch
// between peers is an error naming both counts rather than silent truncation.
#include "comm/mpi_impl.hpp"

namespace meshtp::comm {
namespace {

void check_received(const MPI_Status& status, MPI_Datatype type, std::size_t expected,
                    int source, std::string_view call) {
  int got = 0;
  MPI_Get_count(&status, wire_type(type, static_cast<int>(expected)), &got);
  MESHTP_CHECK(static_cast<std::size_t>(got) == expected,
               "{}: expected {} elements from rank {}, received {}", call, expected, source,
               got);
}

}  // namespace

template <typename T>
void Communicator::send(std::span<const T> buf, int dest, int tag) const {
  check_rank(dest, impl_->size, "send", "destination");
  const int count = as_count(buf.size(), "send");
  const LedgerScope timed("send");
  impl_->count<T>(layout::CollectiveKind::kSendRecv, buf.size());
  if (!watchdog_active()) {
    check_mpi(
        MPI_Send(buf.data(), count, wire_type(mpi_datatype<T>(), count), dest, tag, impl_->handle),
        "MPI_Send", impl_->size);
    return;
  }
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Isend(buf.data(), count, wire_type(mpi_datatype<T>(), count), dest, tag,
                      impl_->handle, &request),
            "MPI_Send", impl_->size);
  check_mpi(wait_requests(std::span<MPI_Request>(&request, 1), {}, {"send", impl_.get(), 0, dest}),
            "MPI_Send", impl_->size);
}

template <typename T>
void Communicator::recv(std::span<T> buf, int source, int tag) const {
  check_rank(source, impl_->size, "recv", "source");
  const int count = as_count(buf.size(), "recv");
  const LedgerScope timed("recv");
  MPI_Status status;
  int rc = MPI_SUCCESS;
  if (!watchdog_active()) {
    rc = MPI_Recv(buf.data(), count, wire_type(mpi_datatype<T>(), count), source, tag,
                  impl_->handle, &status);
  } else {
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Irecv(buf.data(), count, wire_type(mpi_datatype<T>(), count), source, tag,
                        impl_->handle, &request),
              "MPI_Recv", impl_->size);
    rc = wait_requests(std::span<MPI_Request>(&request, 1), std::span<MPI_Status>(&status, 1),
                       {"recv", impl_.get(), 0, source});
  }
  MESHTP_CHECK(rc != MPI_ERR_TRUNCATE, "recv: rank {} sent more than the {} elements expected",
               source, buf.size());
  check_mpi(rc, "MPI_Recv", impl_->size);
  check_received(status, mpi_datatype<T>(), buf.size(), source, "recv");
}

template <typename T>
void Communicator::sendrecv(std::span<const T> send, int dest, std::span<T> recv, int source,
                            int tag) const {
  check_rank(dest, impl_->size, "sendrecv", "destination");
  check_rank(source, impl_->size, "sendrecv", "source");
  const int send_count = as_count(send.size(), "sendrecv");
  const int recv_count = as_count(recv.size(), "sendrecv");
  const LedgerScope timed("sendrecv");
  impl_->count<T>(layout::CollectiveKind::kSendRecv, send.size());
  MPI_Status status;
  int rc = MPI_SUCCESS;
  if (!watchdog_active()) {
    rc = MPI_Sendrecv(send.data(), send_count, wire_type(mpi_datatype<T>(), send_count), dest, tag,
                      recv.data(), recv_count, wire_type(mpi_datatype<T>(), recv_count), source,
                      tag, impl_->handle, &status);
  } else {
    MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    MPI_Status statuses[2];
    check_mpi(MPI_Irecv(recv.data(), recv_count, wire_type(mpi_datatype<T>(), recv_count), source,
                        tag, impl_->handle, &requests[0]),
              "MPI_Sendrecv", impl_->size);
    check_mpi(MPI_Isend(send.data(), send_count, wire_type(mpi_datatype<T>(), send_count), dest,
                        tag, impl_->handle, &requests[1]),
              "MPI_Sendrecv", impl_->size);
    rc = wait_requests(requests, statuses, {"sendrecv", impl_.get(), 0, source});
    status = statuses[0];
  }
  MESHTP_CHECK(rc != MPI_ERR_TRUNCATE,
               "sendrecv: rank {} sent more than the {} elements expected", source,
               recv.size());
  check_mpi(rc, "MPI_Sendrecv", impl_->size);
  check_received(status, mpi_datatype<T>(), recv.size(), source, "sendrecv");
}

template <typename T>
Request Communicator::isend(std::span<const T> buf, int dest, int tag) const {
  check_rank(dest, impl_->size, "isend", "destination");
  const int count = as_count(buf.size(), "isend");
  Request r;
  r.impl_ = std::make_unique<Request::Impl>("isend", impl_, dest);
  impl_->count<T>(layout::CollectiveKind::kSendRecv, buf.size());
  check_mpi(MPI_Isend(buf.data(), count, wire_type(mpi_datatype<T>(), count), dest, tag,
                      impl_->handle, &r.impl_->handle),
            "MPI_Isend", impl_->size);
  return r;
}

template <typename T>
Request Communicator::irecv(std::span<T> buf, int source, int tag) const {
  check_rank(source, impl_->size, "irecv", "source");
  const int count = as_count(buf.size(), "irecv");
  Request r;
  r.impl_ = std::make_unique<Request::Impl>("irecv", impl_, source);
  check_mpi(MPI_Irecv(buf.data(), count, wire_type(mpi_datatype<T>(), count), source, tag,
                      impl_->handle, &r.impl_->handle),
            "MPI_Irecv", impl_->size);
  return r;
}

#define INSTANTIATE(T)                                                                   \
  template void Communicator::send<T>(std::span<const T>, int, int) const;               \
  template void Communicator::recv<T>(std::span<T>, int, int) const;                     \
  template void Communicator::sendrecv<T>(std::span<const T>, int, std::span<T>, int,    \
                                          int) const;                                    \
  template Request Communicator::isend<T>(std::span<const T>, int, int) const;           \
  template Request Communicator::irecv<T>(std::span<T>, int, int) const;
MESHTP_FOR_EACH_COMM_TYPE(INSTANTIATE)
#undef INSTANTIATE

}  // namespace meshtp::comm
