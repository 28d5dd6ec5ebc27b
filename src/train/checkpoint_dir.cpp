#include "train/checkpoint_dir.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <system_error>

#include <fmt/ranges.h>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/stats.hpp"

namespace meshtp::train {
namespace fs = std::filesystem;
namespace {

constexpr const char* kLatest = "checkpoint.safetensors";
constexpr const char* kLockName = "meshtp.lock";
constexpr double kHeartbeatSeconds = 60;
constexpr double kForeignLockStaleSeconds = 600;

std::string first_line_of(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

// Ticks since boot at which `pid` started (field 22 of /proc/PID/stat); "" if there is no
// such process or it is a zombie (dead, not yet reaped — an orphan's parent may never reap).
std::string start_time(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return "";
  const auto close = stat.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos) return "";
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 3 && (field == "Z" || field == "X")) return "";
    if (i == 22) return field;
  }
  return "";
}

struct LockOwner {
  long pid = 0;
  std::string host, boot, start, since;
};

std::string lock_text() {
  const std::time_t now = std::time(nullptr);
  char since[32] = {};
  std::strftime(since, sizeof since, "%Y-%m-%d %H:%M:%S", std::localtime(&now));
  return fmt::format("pid {}\nhost {}\nboot {}\nstart {}\nsince {}\n", ::getpid(), host_name(),
                     first_line_of("/proc/sys/kernel/random/boot_id"), start_time(::getpid()),
                     since);
}

std::optional<LockOwner> parse_lock(const std::string& text) {
  LockOwner owner;
  std::istringstream in(text);
  std::string key, value;
  while (in >> key && std::getline(in >> std::ws, value)) {
    if (key == "pid") {
      try {
        owner.pid = std::stol(value);
      } catch (const std::exception&) {
        return std::nullopt;
      }
    } else if (key == "host") {
      owner.host = value;
    } else if (key == "boot") {
      owner.boot = value;
    } else if (key == "start") {
      owner.start = value;
    } else if (key == "since") {
      owner.since = value;
    }
  }
  if (owner.pid <= 0 || owner.host.empty()) return std::nullopt;
  return owner;
}

// Whether the run that wrote a lock may still be running.
bool lock_live(const std::optional<LockOwner>& owner, double age_s) {
  if (!owner || owner->host != host_name()) return age_s < kForeignLockStaleSeconds;
  if (!owner->boot.empty() && owner->boot != first_line_of("/proc/sys/kernel/random/boot_id")) {
    return false;  // written before a reboot
  }
  const std::string start = start_time(owner->pid);
  return !start.empty() && (owner->start.empty() || start == owner->start);
}

std::string owner_text(const std::optional<LockOwner>& owner) {
  return owner ? fmt::format("pid {} on {}, since {}", owner->pid, owner->host, owner->since)
               : std::string("an unreadable lock");
}

// step of "checkpoint-<digits>.safetensors", or -1.
std::int64_t step_of(const std::string& name) {
  constexpr std::string_view prefix = "checkpoint-", suffix = ".safetensors";
  if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return -1;
  }
  const std::string digits =
      name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 18) return -1;
  return std::stoll(digits);
}

// Numbered checkpoints of `dir`, newest first.
std::vector<std::pair<std::int64_t, std::string>> numbered(const std::string& dir) {
  std::vector<std::pair<std::int64_t, std::string>> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::int64_t step = step_of(entry.path().filename().string());
    if (step >= 0) out.emplace_back(step, entry.path().string());
  }
  std::sort(out.begin(), out.end(), std::greater<>());
  return out;
}

void broadcast_string(const comm::Communicator& world, std::string& text) {
  std::int64_t size = static_cast<std::int64_t>(text.size());
  world.broadcast(std::span<std::int64_t>(&size, 1), 0);
  text.resize(static_cast<std::size_t>(size));
  world.broadcast(std::span<unsigned char>(reinterpret_cast<unsigned char*>(text.data()),
                                           text.size()),
                  0);
}

void point_link_at(const std::string& dir, const std::string& target) {
  const std::string link = (fs::path(dir) / kLatest).string();
  const std::string temp = (fs::path(dir) / fmt::format(".{}.link.{}", kLatest, ::getpid())).string();
  (void)::unlink(temp.c_str());
  const std::string name = fs::path(target).filename().string();
  if (::symlink(name.c_str(), temp.c_str()) != 0 || ::rename(temp.c_str(), link.c_str()) != 0) {
    const int error = errno;
    (void)::unlink(temp.c_str());
    fail("cannot point '{}' at '{}': {} (the checkpoint itself is complete)", link, name,
         errno_text(error));
  }
}

}  // namespace

