#include "train/byte_corpus.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.hpp"

namespace meshtp::train {
namespace {

namespace fs = std::filesystem;

class ByteCorpusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("meshtp_corpus_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
  fs::path dir_;
};

std::string alphabet(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += static_cast<char>('a' + i % 26);
  return s;
}

TEST_F(ByteCorpusTest, TargetsAreTokensShiftedByOne) {
  const ByteCorpus c = ByteCorpus::load(write("t.txt", alphabet(1000)), 0.1, 16);
  EXPECT_EQ(c.train_bytes(), 900);
  EXPECT_EQ(c.validation_bytes(), 100);
  std::vector<std::int32_t> tok(4 * 16);
  std::vector<std::int32_t> tgt(4 * 16);
  c.sample(Split::kTrain, 1, 0, 4, 0, 4, 16, tok, tgt);
  for (std::size_t i = 0; i < tok.size(); ++i) {
    EXPECT_EQ(tgt[i], 'a' + (tok[i] - 'a' + 1) % 26);
  }
}

TEST_F(ByteCorpusTest, SamplingIsDeterministicAndRowsSplitAcrossReplicas) {
  const ByteCorpus c = ByteCorpus::load(write("t.txt", alphabet(5000)), 0.1, 8);
  std::vector<std::int32_t> all(8 * 8), all_t(8 * 8), again(8 * 8), again_t(8 * 8);
  c.sample(Split::kTrain, 7, 3, 8, 0, 8, 8, all, all_t);
  c.sample(Split::kTrain, 7, 3, 8, 0, 8, 8, again, again_t);
  EXPECT_EQ(all, again);
  // Replica 1 of 2 takes rows 4..7: exactly the second half of the global batch.
  std::vector<std::int32_t> half(4 * 8), half_t(4 * 8);
  c.sample(Split::kTrain, 7, 3, 8, 4, 4, 8, half, half_t);
  EXPECT_TRUE(std::equal(half.begin(), half.end(), all.begin() + 32));
  // Another step or seed gives other text.
  c.sample(Split::kTrain, 7, 4, 8, 0, 8, 8, again, again_t);
  EXPECT_NE(all, again);
}

TEST_F(ByteCorpusTest, ValidationSamplesComeFromTheHeldOutTail) {
  const std::string text = std::string(900, 'x') + std::string(100, 'y');
  const ByteCorpus c = ByteCorpus::load(write("t.txt", text), 0.1, 8);
  std::vector<std::int32_t> tok(2 * 8), tgt(2 * 8);
  c.sample(Split::kValidation, 1, 0, 2, 0, 2, 8, tok, tgt);
  for (const auto t : tok) EXPECT_EQ(t, 'y');
  c.sample(Split::kTrain, 1, 0, 2, 0, 2, 8, tok, tgt);
  for (const auto t : tok) EXPECT_EQ(t, 'x');
}

TEST_F(ByteCorpusTest, DirectoryConcatenatesFilesSkippingDatIndexes) {
  write("b.txt", alphabet(300));
  write("a.txt", alphabet(300));
  write("a.dat", std::string(5000, '\0'));
  const ByteCorpus c = ByteCorpus::load(dir_.string(), 0.0, 8);
  EXPECT_EQ(c.train_bytes(), 600);
}

TEST_F(ByteCorpusTest, BadDataIsAClearError) {
  const std::string missing = (dir_ / "nope.txt").string();
  try {
    ByteCorpus::load(missing, 0.1, 8);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "data '" + missing + "' does not exist");
  }
  const std::string empty = write("empty.txt", "");
  try {
    ByteCorpus::load(empty, 0.1, 8);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "data '" + empty + "' is empty: give a text file to train on");
  }
  EXPECT_THROW(ByteCorpus::load(write("short.txt", "hello"), 0.1, 8), Error);
  fs::create_directories(dir_ / "void");
  EXPECT_THROW(ByteCorpus::load((dir_ / "void").string(), 0.1, 8), Error);
}

}  // namespace
}  // namespace meshtp::train
