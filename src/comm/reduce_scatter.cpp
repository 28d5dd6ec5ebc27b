// reduce_scatter: send is P equal blocks; rank r receives op over ranks of block r.
//
// The inverse communication pattern of all_gather: (P−1)/P · |send| bytes leave each rank.
#include "comm/mpi_impl.hpp"

namespace meshtp::comm {
void MpiTransport::reduce_scatter(ConstBuffer send, Buffer recv, ReduceOp op) {
  const MPI_Datatype dtype = mpi_datatype(send.type);
  const int count = as_count(recv.count, "reduce_scatter");
  run_collective(
      *group_, "reduce_scatter", "MPI_Reduce_scatter_block",
      [&] {
        return MPI_Reduce_scatter_block(send.data, recv.data, count, dtype,
                                        mpi_op(op), group_->handle);
      },
      [&](MPI_Request* r) {
        return MPI_Ireduce_scatter_block(send.data, recv.data, count, dtype,
                                         mpi_op(op), group_->handle, r);
      });
}

Request MpiTransport::ireduce_scatter(ConstBuffer send, Buffer recv, ReduceOp op) {
  const MPI_Datatype dtype = mpi_datatype(send.type);
  const int count = as_count(recv.count, "ireduce_scatter");
  Request r = start("ireduce_scatter");
  check_mpi(MPI_Ireduce_scatter_block(send.data, recv.data, count, dtype,
                                      mpi_op(op), group_->handle, handle_of(r)),
            "MPI_Ireduce_scatter_block", group_->size);
  return r;
}

}  // namespace meshtp::comm
