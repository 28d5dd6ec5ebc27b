// Atomic writes: the destination holds the old bytes or the new bytes, never a mix, and no
// temporary file outlives a failure. A full disk is simulated with RLIMIT_FSIZE, which
// makes write() fail with EFBIG part-way through, exactly like ENOSPC would.
// What is written over: only regular files; symlinks followed; the mode kept; read-only
// files refused. These tests run as root too, where access() would allow everything.
#include "core/atomic_file.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
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

// The file type and permission bits at `path`, without following a symlink there.
mode_t lmode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path << ": " << std::strerror(errno);
  return st.st_mode;
}

const char* const kOnlyRegular = ", not a regular file: meshtp writes only regular files";

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
            "'" + path("ckpt") + "' is a directory" + kOnlyRegular);
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

// A device node given as an output path stays a device node. The nodes are made here with
// mknod (root), so that a broken writer replaces a copy, never the machine's /dev/null;
// without mknod the test uses /dev/null itself, which a non-root writer cannot replace.
TEST_F(AtomicFile, DeviceNodesAreRefusedAndKept) {
  std::string null_path = path("null");
  if (::mknod(null_path.c_str(), S_IFCHR | 0666, ::makedev(1, 3)) != 0) {
    if (::geteuid() == 0) GTEST_SKIP() << "root without mknod: /dev/null would be at risk";
    null_path = "/dev/null";
  }
  EXPECT_EQ(error_of([&] { write_file_atomically(null_path, "{}"); }),
            "'" + null_path + "' is a character device" + kOnlyRegular);
  struct stat st {};
  ASSERT_EQ(::lstat(null_path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_EQ(st.st_rdev, ::makedev(1, 3));

  if (::mknod(path("loop").c_str(), S_IFBLK | 0660, ::makedev(7, 0)) == 0) {
    EXPECT_EQ(error_of([&] { write_file_atomically(path("loop"), "{}"); }),
              "'" + path("loop") + "' is a block device" + kOnlyRegular);
    EXPECT_TRUE(S_ISBLK(lmode_of(path("loop"))));
  }
  // Nothing was created: the refusal comes before the temporary file.
  for (const std::string& name : entries()) EXPECT_TRUE(name == "null" || name == "loop") << name;
}

TEST_F(AtomicFile, FifoIsRefusedAndKept) {
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0644), 0);
  EXPECT_EQ(error_of([&] { write_file_atomically(path("fifo"), "{}"); }),
            "'" + path("fifo") + "' is a FIFO (named pipe)" + kOnlyRegular);
  EXPECT_TRUE(S_ISFIFO(lmode_of(path("fifo"))));
  EXPECT_EQ(entries(), std::set<std::string>{"fifo"});
}

TEST_F(AtomicFile, SocketIsRefusedAndKept) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const std::string socket_path = path("sock");
  ASSERT_LT(socket_path.size(), sizeof(address.sun_path));
  std::memcpy(address.sun_path, socket_path.c_str(), socket_path.size() + 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0)
      << std::strerror(errno);
  EXPECT_EQ(error_of([&] { write_file_atomically(socket_path, "x"); }),
            "'" + socket_path + "' is a socket" + kOnlyRegular);
  EXPECT_TRUE(S_ISSOCK(lmode_of(socket_path)));
  EXPECT_EQ(entries(), std::set<std::string>{"sock"});
  ::close(fd);
}

TEST_F(AtomicFile, SymlinkIsFollowedAndStaysALink) {
  write_file_atomically(path("real.json"), "old");
  fs::create_symlink("real.json", path("link.json"));
  write_file_atomically(path("link.json"), "new content");
  EXPECT_TRUE(fs::is_symlink(path("link.json")));
  EXPECT_EQ(fs::read_symlink(path("link.json")), "real.json");
  EXPECT_EQ(read_file(path("real.json")), "new content");
  EXPECT_EQ(entries(), (std::set<std::string>{"link.json", "real.json"}));
}

// out → ../x/mid → /abs/DIR/sub/end.json: the temporary file is created beside end.json
// (the rename must stay in one directory), and both links survive.
TEST_F(AtomicFile, SymlinkChainIsFollowedToItsEnd) {
  fs::create_directories(path("sub"));
  fs::create_directories(path("x"));
  write_file_atomically(path("sub/end.json"), "old");
  fs::create_symlink(path("sub/end.json"), path("x/mid"));  // absolute
  fs::create_symlink("x/mid", path("out"));                  // relative
  AtomicFileWriter writer(path("out"));
  EXPECT_EQ(writer.target_path(), (fs::canonical(path("sub")) / "end.json").string());
  EXPECT_EQ(fs::path(writer.temp_path()).parent_path(), fs::canonical(path("sub")));
  writer.write("new");
  writer.commit();
  EXPECT_TRUE(fs::is_symlink(path("out")));
  EXPECT_TRUE(fs::is_symlink(path("x/mid")));
  EXPECT_EQ(read_file(path("sub/end.json")), "new");
  EXPECT_EQ(entries(), (std::set<std::string>{"out", "sub", "x"}));
  EXPECT_EQ(fs::directory_iterator(path("sub"))->path().filename(), "end.json");
}

