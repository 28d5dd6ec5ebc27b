// broadcast: every rank's buffer becomes root's (in place).
#include "comm/mpi_impl.hpp"

namespace meshtp::comm {

template <typename T>
void Communicator::broadcast(std::span<T> buf, int root) const {
  check_rank(root, impl_->size, "broadcast", "root");
  const int count = as_count(buf.size(), "broadcast");
  impl_->count<T>(layout::CollectiveKind::kBroadcast, buf.size());
  run_collective(
      *impl_, "broadcast", "MPI_Bcast",
      [&] { return MPI_Bcast(buf.data(), count, mpi_datatype<T>(), root, impl_->handle); },
      [&](MPI_Request* r) {
        return MPI_Ibcast(buf.data(), count, mpi_datatype<T>(), root, impl_->handle, r);
      });
}

template <typename T>
Request Communicator::ibroadcast(std::span<T> buf, int root) const {
  check_rank(root, impl_->size, "ibroadcast", "root");
  const int count = as_count(buf.size(), "ibroadcast");
  Request r;
  r.impl_ = std::make_unique<Request::Impl>("ibroadcast", impl_);
  impl_->count<T>(layout::CollectiveKind::kBroadcast, buf.size());
  check_mpi(MPI_Ibcast(buf.data(), count, mpi_datatype<T>(), root, impl_->handle,
                       &r.impl_->handle),
            "MPI_Ibcast", impl_->size);
  return r;
}

#define INSTANTIATE(T)                                                  \
  template void Communicator::broadcast<T>(std::span<T>, int) const;    \
  template Request Communicator::ibroadcast<T>(std::span<T>, int) const;
MESHTP_FOR_EACH_COMM_TYPE(INSTANTIATE)
#undef INSTANTIATE

}  // namespace meshtp::comm
