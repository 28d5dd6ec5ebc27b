// The one rule for a string written into text another program parses: a configuration
// (Megatron-LM's bash arguments, torchtitan's TOML, DeepSpeed's JSON), a comment line of one,
// or a file meshtp writes for itself.
//
//   check_name   a name (model, topology, level, host, NIC, calibrate --name) is refused
//                before any work unless it is valid UTF-8 without control characters: the
//                error names what it is and shows the name escaped
//   escape_text  every string interpolated into a configuration or its comments: `\`, `"`
//                and control characters escaped as \\ \" \n \t \r \uXXXX, bytes that are not
//                UTF-8 as \uFFFD. The result is a valid TOML or JSON basic string's content
//                and stays on one comment line, so no name can start a line of its own
#pragma once

#include <string>
#include <string_view>

namespace meshtp {

// Whether `s` is well-formed UTF-8 (no overlong forms, no surrogates, at most U+10FFFF).
bool valid_utf8(std::string_view s);

// `s` escaped as above.
std::string escape_text(std::string_view s);

// Throws meshtp::Error "<what> "<escaped s>" is not UTF-8 text" or "… holds a control
// character (U+000A)" unless `s` is a name as above; `what` names it ("model name", "--name").
void check_name(std::string_view what, std::string_view s);

}  // namespace meshtp
