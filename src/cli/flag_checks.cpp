#include "cli/flag_checks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <charconv>
#include <string>
#include <string_view>

#include "core/error.hpp"

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

namespace {

// Decimal digits, an optional '-' for a signed option, within the option type's 64 bits;
// rewrites the text without leading zeros, as CLI11 would otherwise read "010" as octal.
CLI::Validator decimal_integer(bool is_signed) {
  return CLI::Validator(
      [is_signed](std::string& text) -> std::string {
        std::string_view digits = text;
        const bool negative = !digits.empty() && digits.front() == '-';
        if (negative) digits.remove_prefix(1);
        if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos) {
          return fmt::format("'{}' is not a decimal integer", text);
        }
        if (negative && !is_signed) return fmt::format("'{}' must not be negative", text);
        digits.remove_prefix(std::min(digits.find_first_not_of('0'), digits.size() - 1));
        unsigned long long value = 0;  // the whole 64-bit range, before any narrowing
        const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
        const unsigned long long max = !is_signed ? ~0ULL
                                       : negative ? 1ULL << 63
                                                  : (1ULL << 63) - 1;
        if (ec != std::errc() || value > max) {
          return fmt::format("'{}' is out of range (at most {}{})", text, negative ? "-" : "", max);
        }
        text = (negative && value != 0 ? "-" : "") + std::string(digits);
        return {};
      },
      "");
}

CLI::Validator nonempty_text() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        return text.empty() ? "the value is empty (leave the flag out instead)" : "";
      },
      "");
}

}  // namespace

void require_nonempty_text(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    if (option->get_type_name().rfind("TEXT", 0) == 0) option->check(nonempty_text());
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    require_nonempty_text(*sub);
  }
}

void require_decimal_integers(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    const std::string type = option->get_type_name();
    if (type.rfind("INT", 0) == 0) option->transform(decimal_integer(true));
    if (type.rfind("UINT", 0) == 0) option->transform(decimal_integer(false));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    require_decimal_integers(*sub);
  }
}

void check_distinct_outputs(const std::vector<std::pair<std::string, std::string>>& outputs) {
  namespace fs = std::filesystem;
  std::vector<fs::path> resolved;
  for (const auto& [flag, path] : outputs) {
    std::error_code ec;
    fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
    if (ec) p = fs::absolute(path).lexically_normal();
    resolved.push_back(p);
  }
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].second.empty()) continue;
    for (std::size_t k = i + 1; k < outputs.size(); ++k) {
      if (outputs[k].second.empty() || resolved[i] != resolved[k]) continue;
      fail("{} '{}' and {} '{}' are the same file: give each its own", outputs[i].first,
           outputs[i].second, outputs[k].first, outputs[k].second);
    }
  }
}

}  // namespace meshtp::cli
