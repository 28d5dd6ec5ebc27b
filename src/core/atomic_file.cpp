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
#include <system_error>
#include <utility>

#include "core/error.hpp"

namespace meshtp {
namespace {

// strerror, but thread-safe.
std::string describe(int error) { return std::generic_category().message(error); }

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
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

AtomicFileWriter::AtomicFileWriter(std::string path) : path_(std::move(path)) {
  const std::filesystem::path dest(path_);
  const std::string name = dest.filename().string();
  MESHTP_CHECK(!name.empty() && name != "." && name != "..",
               "cannot write '{}': the path does not name a file", path_);
  MESHTP_CHECK(!is_directory(path_), "cannot write '{}': it is a directory", path_);
  const std::filesystem::path dir = dest.parent_path();
  for (int attempt = 0;; ++attempt) {
    const std::string temp_name = "." + name + ".tmp." + std::to_string(::getpid()) + "." +
                                  std::to_string(temp_counter.fetch_add(1));
    temp_path_ = (dir / temp_name).string();
    fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ >= 0) return;
    const int error = errno;
    if (error == EEXIST && attempt < 100) continue;  // a stale temporary file of ours
    temp_path_.clear();
    fail("cannot write '{}': cannot create a temporary file in '{}': {}", path_,
         dir.empty() ? "." : dir.string(), describe(error));
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
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    const int error = errno;
    const std::string temp = temp_path_;
    abandon();
    fail("cannot write '{}': rename from '{}' failed: {}; the file was left as it was", path_, temp,
         describe(error));
  }
  committed_ = true;
  temp_path_.clear();
  const std::filesystem::path dir = std::filesystem::path(path_).parent_path();
  sync_directory(dir.empty() ? "." : dir.string());
}

void write_file_atomically(const std::string& path, std::string_view contents) {
  AtomicFileWriter writer(path);
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
