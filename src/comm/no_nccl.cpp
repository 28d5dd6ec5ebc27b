// Built without NCCL (no CUDA toolkit, or one without nccl.h): an NCCL group is refused,
// saying why, on every rank alike (nothing is communicated first).
#include "comm/transport.hpp"
#include "core/error.hpp"

namespace meshtp::comm {

bool nccl_available() { return false; }

std::shared_ptr<Transport> nccl_transport(const Communicator& host, void*,
                                          std::shared_ptr<DeviceMemory>) {
  fail("NCCL on {}: this meshtp was built without NCCL (no CUDA toolkit with nccl.h at "
       "configure time); use --collectives host-staged or mpi",
       host.label());
}

Communicator Communicator::nccl(const Communicator& host, void* compute_stream,
                                std::shared_ptr<DeviceMemory> memory) {
  return Communicator(nccl_transport(host, compute_stream, std::move(memory)));
}

}  // namespace meshtp::comm
