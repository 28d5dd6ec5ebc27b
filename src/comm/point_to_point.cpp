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

void MpiTransport::send(ConstBuffer buf, int dest, int tag) {
  const MPI_Datatype dtype = mpi_datatype(buf.type);
  const int count = as_count(buf.count, "send");
  const LedgerScope timed("send");
  if (!watchdog_active()) {
    check_mpi(
        MPI_Send(buf.data, count, wire_type(dtype, count), dest, tag, group_->handle),
        "MPI_Send", group_->size);
    return;
  }
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Isend(buf.data, count, wire_type(dtype, count), dest, tag,
                      group_->handle, &request),
            "MPI_Send", group_->size);
  check_mpi(wait_requests(std::span<MPI_Request>(&request, 1), {}, {"send", group_.get(), 0, dest}),
            "MPI_Send", group_->size);
}

void MpiTransport::recv(Buffer buf, int source, int tag) {
  const MPI_Datatype dtype = mpi_datatype(buf.type);
  const int count = as_count(buf.count, "recv");
  const LedgerScope timed("recv");
  MPI_Status status;
  int rc = MPI_SUCCESS;
  if (!watchdog_active()) {
    rc = MPI_Recv(buf.data, count, wire_type(dtype, count), source, tag,
                  group_->handle, &status);
  } else {
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Irecv(buf.data, count, wire_type(dtype, count), source, tag,
                        group_->handle, &request),
              "MPI_Recv", group_->size);
    rc = wait_requests(std::span<MPI_Request>(&request, 1), std::span<MPI_Status>(&status, 1),
                       {"recv", group_.get(), 0, source});
  }
  MESHTP_CHECK(rc != MPI_ERR_TRUNCATE, "recv: rank {} sent more than the {} elements expected",
               source, buf.count);
  check_mpi(rc, "MPI_Recv", group_->size);
  check_received(status, dtype, buf.count, source, "recv");
}

void MpiTransport::sendrecv(ConstBuffer send, int dest, Buffer recv, int source, int tag) {
  const MPI_Datatype dtype = mpi_datatype(send.type);
  const int send_count = as_count(send.count, "sendrecv");
  const int recv_count = as_count(recv.count, "sendrecv");
  const LedgerScope timed("sendrecv");
  MPI_Status status;
  int rc = MPI_SUCCESS;
  if (!watchdog_active()) {
    rc = MPI_Sendrecv(send.data, send_count, wire_type(dtype, send_count), dest, tag,
                      recv.data, recv_count, wire_type(dtype, recv_count), source,
                      tag, group_->handle, &status);
  } else {
    MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    MPI_Status statuses[2];
    check_mpi(MPI_Irecv(recv.data, recv_count, wire_type(dtype, recv_count), source,
                        tag, group_->handle, &requests[0]),
              "MPI_Sendrecv", group_->size);
    check_mpi(MPI_Isend(send.data, send_count, wire_type(dtype, send_count), dest,
                        tag, group_->handle, &requests[1]),
              "MPI_Sendrecv", group_->size);
    rc = wait_requests(requests, statuses, {"sendrecv", group_.get(), 0, source});
    status = statuses[0];
  }
  MESHTP_CHECK(rc != MPI_ERR_TRUNCATE,
               "sendrecv: rank {} sent more than the {} elements expected", source,
               recv.count);
  check_mpi(rc, "MPI_Sendrecv", group_->size);
  check_received(status, dtype, recv.count, source, "sendrecv");
}

Request MpiTransport::isend(ConstBuffer buf, int dest, int tag) {
  const MPI_Datatype dtype = mpi_datatype(buf.type);
  const int count = as_count(buf.count, "isend");
  Request r = start("isend", dest);
  check_mpi(MPI_Isend(buf.data, count, wire_type(dtype, count), dest, tag,
                      group_->handle, handle_of(r)),
            "MPI_Isend", group_->size);
  return r;
}

Request MpiTransport::irecv(Buffer buf, int source, int tag) {
  const MPI_Datatype dtype = mpi_datatype(buf.type);
  const int count = as_count(buf.count, "irecv");
  Request r = start("irecv", source);
  check_mpi(MPI_Irecv(buf.data, count, wire_type(dtype, count), source, tag,
                      group_->handle, handle_of(r)),
            "MPI_Irecv", group_->size);
  return r;
}

}  // namespace meshtp::comm
