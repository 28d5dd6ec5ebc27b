// The NCCL transport (communicator.hpp, TransportKind::kNccl): a group whose buffers are
// device memory on this rank's CUDA device, moved by NCCL. Built when the CUDA toolkit has
// NCCL (src/comm/CMakeLists.txt); otherwise no_nccl.cpp says so.
//
// Streams. Each group has a stream of its own, so communication overlaps the compute stream
// the layers run on (`compute_stream`). An operation first makes its stream wait for an
// event recorded on the compute stream (it then reads what the layers wrote), runs NCCL, and
// records a completion event. A non-blocking operation's Request completes on that event
// (cudaEventQuery); a blocking one waits for it before returning, as over MPI. Either way the
// compute stream is then made to wait for the event, so work queued after the operation
// completes sees its result.
//
// The watchdog stays in charge: a wait polls the event with the deadline of --comm-timeout
// (comm/watchdog.hpp); past it, or on an asynchronous NCCL error (ncclCommGetAsyncError), the
// communicator is aborted (ncclCommAbort, so no kernel spins forever) and meshtp::Error names
// the operation and the group. NCCL's own deadlock diagnosis is not the MPI watchdog's: the
// message says which operation on which group timed out, not which ranks did not arrive.
//
// Groups. Splits are ncclCommSplit (collective over the parent group, as MPI_Comm_split is);
// the host group (MPI) is split alongside, for the NCCL id and for ranks_on_this_node.
// Transfers: NCCL has no tags; messages between two ranks of a group arrive in the order sent
// (send/recv pairs in one ncclGroupStart/End for sendrecv and the all-to-alls).
//
// One rank per device: NCCL 2.28 refuses two ranks of a communicator on one GPU. Creation
// gathers every rank's device (PCI bus id) over the host group first, and refuses a shared one
// naming the ranks, on every rank alike; ranks that share a GPU use the host-staged transport.
#include <cuda_runtime.h>
#include <nccl.h>

#include <array>
#include <chrono>
#include <thread>
#include <vector>

#include "comm/mpi_impl.hpp"
#include "comm/transport.hpp"
#include "comm/watchdog.hpp"
#include "core/error.hpp"

