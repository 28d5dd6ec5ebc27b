// all_to_all: block j of rank i's send buffer becomes block i of rank j's receive buffer.
//
// The transpose of a P×P block matrix spread over the ranks; (P−1)/P · |send| bytes move.
#include "comm/mpi_impl.hpp"

namespace meshtp::comm {
void MpiTransport::all_to_all(ConstBuffer send, Buffer recv) {
  const MPI_Datatype dtype = mpi_datatype(send.type);
  const int block = as_count(send.count / static_cast<std::size_t>(group_->size), "all_to_all");
  run_collective(
      *group_, "all_to_all", "MPI_Alltoall",
      [&] {
        return MPI_Alltoall(send.data, block, dtype, recv.data, block,
                            dtype, group_->handle);
      },
      [&](MPI_Request* r) {
        return MPI_Ialltoall(send.data, block, dtype, recv.data, block,
                             dtype, group_->handle, r);
      });
}

Request MpiTransport::iall_to_all(ConstBuffer send, Buffer recv) {
  const MPI_Datatype dtype = mpi_datatype(send.type);
  const int block = as_count(send.count / static_cast<std::size_t>(group_->size), "iall_to_all");
  Request r = start("iall_to_all");
  check_mpi(MPI_Ialltoall(send.data, block, dtype, recv.data, block,
                          dtype, group_->handle, handle_of(r)),
            "MPI_Ialltoall", group_->size);
  return r;
}

}  // namespace meshtp::comm
