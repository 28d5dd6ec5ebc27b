// The preset JSON files of topologies/ and models/, compiled in (private to plan).
//
// CMake generates presets_embedded.cpp from the files at configure time (src/plan/
// CMakeLists.txt), so the files stay the one source of truth and the binary works from any
// directory. Editing or adding a file re-runs configure.
#pragma once

#include <span>

namespace meshtp::plan::detail {

struct EmbeddedPreset {
  const char* name;  // file name without ".json"
  const char* json;  // the file's text
};

std::span<const EmbeddedPreset> embedded_topologies();
std::span<const EmbeddedPreset> embedded_models();

}  // namespace meshtp::plan::detail
