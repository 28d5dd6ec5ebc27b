// One collective per chunk, over one mesh-dim group: started non-blocking by the stage that
// produced chunk i, waited by the stage that consumes it (ATP §4's chunk-based overlap).
//
//   kAllReduce      send == recv (in place), Partial → Replicate
//   kReduceScatter  |send| = P·|recv|: member r keeps the sum of block r of the chunk
//   kAllGather      |recv| = P·|send|: recv = [send of member 0 | … | member P−1]
//   kNone           no communication: the producer wrote the consumer's buffer directly
//                   (send and recv must be the same memory)
//
// A group of one member (a mesh dim of size 1) makes every kind kNone, so the layers never
// call MPI on a trivial group. Chunk spans are contiguous (chunked.hpp), so a reduce-scatter
// or all-gather of a chunk splits it into P contiguous blocks: row blocks in sequence
// parallelism, whole-head column pieces in the attention block.
//
// The Request slots are allocated once (constructor); start/wait allocate nothing here.
#pragma once

#include <span>
#include <vector>

#include "comm/communicator.hpp"
#include "core/view.hpp"
#include "layout/vocabulary.hpp"

namespace meshtp::parallel {

using layout::CollectiveKind;  // none, all_reduce, reduce_scatter or all_gather here

class ChunkedCollective {
 public:
  ChunkedCollective() = default;
  // group may be null (no communication); it must outlive this object.
  ChunkedCollective(CollectiveKind kind, const comm::Communicator* group, int chunks);

  CollectiveKind kind() const { return kind_; }
  bool active() const { return kind_ != CollectiveKind::kNone; }
  int group_size() const;

  // Starts chunk i's collective on two packed views (chunk messages) in memory the group's
  // transport carries (kNone: checks that send and recv alias, does nothing).
  void start(int i, const View& send, const View& recv);
  void wait(int i);
  void wait_all();
  // Whether a chunk was started and not yet waited: program order, not whether the transport
  // has finished it, so whatever depends on it (gemm_poked's cut) is the same on every run.
  bool any_pending() const;
  // MPI_Test on every pending chunk: lets Open MPI advance them.
  void poke();

 private:
  CollectiveKind kind_ = CollectiveKind::kNone;
  const comm::Communicator* group_ = nullptr;
  std::vector<comm::Request> pending_;
  std::vector<char> started_;  // per chunk: started, not yet waited
};

}  // namespace meshtp::parallel
