// all_gather: recv = [send of rank 0 | send of rank 1 | … | send of rank P−1].
//
// Every rank contributes the same count; (P−1)/P · |recv| bytes arrive per rank.
#include "comm/mpi_impl.hpp"

namespace meshtp::comm {
namespace {

int check_all_gather(std::size_t send, std::size_t recv, int size, std::string_view call) {
  MESHTP_CHECK(recv == send * static_cast<std::size_t>(size),
               "{}: receive buffer holds {} elements but {} ranks × {} sent need {}", call, recv,
               size, send, send * static_cast<std::size_t>(size));
  return as_count(send, call);
}

}  // namespace

template <typename T>
void Communicator::all_gather(std::span<const T> send, std::span<T> recv) const {
  const int count = check_all_gather(send.size(), recv.size(), impl_->size, "all_gather");
  impl_->count<T>(layout::CollectiveKind::kAllGather, recv.size());
  run_collective(
      *impl_, "all_gather", "MPI_Allgather",
      [&] {
        return MPI_Allgather(send.data(), count, mpi_datatype<T>(), recv.data(), count,
                             mpi_datatype<T>(), impl_->handle);
      },
      [&](MPI_Request* r) {
        return MPI_Iallgather(send.data(), count, mpi_datatype<T>(), recv.data(), count,
                              mpi_datatype<T>(), impl_->handle, r);
      });
}

template <typename T>
Request Communicator::iall_gather(std::span<const T> send, std::span<T> recv) const {
  const int count = check_all_gather(send.size(), recv.size(), impl_->size, "iall_gather");
  Request r;
  r.impl_ = std::make_unique<Request::Impl>("iall_gather", impl_);
  impl_->count<T>(layout::CollectiveKind::kAllGather, recv.size());
  check_mpi(MPI_Iallgather(send.data(), count, mpi_datatype<T>(), recv.data(), count,
                           mpi_datatype<T>(), impl_->handle, &r.impl_->handle),
            "MPI_Iallgather", impl_->size);
  return r;
}

#define INSTANTIATE(T)                                                                  \
  template void Communicator::all_gather<T>(std::span<const T>, std::span<T>) const;    \
  template Request Communicator::iall_gather<T>(std::span<const T>, std::span<T>) const;
MESHTP_FOR_EACH_COMM_TYPE(INSTANTIATE)
#undef INSTANTIATE

}  // namespace meshtp::comm
