// Every collective with exact expected values. Inputs are unique across ranks and elements
// (value = rank·1000 + element), small integers that fp32 adds exactly, so results are
// compared with ==, not a tolerance.
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "comm/communicator.hpp"
#include "core/error.hpp"
#include "core/trace.hpp"

namespace meshtp::comm {
namespace {

constexpr int kCount = 5;

float value(int rank, int element) { return static_cast<float>(rank * 1000 + element); }

class Collectives : public ::testing::Test {
 protected:
  Communicator world = Communicator::world();
  int rank = world.rank();
  int size = world.size();

  std::vector<float> mine(int count) const {
    std::vector<float> v(static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) v[i] = value(rank, i);
    return v;
  }
  float sum_over_ranks(int element) const {
    float s = 0;
    for (int r = 0; r < size; ++r) s += value(r, element);
    return s;
  }
};

TEST_F(Collectives, AllReduceSumAndMax) {
  auto buf = mine(kCount);
  world.all_reduce(std::span<float>(buf));
  for (int i = 0; i < kCount; ++i) EXPECT_EQ(buf[i], sum_over_ranks(i)) << "rank " << rank;
  buf = mine(kCount);
  world.all_reduce(std::span<float>(buf), ReduceOp::kMax);
  for (int i = 0; i < kCount; ++i) EXPECT_EQ(buf[i], value(size - 1, i)) << "rank " << rank;
}

// An empty buffer (a data-parallel bucket of a pipeline chunk without parameters of a kind)
// is reduced by nothing; SimGrid's SMPI used to die of SIGFPE on it (its pipelined reduce
// divides by the count). The collectives after it still match.
TEST_F(Collectives, EmptyAllReduceIsANoOp) {
  std::vector<float> none;
  world.all_reduce(std::span<float>(none));
  Request r = world.iall_reduce(std::span<float>(none));
  r.wait();
  auto buf = mine(kCount);
  world.all_reduce(std::span<float>(buf));
  for (int i = 0; i < kCount; ++i) EXPECT_EQ(buf[i], sum_over_ranks(i));
}

TEST_F(Collectives, AllReduceOtherTypes) {
  std::vector<double> d{1.5 * rank, 2.0};
  world.all_reduce(std::span<double>(d));
  EXPECT_EQ(d[0], 1.5 * size * (size - 1) / 2);
  EXPECT_EQ(d[1], 2.0 * size);
  std::vector<std::int64_t> big{std::int64_t{1} << 40};
  world.all_reduce(std::span<std::int64_t>(big));
  EXPECT_EQ(big[0], (std::int64_t{1} << 40) * size);
}

// bf16 buffers travel as 2-byte words through the type-erased front (Buffer carries the
// element type): gathered and broadcast bit for bit, and refused by every reduction before MPI
// is called, on every rank alike, so the group stays usable.
TEST_F(Collectives, Bf16WordsMoveBitForBitAndAreNeverReduced) {
  const auto word = [](int r, int i) { return static_cast<std::uint16_t>(0x3f80 + 16 * r + i); };
  std::vector<std::uint16_t> mine_words{word(rank, 0), word(rank, 1)};
  std::vector<std::uint16_t> gathered(static_cast<std::size_t>(2 * size));
  world.all_gather(ConstBuffer{mine_words.data(), Element::kBF16, 2},
                   Buffer{gathered.data(), Element::kBF16, gathered.size()});
  for (int r = 0; r < size; ++r) {
    EXPECT_EQ(gathered[2 * r], word(r, 0));
    EXPECT_EQ(gathered[2 * r + 1], word(r, 1));
  }
  std::vector<std::uint16_t> root_words{word(rank, 0)};
  world.broadcast(Buffer{root_words.data(), Element::kBF16, 1}, size - 1);
  EXPECT_EQ(root_words[0], word(size - 1, 0));
  try {
    world.all_reduce(Buffer{mine_words.data(), Element::kBF16, 2}, ReduceOp::kSum);
    FAIL() << "a bf16 all_reduce was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("all_reduce: cannot reduce bf16 elements"),
              std::string::npos)
        << e.what();
  }
  std::vector<std::uint16_t> block(2);
  EXPECT_THROW(world.reduce_scatter(ConstBuffer{gathered.data(), Element::kBF16, gathered.size()},
                                    Buffer{block.data(), Element::kBF16, 2}, ReduceOp::kSum),
               Error);
  std::vector<float> one{1.0f};
  world.all_reduce(std::span<float>(one));
  EXPECT_EQ(one[0], static_cast<float>(size));
}

TEST_F(Collectives, AllGatherConcatenatesInRankOrder) {
  const auto send = mine(kCount);
  std::vector<float> recv(static_cast<std::size_t>(kCount * size), -1.0f);
  world.all_gather(std::span<const float>(send), std::span<float>(recv));
  for (int r = 0; r < size; ++r)
    for (int i = 0; i < kCount; ++i) EXPECT_EQ(recv[r * kCount + i], value(r, i));
}

TEST_F(Collectives, ReduceScatterGivesEachRankItsBlock) {
  const auto send = mine(kCount * size);
  std::vector<float> recv(kCount, -1.0f);
  world.reduce_scatter(std::span<const float>(send), std::span<float>(recv));
  for (int i = 0; i < kCount; ++i) EXPECT_EQ(recv[i], sum_over_ranks(rank * kCount + i));
  world.reduce_scatter(std::span<const float>(send), std::span<float>(recv), ReduceOp::kMax);
  for (int i = 0; i < kCount; ++i) EXPECT_EQ(recv[i], value(size - 1, rank * kCount + i));
}

TEST_F(Collectives, BroadcastFromLastRank) {
  auto buf = mine(kCount);
  world.broadcast(std::span<float>(buf), size - 1);
  for (int i = 0; i < kCount; ++i) EXPECT_EQ(buf[i], value(size - 1, i));
}

TEST_F(Collectives, ReduceToRootOnly) {
  const auto send = mine(kCount);
  std::vector<float> recv(kCount, -1.0f);
  world.reduce(std::span<const float>(send), std::span<float>(recv), 0);
  for (int i = 0; i < kCount; ++i) {
    EXPECT_EQ(recv[i], rank == 0 ? sum_over_ranks(i) : -1.0f) << "rank " << rank;
  }
}

TEST_F(Collectives, AllToAllTransposesBlocks) {
  // Block j of rank q's send = q·1000 + j·10 + e; rank r's recv block i came from rank i.
  std::vector<float> send(static_cast<std::size_t>(kCount * size));
  for (int j = 0; j < size; ++j)
    for (int e = 0; e < kCount; ++e) send[j * kCount + e] = value(rank, j * 10 + e);
  std::vector<float> recv(send.size(), -1.0f);
  world.all_to_all(std::span<const float>(send), std::span<float>(recv));
  for (int i = 0; i < size; ++i)
    for (int e = 0; e < kCount; ++e) EXPECT_EQ(recv[i * kCount + e], value(i, rank * 10 + e));
}

// Rank q sends rank j a block of (q + 2·j) % 3 elements (empty blocks included), each
// element q·1000 + j·10 + e; rank r's recv block i must hold rank i's block for r.
TEST_F(Collectives, AllToAllvMovesBlocksOfTheirOwnSizes) {
  const auto n = [](int q, int j) { return static_cast<std::int64_t>((q + 2 * j) % 3); };
  std::vector<std::int64_t> send_counts, recv_counts;
  std::vector<float> send;
  for (int j = 0; j < size; ++j) {
    send_counts.push_back(n(rank, j));
    recv_counts.push_back(n(j, rank));
    for (int e = 0; e < n(rank, j); ++e) send.push_back(value(rank, j * 10 + e));
  }
  const auto total = std::accumulate(recv_counts.begin(), recv_counts.end(), std::int64_t{0});
  for (const bool nonblocking : {false, true}) {
    std::vector<float> recv(static_cast<std::size_t>(total), -1.0f);
    if (nonblocking) {
      Request r = world.iall_to_allv(std::span<const float>(send),
                                     std::span<const std::int64_t>(send_counts),
                                     std::span<float>(recv),
                                     std::span<const std::int64_t>(recv_counts));
      r.wait();
    } else {
      world.all_to_allv(std::span<const float>(send), std::span<const std::int64_t>(send_counts),
                        std::span<float>(recv), std::span<const std::int64_t>(recv_counts));
    }
    std::size_t at = 0;
    for (int i = 0; i < size; ++i)
      for (int e = 0; e < n(i, rank); ++e)
        EXPECT_EQ(recv[at++], value(i, rank * 10 + e)) << "from " << i << " nonblocking "
                                                         << nonblocking;
  }
}

TEST_F(Collectives, AllToAllvRefusesCountsThatDoNotAddUp) {
  std::vector<float> send(static_cast<std::size_t>(size), 1.0f), recv(send.size());
  std::vector<std::int64_t> ones(static_cast<std::size_t>(size), 1);
  std::vector<std::int64_t> short_counts(static_cast<std::size_t>(size) + 1, 1);
  std::vector<std::int64_t> negative = ones;
  negative[0] = -1;
  const auto call = [&](std::span<const std::int64_t> sc, std::span<const std::int64_t> rc) {
    world.all_to_allv(std::span<const float>(send), sc, std::span<float>(recv), rc);
  };
  try {
    call(short_counts, ones);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "all_to_allv: " + std::to_string(size + 1) +
                                         " send counts and " + std::to_string(size) +
                                         " receive counts for a group of " +
                                         std::to_string(size));
  }
  EXPECT_THROW(call(negative, ones), Error);
  std::vector<std::int64_t> twos(static_cast<std::size_t>(size), 2);
  EXPECT_THROW(call(twos, ones), Error);  // sums to 2·P, the buffer holds P
  // Everyone threw before MPI: the group is still usable.
  call(ones, ones);
  for (int i = 0; i < size; ++i) EXPECT_EQ(recv[i], 1.0f);
}

