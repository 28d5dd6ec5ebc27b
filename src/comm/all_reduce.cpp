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

template <typename T>
void Communicator::all_reduce(std::span<T> buf, ReduceOp op) const {
  if (buf.empty()) return;
  const int count = as_count(buf.size(), "all_reduce");
  impl_->count<T>(layout::CollectiveKind::kAllReduce, buf.size());
  run_collective(
      *impl_, "all_reduce", "MPI_Allreduce",
      [&] {
        return MPI_Allreduce(MPI_IN_PLACE, buf.data(), count, mpi_datatype<T>(), mpi_op(op),
                             impl_->handle);
      },
      [&](MPI_Request* r) {
        return MPI_Iallreduce(MPI_IN_PLACE, buf.data(), count, mpi_datatype<T>(), mpi_op(op),
                              impl_->handle, r);
      });
}

template <typename T>
Request Communicator::iall_reduce(std::span<T> buf, ReduceOp op) const {
  const int count = as_count(buf.size(), "iall_reduce");
  Request r;
  if (buf.empty()) return r;  // complete
  r.impl_ = std::make_unique<Request::Impl>("iall_reduce", impl_);
  impl_->count<T>(layout::CollectiveKind::kAllReduce, buf.size());
  check_mpi(MPI_Iallreduce(MPI_IN_PLACE, buf.data(), count, mpi_datatype<T>(), mpi_op(op),
                           impl_->handle, &r.impl_->handle),
            "MPI_Iallreduce", impl_->size);
  return r;
}

#define INSTANTIATE(T)                                                         \
  template void Communicator::all_reduce<T>(std::span<T>, ReduceOp) const;     \
  template Request Communicator::iall_reduce<T>(std::span<T>, ReduceOp) const;
MESHTP_FOR_EACH_COMM_TYPE(INSTANTIATE)
#undef INSTANTIATE

}  // namespace meshtp::comm
