#include "cli/flag_checks.hpp"

#include <fmt/format.h>

#include <charconv>
#include <string>

namespace meshtp::cli {

CLI::Validator integer_at_least(long long min) {
  return CLI::Validator(
      [min](std::string& text) -> std::string {
        const char* begin = text.data();
        const char* end = begin + text.size();
        bool ok = false;
        bool below = false;
        if (!text.empty() && text.front() == '-') {
          long long value = 0;
          const auto [ptr, ec] = std::from_chars(begin, end, value);
          ok = ec == std::errc() && ptr == end;
          below = ok && value < min;
        } else {
          unsigned long long value = 0;
          const auto [ptr, ec] = std::from_chars(begin, end, value);
          ok = ec == std::errc() && ptr == end;
          below = ok && min > 0 && value < static_cast<unsigned long long>(min);
        }
        if (ok && !below) return {};
        return fmt::format("{} must be an integer ≥ {}", text, min);
      },
      fmt::format("INT≥{}", min));
}

}  // namespace meshtp::cli
