// The host-staged transport (communicator.hpp, TransportKind::kHostStaged) on 1, 2, 4 and 8
// ranks, with exact values, over a stand-in for device memory that the host cannot read as it
// is: InvertedMemory keeps every byte complemented (~b), so a transport that handed a "device"
// pointer to MPI without staging it would sum, gather and send complemented bytes, and every
// value below would be wrong. The copies in and out are counted, and the staging pool's
// allocations too (a repeated step allocates nothing).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "comm/communicator.hpp"
#include "core/device_memory.hpp"
#include "core/error.hpp"
#include "inverted_memory.hpp"

namespace meshtp::comm {
namespace {

using testing::InvertedMemory;

// A "device" array of T: its storage holds the complement of its values' bytes.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(const std::vector<T>& values) : bytes_(values.size() * sizeof(T)) {
    InvertedMemory::invert(bytes_.data(), reinterpret_cast<const unsigned char*>(values.data()),
                           bytes_.size());
    InvertedMemory::track(bytes_.data(), bytes_.size());
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { InvertedMemory::untrack(bytes_.data()); }
  std::vector<T> values() const {
    std::vector<T> v(bytes_.size() / sizeof(T));
    InvertedMemory::invert(reinterpret_cast<unsigned char*>(v.data()), bytes_.data(),
                           bytes_.size());
    return v;
  }
  std::span<T> span() { return {reinterpret_cast<T*>(bytes_.data()), bytes_.size() / sizeof(T)}; }
  std::span<const T> cspan() const {
    return {reinterpret_cast<const T*>(bytes_.data()), bytes_.size() / sizeof(T)};
  }

 private:
  std::vector<unsigned char> bytes_;
};

constexpr int kCount = 5;
constexpr float kUntouched = -7.0f;
float value(int rank, int element) { return static_cast<float>(rank * 1000 + element); }

class HostStaged : public ::testing::Test {
 protected:
  std::shared_ptr<InvertedMemory> memory = std::make_shared<InvertedMemory>();
  Communicator host = Communicator::world();
  Communicator staged = Communicator::host_staged(host, memory);
  int rank = host.rank();
  int size = host.size();

