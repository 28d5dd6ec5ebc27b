// broadcast: every rank's buffer becomes root's (in place).
#include "comm/mpi_impl.hpp"

namespace meshtp::comm {

void MpiTransport::broadcast(Buffer buf, int root) {
  const MPI_Datatype dtype = mpi_datatype(buf.type);
  const int count = as_count(buf.count, "broadcast");
  run_collective(
      *group_, "broadcast", "MPI_Bcast",
      [&] { return MPI_Bcast(buf.data, count, dtype, root, group_->handle); },
      [&](MPI_Request* r) {
        return MPI_Ibcast(buf.data, count, dtype, root, group_->handle, r);
      });
}

Request MpiTransport::ibroadcast(Buffer buf, int root) {
  const MPI_Datatype dtype = mpi_datatype(buf.type);
  const int count = as_count(buf.count, "ibroadcast");
  Request r = start("ibroadcast");
  check_mpi(MPI_Ibcast(buf.data, count, dtype, root, group_->handle,
                       handle_of(r)),
            "MPI_Ibcast", group_->size);
  return r;
}

}  // namespace meshtp::comm
