// Reading user-written JSON (topology, model and plan files) with errors that say where and what.
//
// nlohmann's parse_error knows the byte offset of the bad character; users think in lines
// and columns, so parse_json() converts the offset itself:
//
//   text  = "{\n  \"levels\": [,]\n}"      the ',' is byte 14 (0-based 13)
//   error = "malformed JSON in 'x.json' at line 2, column 14: syntax error …"
//
// The field readers check the type and range of one field and name the file, the object
// (e.g. "level 1") and the field when it is wrong. Unknown fields are errors too, so a typo
// ("memebers") is not silently ignored.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <span>
#include <vector>

namespace meshtp {

// Parses `text`; `source` names it in errors (a file path or "preset 'x'").
nlohmann::json parse_json(std::string_view text, std::string_view source);

// Line and column (both 1-based) of the 0-based byte `offset` in `text`.
struct TextPosition {
  int line = 1;
  int column = 1;
};
TextPosition position_of(std::string_view text, std::size_t offset);

// Field readers. `where` describes the enclosing object for messages, e.g.
// "topology 'x.json', level 1". Each throws meshtp::Error naming `where` and `key`.
const nlohmann::json& require_field(const nlohmann::json& obj, std::string_view key,
                                    std::string_view where);
double read_number(const nlohmann::json& obj, std::string_view key, std::string_view where);
std::optional<double> read_optional_number(const nlohmann::json& obj, std::string_view key,
                                           std::string_view where);
std::int64_t read_integer(const nlohmann::json& obj, std::string_view key,
                          std::string_view where);
// An integer in [min, max].
int read_int(const nlohmann::json& obj, std::string_view key, std::string_view where, int min,
             int max);
// A non-empty array of integers, each in [min, max]; of finite numbers.
std::vector<int> read_int_list(const nlohmann::json& obj, std::string_view key,
                               std::string_view where, int min, int max);
std::vector<double> read_number_list(const nlohmann::json& obj, std::string_view key,
                                     std::string_view where);
std::string read_string(const nlohmann::json& obj, std::string_view key, std::string_view where);
std::string read_optional_string(const nlohmann::json& obj, std::string_view key,
                                 std::string_view where, std::string fallback);

// Throws if `obj` is not an object or has a key outside `allowed`.
void check_fields(const nlohmann::json& obj, std::span<const std::string_view> allowed,
                  std::string_view where);
inline void check_fields(const nlohmann::json& obj,
                         std::initializer_list<std::string_view> allowed, std::string_view where) {
  check_fields(obj, std::span<const std::string_view>(allowed.begin(), allowed.size()), where);
}

}  // namespace meshtp