TEST_F(Collectives, RingSendRecvAndSendRecv) {
  const int next = (rank + 1) % size;
  const int prev = (rank + size - 1) % size;
  const auto send = mine(kCount);
  std::vector<float> recv(kCount, -1.0f);
  world.sendrecv(std::span<const float>(send), next, std::span<float>(recv), prev, 7);
  for (int i = 0; i < kCount; ++i) EXPECT_EQ(recv[i], value(prev, i));
  if (size > 1) {  // blocking send/recv in a ring: even ranks send first, odd ranks receive
    std::fill(recv.begin(), recv.end(), -1.0f);
    if (rank % 2 == 0) {
      world.send(std::span<const float>(send), next, 3);
      world.recv(std::span<float>(recv), prev, 3);
    } else {
      world.recv(std::span<float>(recv), prev, 3);
      world.send(std::span<const float>(send), next, 3);
    }
    for (int i = 0; i < kCount; ++i) EXPECT_EQ(recv[i], value(prev, i));
  }
}

TEST_F(Collectives, NonBlockingVersionsMatchBlocking) {
  auto reduced = mine(kCount);
  const auto send = mine(kCount);
  std::vector<float> gathered(static_cast<std::size_t>(kCount * size));
  const auto scatter_in = mine(kCount * size);
  std::vector<float> scattered(kCount);
  auto bcast = mine(kCount);
  std::vector<float> ring(kCount);
  const int next = (rank + 1) % size;
  const int prev = (rank + size - 1) % size;

  std::vector<Request> requests;
  requests.push_back(world.iall_reduce(std::span<float>(reduced)));
  requests.push_back(world.iall_gather(std::span<const float>(send), std::span<float>(gathered)));
  requests.push_back(
      world.ireduce_scatter(std::span<const float>(scatter_in), std::span<float>(scattered)));
  requests.push_back(world.ibroadcast(std::span<float>(bcast), 0));
  requests.push_back(world.irecv(std::span<float>(ring), prev, 11));
  requests.push_back(world.isend(std::span<const float>(send), next, 11));
  int completions = 0;
  requests[0].then([&] { ++completions; });
  while (!requests[0].test()) {
  }
  EXPECT_EQ(completions, 1);
  wait_all(requests);
  EXPECT_EQ(completions, 1);  // a completion step runs exactly once
  for (int i = 0; i < kCount; ++i) {
    EXPECT_EQ(reduced[i], sum_over_ranks(i));
    EXPECT_EQ(scattered[i], sum_over_ranks(rank * kCount + i));
    EXPECT_EQ(bcast[i], value(0, i));
    EXPECT_EQ(ring[i], value(prev, i));
  }
  for (int r = 0; r < size; ++r)
    for (int i = 0; i < kCount; ++i) EXPECT_EQ(gathered[r * kCount + i], value(r, i));

  std::vector<float> a2a_in(static_cast<std::size_t>(size), static_cast<float>(rank));
  std::vector<float> a2a_out(a2a_in.size());
  Request r = world.iall_to_all(std::span<const float>(a2a_in), std::span<float>(a2a_out));
  bool unpacked = false;
  r.then([&] { unpacked = true; });
  EXPECT_TRUE(r.pending());
  r.wait();
  EXPECT_FALSE(r.pending());
  EXPECT_TRUE(unpacked);
  for (int i = 0; i < size; ++i) EXPECT_EQ(a2a_out[i], static_cast<float>(i));
}

