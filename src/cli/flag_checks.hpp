// CLI11 validators for integer flags whose errors name the flag and the value:
//   error: --dp: 0 must be an integer ≥ 1
// (CLI11's own Range/PositiveNumber print the whole range of a double instead.)
#pragma once

#include "cli/cli11.hpp"

#include <string>
#include <utility>
#include <vector>

namespace meshtp::cli {

// An integer ≥ min (up to 2^64 − 1 for non-negative flags such as --seed).
CLI::Validator integer_at_least(long long min);

// Makes every integer option of `app` and its subcommands decimal, as typed: CLI11 converts
// with strtoll(…, 0), so `--devices 010` was 8 and `--warmup 0x10` 16. A leading '+', hex,
// a non-digit or a value beyond 64 bits is an error naming the text ("--devices: '0x8' is
// not a decimal integer"); leading zeros are decimal ("010" is 10). Call once every command
// is registered.
void require_decimal_integers(CLI::App& app);

// Makes every text option of `app` and its subcommands refuse an empty value: `--checkpoint-dir
// ""` trained without checkpoints and `--out ""` wrote nothing, without a word. "leave the flag
// out" is how a user says none. Call once every command is registered.
void require_nonempty_text(CLI::App& app);

// Refuses, before any work, two outputs of one command that name the same file (`--emit-file X
// --out X`, `--report DIR --emit-file DIR/report.json`): one would overwrite the other. Each
// entry is (flag, path); paths are compared after making them absolute and resolving what
// exists of them. "error: --emit-file 'a.json' and --out 'a.json' are the same file: give
// each its own".
void check_distinct_outputs(const std::vector<std::pair<std::string, std::string>>& outputs);

}  // namespace meshtp::cli
