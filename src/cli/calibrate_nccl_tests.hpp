// `meshtp calibrate --from-nccl-tests FILE…`: the calibration fitted from nccl-tests logs
// instead of meshtp's own measurements (plan/nccl_tests.hpp reads and fits; this file prints
// and writes). calibrate_command.cpp owns the flags and calls here when the flag is given.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace meshtp::cli {

struct NcclTestsCalibrateArgs {
  std::vector<std::string> logs;
  std::string out;
  std::string base;  // required: nccl-tests measure neither memory nor FLOP rates
  std::string name;
  std::string min_bytes;  // "1M"; empty: plan::kNcclTestsMinBytes
  bool json = false;
  // The device: by default the base's, or the datasheet's of the GPU the logs name where the
  // base's does not match it; these override either (--tflops: a flat rate, the base's GeMM
  // model dropped).
  std::optional<double> memory_gib, tflops;
};

void run_calibrate_from_nccl_tests(const NcclTestsCalibrateArgs& args);

}  // namespace meshtp::cli