TEST_F(Collectives, SplitFormsSubgroupsOrderedByKey) {
  // Even and odd ranks; key reversed so the highest world rank is subgroup rank 0.
  const Communicator half = world.split(rank % 2, size - rank);
  const int expected_size = (size + 1 - rank % 2) / 2;
  EXPECT_EQ(half.size(), expected_size);
  std::vector<int> ranks{rank};
  world.barrier();
  std::vector<int> members(static_cast<std::size_t>(half.size()));
  half.all_gather(std::span<const int>(ranks), std::span<int>(members));
  EXPECT_TRUE(std::is_sorted(members.rbegin(), members.rend()));
  for (const int m : members) EXPECT_EQ(m % 2, rank % 2);
  EXPECT_TRUE(half.same_group(half));
  EXPECT_EQ(world.same_group(half), size == 1);
}

TEST_F(Collectives, BufferMismatchesAreRejectedBeforeMpi) {
  const std::vector<float> send(3);
  std::vector<float> recv(static_cast<std::size_t>(3 * size + 1));
  try {
    world.all_gather(std::span<const float>(send), std::span<float>(recv));
    FAIL() << "mismatched all_gather accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "all_gather: receive buffer holds " + std::to_string(3 * size + 1) +
                  " elements but " + std::to_string(size) + " ranks × 3 sent need " +
                  std::to_string(3 * size));
  }
  std::vector<float> small(2);
  EXPECT_THROW(world.reduce_scatter(std::span<const float>(send), std::span<float>(small)),
               Error);
  EXPECT_THROW(world.all_to_all(std::span<const float>(send), std::span<float>(small)), Error);
  EXPECT_THROW(world.broadcast(std::span<float>(small), size), Error);
  EXPECT_THROW((void)world.isend(std::span<const float>(send), -1), Error);
  // Everyone threw at the same point: the group is still usable.
  std::vector<float> one{1.0f};
  world.all_reduce(std::span<float>(one));
  EXPECT_EQ(one[0], static_cast<float>(size));
}

