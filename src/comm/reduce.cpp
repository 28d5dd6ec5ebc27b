// reduce: root receives op over all ranks of send; recv is only touched at root.
#include "comm/mpi_impl.hpp"

namespace meshtp::comm {

template <typename T>
void Communicator::reduce(std::span<const T> send, std::span<T> recv, int root,
                          ReduceOp op) const {
  check_rank(root, impl_->size, "reduce", "root");
  const int count = as_count(send.size(), "reduce");
  if (impl_->rank == root) {
    MESHTP_CHECK(recv.size() == send.size(),
                 "reduce: root's receive buffer holds {} elements, send holds {}", recv.size(),
                 send.size());
  }
  impl_->count<T>(layout::CollectiveKind::kReduce, send.size());
  run_collective(
      *impl_, "reduce", "MPI_Reduce",
      [&] {
        return MPI_Reduce(send.data(), recv.data(), count, mpi_datatype<T>(), mpi_op(op), root,
                          impl_->handle);
      },
      [&](MPI_Request* r) {
        return MPI_Ireduce(send.data(), recv.data(), count, mpi_datatype<T>(), mpi_op(op), root,
                           impl_->handle, r);
      });
}

#define INSTANTIATE(T)                                                                   \
  template void Communicator::reduce<T>(std::span<const T>, std::span<T>, int, ReduceOp) \
      const;
MESHTP_FOR_EACH_COMM_TYPE(INSTANTIATE)
#undef INSTANTIATE

}  // namespace meshtp::comm
