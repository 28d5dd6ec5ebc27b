// main() of the GPU tests (label gpu): without a GPU they print why and exit 77, which ctest
// reports as Skipped (SKIP_RETURN_CODE 77), never Passed.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "device/gpu.hpp"

int main(int argc, char** argv) {
  std::string why;
  const auto info = meshtp::gpu::probe(&why);
  if (!info) {
    std::printf("skipped: %s\n", why.c_str());
    return 77;
  }
  std::printf("GPU: %s\n", info->name.c_str());
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