std::vector<std::string> checkpoint_candidates(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  const fs::path link = fs::path(dir) / kLatest;
  if (fs::exists(link, ec)) {  // follows the link: a dangling one is skipped
    out.push_back(fs::is_symlink(link, ec) ? (fs::path(dir) / fs::read_symlink(link, ec)).string()
                                           : link.string());
  }
  for (const auto& [step, path] : numbered(dir)) {
    if (out.empty() || !fs::equivalent(out.front(), path, ec)) out.push_back(path);
  }
  return out;
}

std::optional<CheckpointState> peek_newest_checkpoint(const std::string& dir) {
  for (const std::string& path : checkpoint_candidates(dir)) {
    try {
      return peek_checkpoint(path);
    } catch (const Error&) {
    }
  }
  return std::nullopt;
}

void on_rank0(const comm::Communicator& world, const std::function<void()>& fn) {
  int failed = 0;
  std::string reason;
  if (world.rank() == 0) {
    try {
      fn();
    } catch (const Error& e) {
      failed = 1;
      reason = e.what();
    }
  }
  world.broadcast(std::span<int>(&failed, 1), 0);
  if (!failed) return;
  broadcast_string(world, reason);
  throw Error(reason);
}

CheckpointDir::CheckpointDir(std::string dir, int keep, bool resume,
                             const comm::Communicator& world, const NoticeFn& notice)
    : dir_(std::move(dir)), keep_(keep), world_(world) {
  MESHTP_CHECK(keep_ >= 1, "--keep={} must be ≥ 1 (checkpoints kept in --checkpoint-dir)", keep_);
  std::string notes;
  on_rank0(world_, [&] {
    std::error_code ec;
    MESHTP_CHECK(!resume || fs::exists(dir_, ec),
                 "--resume: checkpoint directory '{}' does not exist", dir_);
    fs::create_directories(dir_, ec);
    MESHTP_CHECK(!ec && fs::is_directory(dir_),
                 "cannot use checkpoint directory '{}': {}", dir_,
                 ec ? ec.message() : "it is not a directory");
    const std::string lock = (fs::path(dir_) / kLockName).string();
    for (int attempt = 0; !locked_; ++attempt) {
      MESHTP_CHECK(attempt < 5, "cannot lock checkpoint directory '{}': '{}' keeps changing",
                   dir_, lock);
      const std::string temp = (fs::path(dir_) / fmt::format(".{}.{}", kLockName, ::getpid())).string();
      try {
        write_file_atomically(temp, lock_text());
      } catch (const Error& e) {
        fail("checkpoint directory '{}' is not writable: {}", dir_, e.what());
      }
      const int rc = ::link(temp.c_str(), lock.c_str());  // fails if the lock exists
      const int error = errno;
      (void)::unlink(temp.c_str());
      if (rc == 0) {
        locked_ = true;
        break;
      }
      MESHTP_CHECK(error == EEXIST, "cannot lock checkpoint directory '{}': link to '{}': {}",
                   dir_, lock, errno_text(error));
      struct stat st {};
      if (::stat(lock.c_str(), &st) != 0) continue;  // released meanwhile: try again
      const double age = static_cast<double>(std::time(nullptr) - st.st_mtime);
      std::string text;
      try {
        text = read_file(lock);
      } catch (const Error&) {
        continue;
      }
      const std::optional<LockOwner> owner = parse_lock(text);
      MESHTP_CHECK(!lock_live(owner, age),
                   "checkpoint directory '{}' is in use by another meshtp run ({}): two runs "
                   "would overwrite each other's checkpoints; wait for it, use another "
                   "--checkpoint-dir, or remove '{}' if that run is gone",
                   dir_, owner_text(owner), lock);
      notes += fmt::format("removed the stale lock of a run that is gone ({})\n", owner_text(owner));
      (void)::unlink(lock.c_str());
    }
    if (!resume) {
      const std::vector<std::string> found = checkpoint_candidates(dir_);
      if (!found.empty()) {
        (void)::unlink(lock.c_str());
        locked_ = false;
        fail("checkpoint directory '{}' already holds checkpoints (newest: '{}'): pass --resume "
             "to continue from them, or give another --checkpoint-dir; nothing was changed",
             dir_, found.front());
      }
    }
    // Temporaries of killed writers (nobody else writes here while we hold the lock).
    int removed = 0;
    std::uintmax_t bytes = 0;
    for (const auto& entry : fs::directory_iterator(dir_, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind(".checkpoint", 0) == 0 &&
          (name.find(".tmp.") != std::string::npos || name.find(".link.") != std::string::npos)) {
        bytes += entry.is_regular_file(ec) ? entry.file_size(ec) : 0;
        if (::unlink(entry.path().c_str()) == 0) ++removed;
      }
    }
    if (removed > 0) {
      notes += fmt::format("removed {} temporary file{} ({:.1f} MB) left in '{}' by killed "
                           "writers\n",
                           removed, removed > 1 ? "s" : "", static_cast<double>(bytes) / 1e6, dir_);
    }
  });
  if (world_.rank() == 0 && notice) {
    std::istringstream lines(notes);
    for (std::string line; std::getline(lines, line);) notice(line);
  }
  last_heartbeat_ = now_seconds();
}

