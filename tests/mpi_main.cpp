// main() for MPI GoogleTest executables: initialise MPI, pin BLAS to one thread, watch every
// communication wait, run the tests, and make every rank agree: the job fails if any rank
// failed. Rank 0 prints the usual report; the other ranks print only their failures,
// prefixed with their rank, so the output is one report rather than P interleaved ones.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "comm/communicator.hpp"
#include "comm/watchdog.hpp"
#include "tensor/gemm.hpp"

namespace {

class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                 result.file_name() ? result.file_name() : "?", result.line_number(),
                 result.message());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  meshtp::comm::Environment env(argc, argv);
  meshtp::set_blas_threads(meshtp::blas_threads_from_env());
  // Every wait is watched (as under the CLI), so a hang is an error naming the missing rank
  // rather than a ctest timeout; MESHTP_TEST_COMM_TIMEOUT=0 tests the plain blocking path.
  const char* timeout = std::getenv("MESHTP_TEST_COMM_TIMEOUT");
  meshtp::comm::set_comm_timeout(timeout != nullptr ? std::atof(timeout) : 120.0);
  ::testing::InitGoogleTest(&argc, argv);
  int failed = 0;
  {
    const auto world = meshtp::comm::Communicator::world();
    if (world.rank() != 0) {
      auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
      delete listeners.Release(listeners.default_result_printer());
      listeners.Append(new FailurePrinter(world.rank()));
    }
    failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
    world.all_reduce(std::span<int>(&failed, 1), meshtp::comm::ReduceOp::kMax);
  }
  return failed;
}
