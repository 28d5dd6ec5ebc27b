// Parsers for the small value syntaxes users type on the command line.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace meshtp {

// "2x4" → {2, 4}; "8" → {8}; "2x2x2" → {2, 2, 2}. Every size must be a positive integer.
std::vector<int> parse_mesh_shape(std::string_view text);

// The words of `text`, split at runs of spaces and tabs (none empty): views into `text`,
// which must outlive them. The one splitter of the text logs meshtp reads (nccl-tests output,
// `nvidia-smi topo -m`).
std::vector<std::string_view> split_words(std::string_view text);

// `flag`'s value "d1xd2" (a 2D mesh: --mesh, and the Python module's mesh=); throws "--mesh 5
// is not a 2D mesh: expected d1xd2, like 2x2" and, with ranks > 0, "--mesh 2x2 has 4 ranks but
// the world has 2".
std::array<int, 2> mesh_2d(std::string_view flag, std::string_view text, int ranks = 0);

// "2x4" from {2, 4}.
std::string format_mesh_shape(const std::vector<int>& shape);

// "1,2,4" → {1, 2, 4}: positive integers joined by commas, as flags like --chunks take them.
// `flag` names the option in the error ("bad --chunks '1,x': item 'x' is not …").
std::vector<int> parse_positive_ints(std::string_view text, std::string_view flag);

// "8K" → 8192, "64M" → 67108864, "1G", "4096" (bytes). Suffixes are binary (KiB, MiB, GiB).
std::int64_t parse_byte_size(std::string_view text);

// "8K,1M,64M" → {8192, 1048576, 67108864}.
std::vector<std::int64_t> parse_byte_sizes(std::string_view text);

// 8192 → "8K", 67108864 → "64M", 1000 → "1000".
std::string format_byte_size(std::int64_t bytes);

}  // namespace meshtp
