// A small text corpus the training tests write for themselves (no dependency on installed
// text): `lines` lines of varied bytes.
#pragma once

#include <filesystem>
#include <fstream>

namespace meshtp::train::test {

inline void write_corpus(const std::filesystem::path& file, int lines = 400) {
  std::ofstream text(file);
  for (int i = 0; i < lines; ++i) {
    text << "the quick brown fox " << i * 7919 % 1000 << " jumps over the lazy dog "
         << (i % 3 ? "again\n" : "and sleeps.\n");
  }
}

}  // namespace meshtp::train::test
