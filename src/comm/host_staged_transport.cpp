// The host-staged transport (communicator.hpp, TransportKind::kHostStaged): a group whose
// buffers are device memory, moved by a host transport (Open MPI) through host staging.
// Every operation copies what it sends to the host, runs the host transport's operation on
// the host copies, and copies what it received back:
//
//   device send ──to_host──→ pinned host ──MPI──→ pinned host ──to_device──→ device recv
//
// So any number of ranks can share one GPU (NCCL refuses two ranks on one device), at the
// price of two copies over the host bus per message. A buffer in host memory (DeviceMemory::
// holds false: a loss or a norm the layers reduce on the host) travels as it is. A non-blocking
// operation stages its send side when it starts and copies its receive side back when it completes
// (the Request's first completion step), so the caller's own then() steps see device memory already
// written. Staging buffers come from a pool shared by the group and every group split from it: a
// training step moves the same sizes every step, so after the first step nothing is allocated.
#include <map>
#include <mutex>

#include "comm/transport.hpp"
#include "core/device_memory.hpp"
#include "core/error.hpp"

namespace meshtp::comm {
namespace {

// Page-locked host buffers by size, reused: acquire() hands out a free one of exactly that
// size or allocates; the handle gives it back when the last holder lets go.
class StagingPool : public std::enable_shared_from_this<StagingPool> {
 public:
  explicit StagingPool(std::shared_ptr<DeviceMemory> memory) : memory_(std::move(memory)) {}
  ~StagingPool() {
    for (auto& [bytes, p] : free_) memory_->free_host(p, bytes);
  }
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  std::shared_ptr<void> acquire(std::size_t bytes) {
    void* p = nullptr;
    {
      const std::lock_guard lock(mutex_);
      if (auto it = free_.find(bytes); it != free_.end()) {
        p = it->second;
        free_.erase(it);
      }
    }
    if (p == nullptr) p = memory_->alloc_host(bytes);
    MESHTP_CHECK(p != nullptr, "host staging: no page-locked host memory for {} bytes", bytes);
    return {p, [pool = shared_from_this(), bytes](void* q) {
              const std::lock_guard lock(pool->mutex_);
              pool->free_.emplace(bytes, q);
            }};
  }
  DeviceMemory& memory() { return *memory_; }

 private:
  std::shared_ptr<DeviceMemory> memory_;
  std::mutex mutex_;
  std::multimap<std::size_t, void*> free_;
};

std::size_t bytes_of(std::size_t count, Element type) { return count * element_size(type); }

// One buffer's host copy: made (and filled from the device when `in`) on construction;
// written back to the device by copy_back().
struct Staged {
  std::shared_ptr<void> host;
  void* device = nullptr;
  std::size_t bytes = 0;
};

class HostStagedTransport final : public Transport {
 public:
  HostStagedTransport(std::shared_ptr<Transport> host, std::shared_ptr<StagingPool> pool)
      : host_(std::move(host)), pool_(std::move(pool)) {}

  TransportKind kind() const override { return TransportKind::kHostStaged; }
  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  const std::string& label() const override { return host_->label(); }
  std::shared_ptr<Transport> split(int color, int key, std::string label) const override {
    return std::make_shared<HostStagedTransport>(host_->split(color, key, std::move(label)),
                                                 pool_);
  }
  int ranks_on_this_node() const override { return host_->ranks_on_this_node(); }
  bool runs_alone() const override { return host_->runs_alone(); }
  std::shared_ptr<Transport> alone_group(int rank, int size, std::string label) const override {
    return std::make_shared<HostStagedTransport>(host_->alone_group(rank, size, std::move(label)),
                                                 pool_);
  }
  bool same_group(const Transport& other) const override {
    const auto* staged = dynamic_cast<const HostStagedTransport*>(&other);
    return staged != nullptr && host_->same_group(*staged->host_);
  }

  void all_reduce(Buffer buf, ReduceOp op) override {
    Staged s = stage_in(buf);
    host_->all_reduce(on_host(buf, s), op);
    copy_back(s);
  }
  void all_gather(ConstBuffer send, Buffer recv) override {
    Staged in = stage_in(send), out = stage_out(recv);
    host_->all_gather(on_host(send, in), on_host(recv, out));
    copy_back(out);
  }
  void reduce_scatter(ConstBuffer send, Buffer recv, ReduceOp op) override {
    Staged in = stage_in(send), out = stage_out(recv);
    host_->reduce_scatter(on_host(send, in), on_host(recv, out), op);
    copy_back(out);
  }
  void broadcast(Buffer buf, int root) override {
    // The root's buffer is read, every other rank's written.
    const bool root_here = rank() == root;
    Staged s = root_here ? stage_in(buf) : stage_out(buf);
    host_->broadcast(on_host(buf, s), root);
    if (!root_here) copy_back(s);
  }
  void reduce(ConstBuffer send, Buffer recv, int root, ReduceOp op) override {
    const bool root_here = rank() == root;
    Staged in = stage_in(send);
    Staged out = root_here ? stage_out(recv) : Staged{};
    host_->reduce(on_host(send, in), root_here ? on_host(recv, out) : Buffer{}, root, op);
    if (root_here) copy_back(out);
  }
  void all_to_all(ConstBuffer send, Buffer recv) override {
    Staged in = stage_in(send), out = stage_out(recv);
    host_->all_to_all(on_host(send, in), on_host(recv, out));
    copy_back(out);
  }
  void all_to_allv(ConstBuffer send, std::span<const std::int64_t> send_counts, Buffer recv,
                   std::span<const std::int64_t> recv_counts) override {
    Staged in = stage_in(send), out = stage_out(recv);
    host_->all_to_allv(on_host(send, in), send_counts, on_host(recv, out), recv_counts);
    copy_back(out);
  }
  void send(ConstBuffer buf, int dest, int tag) override {
    Staged s = stage_in(buf);
    host_->send(on_host(buf, s), dest, tag);
  }
  void recv(Buffer buf, int source, int tag) override {
    Staged s = stage_out(buf);
    host_->recv(on_host(buf, s), source, tag);
    copy_back(s);
  }
  void sendrecv(ConstBuffer send, int dest, Buffer recv, int source, int tag) override {
    Staged in = stage_in(send), out = stage_out(recv);
    host_->sendrecv(on_host(send, in), dest, on_host(recv, out), source, tag);
    copy_back(out);
  }
  void barrier() override { host_->barrier(); }

