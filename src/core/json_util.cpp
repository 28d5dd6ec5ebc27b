#include "core/json_util.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/json_limits.hpp"

namespace meshtp {

TextPosition position_of(std::string_view text, std::size_t offset) {
  offset = std::min(offset, text.size());
  TextPosition pos;
  std::size_t line_start = 0;
  for (std::size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++pos.line;
      line_start = i + 1;
    }
  }
  pos.column = static_cast<int>(offset - line_start) + 1;
  return pos;
}

nlohmann::json parse_json(std::string_view text, std::string_view source) {
  check_json_depth(text, source);
  // nlohmann keeps the last of two equal keys; a file that says "dp" twice means one of them
  // by mistake, so the parser refuses it. One set of keys per open object (the depth check
  // above bounds the stack).
  std::vector<std::set<std::string>> open_objects;
  const nlohmann::json::parser_callback_t refuse_duplicate_keys =
      [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
        using Event = nlohmann::json::parse_event_t;
        if (event == Event::object_start) open_objects.emplace_back();
        if (event == Event::object_end) open_objects.pop_back();
        if (event == Event::key && !open_objects.back().insert(parsed.get<std::string>()).second) {
          fail("malformed JSON in {}: the key '{}' appears twice in one object", source,
               parsed.get<std::string>());
        }
        return true;
      };
  try {
    return nlohmann::json::parse(text.begin(), text.end(), refuse_duplicate_keys);
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is 1-based: the position of the last character read, i.e. the offending one.
    const std::size_t offset = e.byte > 0 ? e.byte - 1 : 0;
    const TextPosition pos = position_of(text, offset);
    // nlohmann's own text is "[json.exception.parse_error.101] parse error at line 1,
    // column 2: <reason>"; keep only <reason>.
    std::string reason = e.what();
    const auto colon = reason.find(": ");
    if (colon != std::string::npos) reason = reason.substr(colon + 2);
    fail("malformed JSON in {} at line {}, column {}: {}", source, pos.line, pos.column, reason);
  } catch (const nlohmann::json::exception& e) {  // e.g. out_of_range: "number overflow parsing '1e999'"
    std::string reason = e.what();
    const auto bracket = reason.find("] ");
    if (bracket != std::string::npos) reason = reason.substr(bracket + 2);
    fail("malformed JSON in {}: {}", source, reason);
  }
}

const nlohmann::json& require_field(const nlohmann::json& obj, std::string_view key,
                                    std::string_view where) {
  MESHTP_CHECK(obj.is_object(), "{}: expected a JSON object, got {}", where, obj.dump());
  const auto it = obj.find(std::string(key));
  MESHTP_CHECK(it != obj.end(), "{}: missing field '{}'", where, key);
  return *it;
}

double read_number(const nlohmann::json& obj, std::string_view key, std::string_view where) {
  const nlohmann::json& v = require_field(obj, key, where);
  MESHTP_CHECK(v.is_number(), "{}: field '{}' must be a number, got {}", where, key, v.dump());
  const double x = v.get<double>();
  MESHTP_CHECK(std::isfinite(x), "{}: field '{}' must be finite, got {}", where, key, v.dump());
  return x;
}

std::optional<double> read_optional_number(const nlohmann::json& obj, std::string_view key,
                                           std::string_view where) {
  if (!obj.contains(std::string(key)) || obj.at(std::string(key)).is_null()) return std::nullopt;
  return read_number(obj, key, where);
}

std::int64_t read_integer(const nlohmann::json& obj, std::string_view key,
                          std::string_view where) {
  const nlohmann::json& v = require_field(obj, key, where);
  MESHTP_CHECK(v.is_number_integer(), "{}: field '{}' must be an integer, got {}", where, key,
               v.dump());
  // 2^63 … 2^64 − 1 parse as unsigned, and would wrap negative.
  MESHTP_CHECK(!v.is_number_unsigned() ||
                   v.get<std::uint64_t>() <=
                       static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()),
               "{}: field '{}' is out of range, got {}", where, key, v.dump());
  return v.get<std::int64_t>();
}

int read_int(const nlohmann::json& obj, std::string_view key, std::string_view where, int min,
             int max) {
  const std::int64_t v = read_integer(obj, key, where);
  MESHTP_CHECK(v >= min && v <= max, "{}: {}={} must be between {} and {}", where, key, v, min,
               max);
  return static_cast<int>(v);
}

std::vector<int> read_int_list(const nlohmann::json& obj, std::string_view key,
                               std::string_view where, int min, int max) {
  const nlohmann::json& v = require_field(obj, key, where);
  MESHTP_CHECK(v.is_array() && !v.empty(), "{}: field '{}' must be a non-empty array of "
               "integers, got {}", where, key, v.dump());
  std::vector<int> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    MESHTP_CHECK(v[i].is_number_integer(), "{}: {}[{}] must be an integer, got {}", where, key, i,
                 v[i].dump());
    MESHTP_CHECK(
        !v[i].is_number_unsigned() || v[i].get<std::uint64_t>() <= static_cast<std::uint64_t>(max),
        "{}: {}[{}]={} must be between {} and {}", where, key, i, v[i].dump(), min, max);
    const std::int64_t x = v[i].get<std::int64_t>();
    MESHTP_CHECK(x >= min && x <= max, "{}: {}[{}]={} must be between {} and {}", where, key, i,
                 x, min, max);
    out.push_back(static_cast<int>(x));
  }
  return out;
}

std::vector<double> read_number_list(const nlohmann::json& obj, std::string_view key,
                                     std::string_view where) {
  const nlohmann::json& v = require_field(obj, key, where);
  MESHTP_CHECK(v.is_array() && !v.empty(), "{}: field '{}' must be a non-empty array of "
               "numbers, got {}", where, key, v.dump());
  std::vector<double> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    MESHTP_CHECK(v[i].is_number() && std::isfinite(v[i].get<double>()), "{}: {}[{}] must be a "
                 "finite number, got {}", where, key, i, v[i].dump());
    out.push_back(v[i].get<double>());
  }
  return out;
}

std::string read_string(const nlohmann::json& obj, std::string_view key, std::string_view where) {
  const nlohmann::json& v = require_field(obj, key, where);
  MESHTP_CHECK(v.is_string(), "{}: field '{}' must be a string, got {}", where, key, v.dump());
  return v.get<std::string>();
}

std::string read_optional_string(const nlohmann::json& obj, std::string_view key,
                                 std::string_view where, std::string fallback) {
  if (!obj.contains(std::string(key))) return fallback;
  return read_string(obj, key, where);
}

void check_fields(const nlohmann::json& obj, std::span<const std::string_view> allowed,
                  std::string_view where) {
  MESHTP_CHECK(obj.is_object(), "{}: expected a JSON object, got {}", where, obj.dump());
  for (const auto& [key, value] : obj.items()) {
    const bool known = std::find(allowed.begin(), allowed.end(), key) != allowed.end();
    if (!known) {
      std::string names;
      for (const auto a : allowed) names += (names.empty() ? "" : ", ") + std::string(a);
      fail("{}: unknown field '{}' (allowed: {})", where, key, names);
    }
  }
}

}  // namespace meshtp