CheckpointDir::~CheckpointDir() {
  if (!locked_) return;
  const std::string lock = (fs::path(dir_) / kLockName).string();
  std::string text;
  try {
    text = read_file(lock);
  } catch (const Error&) {
    return;
  }
  const std::optional<LockOwner> owner = parse_lock(text);
  if (owner && owner->pid == ::getpid() && owner->host == host_name()) (void)::unlink(lock.c_str());
}

std::string CheckpointDir::latest_link() const { return (fs::path(dir_) / kLatest).string(); }

std::string CheckpointDir::path_for(std::int64_t step) const {
  return (fs::path(dir_) / fmt::format("checkpoint-{:08}.safetensors", step)).string();
}

CheckpointState CheckpointDir::resume(const ModelParts& parts, std::string& used,
                                      const NoticeFn& notice) {
  std::string listed;
  if (world_.rank() == 0) {
    for (const std::string& path : checkpoint_candidates(dir_)) listed += path + '\n';
  }
  broadcast_string(world_, listed);
  std::vector<std::string> paths;
  std::istringstream lines(listed);
  for (std::string line; std::getline(lines, line);) paths.push_back(line);
  MESHTP_CHECK(!paths.empty(),
               "--resume: no checkpoint in '{}' (neither '{}' nor checkpoint-<step>.safetensors)",
               dir_, latest_link());
  std::vector<std::string> damaged;
  std::error_code ec;
  if (fs::is_symlink(latest_link(), ec) && !fs::exists(latest_link(), ec)) {
    damaged.push_back(fmt::format("'{}' points at '{}', which is missing", latest_link(),
                                  fs::read_symlink(latest_link(), ec).string()));
  }
  for (const std::string& path : paths) {
    std::optional<LoadedCheckpoint> loaded;
    std::string reason = fmt::format(
        "{}: unreadable on another rank (missing or damaged there: that rank says which)", path);
    try {
      loaded = read_checkpoint(path, parts);
    } catch (const CorruptCheckpoint& e) {
      reason = e.what();
    }
    int bad = loaded ? 0 : 1;
    world_.all_reduce(std::span<int>(&bad, 1), comm::ReduceOp::kMax);
    if (bad) {
      damaged.push_back(reason);
      continue;
    }
    restore_checkpoint(*loaded, parts);
    used = path;
    if (!damaged.empty() && notice && world_.rank() == 0) {
      const std::string skipped = fmt::format("{}", fmt::join(damaged, "; "));
      notice(fmt::format("the newest checkpoint is damaged or missing ({}); resuming from the "
                         "previous one, '{}' (step {})",
                         skipped, path, loaded->state.step));
    }
    // A checkpoint from before numbered files (a regular DIR/checkpoint.safetensors) takes
    // its numbered name, so the link can point at it.
    on_rank0(world_, [&] {
      if (path != latest_link() || fs::is_symlink(path, ec)) return;
      const std::string numbered_path = path_for(loaded->state.step);
      MESHTP_CHECK(!fs::exists(numbered_path, ec), "cannot adopt '{}': '{}' exists", path,
                   numbered_path);
      fs::rename(path, numbered_path, ec);
      MESHTP_CHECK(!ec, "cannot rename '{}' to '{}': {}", path, numbered_path, ec.message());
      point_link_at(dir_, numbered_path);
      used = numbered_path;
    });
    return loaded->state;
  }
  fail("--resume: no checkpoint in '{}' is intact: {}", dir_, fmt::join(damaged, "; "));
}

std::string CheckpointDir::save(const ModelParts& parts, const CheckpointState& state,
                                int dp_rank, const comm::Communicator& pipeline) {
  const std::string path = path_for(state.step);
  save_checkpoint(path, parts, state, world_, dp_rank, pipeline);
  on_rank0(world_, [&] {
    point_link_at(dir_, path);
    // Keep the newest `keep` up to this step. Files of later steps are ones a resume skipped
    // as damaged: this run has replaced them.
    int kept = 0;
    for (const auto& [step, file] : numbered(dir_)) {
      if (step > state.step || (step < state.step && ++kept >= keep_)) {
        (void)::unlink(file.c_str());
      }
    }
  });
  return path;
}

void CheckpointDir::heartbeat() {
  if (world_.rank() != 0 || !locked_) return;
  const double now = now_seconds();
  if (now - last_heartbeat_ < kHeartbeatSeconds) return;
  last_heartbeat_ = now;
  (void)::utimensat(AT_FDCWD, (fs::path(dir_) / kLockName).c_str(), nullptr, 0);
}

}  // namespace meshtp::train