  Request iall_reduce(Buffer buf, ReduceOp op) override {
    Staged s = stage_in(buf);
    return finish(host_->iall_reduce(on_host(buf, s), op), s);
  }
  Request iall_gather(ConstBuffer send, Buffer recv) override {
    Staged in = stage_in(send), out = stage_out(recv);
    return finish(host_->iall_gather(on_host(send, in), on_host(recv, out)), out, in);
  }
  Request ireduce_scatter(ConstBuffer send, Buffer recv, ReduceOp op) override {
    Staged in = stage_in(send), out = stage_out(recv);
    return finish(host_->ireduce_scatter(on_host(send, in), on_host(recv, out), op), out, in);
  }
  Request ibroadcast(Buffer buf, int root) override {
    const bool root_here = rank() == root;
    Staged s = root_here ? stage_in(buf) : stage_out(buf);
    Request r = host_->ibroadcast(on_host(buf, s), root);
    if (root_here) return keep(std::move(r), s);
    return finish(std::move(r), s);
  }
  Request iall_to_all(ConstBuffer send, Buffer recv) override {
    Staged in = stage_in(send), out = stage_out(recv);
    return finish(host_->iall_to_all(on_host(send, in), on_host(recv, out)), out, in);
  }
  Request iall_to_allv(ConstBuffer send, std::span<const std::int64_t> send_counts, Buffer recv,
                       std::span<const std::int64_t> recv_counts) override {
    Staged in = stage_in(send), out = stage_out(recv);
    return finish(host_->iall_to_allv(on_host(send, in), send_counts, on_host(recv, out),
                                      recv_counts),
                  out, in);
  }
  Request isend(ConstBuffer buf, int dest, int tag) override {
    Staged s = stage_in(buf);
    return keep(host_->isend(on_host(buf, s), dest, tag), s);
  }
  Request irecv(Buffer buf, int source, int tag) override {
    Staged s = stage_out(buf);
    return finish(host_->irecv(on_host(buf, s), source, tag), s);
  }
  Request ibarrier() override { return host_->ibarrier(); }

 private:
  // A host copy of a buffer the operation reads: filled from the device now.
  Staged stage_in(ConstBuffer buf) const {
    const std::size_t bytes = bytes_of(buf.count, buf.type);
    if (bytes == 0 || !pool_->memory().holds(buf.data)) return {};
    Staged s{pool_->acquire(bytes), const_cast<void*>(buf.data), bytes};
    pool_->memory().to_host(s.host.get(), buf.data, bytes);
    return s;
  }
  Staged stage_in(Buffer buf) const { return stage_in(ConstBuffer{buf.data, buf.type, buf.count}); }
  // A host buffer the operation writes, copied to the device by copy_back(). Over MPI an
  // operation writes all of its receive buffer; an alone one leaves most of it untouched
  // (alone_transport.cpp), so there the host copy starts as the device's contents, or the
  // copy back would overwrite what must stay with the staging's stale bytes.
  Staged stage_out(Buffer buf) const {
    const std::size_t bytes = bytes_of(buf.count, buf.type);
    if (bytes == 0 || !pool_->memory().holds(buf.data)) return {};
    Staged s{pool_->acquire(bytes), buf.data, bytes};
    if (host_->kind() == TransportKind::kAlone) pool_->memory().to_host(s.host.get(), buf.data, bytes);
    return s;
  }
  void copy_back(const Staged& s) const {
    if (s.bytes > 0) pool_->memory().to_device(s.device, s.host.get(), s.bytes);
  }
  // The staging, or the buffer itself where it is host memory (nothing staged).
  static Buffer on_host(Buffer buf, const Staged& s) {
    return {s.host ? s.host.get() : buf.data, buf.type, buf.count};
  }
  static ConstBuffer on_host(ConstBuffer buf, const Staged& s) {
    return {s.host ? s.host.get() : buf.data, buf.type, buf.count};
  }
  // The Request completes after the received buffer is back on the device; the staging of
  // both sides stays held until then.
  Request finish(Request r, Staged out, Staged in = {}) const {
    r.then([pool = pool_, out = std::move(out), in = std::move(in)] {
      if (out.bytes > 0) pool->memory().to_device(out.device, out.host.get(), out.bytes);
    });
    return r;
  }
  static Request keep(Request r, Staged in) {
    r.then([in = std::move(in)] {});
    return r;
  }

  std::shared_ptr<Transport> host_;
  std::shared_ptr<StagingPool> pool_;
};

}  // namespace

std::shared_ptr<Transport> host_staged_transport(std::shared_ptr<Transport> host,
                                                 std::shared_ptr<DeviceMemory> memory) {
  MESHTP_CHECK(memory != nullptr, "a host-staged group needs the device's memory");
  MESHTP_CHECK(host->kind() == TransportKind::kMpi || host->kind() == TransportKind::kAlone,
               "host staging runs over a host transport (mpi or alone), not {}",
               to_string(host->kind()));
  return std::make_shared<HostStagedTransport>(
      std::move(host), std::make_shared<StagingPool>(std::move(memory)));
}

}  // namespace meshtp::comm