TEST_F(Collectives, RecvOfWrongSizeNamesBothCounts) {
  if (size < 2) GTEST_SKIP() << "needs a peer";
  const std::vector<float> send(4, 1.0f);
  std::vector<float> recv(6);
  const int next = (rank + 1) % size;
  const int prev = (rank + size - 1) % size;
  try {
    world.sendrecv(std::span<const float>(send), next, std::span<float>(recv), prev, 5);
    FAIL() << "short message accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected 6 elements from rank " + std::to_string(prev) +
                                         ", received 4"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(Collectives, TracedCollectivesRecordCommAndWaitSpans) {
  Tracer& tracer = Tracer::instance();
  tracer.clear();
  tracer.enable();
  std::vector<float> buf(8, 1.0f);
  world.all_reduce(std::span<float>(buf));
  Request r = world.iall_reduce(std::span<float>(buf));
  r.wait();
  tracer.disable();
  std::vector<std::string> names;
  for (const TraceSpan& s : tracer.spans()) {
    names.push_back(s.name);
    EXPECT_LE(s.start_s, s.end_s);
  }
  tracer.clear();
  EXPECT_EQ(names, (std::vector<std::string>{"all_reduce", "iall_reduce", "wait"}));
}

}  // namespace
}  // namespace meshtp::comm
