// reduce_scatter: send is P equal blocks; rank r receives op over ranks of block r.
//
// The inverse communication pattern of all_gather: (P−1)/P · |send| bytes leave each rank.
#include "comm/mpi_impl.hpp"

namespace meshtp::comm {
namespace {

int check_reduce_scatter(std::size_t send, std::size_t recv, int size, std::string_view call) {
  MESHTP_CHECK(send == recv * static_cast<std::size_t>(size),
               "{}: send buffer holds {} elements but {} ranks × {} received need {}", call,
               send, size, recv, recv * static_cast<std::size_t>(size));
  return as_count(recv, call);
}

}  // namespace

template <typename T>
void Communicator::reduce_scatter(std::span<const T> send, std::span<T> recv,
                                  ReduceOp op) const {
  const int count =
      check_reduce_scatter(send.size(), recv.size(), impl_->size, "reduce_scatter");
  impl_->count<T>(layout::CollectiveKind::kReduceScatter, send.size());
  run_collective(
      *impl_, "reduce_scatter", "MPI_Reduce_scatter_block",
      [&] {
        return MPI_Reduce_scatter_block(send.data(), recv.data(), count, mpi_datatype<T>(),
                                        mpi_op(op), impl_->handle);
      },
      [&](MPI_Request* r) {
        return MPI_Ireduce_scatter_block(send.data(), recv.data(), count, mpi_datatype<T>(),
                                         mpi_op(op), impl_->handle, r);
      });
}

template <typename T>
Request Communicator::ireduce_scatter(std::span<const T> send, std::span<T> recv,
                                      ReduceOp op) const {
  const int count =
      check_reduce_scatter(send.size(), recv.size(), impl_->size, "ireduce_scatter");
  Request r;
  r.impl_ = std::make_unique<Request::Impl>("ireduce_scatter", impl_);
  impl_->count<T>(layout::CollectiveKind::kReduceScatter, send.size());
  check_mpi(MPI_Ireduce_scatter_block(send.data(), recv.data(), count, mpi_datatype<T>(),
                                      mpi_op(op), impl_->handle, &r.impl_->handle),
            "MPI_Ireduce_scatter_block", impl_->size);
  return r;
}

#define INSTANTIATE(T)                                                                  \
  template void Communicator::reduce_scatter<T>(std::span<const T>, std::span<T>,       \
                                                ReduceOp) const;                        \
  template Request Communicator::ireduce_scatter<T>(std::span<const T>, std::span<T>,   \
                                                    ReduceOp) const;
MESHTP_FOR_EACH_COMM_TYPE(INSTANTIATE)
#undef INSTANTIATE

}  // namespace meshtp::comm
