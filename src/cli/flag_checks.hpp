// CLI11 validators for integer flags whose errors name the flag and the value:
//   error: --dp: 0 must be an integer ≥ 1
// (CLI11's own Range/PositiveNumber print the whole range of a double instead.)
#pragma once

#include "cli/cli11.hpp"


namespace meshtp::cli {

// An integer ≥ min (up to 2^64 − 1 for non-negative flags such as --seed).
CLI::Validator integer_at_least(long long min);

}  // namespace meshtp::cli