TEST_F(AtomicFile, DanglingSymlinkIsWrittenThrough) {
  fs::create_symlink("later.json", path("link"));
  write_file_atomically(path("link"), "created");
  EXPECT_TRUE(fs::is_symlink(path("link")));
  EXPECT_EQ(read_file(path("later.json")), "created");
  EXPECT_EQ(entries(), (std::set<std::string>{"link", "later.json"}));

  // Into a directory that does not exist: refused, naming both, and the link is kept.
  fs::create_symlink("/nonexistent-meshtp-dir/f.json", path("nowhere"));
  EXPECT_EQ(error_of([&] { write_file_atomically(path("nowhere"), "x"); }),
            "cannot write '" + path("nowhere") +
                "' (a symlink to '/nonexistent-meshtp-dir/f.json'): the directory "
                "'/nonexistent-meshtp-dir' does not exist");
  EXPECT_EQ(fs::read_symlink(path("nowhere")), "/nonexistent-meshtp-dir/f.json");
}

TEST_F(AtomicFile, SymlinkToANonRegularFileIsRefused) {
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0644), 0);
  fs::create_symlink("fifo", path("a"));
  fs::create_symlink("a", path("b"));
  EXPECT_EQ(error_of([&] { write_file_atomically(path("b"), "x"); }),
            "'" + path("b") + "' (a symlink to '" + path("fifo") + "') is a FIFO (named pipe)" +
                kOnlyRegular);
  fs::create_symlink(dir_, path("d"));
  EXPECT_EQ(error_of([&] { write_file_atomically(path("d"), "x"); }),
            "'" + path("d") + "' (a symlink to '" + dir_.string() + "') is a directory" +
                kOnlyRegular);
  EXPECT_TRUE(S_ISFIFO(lmode_of(path("fifo"))));
  EXPECT_TRUE(fs::is_symlink(path("a")) && fs::is_symlink(path("b")) && fs::is_symlink(path("d")));
  EXPECT_EQ(entries(), (std::set<std::string>{"a", "b", "d", "fifo"}));

  fs::create_symlink("loop2", path("loop1"));
  fs::create_symlink("loop1", path("loop2"));
  const std::string message = error_of([&] { write_file_atomically(path("loop1"), "x"); });
  EXPECT_NE(message.find("cannot write '" + path("loop1") + "': Too many levels of symbolic links"),
            std::string::npos)
      << message;
}

// Refused by its mode bits even for root, who may write it: content, mode and directory
// stay as they were. With replace_read_only it is replaced and stays read-only.
TEST_F(AtomicFile, ReadOnlyFileIsRefusedUnlessAskedFor) {
  write_file_atomically(path("x.json"), "precious");
  fs::permissions(path("x.json"), fs::perms(0444));
  EXPECT_EQ(error_of([&] { write_file_atomically(path("x.json"), "clobbered"); }),
            "'" + path("x.json") + "' is read-only (mode 0444): not overwritten");
  EXPECT_EQ(read_file(path("x.json")), "precious");
  EXPECT_EQ(lmode_of(path("x.json")), S_IFREG | 0444);
  EXPECT_EQ(entries(), std::set<std::string>{"x.json"});

  // Through a link the message names both; group and others' bits do not make it writable.
  fs::permissions(path("x.json"), fs::perms(0466));
  fs::create_symlink("x.json", path("link"));
  EXPECT_EQ(error_of([&] { write_file_atomically(path("link"), "clobbered"); }),
            "'" + path("link") + "' (a symlink to '" + path("x.json") +
                "') is read-only (mode 0466): not overwritten");
  EXPECT_EQ(read_file(path("x.json")), "precious");

  fs::permissions(path("x.json"), fs::perms(0444));
  write_file_atomically(path("link"), "replaced", AtomicWriteOptions{.replace_read_only = true});
  EXPECT_EQ(read_file(path("x.json")), "replaced");
  EXPECT_EQ(lmode_of(path("x.json")), S_IFREG | 0444);
  EXPECT_TRUE(fs::is_symlink(path("link")));
}

TEST_F(AtomicFile, ReplacedFileKeepsItsMode) {
  for (const mode_t mode : {0600, 0640, 0755, 0200}) {
    SCOPED_TRACE(mode);
    write_file_atomically(path("f"), "old");
    ASSERT_EQ(::chmod(path("f").c_str(), mode), 0);
    AtomicFileWriter writer(path("f"));
    // Already while it is written: a 0600 file's new content is never readable by others.
    EXPECT_EQ(lmode_of(writer.temp_path()), S_IFREG | mode);
    writer.write("new");
    writer.commit();
    EXPECT_EQ(lmode_of(path("f")), S_IFREG | mode);
    ASSERT_EQ(::chmod(path("f").c_str(), 0600), 0);  // readable, for read_file as non-root
    EXPECT_EQ(read_file(path("f")), "new");
    fs::remove(path("f"));
  }
  // A new file: 0666 less the umask, as before.
  const mode_t saved = ::umask(027);
  write_file_atomically(path("new"), "x");
  ::umask(saved);
  EXPECT_EQ(lmode_of(path("new")), S_IFREG | 0640);
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