  std::vector<float> mine(int count) const {
    std::vector<float> v(static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) v[static_cast<std::size_t>(i)] = value(rank, i);
    return v;
  }
  float sum_over_ranks(int element) const {
    float s = 0;
    for (int r = 0; r < size; ++r) s += value(r, element);
    return s;
  }
};

TEST_F(HostStaged, IsTheHostGroupOverDeviceMemory) {
  EXPECT_EQ(staged.transport(), TransportKind::kHostStaged);
  EXPECT_STREQ(to_string(staged.transport()), "host-staged");
  EXPECT_EQ(staged.rank(), rank);
  EXPECT_EQ(staged.size(), size);
  EXPECT_EQ(staged.ranks_on_this_node(), host.ranks_on_this_node());
  EXPECT_FALSE(staged.same_group(host));
  EXPECT_TRUE(staged.same_group(Communicator::host_staged(host, memory)));
}

TEST_F(HostStaged, AllReduceSumAndMax) {
  DeviceArray<float> buf(mine(kCount));
  staged.all_reduce(buf.span());
  for (int i = 0; i < kCount; ++i) EXPECT_EQ(buf.values()[i], sum_over_ranks(i)) << "rank " << rank;
  DeviceArray<float> top(mine(kCount));
  staged.all_reduce(top.span(), ReduceOp::kMax);
  for (int i = 0; i < kCount; ++i) EXPECT_EQ(top.values()[i], value(size - 1, i));
  EXPECT_EQ(memory->to_host_calls, 2);
  EXPECT_EQ(memory->to_device_calls, 2);
}

// Host buffers (a loss, a norm, a count the layers reduce on the host) travel over the same
// group unstaged: a staged sum of host floats would add their complements.
TEST_F(HostStaged, MovesHostBuffersAsTheyAre) {
  std::vector<float> sums = mine(kCount);
  staged.all_reduce(std::span<float>(sums));
  for (int i = 0; i < kCount; ++i) EXPECT_EQ(sums[static_cast<std::size_t>(i)], sum_over_ranks(i));
  const std::vector<float> send = mine(kCount);
  std::vector<float> gathered(static_cast<std::size_t>(kCount * size));
  comm::Request r = staged.iall_gather(std::span<const float>(send), std::span<float>(gathered));
  r.wait();
  for (int q = 0; q < size; ++q)
    EXPECT_EQ(gathered[static_cast<std::size_t>(q * kCount)], value(q, 0));
  EXPECT_EQ(memory->to_host_calls, 0);
  EXPECT_EQ(memory->to_device_calls, 0);
  // One host and one device buffer in one operation: each as it is.
  DeviceArray<float> on_device(std::vector<float>(static_cast<std::size_t>(kCount * size)));
  staged.all_gather(std::span<const float>(send), on_device.span());
  for (int q = 0; q < size; ++q)
    EXPECT_EQ(on_device.values()[static_cast<std::size_t>(q * kCount)], value(q, 0));
}

TEST_F(HostStaged, AllGatherAndReduceScatter) {
  const DeviceArray<float> send(mine(kCount));
  DeviceArray<float> gathered(std::vector<float>(static_cast<std::size_t>(kCount * size)));
  staged.all_gather(send.cspan(), gathered.span());
  const auto g = gathered.values();
  for (int r = 0; r < size; ++r)
    for (int i = 0; i < kCount; ++i) EXPECT_EQ(g[static_cast<std::size_t>(r * kCount + i)], value(r, i));

  const DeviceArray<float> whole(mine(kCount * size));
  DeviceArray<float> block(std::vector<float>(kCount, kUntouched));
  staged.reduce_scatter(whole.cspan(), block.span());
  for (int i = 0; i < kCount; ++i) EXPECT_EQ(block.values()[i], sum_over_ranks(rank * kCount + i));
}

TEST_F(HostStaged, BroadcastAndReduceWriteOnlyWhereReceived) {
  DeviceArray<float> buf(mine(kCount));
  staged.broadcast(buf.span(), size - 1);
  for (int i = 0; i < kCount; ++i) EXPECT_EQ(buf.values()[i], value(size - 1, i));

  const DeviceArray<float> send(mine(kCount));
  DeviceArray<float> recv(std::vector<float>(kCount, kUntouched));
  staged.reduce(send.cspan(), recv.span(), 0);
  for (int i = 0; i < kCount; ++i) {
    EXPECT_EQ(recv.values()[i], rank == 0 ? sum_over_ranks(i) : kUntouched) << "rank " << rank;
  }
}

TEST_F(HostStaged, AllToAllAndAllToAllv) {
  const DeviceArray<float> send(mine(size * 2));
  DeviceArray<float> recv(std::vector<float>(static_cast<std::size_t>(size * 2)));
  staged.all_to_all(send.cspan(), recv.span());
  const auto got = recv.values();
  for (int r = 0; r < size; ++r) {
    EXPECT_EQ(got[static_cast<std::size_t>(2 * r)], value(r, 2 * rank));
    EXPECT_EQ(got[static_cast<std::size_t>(2 * r + 1)], value(r, 2 * rank + 1));
  }
  // Rank r sends r + 1 elements to every rank: block j of its send is (r+1) copies of j.
  std::vector<float> out;
  std::vector<std::int64_t> send_counts(static_cast<std::size_t>(size), rank + 1);
  std::vector<std::int64_t> recv_counts(static_cast<std::size_t>(size));
  for (int j = 0; j < size; ++j) {
    for (int k = 0; k <= rank; ++k) out.push_back(value(rank, j));
    recv_counts[static_cast<std::size_t>(j)] = j + 1;
  }
  const DeviceArray<float> vsend(out);
  DeviceArray<float> vrecv(std::vector<float>(static_cast<std::size_t>(size * (size + 1) / 2)));
  staged.all_to_allv(vsend.cspan(), send_counts, vrecv.span(), recv_counts);
  const auto v = vrecv.values();
  std::size_t at = 0;
  for (int i = 0; i < size; ++i)
    for (int k = 0; k <= i; ++k) EXPECT_EQ(v[at++], value(i, rank)) << "from rank " << i;
}

TEST_F(HostStaged, RingTransfers) {
  if (size < 2) GTEST_SKIP() << "needs a peer";
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  const DeviceArray<float> mine_dev(mine(kCount));
  DeviceArray<float> from_prev(std::vector<float>(kCount, kUntouched));
  staged.sendrecv(mine_dev.cspan(), next, from_prev.span(), prev, 3);
  for (int i = 0; i < kCount; ++i) EXPECT_EQ(from_prev.values()[i], value(prev, i));
  DeviceArray<float> again(std::vector<float>(kCount, kUntouched));
  if (rank % 2 == 0) {
    staged.send(mine_dev.cspan(), next, 4);
    staged.recv(again.span(), prev, 4);
  } else {
    staged.recv(again.span(), prev, 4);
    staged.send(mine_dev.cspan(), next, 4);
  }
  for (int i = 0; i < kCount; ++i) EXPECT_EQ(again.values()[i], value(prev, i));
}

// A non-blocking operation writes the device buffer before the caller's own completion step
// runs, and holds its staging until it completes.
TEST_F(HostStaged, NonBlockingCompletesOnTheDeviceBeforeTheCallersStep) {
  DeviceArray<float> buf(mine(kCount));
  float seen = 0;
  Request r = staged.iall_reduce(buf.span());
  r.then([&] { seen = buf.values()[0]; });
  r.wait();
  EXPECT_EQ(seen, sum_over_ranks(0));

  const DeviceArray<float> send(mine(kCount));
  DeviceArray<float> gathered(std::vector<float>(static_cast<std::size_t>(kCount * size)));
  DeviceArray<float> block{std::vector<float>(kCount)};
  const DeviceArray<float> whole(mine(kCount * size));
  DeviceArray<float> bcast(mine(kCount));
  std::vector<Request> pending;
  pending.push_back(staged.iall_gather(send.cspan(), gathered.span()));
  pending.push_back(staged.ireduce_scatter(whole.cspan(), block.span()));
  pending.push_back(staged.ibroadcast(bcast.span(), 0));
  wait_all(pending);
  for (int r2 = 0; r2 < size; ++r2)
    EXPECT_EQ(gathered.values()[static_cast<std::size_t>(r2 * kCount)], value(r2, 0));
  EXPECT_EQ(block.values()[0], sum_over_ranks(rank * kCount));
  EXPECT_EQ(bcast.values()[kCount - 1], value(0, kCount - 1));

  if (size >= 2) {
    const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    DeviceArray<float> got(std::vector<float>(kCount, kUntouched));
    Request in = staged.irecv(got.span(), prev, 9);
    Request out = staged.isend(send.cspan(), next, 9);
    in.wait();
    out.wait();
    EXPECT_EQ(got.values()[2], value(prev, 2));
  }
}

// bf16 moves as 2-byte words, bit for bit, through the staging; reductions of it are still
// refused by the front, before anything is staged.
TEST_F(HostStaged, Bf16WordsAndRefusalsBeforeStaging) {
  std::vector<std::uint16_t> words{static_cast<std::uint16_t>(0x3f80 + rank),
                                   static_cast<std::uint16_t>(0xbf00 + rank)};
  const DeviceArray<std::uint16_t> send(words);
  DeviceArray<std::uint16_t> recv(std::vector<std::uint16_t>(static_cast<std::size_t>(2 * size)));
  staged.all_gather(ConstBuffer{send.cspan().data(), Element::kBF16, 2},
                    Buffer{recv.span().data(), Element::kBF16, recv.span().size()});
  for (int r = 0; r < size; ++r) {
    EXPECT_EQ(recv.values()[static_cast<std::size_t>(2 * r)], 0x3f80 + r);
    EXPECT_EQ(recv.values()[static_cast<std::size_t>(2 * r + 1)], 0xbf00 + r);
  }
  const int copies = memory->to_host_calls;
  DeviceArray<std::uint16_t> reduce_me(words);
  EXPECT_THROW(staged.all_reduce(Buffer{reduce_me.span().data(), Element::kBF16, 2},
                                 ReduceOp::kSum),
               Error);
  DeviceArray<float> small(std::vector<float>(1));
  const DeviceArray<float> send2(mine(kCount));
  EXPECT_THROW(staged.all_gather(send2.cspan(), small.span()), Error);
  EXPECT_EQ(memory->to_host_calls, copies);  // nothing staged for a refused call
}

// Splits are staged too, and share the parent's staging pool: a repeated step's sizes are
// allocated once.
TEST_F(HostStaged, SplitsAreStagedAndTheStagingIsReused) {
  const Communicator half = staged.split(rank % 2, rank);
  EXPECT_EQ(half.transport(), TransportKind::kHostStaged);
  for (int step = 0; step < 3; ++step) {
    DeviceArray<float> buf(mine(kCount));
    half.all_reduce(buf.span());
    float expect = 0;
    for (int r = rank % 2; r < size; r += 2) expect += value(r, 1);
    EXPECT_EQ(buf.values()[1], expect);
    if (step == 0) {
      const int allocs = memory->host_allocs;
      DeviceArray<float> again(mine(kCount));
      staged.all_reduce(again.span());
      EXPECT_EQ(memory->host_allocs, allocs);  // the split's freed staging served the parent
    }
  }
  EXPECT_EQ(memory->host_allocs, 1);
}

// Over an alone group (one rank of a big layout on one device): what an alone operation
// leaves, on device memory.
TEST(HostStagedAlone, LeavesThisRanksOwnPart) {
  auto memory = std::make_shared<InvertedMemory>();
  const Communicator c = Communicator::host_staged(Communicator::alone(1, 3), memory);
  const DeviceArray<float> send(std::vector<float>{1, 2});
  DeviceArray<float> recv(std::vector<float>(6, kUntouched));
  c.all_gather(send.cspan(), recv.span());
  EXPECT_EQ(recv.values(), (std::vector<float>{kUntouched, kUntouched, 1, 2, kUntouched, kUntouched}));
}

TEST(HostStagedAlone, RefusesNoMemoryAndNesting) {
  const Communicator alone = Communicator::alone(0, 2);
  EXPECT_THROW((void)Communicator::host_staged(alone, nullptr), Error);
  const Communicator staged = Communicator::host_staged(alone, std::make_shared<InvertedMemory>());
  EXPECT_THROW((void)Communicator::host_staged(staged, std::make_shared<InvertedMemory>()), Error);
}

// NCCL where it cannot run — built without it, no GPU, or ranks sharing one GPU — is refused
// naming why, on every rank alike (no rank is left in the NCCL set-up); over an alone group it
// is refused before anything else.
TEST_F(HostStaged, NcclIsRefusedNamingWhyWhereItCannotRun) {
  const std::string over_alone = [&] {
    try {
      (void)Communicator::nccl(Communicator::alone(0, 2), nullptr, nullptr);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  }();
  EXPECT_NE(over_alone.find(nccl_available() ? "made over an mpi group" : "without NCCL"),
            std::string::npos)
      << over_alone;
  std::string why;
  try {
    (void)Communicator::nccl(host, nullptr, nullptr);
  } catch (const Error& e) {
    why = e.what();
  }
  if (why.empty()) GTEST_SKIP() << "NCCL runs here: scripts/gpu-check.sh covers it";
  const bool named = why.find("without NCCL") != std::string::npos ||
                     why.find("has no CUDA device") != std::string::npos ||
                     why.find("share the GPU") != std::string::npos;
  EXPECT_TRUE(named) << why;
  // The group is still usable: no rank was left behind.
  DeviceArray<float> buf(mine(kCount));
  staged.all_reduce(buf.span());
  EXPECT_EQ(buf.values()[0], sum_over_ranks(0));
}

}  // namespace
}  // namespace meshtp::comm
