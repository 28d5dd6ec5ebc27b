#include "core/parse.hpp"

#include <charconv>

#include "core/error.hpp"

namespace meshtp {

std::vector<std::string_view> split_words(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    const std::size_t start = i;
    while (i < text.size() && text[i] != ' ' && text[i] != '\t') ++i;
    if (i > start) out.push_back(text.substr(start, i - start));
  }
  return out;
}
namespace {

bool parse_positive(std::string_view text, std::int64_t& value) {
  if (text.empty()) return false;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  return ec == std::errc() && ptr == end && value > 0;
}

}  // namespace

std::vector<int> parse_mesh_shape(std::string_view text) {
  std::vector<int> shape;
  std::string_view rest = text;
  while (true) {
    const auto cut = rest.find('x');
    const std::string_view item = rest.substr(0, cut);
    std::int64_t size = 0;
    if (!parse_positive(item, size) || size > (1 << 20)) {
      fail("bad mesh '{}': expected positive sizes joined by 'x', like 4, 2x4 or 2x2x2", text);
    }
    shape.push_back(static_cast<int>(size));
    if (cut == std::string_view::npos) break;
    rest = rest.substr(cut + 1);
  }
  return shape;
}

std::vector<int> parse_positive_ints(std::string_view text, std::string_view flag) {
  std::vector<int> values;
  std::string_view rest = text;
  while (true) {
    const auto cut = rest.find(',');
    const std::string_view item = rest.substr(0, cut);
    std::int64_t value = 0;
    MESHTP_CHECK(parse_positive(item, value) && value <= (1 << 30),
                 "bad {} '{}': item '{}' is not a positive integer; expected positive integers "
                 "joined by ',', like 1,2,4",
                 flag, text, item);
    values.push_back(static_cast<int>(value));
    if (cut == std::string_view::npos) return values;
    rest = rest.substr(cut + 1);
  }
}

std::array<int, 2> mesh_2d(std::string_view flag, std::string_view text, int ranks) {
  const std::vector<int> shape = parse_mesh_shape(text);
  MESHTP_CHECK(shape.size() == 2, "{} {} is not a 2D mesh: expected d1xd2, like 2x2", flag, text);
  const std::int64_t size = static_cast<std::int64_t>(shape[0]) * shape[1];
  MESHTP_CHECK(ranks <= 0 || size == ranks, "{} {} has {} ranks but the world has {}", flag, text,
               size, ranks);
  return {shape[0], shape[1]};
}

std::string format_mesh_shape(const std::vector<int>& shape) {
  std::string out;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) out += 'x';
    out += std::to_string(shape[i]);
  }
  return out;
}

std::int64_t parse_byte_size(std::string_view text) {
  std::int64_t multiplier = 1;
  std::string_view digits = text;
  if (!digits.empty()) {
    switch (digits.back()) {
      case 'K': case 'k': multiplier = std::int64_t{1} << 10; break;
      case 'M': case 'm': multiplier = std::int64_t{1} << 20; break;
      case 'G': case 'g': multiplier = std::int64_t{1} << 30; break;
      default: break;
    }
    if (multiplier != 1) digits.remove_suffix(1);
  }
  std::int64_t value = 0;
  if (!parse_positive(digits, value) || value > (std::int64_t{1} << 40) / multiplier) {
    fail("bad size '{}': expected a positive byte count like 4096, 8K, 64M or 1G", text);
  }
  return value * multiplier;
}

std::vector<std::int64_t> parse_byte_sizes(std::string_view text) {
  std::vector<std::int64_t> sizes;
  std::string_view rest = text;
  while (true) {
    const auto cut = rest.find(',');
    sizes.push_back(parse_byte_size(rest.substr(0, cut)));
    if (cut == std::string_view::npos) break;
    rest = rest.substr(cut + 1);
  }
  return sizes;
}

std::string format_byte_size(std::int64_t bytes) {
  constexpr const char* kSuffix[] = {"", "K", "M", "G"};
  int unit = 0;
  while (unit < 3 && bytes % 1024 == 0 && bytes >= 1024) {
    bytes /= 1024;
    ++unit;
  }
  return std::to_string(bytes) + kSuffix[unit];
}

}  // namespace meshtp
