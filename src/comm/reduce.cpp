// reduce: root receives op over all ranks of send; recv is only touched at root.
#include "comm/mpi_impl.hpp"

namespace meshtp::comm {

void MpiTransport::reduce(ConstBuffer send, Buffer recv, int root, ReduceOp op) {
  const MPI_Datatype dtype = mpi_datatype(send.type);
  const int count = as_count(send.count, "reduce");
  run_collective(
      *group_, "reduce", "MPI_Reduce",
      [&] {
        return MPI_Reduce(send.data, recv.data, count, dtype, mpi_op(op), root,
                          group_->handle);
      },
      [&](MPI_Request* r) {
        return MPI_Ireduce(send.data, recv.data, count, dtype, mpi_op(op), root,
                           group_->handle, r);
      });
}

}  // namespace meshtp::comm
