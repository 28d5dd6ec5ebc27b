// Limits on untrusted JSON text, checked before a parser sees it.
//
// Why: a file of 100 000 '[' is valid-looking JSON a recursive consumer (printing a value
// for an error message, destroying a deep tree) turns into a stack overflow. No meshtp file
// — topology, model, plan, a safetensors header — nests deeper than a handful of levels, so
// anything past kMaxJsonDepth is refused by a linear scan that counts '[' and '{' outside
// strings:
//
//   text = {"a": [[1]], "s": "[[["}      depth 3 (the brackets inside "s" do not count)
#pragma once

#include <string_view>

namespace meshtp {

inline constexpr int kMaxJsonDepth = 64;

// Throws meshtp::Error naming `source`, the line and column where the text first nests
// deeper than `max_depth`.
void check_json_depth(std::string_view text, std::string_view source,
                      int max_depth = kMaxJsonDepth);

}  // namespace meshtp
