// Transport: what moves a group's bytes behind comm::Communicator (communicator.hpp), the way
// gloo keeps its transport apart from its algorithms. The front has validated every size and
// counted the traffic before a call gets here; a transport only moves (or, alone, does not).
//
// Implementations: MpiTransport (mpi_impl.hpp; Open MPI on host memory, with the watchdog as
// its policy), AloneTransport (alone_transport.cpp; no peer), HostStagedTransport
// (host_staged_transport.cpp; device memory through host copies over a host transport) and
// NcclTransport (nccl_transport.cpp; device memory over NCCL). Private to the comm layer and
// its tests.
#pragma once

#include <memory>
#include <string>

#include "comm/communicator.hpp"
#include "core/error.hpp"

namespace meshtp::comm {

class Transport {
 public:
  virtual ~Transport() = default;

  virtual TransportKind kind() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const std::string& label() const = 0;
  virtual std::shared_ptr<Transport> split(int color, int key, std::string label) const = 0;
  virtual int ranks_on_this_node() const = 0;
  virtual bool same_group(const Transport& other) const = 0;
  // Played alone (kAlone, or staged over an alone group), and a group of the same kind with no
  // peer: what an alone group's "split" is, its members known from coordinates (the front's
  // alone_group). A transport with peers refuses.
  virtual bool runs_alone() const { return kind() == TransportKind::kAlone; }
  virtual std::shared_ptr<Transport> alone_group(int rank, int size, std::string label) const;

  virtual void all_reduce(Buffer buf, ReduceOp op) = 0;
  virtual void all_gather(ConstBuffer send, Buffer recv) = 0;
  virtual void reduce_scatter(ConstBuffer send, Buffer recv, ReduceOp op) = 0;
  virtual void broadcast(Buffer buf, int root) = 0;
  virtual void reduce(ConstBuffer send, Buffer recv, int root, ReduceOp op) = 0;
  virtual void all_to_all(ConstBuffer send, Buffer recv) = 0;
  // Counts validated by the front: P each, non-negative, summing to the buffers' counts.
  virtual void all_to_allv(ConstBuffer send, std::span<const std::int64_t> send_counts,
                           Buffer recv, std::span<const std::int64_t> recv_counts) = 0;
  virtual void send(ConstBuffer buf, int dest, int tag) = 0;
  virtual void recv(Buffer buf, int source, int tag) = 0;
  virtual void sendrecv(ConstBuffer send, int dest, Buffer recv, int source, int tag) = 0;
  virtual void barrier() = 0;

  virtual Request iall_reduce(Buffer buf, ReduceOp op) = 0;
  virtual Request iall_gather(ConstBuffer send, Buffer recv) = 0;
  virtual Request ireduce_scatter(ConstBuffer send, Buffer recv, ReduceOp op) = 0;
  virtual Request ibroadcast(Buffer buf, int root) = 0;
  virtual Request iall_to_all(ConstBuffer send, Buffer recv) = 0;
  virtual Request iall_to_allv(ConstBuffer send, std::span<const std::int64_t> send_counts,
                               Buffer recv, std::span<const std::int64_t> recv_counts) = 0;
  virtual Request isend(ConstBuffer buf, int dest, int tag) = 0;
  virtual Request irecv(Buffer buf, int source, int tag) = 0;
  virtual Request ibarrier() = 0;

  // comm_ledger()'s traffic count files this group's calls under this label (shared by the
  // Communicator copies that share the transport).
  int traffic_label = -1;
};

std::shared_ptr<Transport> alone_transport(int rank, int size, std::string label);
inline std::shared_ptr<Transport> Transport::alone_group(int rank, int size,
                                                         std::string label) const {
  MESHTP_CHECK(runs_alone(), "{} ({}) has peers: split it instead of playing a group alone", label,
               to_string(kind()));
  return alone_transport(rank, size, std::move(label));
}
std::shared_ptr<Transport> host_staged_transport(std::shared_ptr<Transport> host,
                                                 std::shared_ptr<DeviceMemory> memory);
std::shared_ptr<Transport> nccl_transport(const Communicator& host, void* compute_stream,
                                          std::shared_ptr<DeviceMemory> memory);

}  // namespace meshtp::comm
