// The one exception type of meshtp.
//
// Error policy (docs/ARCHITECTURE.md, "Conventions"): bad user input and failed system calls throw meshtp::Error
// with a message that names the offending values. Library code never prints and never exits;
// the CLI's main() catches, prints `error: …` and aborts the whole MPI job.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <system_error>

namespace meshtp {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// MESHTP_CHECK(cond, "fmt {}", args…): throw meshtp::Error with a formatted message.
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

// An errno value as the system says it ("No space left on device"), for failed system calls.
inline std::string errno_text(int error) { return std::generic_category().message(error); }

}  // namespace meshtp

#define MESHTP_CHECK(cond, ...)      \
  do {                               \
    if (!(cond)) ::meshtp::fail(__VA_ARGS__); \
  } while (0)
