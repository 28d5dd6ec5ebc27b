// The watchdog (comm/watchdog.hpp) on 2 ranks: a wait past the deadline throws an error
// naming the operation, the group and the rank that did not arrive — and what that rank is
// doing instead — while a peer that is only slow is no error.
//
// After a timeout each test lets the abandoned operations complete (the peer joins late),
// so the next test starts from a clean state; the job is not aborted here as the CLI would.
#include <gtest/gtest.h>

#include <chrono>
#include <limits>
#include <thread>

#include "comm/communicator.hpp"
#include "comm/watchdog.hpp"
#include "core/error.hpp"

namespace meshtp::comm {
namespace {

class Watchdog : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!watchdog_available()) GTEST_SKIP() << "built with MESHTP_COMM_WATCHDOG=OFF";
    if (world.size() != 2) GTEST_SKIP() << "a 2-rank test";
    previous_ = comm_timeout();
  }
  void TearDown() override { set_comm_timeout(previous_); }

  Communicator world = Communicator::world();
  int rank = world.rank();

 private:
  double previous_ = 0;
};

void sleep_s(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

TEST_F(Watchdog, RejectsANegativeTimeout) {
  EXPECT_THROW(set_comm_timeout(-1), Error);
  EXPECT_THROW(set_comm_timeout(std::numeric_limits<double>::infinity()), Error);
}

TEST_F(Watchdog, ASlowPeerWithinTheDeadlineIsNoError) {
  set_comm_timeout(5);
  if (rank == 1) sleep_s(0.5);
  int x = rank + 1;
  world.all_reduce(std::span<int>(&x, 1));
  EXPECT_EQ(x, 3);
  std::vector<float> buf(4, static_cast<float>(rank));
  if (rank == 0) sleep_s(0.3);
  if (rank == 0) {
    world.send(std::span<const float>(buf), 1, 7);
  } else {
    world.recv(std::span<float>(buf), 0, 7);
  }
  EXPECT_EQ(buf[0], 0.0f);
}

TEST_F(Watchdog, NamesTheRankThatDidNotArrive) {
  set_comm_timeout(1);  // grace: 1 s more
  int x = 1;
  if (rank == 1) {
    sleep_s(3);  // busy outside communication: it cannot answer the query
    world.all_reduce(std::span<int>(&x, 1));  // completes rank 0's abandoned one
  } else {
    try {
      world.all_reduce(std::span<int>(&x, 1));
      ADD_FAILURE() << "all_reduce returned although rank 1 never arrived in time";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("all_reduce #"), std::string::npos) << m;
      EXPECT_NE(m.find("on the world (world ranks 0,1)"), std::string::npos) << m;
      EXPECT_NE(m.find("within 1 s"), std::string::npos) << m;
      EXPECT_NE(m.find("world rank 1 did not arrive (no answer: stopped, dead, or busy"),
                std::string::npos)
          << m;
    }
  }
  set_comm_timeout(30);
  world.barrier();
}

TEST_F(Watchdog, SaysWhereTheMissingRankWaits) {
  // A deadlock: rank 0 waits in a collective, rank 1 in a receive from rank 0. Rank 1's
  // deadline is later, so rank 0 has given up and moved on to the next barrier by the time
  // rank 1 asks where it is: it must still name the all_reduce it abandoned.
  set_comm_timeout(rank == 0 ? 1 : 3);
  const Communicator pair = world.split(0, rank, "the pair");
  int x = 1;
  std::string message;
  try {
    if (rank == 0) {
      pair.all_reduce(std::span<int>(&x, 1));
    } else {
      pair.recv(std::span<int>(&x, 1), 0, 99);
    }
  } catch (const Error& e) {
    message = e.what();
  }
  if (rank == 0) {
    EXPECT_NE(message.find("all_reduce #1 on the pair (world ranks 0,1)"), std::string::npos)
        << message;
    // Rank 1 is still waiting (its deadline is 3 s), or — on a very loaded machine — has
    // given up on that receive by now: either way it names the receive.
    EXPECT_NE(message.find("world rank 1 did not arrive ("), std::string::npos) << message;
    EXPECT_NE(message.find("waiting in recv with world rank 0 on the pair"), std::string::npos)
        << message;
    // Both ranks run on this one host: no host is named (across hosts the message ends
    // "; on host NAME (world rank 1)": tests/cluster, cluster_cut).
    EXPECT_EQ(message.find("; on host"), std::string::npos) << message;
  } else {
    EXPECT_NE(message.find("recv with world rank 0 on the pair (world ranks 0,1) did not "
                           "complete within 3 s"),
              std::string::npos)
        << message;
    // Rank 0 gave up at ~2 s (after following its own chain one timeout further) and waits
    // in the test's next barrier now; it answers with the all_reduce it abandoned.
    EXPECT_NE(message.find("world rank 0 did not arrive (gave up waiting in all_reduce #1 on "
                           "the pair"),
              std::string::npos)
        << message;
  }
  // Unblock both abandoned operations: the receive gets its message, the all_reduce its peer
  // (once both ranks have given up, or the receive would just complete late).
  set_comm_timeout(30);
  world.barrier();
  if (rank == 0) {
    pair.send(std::span<const int>(&x, 1), 1, 99);
  } else {
    pair.all_reduce(std::span<int>(&x, 1));
  }
  world.barrier();
}

}  // namespace
}  // namespace meshtp::comm
