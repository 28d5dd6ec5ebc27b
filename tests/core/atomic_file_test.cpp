// Atomic writes: the destination holds the old bytes or the new bytes, never a mix, and no
// temporary file outlives a failure. A full disk is simulated with RLIMIT_FSIZE, which
// makes write() fail with EFBIG part-way through, exactly like ENOSPC would.
#include "core/atomic_file.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>

#include "core/error.hpp"
#include "error_of.hpp"

namespace meshtp {
namespace {

using meshtp::test_support::error_of;

namespace fs = std::filesystem;

class AtomicFile : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "meshtp_atomic_XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::set<std::string> entries() const {
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.insert(e.path().filename());
    return names;
  }

  fs::path dir_;
};

// The message of the meshtp::Error that `f` throws; fails the test if it throws nothing.
TEST_F(AtomicFile, WritesReplacesAndLeavesNoTemporaryFile) {
  write_file_atomically(path("plan.json"), "first");
  EXPECT_EQ(read_file(path("plan.json")), "first");
  write_file_atomically(path("plan.json"), "second, longer");
  EXPECT_EQ(read_file(path("plan.json")), "second, longer");
  write_file_atomically(path("empty"), "");
  EXPECT_EQ(read_file(path("empty")), "");
  EXPECT_EQ(entries(), (std::set<std::string>{"plan.json", "empty"}));
}

TEST_F(AtomicFile, StreamedWritesArriveInOrder) {
  AtomicFileWriter writer(path("out"));
  EXPECT_EQ(fs::path(writer.temp_path()).parent_path(), dir_);  // same filesystem
  writer.write("abc");
  const std::byte raw[] = {std::byte{0}, std::byte{0xff}};
  writer.write(raw);
  EXPECT_FALSE(fs::exists(path("out")));  // nothing visible before commit
  writer.commit();
  EXPECT_EQ(read_file(path("out")), std::string("abc\0\xff", 5));
  EXPECT_THROW(writer.write("more"), Error);
}

TEST_F(AtomicFile, WriterDestroyedWithoutCommitLeavesOldFile) {
  write_file_atomically(path("ckpt"), "good");
  {
    AtomicFileWriter writer(path("ckpt"));
    writer.write("half-written");
  }  // e.g. an exception while serialising
  EXPECT_EQ(read_file(path("ckpt")), "good");
  EXPECT_EQ(entries(), std::set<std::string>{"ckpt"});
}

TEST_F(AtomicFile, DiskFullMidwayKeepsOldFileAndRemovesTemporary) {
  write_file_atomically(path("ckpt"), "good checkpoint");
  const std::string big(1 << 20, 'x');

  // Files may not grow past 64 KiB: write() fails with EFBIG part-way through.
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = saved;
  small.rlim_cur = 64 << 10;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string message = error_of([&] { write_file_atomically(path("ckpt"), big); });
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &saved), 0);
  std::signal(SIGXFSZ, old_handler);

  EXPECT_NE(message.find("cannot write '" + path("ckpt") + "': File too large after 65536 bytes"),
            std::string::npos)
      << message;
  EXPECT_EQ(read_file(path("ckpt")), "good checkpoint");
  EXPECT_EQ(entries(), std::set<std::string>{"ckpt"});
}

TEST_F(AtomicFile, MissingDirectoryIsNamed) {
  const std::string target = path("no/such/dir/ckpt");
  EXPECT_EQ(error_of([&] { write_file_atomically(target, "x"); }),
            "cannot write '" + target + "': cannot create a temporary file in '" +
                path("no/such/dir") + "': No such file or directory");
}

TEST_F(AtomicFile, DirectoryDestinationIsRefusedAndKept) {
  fs::create_directory(path("ckpt"));
  write_file_atomically(path("ckpt/inside"), "kept");
  EXPECT_EQ(error_of([&] { write_file_atomically(path("ckpt"), "x"); }),
            "cannot write '" + path("ckpt") + "': it is a directory");
  EXPECT_EQ(error_of([&] { AtomicFileWriter w(dir_.string() + "/"); }),
            "cannot write '" + dir_.string() + "/': the path does not name a file");
  EXPECT_TRUE(fs::is_directory(path("ckpt")));
  EXPECT_EQ(read_file(path("ckpt/inside")), "kept");
  EXPECT_EQ(entries(), std::set<std::string>{"ckpt"});
}

TEST_F(AtomicFile, FailedRenameRemovesTemporaryFile) {
  AtomicFileWriter writer(path("ckpt"));
  writer.write("new");
  fs::create_directory(path("ckpt"));  // appears between open and commit
  write_file_atomically(path("ckpt/inside"), "kept");
  const std::string temp = writer.temp_path();
  const std::string message = error_of([&] { writer.commit(); });
  EXPECT_EQ(message, "cannot write '" + path("ckpt") + "': rename from '" + temp +
                         "' failed: Is a directory; the file was left as it was");
  EXPECT_EQ(entries(), std::set<std::string>{"ckpt"});
  EXPECT_EQ(read_file(path("ckpt/inside")), "kept");
}

TEST_F(AtomicFile, ReadErrorsNameThePath) {
  EXPECT_EQ(error_of([&] { read_file(path("missing.txt")); }),
            "cannot open '" + path("missing.txt") + "': No such file or directory");
  EXPECT_EQ(error_of([&] { read_file(dir_.string()); }),
            "cannot read '" + dir_.string() + "': it is a directory");

  write_file_atomically(path("short"), "0123456789");
  const InputFile file(path("short"));
  EXPECT_EQ(file.size(), 10);
  std::string buf(4, '\0');
  file.read_at(6, std::as_writable_bytes(std::span<char>(buf.data(), buf.size())));
  EXPECT_EQ(buf, "6789");
  EXPECT_EQ(error_of([&] {
              file.read_at(8, std::as_writable_bytes(std::span<char>(buf.data(), buf.size())));
            }),
            "cannot read '" + path("short") +
                "': it ends at byte 10, but bytes [8, 12) were "
                "expected");
}

}  // namespace
}  // namespace meshtp
