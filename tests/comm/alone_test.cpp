// The alone transport (communicator.hpp, TransportKind::kAlone): one process plays one rank of
// a group whose other members do not exist. Every operation validates as the MPI front does,
// counts the traffic a real group would send, and leaves exactly this rank's own part in the
// receive buffers (alone_transport.cpp's table). No MPI: a plain unit test.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "comm/communicator.hpp"
#include "core/error.hpp"
#include "error_of.hpp"

// The call throws a meshtp::Error whose message holds `text`.
#define EXPECT_THAT_ERROR(expr, text)                                              \
  do {                                                                             \
    const std::string message = test_support::error_of([&] { (void)(expr); });  \
    EXPECT_NE(message.find(text), std::string::npos) << "error was: '" << message << "'"; \
  } while (0)

namespace meshtp::comm {
namespace {

constexpr float kUntouched = -7.0f;

std::vector<float> filled(std::size_t n, float first) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = first + static_cast<float>(i);
  return v;
}

TEST(AloneTransport, ReportsItsRankSizeAndKind) {
  const Communicator c = Communicator::alone(2, 4, "test group");
  EXPECT_EQ(c.rank(), 2);
  EXPECT_EQ(c.size(), 4);
  EXPECT_EQ(c.transport(), TransportKind::kAlone);
  EXPECT_STREQ(to_string(c.transport()), "alone");
  EXPECT_EQ(c.label(), "test group");
  EXPECT_EQ(c.ranks_on_this_node(), 1);
}

TEST(AloneTransport, ReductionsAndBroadcastKeepThisRanksValues) {
  const Communicator c = Communicator::alone(1, 3);
  auto buf = filled(4, 10.0f);
  c.all_reduce(std::span<float>(buf));
  EXPECT_EQ(buf, filled(4, 10.0f));
  c.broadcast(std::span<float>(buf), 0);
  EXPECT_EQ(buf, filled(4, 10.0f));
  Request r = c.iall_reduce(std::span<float>(buf), ReduceOp::kMax);
  EXPECT_FALSE(r.pending());  // complete when started
  EXPECT_EQ(buf, filled(4, 10.0f));
}

TEST(AloneTransport, AllGatherFillsOnlyThisRanksSlot) {
  const Communicator c = Communicator::alone(2, 3);
  const auto send = filled(2, 1.0f);
  std::vector<float> recv(6, kUntouched);
  c.all_gather(std::span<const float>(send), std::span<float>(recv));
  EXPECT_EQ(recv, (std::vector<float>{kUntouched, kUntouched, kUntouched, kUntouched, 1, 2}));
  std::vector<float> again(6, kUntouched);
  Request r = c.iall_gather(std::span<const float>(send), std::span<float>(again));
  r.wait();
  EXPECT_EQ(again, recv);
}

TEST(AloneTransport, ReduceScatterGivesThisRanksBlockOfItsOwnSend) {
  const Communicator c = Communicator::alone(1, 3);
  const auto send = filled(6, 0.0f);  // blocks {0,1} {2,3} {4,5}
  std::vector<float> recv(2, kUntouched);
  c.reduce_scatter(std::span<const float>(send), std::span<float>(recv));
  EXPECT_EQ(recv, (std::vector<float>{2, 3}));
}

TEST(AloneTransport, AllToAllKeepsThisRanksOwnBlock) {
  const Communicator c = Communicator::alone(0, 2);
  const auto send = filled(4, 5.0f);
  std::vector<float> recv(4, kUntouched);
  c.all_to_all(std::span<const float>(send), std::span<float>(recv));
  EXPECT_EQ(recv, (std::vector<float>{5, 6, kUntouched, kUntouched}));
}

TEST(AloneTransport, AllToAllvKeepsThisRanksOwnBlock) {
  const Communicator c = Communicator::alone(1, 3);
  const auto send = filled(5, 0.0f);  // blocks of 1, 2, 2: rank 1's own is {1, 2}
  const std::vector<std::int64_t> send_counts{1, 2, 2}, recv_counts{3, 2, 0};
  std::vector<float> recv(5, kUntouched);
  c.all_to_allv(std::span<const float>(send), std::span<const std::int64_t>(send_counts),
                std::span<float>(recv), std::span<const std::int64_t>(recv_counts));
  EXPECT_EQ(recv, (std::vector<float>{kUntouched, kUntouched, kUntouched, 1, 2}));
  // What it sends itself must be what it expects from itself.
  const std::vector<std::int64_t> mismatched{3, 1, 1};
  EXPECT_THROW(c.all_to_allv(std::span<const float>(send), std::span<const std::int64_t>(send_counts),
                             std::span<float>(recv), std::span<const std::int64_t>(mismatched)),
               Error);
}

TEST(AloneTransport, ReceivesLeaveTheirBuffersUntouched) {
  const Communicator c = Communicator::alone(0, 2);
  std::vector<float> buf(3, kUntouched);
  const auto send = filled(3, 1.0f);
  c.send(std::span<const float>(send), 1);
  c.recv(std::span<float>(buf), 1);
  c.sendrecv(std::span<const float>(send), 1, std::span<float>(buf), 1);
  Request r = c.irecv(std::span<float>(buf), 1);
  r.wait();
  EXPECT_EQ(buf, std::vector<float>(3, kUntouched));
}

TEST(AloneTransport, ValidatesLikeTheMpiFront) {
  const Communicator c = Communicator::alone(0, 4);
  std::vector<float> send(2), recv(7);
  EXPECT_THAT_ERROR(c.all_gather(std::span<const float>(send), std::span<float>(recv)),
                    "receive buffer holds 7 elements but 4 ranks × 2 sent need 8");
  EXPECT_THAT_ERROR(c.send(std::span<const float>(send), 4), "destination rank 4");
  EXPECT_THAT_ERROR(c.split(0, 0, "rows"), "cannot split into 'rows'");
  EXPECT_THAT_ERROR(Communicator::alone(3, 3), "rank 3 is outside an alone group of 3");
  EXPECT_THAT_ERROR(Communicator::alone(0, 0), "at least 1 rank, got 0");
}

TEST(AloneTransport, CountsTheTrafficARealGroupWouldSend) {
  comm_ledger().reset_traffic();
  comm_ledger().count_traffic = true;
  Communicator c = Communicator::alone(1, 4);
  c.set_traffic_label(0);
  std::vector<float> buf(8);
  c.all_reduce(std::span<float>(buf));  // 32 bytes: 2(P−1)/P · n = 48 sent
  const TrafficCount& t = comm_ledger().traffic(layout::CollectiveKind::kAllReduce, 0);
  EXPECT_EQ(t.launches, 1);
  EXPECT_EQ(t.message_bytes, 32);
  EXPECT_DOUBLE_EQ(t.sent_bytes, 48.0);
  comm_ledger().count_traffic = false;
  comm_ledger().reset_traffic();
}

// Element types travel as values: bf16 words move like any 2-byte type and are never summed.
TEST(AloneTransport, Bf16MovesButDoesNotReduce) {
  const Communicator c = Communicator::alone(1, 2);
  std::vector<std::uint16_t> words{0x3f80, 0x4000}, gathered(4, 0);
  c.all_gather(ConstBuffer{words.data(), Element::kBF16, words.size()},
               Buffer{gathered.data(), Element::kBF16, gathered.size()});
  EXPECT_EQ(gathered, (std::vector<std::uint16_t>{0, 0, 0x3f80, 0x4000}));
  EXPECT_THAT_ERROR(c.all_reduce(Buffer{words.data(), Element::kBF16, words.size()},
                                 ReduceOp::kSum),
                    "cannot reduce bf16 elements");
  std::vector<float> f(4);
  EXPECT_THAT_ERROR(c.all_gather(ConstBuffer{words.data(), Element::kBF16, 2},
                                 Buffer{f.data(), Element::kF32, 4}),
                    "send holds bf16 and receive fp32");
}

}  // namespace
}  // namespace meshtp::comm
