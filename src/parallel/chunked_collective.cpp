#include "parallel/chunked_collective.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/trace.hpp"

namespace meshtp::parallel {

ChunkedCollective::ChunkedCollective(CollectiveKind kind, const comm::Communicator* group,
                                     int chunks)
    : kind_(group == nullptr || group->size() == 1 ? CollectiveKind::kNone : kind),
      group_(group),
      pending_(static_cast<std::size_t>(chunks)),
      started_(static_cast<std::size_t>(chunks), 0) {
  MESHTP_CHECK(chunks >= 1, "a chunked collective needs chunks >= 1, got {}", chunks);
}

int ChunkedCollective::group_size() const { return group_ == nullptr ? 1 : group_->size(); }

void ChunkedCollective::start(int i, const View& send, const View& recv) {
  MESHTP_CHECK(i >= 0 && i < static_cast<int>(pending_.size()),
               "chunk {} of a collective over {} chunks", i, pending_.size());
  auto& slot = pending_[static_cast<std::size_t>(i)];
  MESHTP_CHECK(!slot.pending(), "{} of chunk {} started twice", name(kind_), i);
  const ScopedSpan span("comm_issue", SpanKind::kCompute);  // MPI may do the work right here
  started_[static_cast<std::size_t>(i)] = kind_ != CollectiveKind::kNone;
  switch (kind_) {
    case CollectiveKind::kNone:
      MESHTP_CHECK(send.data == recv.data && send.elements() == recv.elements(),
                   "no collective: the producer must write the consumer's buffer");
      return;
    case CollectiveKind::kAllReduce:
      MESHTP_CHECK(send.data == recv.data, "all_reduce runs in place");
      slot = group_->iall_reduce(comm::buffer_of(recv), comm::ReduceOp::kSum);
      return;
    case CollectiveKind::kReduceScatter:
      slot = group_->ireduce_scatter(comm::const_buffer_of(send), comm::buffer_of(recv),
                                     comm::ReduceOp::kSum);
      return;
    case CollectiveKind::kAllGather:
      slot = group_->iall_gather(comm::const_buffer_of(send), comm::buffer_of(recv));
      return;
    default:
      fail("a chunked collective cannot be a {}", kind_);
  }
}

void ChunkedCollective::wait(int i) {
  pending_[static_cast<std::size_t>(i)].wait();
  started_[static_cast<std::size_t>(i)] = 0;
}

void ChunkedCollective::wait_all() {
  for (auto& r : pending_) r.wait();
  std::fill(started_.begin(), started_.end(), 0);
}

bool ChunkedCollective::any_pending() const {
  return std::find(started_.begin(), started_.end(), 1) != started_.end();
}

void ChunkedCollective::poke() {
  const ScopedSpan span("progress", SpanKind::kCompute);
  for (auto& r : pending_) {
    if (r.pending()) r.test();
  }
}

}  // namespace meshtp::parallel
