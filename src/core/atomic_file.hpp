// File I/O that never leaves a half-written file behind, and reads that say what went wrong.
//
// Why: checkpoints and plans are overwritten in place. A crash, a full disk or a killed job
// in the middle of `write(path)` must leave the last good file as it was, so every file
// meshtp writes goes through AtomicFileWriter:
//
//   1. create  DIR/.NAME.tmp.PID.K   (same directory ⇒ same filesystem ⇒ rename is atomic;
//                                     O_EXCL, so two writers never share a temporary file)
//   2. write   all bytes             (short writes and EINTR retried)
//   3. fsync   the temporary file    (the data is on disk before the name points at it)
//   4. rename  over DIR/NAME         (readers see the old file or the new one, never a mix)
//   5. fsync   DIR                   (best effort: makes the rename itself durable)
//
// Any failure before step 4, or a writer destroyed without commit(), removes the temporary
// file and leaves DIR/NAME untouched. A symlink at DIR/NAME is replaced, not followed.
// Errors throw meshtp::Error naming the path and the system's reason (strerror).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace meshtp {

class AtomicFileWriter {
 public:
  // Creates the temporary file beside `path`; throws if the directory does not exist, is
  // not writable, or `path` is a directory.
  explicit AtomicFileWriter(std::string path);
  // Without commit(): closes and removes the temporary file; `path` is untouched.
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(std::span<const std::byte> bytes);
  void write(std::string_view text);
  // fsync, close and rename over the destination. After a failure the writer is spent:
  // the temporary file is gone and the destination untouched.
  void commit();

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }

 private:
  void abandon() noexcept;

  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  std::int64_t bytes_written_ = 0;
  bool committed_ = false;
};

// Writes every byte to `fd`, retrying short writes and EINTR; returns 0, or the errno of the
// write that failed. Every meshtp file write goes through here, so a test can make the disk
// "full": with MESHTP_FAULT_ENOSPC_AFTER=N in the environment, writes fail with ENOSPC once
// this process has written N bytes through this function.
int write_fully(int fd, std::span<const std::byte> bytes, std::int64_t* written = nullptr);

// The whole of `contents` into `path`, atomically (see above).
void write_file_atomically(const std::string& path, std::string_view contents);

// A regular file opened for reading at explicit offsets, so a loader can read a header and
// then each tensor straight into its own buffer without holding the file in memory twice.
class InputFile {
 public:
  // Throws "cannot open 'x': No such file or directory", "'x' is a directory", …
  explicit InputFile(std::string path);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  const std::string& path() const { return path_; }
  std::int64_t size() const { return size_; }  // in bytes, at open time
  // Exactly bytes.size() bytes from `offset`; throws if the file ends first or a read fails.
  void read_at(std::int64_t offset, std::span<std::byte> bytes) const;

 private:
  std::string path_;
  int fd_ = -1;
  std::int64_t size_ = 0;
};

// The whole file as bytes; throws naming the path when it is missing, unreadable or a
// directory.
std::string read_file(const std::string& path);

}  // namespace meshtp
