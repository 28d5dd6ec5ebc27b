// all_to_all: block j of rank i's send buffer becomes block i of rank j's receive buffer.
//
// The transpose of a P×P block matrix spread over the ranks; (P−1)/P · |send| bytes move.
#include "comm/mpi_impl.hpp"

namespace meshtp::comm {
namespace {

int check_all_to_all(std::size_t send, std::size_t recv, int size, std::string_view call) {
  const auto p = static_cast<std::size_t>(size);
  MESHTP_CHECK(send == recv && send % p == 0,
               "{}: send holds {} and receive {} elements; both must be the same multiple of "
               "the group size {}",
               call, send, recv, size);
  return as_count(send / p, call);
}

}  // namespace

template <typename T>
void Communicator::all_to_all(std::span<const T> send, std::span<T> recv) const {
  const int block = check_all_to_all(send.size(), recv.size(), impl_->size, "all_to_all");
  impl_->count<T>(layout::CollectiveKind::kAllToAll, send.size());
  run_collective(
      *impl_, "all_to_all", "MPI_Alltoall",
      [&] {
        return MPI_Alltoall(send.data(), block, mpi_datatype<T>(), recv.data(), block,
                            mpi_datatype<T>(), impl_->handle);
      },
      [&](MPI_Request* r) {
        return MPI_Ialltoall(send.data(), block, mpi_datatype<T>(), recv.data(), block,
                             mpi_datatype<T>(), impl_->handle, r);
      });
}

template <typename T>
Request Communicator::iall_to_all(std::span<const T> send, std::span<T> recv) const {
  const int block = check_all_to_all(send.size(), recv.size(), impl_->size, "iall_to_all");
  Request r;
  r.impl_ = std::make_unique<Request::Impl>("iall_to_all", impl_);
  impl_->count<T>(layout::CollectiveKind::kAllToAll, send.size());
  check_mpi(MPI_Ialltoall(send.data(), block, mpi_datatype<T>(), recv.data(), block,
                          mpi_datatype<T>(), impl_->handle, &r.impl_->handle),
            "MPI_Ialltoall", impl_->size);
  return r;
}

#define INSTANTIATE(T)                                                                   \
  template void Communicator::all_to_all<T>(std::span<const T>, std::span<T>) const;     \
  template Request Communicator::iall_to_all<T>(std::span<const T>, std::span<T>) const;
MESHTP_FOR_EACH_COMM_TYPE(INSTANTIATE)
#undef INSTANTIATE

}  // namespace meshtp::comm
