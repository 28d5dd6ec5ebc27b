#include "core/text.hpp"

#include <fmt/format.h>

#include <cstdint>

#include "core/error.hpp"

namespace meshtp {
namespace {

// The length of the UTF-8 sequence at s[i], or 0 when it is not well-formed.
std::size_t sequence_length(std::string_view s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  std::uint32_t cp = 0;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
    cp = c & 0x1Fu;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    cp = c & 0x0Fu;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    cp = c & 0x07u;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0u) != 0x80u) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3Fu);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF ||
      (cp >= 0xD800 && cp <= 0xDFFF)) {
    return 0;
  }
  return n;
}

}  // namespace

bool valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = sequence_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string escape_text(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = sequence_length(s, i);
    if (n == 0) {
      out += "\\uFFFD";
      ++i;
      continue;
    }
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (n == 1) {
      switch (c) {
        case '\\':
          out += "\\\\";
          break;
        case '"':
          out += "\\\"";
          break;
        case '\n':
          out += "\\n";
          break;
        case '\t':
          out += "\\t";
          break;
        case '\r':
          out += "\\r";
          break;
        default:
          if (c < 0x20 || c == 0x7F) {
            out += fmt::format("\\u{:04X}", c);
          } else {
            out += static_cast<char>(c);
          }
      }
    } else {
      out.append(s.substr(i, n));
    }
    i += n;
  }
  return out;
}

void check_name(std::string_view what, std::string_view s) {
  MESHTP_CHECK(valid_utf8(s), "{} \"{}\" is not UTF-8 text", what, escape_text(s));
  for (const char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    MESHTP_CHECK(c >= 0x20 && c != 0x7F, "{} \"{}\" holds a control character (U+{:04X})", what,
                 escape_text(s), c);
  }
}

}  // namespace meshtp
