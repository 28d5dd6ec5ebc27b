// Atomic writes (temp + fsync + rename) and offset reads over POSIX file descriptors; the
// protocol is described in atomic_file.hpp. POSIX rather than iostreams because iostreams
// hide errno, and "No space left on device" is exactly what a user needs to read.
#include "core/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <system_error>
#include <utility>

#include "core/error.hpp"

namespace meshtp {
namespace {

// strerror, but thread-safe.
std::string describe(int error) { return std::generic_category().message(error); }

namespace fs = std::filesystem;

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// "a character device", for "'/dev/full' is a character device, not a regular file".
const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  return "a file of unknown type";
}

// Where a chain of symlinks starting at `path` ends (`path` itself when it is no symlink),
// and what is there.
struct LinkEnd {
  fs::path path;
  bool exists = false;
  struct stat st {};
};

LinkEnd follow_links(const std::string& path) {
  LinkEnd end{fs::path(path)};
  // 40: the kernel's own limit (MAXSYMLINKS), so a loop fails here as open() would.
  for (int hops = 0;; ++hops) {
    // Any failure (ENOENT, ENOTDIR, EACCES) means "nothing to check here": creating the
    // temporary file in the same directory then fails with the reason, naming the directory.
    if (::lstat(end.path.c_str(), &end.st) != 0) return end;
    if (!S_ISLNK(end.st.st_mode)) {
      end.exists = true;
      return end;
    }
    MESHTP_CHECK(hops < 40, "cannot write '{}': {} (following '{}')", path, describe(ELOOP),
                 end.path.string());
    std::error_code ec;
    const fs::path to = fs::read_symlink(end.path, ec);
    MESHTP_CHECK(!ec, "cannot write '{}': cannot read the symlink '{}': {}", path,
                 end.path.string(), ec.message());
    // Not normalised lexically: "a/../b" must mean what the kernel makes of it when `a` is
    // itself a symlink to a directory.
    end.path = to.is_absolute() ? to : end.path.parent_path() / to;
  }
}

// Makes a completed rename durable. Best effort: some filesystems refuse fsync on a
// directory, and by now the new file is complete, so a failure here is not worth throwing.
void sync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::fsync(fd);
  (void)::close(fd);
}

std::atomic<unsigned> temp_counter{0};

// MESHTP_FAULT_ENOSPC_AFTER: bytes left before writes fail (negative: no limit).
std::int64_t injected_space_left() {
  static const std::int64_t limit = [] {
    const char* text = std::getenv("MESHTP_FAULT_ENOSPC_AFTER");
    return text != nullptr ? std::atoll(text) : std::int64_t{-1};
  }();
  return limit;
}
std::atomic<std::int64_t> bytes_through{0};

}  // namespace

int write_fully(int fd, std::span<const std::byte> bytes, std::int64_t* written) {
  const std::byte* next = bytes.data();
  std::size_t left = bytes.size();
  while (left > 0) {
    std::size_t chunk = left;
    if (const std::int64_t limit = injected_space_left(); limit >= 0) {
      const std::int64_t room = limit - bytes_through.load();
      if (room <= 0) return ENOSPC;
      chunk = std::min(chunk, static_cast<std::size_t>(room));
    }
    const ssize_t n = ::write(fd, next, chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EIO;
    next += n;
    left -= static_cast<std::size_t>(n);
    bytes_through += n;
    if (written != nullptr) *written += n;
  }
  return 0;
}

OutputTarget check_output_path(const std::string& path, AtomicWriteOptions options) {
  const auto names_a_file = [](const fs::path& p) {
    const std::string name = p.filename().string();
    return !name.empty() && name != "." && name != "..";
  };
  MESHTP_CHECK(names_a_file(path), "cannot write '{}': the path does not name a file", path);

  const LinkEnd end = follow_links(path);
  const bool via_link = end.path != fs::path(path);
  // "'out.json'", or "'out.json' (a symlink to '/data/plan.json')": the user named the
  // first, but what is wrong is the second.
  const std::string what = via_link
                               ? fmt::format("'{}' (a symlink to '{}')", path, end.path.string())
                               : fmt::format("'{}'", path);
  OutputTarget out;
  if (end.exists) {
    MESHTP_CHECK(S_ISREG(end.st.st_mode),
                 "{} is {}, not a regular file: meshtp writes only regular files", what,
                 kind_of(end.st.st_mode));
    const mode_t mode = end.st.st_mode & 07777;
    MESHTP_CHECK((mode & S_IWUSR) != 0 || options.replace_read_only,
                 "{} is read-only (mode {:04o}): not overwritten", what, mode);
    out.mode = mode;
  }
  fs::path target = end.path;
  if (via_link) {
    MESHTP_CHECK(names_a_file(target), "cannot write {}: the link does not name a file", what);
    // The directory of the file the link names, resolved: the temporary file must be in it,
    // beside the file the rename replaces, and messages read better without "a/../b".
    const fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
    std::error_code ec;
    const fs::path real_dir = fs::canonical(dir, ec);
    if (ec || !is_directory(real_dir.string())) {
      const std::string why = !ec || ec == std::errc::not_a_directory ? "is not a directory"
                              : ec == std::errc::no_such_file_or_directory
                                  ? "does not exist"
                                  : "cannot be resolved: " + ec.message();
      fail("cannot write {}: the directory '{}' {}", what, dir.string(), why);
    }
    target = real_dir / target.filename();
  }
  out.path = target.string();
  return out;
}

AtomicFileWriter::AtomicFileWriter(std::string path, AtomicWriteOptions options)
    : path_(std::move(path)) {
  // Everything is checked before the temporary file exists, so a refusal leaves no trace.
  const OutputTarget checked = check_output_path(path_, options);
  const std::optional<mode_t> kept_mode = checked.mode;
  const fs::path target = checked.path;
  target_path_ = target.string();

  const std::string name = target.filename().string();
  const fs::path dir = target.parent_path();
  for (int attempt = 0;; ++attempt) {
    const std::string temp_name = "." + name + ".tmp." + std::to_string(::getpid()) + "." +
                                  std::to_string(temp_counter.fetch_add(1));
    temp_path_ = (dir / temp_name).string();
    fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ >= 0) break;
    const int error = errno;
    if (error == EEXIST && attempt < 100) continue;  // a stale temporary file of ours
    temp_path_.clear();
    fail("cannot write '{}': cannot create a temporary file in '{}': {}", path_,
         dir.empty() ? "." : dir.string(), describe(error));
  }
  // At once, not before the rename: a 0600 file's new content must not be readable by
  // others while it is being written either.
  if (kept_mode && ::fchmod(fd_, *kept_mode) != 0) {
    const int error = errno;
    const std::string temp = temp_path_;
    abandon();
    fail("cannot write '{}': cannot give '{}' the mode {:04o} of the file it replaces: {}",
         path_, temp, *kept_mode, describe(error));
  }
}

