// all_to_all: block j of rank i's send buffer becomes block i of rank j's receive buffer.
//
// The transpose of a P×P block matrix spread over the ranks; (P−1)/P · |send| bytes move.
// all_to_allv is the same with blocks of their own sizes (expert-parallel token dispatch).
#include <memory>
#include <vector>

#include "comm/mpi_impl.hpp"

namespace meshtp::comm {
namespace {

// MPI's int counts and displacements of one all_to_allv (blocks packed in rank order).
struct VCounts {
  std::vector<int> send_counts, send_displs, recv_counts, recv_displs;
};

VCounts v_counts(std::span<const std::int64_t> send_counts,
                 std::span<const std::int64_t> recv_counts, std::string_view call) {
  VCounts v;
  const auto pack = [&](std::span<const std::int64_t> counts, std::vector<int>& c,
                        std::vector<int>& d) {
    std::size_t at = 0;
    for (const std::int64_t n : counts) {
      c.push_back(as_count(static_cast<std::size_t>(n), call));
      d.push_back(as_count(at, call));
      at += static_cast<std::size_t>(n);
    }
  };
  pack(send_counts, v.send_counts, v.send_displs);
  pack(recv_counts, v.recv_counts, v.recv_displs);
  return v;
}

}  // namespace
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

void MpiTransport::all_to_allv(ConstBuffer send, std::span<const std::int64_t> send_counts,
                               Buffer recv, std::span<const std::int64_t> recv_counts) {
  const MPI_Datatype dtype = mpi_datatype(send.type);
  const VCounts v = v_counts(send_counts, recv_counts, "all_to_allv");
  run_collective(
      *group_, "all_to_allv", "MPI_Alltoallv",
      [&] {
        return MPI_Alltoallv(send.data, v.send_counts.data(), v.send_displs.data(), dtype,
                             recv.data, v.recv_counts.data(), v.recv_displs.data(), dtype,
                             group_->handle);
      },
      [&](MPI_Request* r) {
        return MPI_Ialltoallv(send.data, v.send_counts.data(), v.send_displs.data(), dtype,
                              recv.data, v.recv_counts.data(), v.recv_displs.data(), dtype,
                              group_->handle, r);
      });
}

Request MpiTransport::iall_to_allv(ConstBuffer send, std::span<const std::int64_t> send_counts,
                                   Buffer recv, std::span<const std::int64_t> recv_counts) {
  const MPI_Datatype dtype = mpi_datatype(send.type);
  // MPI reads the count arrays until the operation completes: the Request keeps them.
  auto v = std::make_shared<const VCounts>(v_counts(send_counts, recv_counts, "iall_to_allv"));
  Request r = start("iall_to_allv");
  check_mpi(MPI_Ialltoallv(send.data, v->send_counts.data(), v->send_displs.data(), dtype,
                           recv.data, v->recv_counts.data(), v->recv_displs.data(), dtype,
                           group_->handle, handle_of(r)),
            "MPI_Ialltoallv", group_->size);
  r.then([keep = std::move(v)] {});
  return r;
}

}  // namespace meshtp::comm
