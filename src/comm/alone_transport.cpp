// The alone transport: this process plays rank `rank` of a group whose other members do not
// exist (communicator.hpp, TransportKind::kAlone). What each operation leaves in its buffers
// is what this rank alone contributes, so shapes and the code paths after a collective are the
// ones a real run takes, while values are those of a group of one:
//
//   all_reduce, reduce, broadcast   buffers untouched (this rank's own values)
//   all_gather                      this rank's slot of recv = send; the others untouched
//   reduce_scatter                  recv = this rank's block of send
//   all_to_all                      this rank's block of recv = its block of send
//   all_to_allv                     the same, with this rank's own counts (the front has
//                                   checked that what it sends itself is what it receives)
//   recv, and sendrecv's receive    untouched
//
// The front has counted the traffic (comm_ledger) before the call: that count, priced by the
// planner's links, is the time these collectives would have taken (`meshtp bench rank`).
#include <cstring>

#include "comm/transport.hpp"
#include "core/error.hpp"

namespace meshtp::comm {
namespace {

class AloneTransport final : public Transport {
 public:
  AloneTransport(int rank, int size, std::string label)
      : rank_(rank), size_(size), label_(std::move(label)) {}

  TransportKind kind() const override { return TransportKind::kAlone; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& label() const override { return label_; }
  std::shared_ptr<Transport> split(int, int, std::string label) const override {
    fail("{} runs alone and cannot split into '{}': the other ranks' colors are unknown; build "
         "alone groups with Communicator::alone",
         label_, label);
  }
  int ranks_on_this_node() const override { return 1; }
  bool same_group(const Transport& other) const override { return &other == this; }

  void all_reduce(Buffer, ReduceOp) override {}
  void all_gather(ConstBuffer send, Buffer recv) override { own_slot(send, recv); }
  void reduce_scatter(ConstBuffer send, Buffer recv, ReduceOp) override { own_block(send, recv); }
  void broadcast(Buffer, int) override {}
  void reduce(ConstBuffer, Buffer, int, ReduceOp) override {}
  void all_to_all(ConstBuffer send, Buffer recv) override {
    const std::size_t block = send.count / static_cast<std::size_t>(size_);
    copy(recv, rank_ * block, send, rank_ * block, block);
  }
  void all_to_allv(ConstBuffer send, std::span<const std::int64_t> send_counts, Buffer recv,
                   std::span<const std::int64_t> recv_counts) override {
    std::size_t send_at = 0, recv_at = 0;
    for (int r = 0; r < rank_; ++r) {
      send_at += static_cast<std::size_t>(send_counts[r]);
      recv_at += static_cast<std::size_t>(recv_counts[r]);
    }
    copy(recv, recv_at, send, send_at, static_cast<std::size_t>(send_counts[rank_]));
  }
  void send(ConstBuffer, int, int) override {}
  void recv(Buffer, int, int) override {}
  void sendrecv(ConstBuffer, int, Buffer, int, int) override {}
  void barrier() override {}

  // Every non-blocking operation is complete when it starts: an empty Request.
  Request iall_reduce(Buffer, ReduceOp) override { return {}; }
  Request iall_gather(ConstBuffer send, Buffer recv) override {
    all_gather(send, recv);
    return {};
  }
  Request ireduce_scatter(ConstBuffer send, Buffer recv, ReduceOp op) override {
    reduce_scatter(send, recv, op);
    return {};
  }
  Request ibroadcast(Buffer, int) override { return {}; }
  Request iall_to_all(ConstBuffer send, Buffer recv) override {
    all_to_all(send, recv);
    return {};
  }
  Request iall_to_allv(ConstBuffer send, std::span<const std::int64_t> send_counts, Buffer recv,
                       std::span<const std::int64_t> recv_counts) override {
    all_to_allv(send, send_counts, recv, recv_counts);
    return {};
  }
  Request isend(ConstBuffer, int, int) override { return {}; }
  Request irecv(Buffer, int, int) override { return {}; }
  Request ibarrier() override { return {}; }

 private:
  static void copy(Buffer dst, std::size_t dst_at, ConstBuffer src, std::size_t src_at,
                   std::size_t count) {
    const std::size_t es = element_size(src.type);
    if (count == 0 || dst.data == src.data) return;
    std::memmove(static_cast<char*>(dst.data) + dst_at * es,
                 static_cast<const char*>(src.data) + src_at * es, count * es);
  }
  void own_slot(ConstBuffer send, Buffer recv) const {
    copy(recv, static_cast<std::size_t>(rank_) * send.count, send, 0, send.count);
  }
  void own_block(ConstBuffer send, Buffer recv) const {
    copy(recv, 0, send, static_cast<std::size_t>(rank_) * recv.count, recv.count);
  }

  int rank_;
  int size_;
  std::string label_;
};

}  // namespace

std::shared_ptr<Transport> alone_transport(int rank, int size, std::string label) {
  MESHTP_CHECK(size >= 1, "an alone group needs at least 1 rank, got {}", size);
  MESHTP_CHECK(rank >= 0 && rank < size, "rank {} is outside an alone group of {} ranks", rank,
               size);
  return std::make_shared<AloneTransport>(rank, size, std::move(label));
}

}  // namespace meshtp::comm
