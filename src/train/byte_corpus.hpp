// Byte-level text corpus: every byte is a token (vocab 256), a held-out tail for
// validation, and deterministic batch sampling.
//
// Sampling is a pure function of (seed, step, row): row r of step t's global batch starts
// at offset uniform_at(seed ⊕ split, t·B + r) · (n − S − 1) of the split. So the "data
// position" of a checkpoint is just the step, resuming is exact, and a data-parallel replica
// that takes rows [r·B/D, (r+1)·B/D) of the global batch sees exactly what a single replica
// would — training is the same on every layout.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace meshtp::train {

enum class Split { kTrain, kValidation };

// What `train` and `bench train` read when --data is not given: Debian's fortunes.
inline constexpr const char* kDefaultCorpus = "/usr/share/games/fortunes";

class ByteCorpus {
 public:
  static constexpr int kVocab = 256;

  // `path` is a text file, or a directory whose regular files (symlinks followed, sorted by
  // name, skipping fortune's *.dat indexes) are concatenated. The last `validation_fraction` of the bytes
  // is held out. Throws for a missing path, an empty corpus, or one too short for seq.
  static ByteCorpus load(const std::string& path, double validation_fraction, int seq);

  // tokens and targets: batch·seq each; targets are tokens shifted by one byte.
  // Rows [row_begin, row_begin + rows) of the global batch of `global_batch` rows.
  void sample(Split split, std::uint64_t seed, std::int64_t step, std::int64_t global_batch,
              std::int64_t row_begin, std::int64_t rows, int seq, std::span<std::int32_t> tokens,
              std::span<std::int32_t> targets) const;

  std::int64_t train_bytes() const { return split_; }
  std::int64_t validation_bytes() const { return static_cast<std::int64_t>(bytes_.size()) - split_; }
  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::vector<unsigned char> bytes_;
  std::int64_t split_ = 0;  // train = [0, split), validation = [split, end)
};

}  // namespace meshtp::train
