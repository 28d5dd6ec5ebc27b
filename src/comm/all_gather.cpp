// all_gather: recv = [send of rank 0 | send of rank 1 | … | send of rank P−1].
//
// Every rank contributes the same count; (P−1)/P · |recv| bytes arrive per rank.
#include "comm/mpi_impl.hpp"

namespace meshtp::comm {
void MpiTransport::all_gather(ConstBuffer send, Buffer recv) {
  const MPI_Datatype dtype = mpi_datatype(send.type);
  const int count = as_count(send.count, "all_gather");
  run_collective(
      *group_, "all_gather", "MPI_Allgather",
      [&] {
        return MPI_Allgather(send.data, count, dtype, recv.data, count,
                             dtype, group_->handle);
      },
      [&](MPI_Request* r) {
        return MPI_Iallgather(send.data, count, dtype, recv.data, count,
                              dtype, group_->handle, r);
      });
}

Request MpiTransport::iall_gather(ConstBuffer send, Buffer recv) {
  const MPI_Datatype dtype = mpi_datatype(send.type);
  const int count = as_count(send.count, "iall_gather");
  Request r = start("iall_gather");
  check_mpi(MPI_Iallgather(send.data, count, dtype, recv.data, count,
                           dtype, group_->handle, handle_of(r)),
            "MPI_Iallgather", group_->size);
  return r;
}

}  // namespace meshtp::comm
