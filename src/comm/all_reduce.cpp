// all_reduce: every rank ends with op over all ranks of its buffer (in place).
//
// Open MPI picks the algorithm (ring / recursive doubling / Rabenseifner) by size; the cost
// model assumes the bandwidth-optimal one: 2(P−1)/P · n bytes sent per rank.
//
// An empty buffer is nothing to reduce on every rank (the counts of a collective match): no
// MPI call. SimGrid's SMPI divides by the count in its pipelined reduce (SIGFPE), and a
// data-parallel bucket can be empty (a pipeline stage's chunk without a LayerNorm_f).
#include "comm/mpi_impl.hpp"

namespace meshtp::comm {

void MpiTransport::all_reduce(Buffer buf, ReduceOp op) {
  const MPI_Datatype dtype = mpi_datatype(buf.type);
  if (buf.count == 0) return;
  const int count = as_count(buf.count, "all_reduce");
  run_collective(
      *group_, "all_reduce", "MPI_Allreduce",
      [&] {
        return MPI_Allreduce(MPI_IN_PLACE, buf.data, count, dtype, mpi_op(op),
                             group_->handle);
      },
      [&](MPI_Request* r) {
        return MPI_Iallreduce(MPI_IN_PLACE, buf.data, count, dtype, mpi_op(op),
                              group_->handle, r);
      });
}

Request MpiTransport::iall_reduce(Buffer buf, ReduceOp op) {
  const MPI_Datatype dtype = mpi_datatype(buf.type);
  const int count = as_count(buf.count, "iall_reduce");
  if (buf.count == 0) return Request{};  // complete
  Request r = start("iall_reduce");
  check_mpi(MPI_Iallreduce(MPI_IN_PLACE, buf.data, count, dtype, mpi_op(op),
                           group_->handle, handle_of(r)),
            "MPI_Iallreduce", group_->size);
  return r;
}

}  // namespace meshtp::comm
