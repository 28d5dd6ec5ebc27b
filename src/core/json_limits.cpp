#include "core/json_limits.hpp"

#include "core/error.hpp"

namespace meshtp {

void check_json_depth(std::string_view text, std::string_view source, int max_depth) {
  int depth = 0;
  int line = 1;
  std::size_t line_start = 0;
  bool in_string = false;
  bool escaped = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      line_start = i + 1;
    }
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        fail("malformed JSON in {} at line {}, column {}: nested more than {} levels deep", source,
             line, i - line_start + 1, max_depth);
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

}  // namespace meshtp
