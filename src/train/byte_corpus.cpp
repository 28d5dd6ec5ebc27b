#include "train/byte_corpus.hpp"

#include <algorithm>
#include <filesystem>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "tensor/random.hpp"

namespace meshtp::train {

namespace fs = std::filesystem;

ByteCorpus ByteCorpus::load(const std::string& path, double validation_fraction, int seq) {
  MESHTP_CHECK(validation_fraction >= 0.0 && validation_fraction < 1.0,
               "validation fraction {} must be in [0, 1)", validation_fraction);
  std::error_code ec;
  MESHTP_CHECK(fs::exists(path, ec), "data '{}' does not exist", path);
  ByteCorpus corpus;
  corpus.source_ = path;
  std::vector<std::string> files;
  if (fs::is_directory(path, ec)) {
    // Regular files, also through symlinks; a dangling symlink is an error (a file the user
    // meant to train on is missing); other kinds (directories, FIFOs, …) are skipped.
    int skipped = 0;
    for (const auto& entry : fs::directory_iterator(path, ec)) {
      if (entry.is_symlink(ec) && !fs::exists(entry.path(), ec)) {
        fail("data directory '{}': '{}' is a symlink to '{}', which does not exist", path,
             entry.path().filename().string(), fs::read_symlink(entry.path(), ec).string());
      }
      if (entry.is_regular_file(ec) && entry.path().extension() != ".dat") {
        files.push_back(entry.path().string());
      } else {
        ++skipped;
      }
    }
    MESHTP_CHECK(!ec, "cannot list data directory '{}': {}", path, ec.message());
    std::sort(files.begin(), files.end());
    MESHTP_CHECK(!files.empty(),
                 "data directory '{}' holds no regular files to train on ({} other entries "
                 "skipped: directories, FIFOs, fortune's .dat indexes)",
                 path, skipped);
  } else {
    MESHTP_CHECK(fs::is_regular_file(path, ec),
                 "data '{}' is not a regular file or a directory (a FIFO, device or socket)",
                 path);
    files.push_back(path);
  }
  for (const std::string& file : files) {
    const std::string text = read_file(file);
    corpus.bytes_.insert(corpus.bytes_.end(), text.begin(), text.end());
  }
  const auto n = static_cast<std::int64_t>(corpus.bytes_.size());
  MESHTP_CHECK(n > 0, "data '{}' is empty: give a text file to train on", path);
  corpus.split_ = n - static_cast<std::int64_t>(static_cast<double>(n) * validation_fraction);
  const std::int64_t need = seq + 1;
  MESHTP_CHECK(corpus.split_ >= need && (validation_fraction == 0.0 || n - corpus.split_ >= need),
               "data '{}' has {} bytes: too short for sequences of {} tokens with a {:.0f}% "
               "validation split (each part needs at least {} bytes)",
               path, n, seq, 100.0 * validation_fraction, need);
  return corpus;
}

void ByteCorpus::sample(Split split, std::uint64_t seed, std::int64_t step,
                        std::int64_t global_batch, std::int64_t row_begin, std::int64_t rows,
                        int seq, std::span<std::int32_t> tokens,
                        std::span<std::int32_t> targets) const {
  const std::size_t want = static_cast<std::size_t>(rows) * static_cast<std::size_t>(seq);
  MESHTP_CHECK(tokens.size() == want && targets.size() == want,
               "sample: buffers hold {} and {} tokens, {} rows of {} need {}", tokens.size(),
               targets.size(), rows, seq, want);
  MESHTP_CHECK(row_begin >= 0 && row_begin + rows <= global_batch,
               "sample: rows [{}, {}) outside a batch of {}", row_begin, row_begin + rows,
               global_batch);
  const std::int64_t begin = split == Split::kTrain ? 0 : split_;
  const std::int64_t end = split == Split::kTrain ? split_ : static_cast<std::int64_t>(bytes_.size());
  const std::int64_t starts = end - begin - seq;  // valid start offsets: [0, starts)
  MESHTP_CHECK(starts >= 1, "sample: the {} split has no room for {} tokens",
               split == Split::kTrain ? "training" : "validation", seq);
  const std::uint64_t stream = seed ^ (split == Split::kTrain ? 0x7261696eull : 0x76616cull);
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto index = static_cast<std::uint64_t>(step * global_batch + row_begin + r);
    const double u = 0.5 * (static_cast<double>(uniform_at(stream, index)) + 1.0);  // [0, 1)
    const std::int64_t offset =
        begin + std::min(starts - 1, static_cast<std::int64_t>(u * static_cast<double>(starts)));
    for (int t = 0; t < seq; ++t) {
      tokens[static_cast<std::size_t>(r * seq + t)] = bytes_[static_cast<std::size_t>(offset + t)];
      targets[static_cast<std::size_t>(r * seq + t)] =
          bytes_[static_cast<std::size_t>(offset + t + 1)];
    }
  }
}

}  // namespace meshtp::train