AtomicFileWriter::~AtomicFileWriter() {
  if (!committed_) abandon();
}

void AtomicFileWriter::abandon() noexcept {
  if (fd_ >= 0) (void)::close(fd_);
  fd_ = -1;
  if (!temp_path_.empty()) (void)::unlink(temp_path_.c_str());
  temp_path_.clear();
}

void AtomicFileWriter::write(std::span<const std::byte> bytes) {
  MESHTP_CHECK(fd_ >= 0, "cannot write '{}': the writer was already committed or failed", path_);
  if (const int error = write_fully(fd_, bytes, &bytes_written_); error != 0) {
    abandon();
    fail("cannot write '{}': {} after {} bytes; the file was left as it was", path_,
         describe(error), bytes_written_);
  }
}

void AtomicFileWriter::write(std::string_view text) {
  write(std::as_bytes(std::span<const char>(text.data(), text.size())));
}

void AtomicFileWriter::commit() {
  MESHTP_CHECK(fd_ >= 0, "cannot commit '{}': the writer was already committed or failed", path_);
  if (::fsync(fd_) != 0) {
    const int error = errno;
    abandon();
    fail("cannot write '{}': fsync failed: {}; the file was left as it was", path_,
         describe(error));
  }
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) {
    const int error = errno;
    abandon();
    fail("cannot write '{}': close failed: {}; the file was left as it was", path_,
         describe(error));
  }
  if (::rename(temp_path_.c_str(), target_path_.c_str()) != 0) {
    const int error = errno;
    const std::string temp = temp_path_;
    abandon();
    fail("cannot write '{}': rename from '{}' failed: {}; the file was left as it was", path_, temp,
         describe(error));
  }
  committed_ = true;
  temp_path_.clear();
  const fs::path dir = fs::path(target_path_).parent_path();
  sync_directory(dir.empty() ? "." : dir.string());
}

void write_file_atomically(const std::string& path, std::string_view contents,
                           AtomicWriteOptions options) {
  AtomicFileWriter writer(path, options);
  writer.write(contents);
  writer.commit();
}

InputFile::InputFile(std::string path) : path_(std::move(path)) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever; it is
  // refused below, and for a regular file the flag changes nothing.
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) fail("cannot open '{}': {}", path_, describe(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int error = errno;
    (void)::close(fd_);
    fail("cannot read '{}': {}", path_, describe(error));
  }
  if (!S_ISREG(st.st_mode)) {
    (void)::close(fd_);
    fail("cannot read '{}': {}", path_,
         S_ISDIR(st.st_mode)    ? "it is a directory"
         : S_ISFIFO(st.st_mode) ? "it is a FIFO (named pipe), not a regular file"
         : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "it is a device, not a regular file"
         : S_ISSOCK(st.st_mode) ? "it is a socket, not a regular file"
                                : "it is not a regular file");
  }
  size_ = static_cast<std::int64_t>(st.st_size);
}

InputFile::~InputFile() { (void)::close(fd_); }

void InputFile::read_at(std::int64_t offset, std::span<std::byte> bytes) const {
  MESHTP_CHECK(offset >= 0, "cannot read '{}' at negative offset {}", path_, offset);
  std::byte* next = bytes.data();
  std::size_t left = bytes.size();
  std::int64_t at = offset;
  while (left > 0) {
    const ssize_t n = ::pread(fd_, next, left, static_cast<off_t>(at));
    if (n < 0) {
      const int error = errno;
      if (error == EINTR) continue;
      fail("cannot read '{}' at byte {}: {}", path_, at, describe(error));
    }
    if (n == 0) {
      fail("cannot read '{}': it ends at byte {}, but bytes [{}, {}) were expected", path_, at,
           offset, offset + static_cast<std::int64_t>(bytes.size()));
    }
    next += n;
    left -= static_cast<std::size_t>(n);
    at += n;
  }
}

std::string read_file(const std::string& path) {
  const InputFile file(path);
  std::string contents(static_cast<std::size_t>(file.size()), '\0');
  file.read_at(0, std::as_writable_bytes(std::span<char>(contents.data(), contents.size())));
  return contents;
}

}  // namespace meshtp
