// File I/O that never leaves a half-written file behind, and reads that say what went wrong.
//
// Why: checkpoints and plans are overwritten in place. A crash, a full disk or a killed job
// in the middle of `write(path)` must leave the last good file as it was, so every file
// meshtp writes goes through AtomicFileWriter:
//
//   0. check   DIR/NAME              (see "What is written over" below; nothing is created
//                                     when the check fails)
//   1. create  DIR/.NAME.tmp.PID.K   (same directory ⇒ same filesystem ⇒ rename is atomic;
//                                     O_EXCL, so two writers never share a temporary file;
//                                     given the mode of the file it replaces at once)
//   2. write   all bytes             (short writes and EINTR retried)
//   3. fsync   the temporary file    (the data is on disk before the name points at it)
//   4. rename  over DIR/NAME         (readers see the old file or the new one, never a mix)
//   5. fsync   DIR                   (best effort: makes the rename itself durable)
//
// Any failure before step 4, or a writer destroyed without commit(), removes the temporary
// file and leaves DIR/NAME untouched.
//
// What is written over: the rename replaces whatever DIR/NAME is, so the writer looks first.
// Paths reach it from the command line (`--out`, `--trace`, …), and `--out /dev/full` run
// as root must not turn the device node into a JSON file:
//   - only a regular file is replaced. A directory, character or block device, FIFO or
//     socket is refused: "'/dev/full' is a character device, not a regular file: meshtp
//     writes only regular files".
//   - a symlink is followed (a chain to its end): the temporary file is created beside the
//     file the link finally names and renamed over that file, so the link stays a link and
//     reads the new content. A dangling link is written through to the path it names, if
//     that path's directory exists. What the link names is checked as above.
//   - the new file keeps the permission bits (st_mode & 07777) of the file it replaces: a
//     0600 file stays private, also while the temporary file is being written. A new file
//     gets 0666 less the umask.
//   - a read-only file (no write bit for its owner, e.g. 0444) is refused: "'x.json' is
//     read-only (mode 0444): not overwritten", unless AtomicWriteOptions::replace_read_only.
//     The mode bits decide, not access(): root may write anything, and a read-only file is
//     usually read-only on purpose.
// Errors throw meshtp::Error naming the path and the system's reason (strerror).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace meshtp {

struct AtomicWriteOptions {
  // Replace an existing file that has no owner write bit (its mode is kept). Off by default:
  // see "What is written over" above.
  bool replace_read_only = false;
};

// Step 0 alone: what is at `path` may be written (see "What is written over"); throws if not.
// Returns the file a write replaces (`path`, or the end of a symlink chain at it) and its
// permission bits when it exists. For a file appended to in place rather than replaced (the
// metrics log), which gets the same checks.
struct OutputTarget {
  std::string path;
  std::optional<unsigned> mode;  // st_mode & 07777 of the existing file
};
OutputTarget check_output_path(const std::string& path, AtomicWriteOptions options = {});

class AtomicFileWriter {
 public:
  // Checks what is at `path` (see above) and creates the temporary file beside it, or
  // beside what a symlink at `path` names; throws if `path` is not a regular file, is
  // read-only, or its directory does not exist or is not writable.
  explicit AtomicFileWriter(std::string path, AtomicWriteOptions options = {});
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
  // What commit() renames over: `path`, or the file a symlink at `path` finally names.
  const std::string& target_path() const { return target_path_; }
  const std::string& temp_path() const { return temp_path_; }

 private:
  void abandon() noexcept;

  std::string path_;
  std::string target_path_;
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
void write_file_atomically(const std::string& path, std::string_view contents,
                           AtomicWriteOptions options = {});

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