namespace meshtp::comm {
namespace {

void check_cuda(cudaError_t rc, std::string_view call) {
  if (rc != cudaSuccess) fail("{} failed: {}", call, cudaGetErrorString(rc));
}

void check_nccl(ncclResult_t rc, std::string_view call, const std::string& label) {
  if (rc != ncclSuccess && rc != ncclInProgress) {
    fail("{} on {} failed: {} ({})", call, label, ncclGetErrorString(rc), ncclGetLastError(nullptr));
  }
}

ncclDataType_t nccl_type(Element type) {
  switch (type) {
    case Element::kF32: return ncclFloat32;
    case Element::kBF16: return ncclBfloat16;
    case Element::kF64: return ncclFloat64;
    case Element::kI32: return ncclInt32;
    case Element::kI64: return ncclInt64;
    case Element::kU8: return ncclUint8;
  }
  return ncclUint8;
}

ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::kSum ? ncclSum : ncclMax; }

char* at(void* base, std::size_t elements, Element type) {
  return static_cast<char*>(base) + elements * element_size(type);
}
const char* at(const void* base, std::size_t elements, Element type) {
  return static_cast<const char*>(base) + elements * element_size(type);
}

// One NCCL communicator, its stream, and the host group beside it.
struct NcclGroup {
  NcclGroup(ncclComm_t c, Communicator host_group, cudaStream_t compute_stream,
            std::shared_ptr<DeviceMemory> device_memory)
      : comm(c),
        host(std::move(host_group)),
        compute(compute_stream),
        memory(std::move(device_memory)) {
    check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    check_cuda(cudaMalloc(&scratch, sizeof(float)), "cudaMalloc (barrier scratch)");
  }
  ~NcclGroup() {
    if (scratch != nullptr) cudaFree(scratch);
    if (comm != nullptr) {
      if (aborted) {
        ncclCommAbort(comm);
      } else {
        ncclCommDestroy(comm);
      }
    }
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

  ncclComm_t comm = nullptr;
  Communicator host;
  cudaStream_t compute = nullptr;
  std::shared_ptr<DeviceMemory> memory;  // tells device buffers from host ones
  cudaStream_t stream = nullptr;
  void* scratch = nullptr;
  bool aborted = false;
};

// Waits for `event` (or only tests it, when !block), watching the deadline and NCCL's
// asynchronous errors. Returns true when complete.
bool poll_event(NcclGroup& g, cudaEvent_t event, const char* op, bool block, double start_s) {
  const double timeout = comm_timeout();
  for (;;) {
    const cudaError_t rc = cudaEventQuery(event);
    if (rc == cudaSuccess) {
      check_cuda(cudaStreamWaitEvent(g.compute, event, 0), "cudaStreamWaitEvent");
      return true;
    }
    if (rc != cudaErrorNotReady) check_cuda(rc, "cudaEventQuery");
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(g.comm, &async);
    if (async != ncclSuccess && async != ncclInProgress) {
      g.aborted = true;
      fail("{} on {} failed asynchronously: {}", op, g.host.label(), ncclGetErrorString(async));
    }
    if (!block) return false;
    if (timeout > 0 && now_seconds() - start_s > timeout) {
      g.aborted = true;
      ncclCommAbort(g.comm);
      g.comm = nullptr;
      fail("{} on {} ({} ranks, NCCL) did not complete within {} s (--comm-timeout); the "
           "communicator was aborted",
           op, g.host.label(), g.host.size(), timeout);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

class NcclTransport final : public Transport {
 public:
  explicit NcclTransport(std::shared_ptr<NcclGroup> group) : g_(std::move(group)) {}

  TransportKind kind() const override { return TransportKind::kNccl; }
  int rank() const override { return g_->host.rank(); }
  int size() const override { return g_->host.size(); }
  const std::string& label() const override { return g_->host.label(); }
  std::shared_ptr<Transport> split(int color, int key, std::string label) const override {
    Communicator host = g_->host.split(color, key, std::move(label));
    ncclComm_t comm = nullptr;
    check_nccl(ncclCommSplit(g_->comm, color, key, &comm, nullptr), "ncclCommSplit", host.label());
    return std::make_shared<NcclTransport>(
        std::make_shared<NcclGroup>(comm, std::move(host), g_->compute, g_->memory));
  }
  int ranks_on_this_node() const override { return g_->host.ranks_on_this_node(); }
  bool same_group(const Transport& other) const override {
    const auto* nccl = dynamic_cast<const NcclTransport*>(&other);
    return nccl != nullptr && g_->host.same_group(nccl->g_->host);
  }

  void all_reduce(Buffer buf, ReduceOp op) override { iall_reduce(buf, op).wait(); }
  void all_gather(ConstBuffer send, Buffer recv) override { iall_gather(send, recv).wait(); }
  void reduce_scatter(ConstBuffer send, Buffer recv, ReduceOp op) override {
    ireduce_scatter(send, recv, op).wait();
  }
  void broadcast(Buffer buf, int root) override { ibroadcast(buf, root).wait(); }
  void reduce(ConstBuffer send, Buffer recv, int root, ReduceOp op) override {
    if (on_host("reduce", send.data, rank() == root ? recv.data : send.data)) {
      g_->host.reduce(send, recv, root, op);
      return;
    }
    run("reduce", [&] {
      return ncclReduce(send.data, recv.data, send.count, nccl_type(send.type), nccl_op(op), root,
                        g_->comm, g_->stream);
    }).wait();
  }
  void all_to_all(ConstBuffer send, Buffer recv) override { iall_to_all(send, recv).wait(); }
  void all_to_allv(ConstBuffer send, std::span<const std::int64_t> send_counts, Buffer recv,
                   std::span<const std::int64_t> recv_counts) override {
    iall_to_allv(send, send_counts, recv, recv_counts).wait();
  }
  void send(ConstBuffer buf, int dest, int tag) override { isend(buf, dest, tag).wait(); }
  void recv(Buffer buf, int source, int tag) override { irecv(buf, source, tag).wait(); }
  void sendrecv(ConstBuffer send, int dest, Buffer recv, int source, int tag) override {
    if (on_host("sendrecv", send.data, recv.data)) {
      g_->host.sendrecv(send, dest, recv, source, tag);
      return;
    }
    run("sendrecv", [&] {
      ncclGroupStart();
      ncclSend(send.data, send.count, nccl_type(send.type), dest, g_->comm, g_->stream);
      ncclRecv(recv.data, recv.count, nccl_type(recv.type), source, g_->comm, g_->stream);
      return ncclGroupEnd();
    }).wait();
  }
  void barrier() override { ibarrier().wait(); }

  Request iall_reduce(Buffer buf, ReduceOp op) override {
    if (on_host("all_reduce", buf.data, buf.data)) return g_->host.iall_reduce(buf, op);
    return run("all_reduce", [&] {
      return ncclAllReduce(buf.data, buf.data, buf.count, nccl_type(buf.type), nccl_op(op),
                           g_->comm, g_->stream);
    });
  }
  Request iall_gather(ConstBuffer send, Buffer recv) override {
    if (on_host("all_gather", send.data, recv.data)) return g_->host.iall_gather(send, recv);
    return run("all_gather", [&] {
      return ncclAllGather(send.data, recv.data, send.count, nccl_type(send.type), g_->comm,
                           g_->stream);
    });
  }
  Request ireduce_scatter(ConstBuffer send, Buffer recv, ReduceOp op) override {
    if (on_host("reduce_scatter", send.data, recv.data)) {
      return g_->host.ireduce_scatter(send, recv, op);
    }
    return run("reduce_scatter", [&] {
      return ncclReduceScatter(send.data, recv.data, recv.count, nccl_type(send.type),
                               nccl_op(op), g_->comm, g_->stream);
    });
  }
  Request ibroadcast(Buffer buf, int root) override {
    if (on_host("broadcast", buf.data, buf.data)) return g_->host.ibroadcast(buf, root);
    return run("broadcast", [&] {
      return ncclBroadcast(buf.data, buf.data, buf.count, nccl_type(buf.type), root, g_->comm,
                           g_->stream);
    });
  }
  Request iall_to_all(ConstBuffer send, Buffer recv) override {
    if (on_host("all_to_all", send.data, recv.data)) return g_->host.iall_to_all(send, recv);
    const std::size_t block = send.count / static_cast<std::size_t>(size());
    return run("all_to_all", [&] {
      ncclGroupStart();
      for (int r = 0; r < size(); ++r) {
        const auto off = static_cast<std::size_t>(r) * block;
        ncclSend(at(send.data, off, send.type), block, nccl_type(send.type), r, g_->comm,
                 g_->stream);
        ncclRecv(at(recv.data, off, recv.type), block, nccl_type(recv.type), r, g_->comm,
                 g_->stream);
      }
      return ncclGroupEnd();
    });
  }
  Request iall_to_allv(ConstBuffer send, std::span<const std::int64_t> send_counts, Buffer recv,
                       std::span<const std::int64_t> recv_counts) override {
    if (on_host("all_to_allv", send.data, recv.data)) {
      return g_->host.iall_to_allv(send, send_counts, recv, recv_counts);
    }
    return run("all_to_allv", [&] {
      ncclGroupStart();
      std::size_t send_at = 0, recv_at = 0;
      for (int r = 0; r < size(); ++r) {
        const auto ns = static_cast<std::size_t>(send_counts[r]);
        const auto nr = static_cast<std::size_t>(recv_counts[r]);
        if (ns > 0) {
          ncclSend(at(send.data, send_at, send.type), ns, nccl_type(send.type), r, g_->comm,
                   g_->stream);
        }
        if (nr > 0) {
          ncclRecv(at(recv.data, recv_at, recv.type), nr, nccl_type(recv.type), r, g_->comm,
                   g_->stream);
        }
        send_at += ns;
        recv_at += nr;
      }
      return ncclGroupEnd();
    });
  }
  Request isend(ConstBuffer buf, int dest, int tag) override {
    if (on_host("send", buf.data, buf.data)) return g_->host.isend(buf, dest, tag);
    return run("send", [&] {
      return ncclSend(buf.data, buf.count, nccl_type(buf.type), dest, g_->comm, g_->stream);
    });
  }
  Request irecv(Buffer buf, int source, int tag) override {
    if (on_host("recv", buf.data, buf.data)) return g_->host.irecv(buf, source, tag);
    return run("recv", [&] {
      return ncclRecv(buf.data, buf.count, nccl_type(buf.type), source, g_->comm, g_->stream);
    });
  }
  // A one-float all-reduce: complete once every rank has started it.
  Request ibarrier() override {
    return run("barrier", [&] {
      return ncclAllReduce(g_->scratch, g_->scratch, 1, ncclFloat32, ncclSum, g_->comm,
                           g_->stream);
    });
  }

 private:
  // Whether an operation's buffers are host memory, which travels over the host group (NCCL
  // moves device memory only); one of each is refused, naming the operation. An empty buffer
  // (a null pointer) goes with the other.
  bool on_host(const char* op, const void* a, const void* b) const {
    if (g_->memory == nullptr) return false;
    if (a == nullptr) a = b;
    if (b == nullptr) b = a;
    if (a == nullptr) return false;
    const bool host_a = !g_->memory->holds(a), host_b = !g_->memory->holds(b);
    MESHTP_CHECK(host_a == host_b,
                 "{} on {}: one buffer is host memory and the other device memory; NCCL moves "
                 "device memory, the host group host memory, not one into the other",
                 op, label());
    return host_a;
  }

  // Orders the group's stream after the compute stream, enqueues `launch`, and returns a
  // Request completing on the event recorded after it.
  template <typename Launch>
  Request run(const char* op, Launch&& launch) {
    MESHTP_CHECK(g_->comm != nullptr, "{} on {}: the NCCL communicator was aborted", op, label());
    cudaEvent_t ready = nullptr;
    check_cuda(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda(cudaEventRecord(ready, g_->compute), "cudaEventRecord");
    check_cuda(cudaStreamWaitEvent(g_->stream, ready, 0), "cudaStreamWaitEvent");
    cudaEventDestroy(ready);
    check_nccl(launch(), op, label());
    cudaEvent_t done = nullptr;
    check_cuda(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda(cudaEventRecord(done, g_->stream), "cudaEventRecord");
    const double start_s = now_seconds();
    auto event = std::shared_ptr<CUevent_st>(done, [](cudaEvent_t e) { cudaEventDestroy(e); });
    return RequestAccess::make(std::make_unique<Request::Impl>(
        op, [g = g_, event, op, start_s](bool block) {
          return poll_event(*g, event.get(), op, block, start_s);
        }));
  }

  std::shared_ptr<NcclGroup> g_;
};

}  // namespace

std::shared_ptr<Transport> nccl_transport(const Communicator& host, void* compute_stream,
                                          std::shared_ptr<DeviceMemory> memory) {
  // Over MPI; or alone with no other member (a group of one needs no peer to agree on the
  // id: scripts/gpu-check.sh runs NCCL so, one process without mpirun).
  MESHTP_CHECK(host.transport() == TransportKind::kMpi ||
                   (host.transport() == TransportKind::kAlone && host.size() == 1),
               "NCCL groups are made over an mpi group (or an alone group of one), not {} "
               "with {} ranks",
               to_string(host.transport()), host.size());
  int device = 0;
  int devices = 0;
  const cudaError_t count_rc = cudaGetDeviceCount(&devices);
  // Every rank learns every other's verdict before any throws, so none is left waiting.
  std::array<char, 64> bus_id{};
  if (count_rc == cudaSuccess && devices > 0 && cudaGetDevice(&device) == cudaSuccess) {
    cudaDeviceGetPCIBusId(bus_id.data(), static_cast<int>(bus_id.size()), device);
  }
  std::vector<char> all(bus_id.size() * static_cast<std::size_t>(host.size()));
  host.all_gather(ConstBuffer{bus_id.data(), Element::kU8, bus_id.size()},
                  Buffer{all.data(), Element::kU8, all.size()});
  for (int r = 0; r < host.size(); ++r) {
    const std::string id(all.data() + static_cast<std::size_t>(r) * bus_id.size());
    MESHTP_CHECK(!id.empty(), "NCCL on {}: rank {} has no CUDA device", host.label(), r);
    for (int q = 0; q < r; ++q) {
      const std::string other(all.data() + static_cast<std::size_t>(q) * bus_id.size());
      MESHTP_CHECK(id != other,
                   "NCCL on {}: ranks {} and {} share the GPU {} (NCCL runs one rank per GPU); "
                   "use --collectives host-staged",
                   host.label(), q, r, id);
    }
  }
  ncclUniqueId id{};
  if (host.rank() == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId", host.label());
  host.broadcast(Buffer{&id, Element::kU8, sizeof(id)}, 0);
  ncclComm_t comm = nullptr;
  check_nccl(ncclCommInitRank(&comm, host.size(), id, host.rank()), "ncclCommInitRank",
             host.label());
  return std::make_shared<NcclTransport>(std::make_shared<NcclGroup>(
      comm, host, static_cast<cudaStream_t>(compute_stream), std::move(memory)));
}

bool nccl_available() { return true; }

Communicator Communicator::nccl(const Communicator& host, void* compute_stream,
                                std::shared_ptr<DeviceMemory> memory) {
  return Communicator(nccl_transport(host, compute_stream, std::move(memory)));
}

}  // namespace meshtp::comm
