#include "cli/report_dir.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/atomic_file.hpp"
#include "core/error.hpp"

extern char** environ;

namespace meshtp::cli {
namespace {

namespace fs = std::filesystem;

const std::string kScript = std::string(MESHTP_SCRIPTS_DIR) + "/report.py";

struct Finished {
  int status = -1;     // the exit status; -1: it did not start
  std::string output;  // its stdout and stderr; why it did not start
  bool timed_out = false;
  int signal = 0;  // the stop signal (SIGINT, SIGTERM, SIGHUP) that ended it, if one came
};

// A stop signal that arrived while a ReportSignals was alive, or 0.
volatile sig_atomic_t g_report_signal = 0;
extern "C" void record_report_signal(int signal) { g_report_signal = signal; }

// While alive: SIGINT, SIGTERM and SIGHUP are recorded instead of ending meshtp, and they
// interrupt poll (no SA_RESTART). The interpreter is in a process group of its own, so Ctrl-C
// reaches it only through here: its group is ended and the temporary directory removed
// before meshtp ends by the same signal (end_by).
class ReportSignals {
 public:
  ReportSignals() {
    g_report_signal = 0;
    struct sigaction action {};
    action.sa_handler = record_report_signal;
    sigemptyset(&action.sa_mask);
    for (std::size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &action, &old_[i]);
  }
  ~ReportSignals() {
    for (std::size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &old_[i], nullptr);
  }
  ReportSignals(const ReportSignals&) = delete;
  ReportSignals& operator=(const ReportSignals&) = delete;

 private:
  static constexpr std::array<int, 3> kSignals{SIGINT, SIGTERM, SIGHUP};
  std::array<struct sigaction, 3> old_{};
};

// Thrown out of the drawing when a stop signal came, so the temporary directory is removed
// on the way out; caught in write(), which then ends meshtp by that signal.
struct ReportStopped {
  int signal;
};

// One line, then the signal's own ending (exit status 128 + signal, as a shell shows it).
[[noreturn]] void end_by(int signal, const std::string& dir) {
  std::fflush(stdout);
  std::fprintf(stderr,
               "error: --report %s: interrupted by signal %d: python3 was ended, nothing "
               "written\n",
               dir.c_str(), signal);
  std::fflush(stderr);
  std::signal(signal, SIG_DFL);
  std::raise(signal);
  std::_Exit(128 + signal);
}

// How long the interpreter may take: to say whether it imports matplotlib, and to draw a
// page (a few seconds either; a python3 that hangs, or leaves a child holding its output, is
// ended instead of waited for).
constexpr int kCheckTimeoutS = 60;
constexpr int kDrawTimeoutS = 300;

// argv (argv[0] looked up on the PATH when it has no '/'), its stdout and stderr captured,
// in a process group of its own: when it has not closed its output `timeout_s` seconds
// later, the whole group is killed (its children too) and timed_out is set.
Finished run_captured(const std::vector<std::string>& argv, int timeout_s) {
  int fds[2];
  MESHTP_CHECK(pipe2(fds, O_CLOEXEC) == 0, "pipe: {}", std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);  // its own group: killed as one
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argv[0].c_str(), &actions, &attributes, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  close(fds[1]);
  Finished done;
  if (rc != 0) {
    close(fds[0]);
    done.output = std::strerror(rc);
    return done;
  }
  char buffer[4096];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) {
      done.timed_out = true;
      kill(-pid, SIGKILL);
      break;
    }
    if (g_report_signal != 0) {
      done.signal = g_report_signal;
      kill(-pid, SIGKILL);
      break;
    }
    pollfd p{.fd = fds[0], .events = POLLIN, .revents = 0};
    const int ready = poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    const ssize_t n = read(fds[0], buffer, sizeof buffer);
    if (n > 0) {
      done.output.append(buffer, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    MESHTP_CHECK(errno == EINTR, "waiting for {}: {}", argv[0], std::strerror(errno));
  }
  done.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return done;
}

// The line of `output` that says what went wrong (the script's "error: …"), without the
// prefix; else its last line.
std::string reason(const std::string& output) {
  std::string last;
  std::size_t start = 0;
  while (start < output.size()) {
    const std::size_t end = std::min(output.find('\n', start), output.size());
    const std::string line = output.substr(start, end - start);
    if (line.rfind("error: ", 0) == 0) return line.substr(7);
    if (!line.empty()) last = line;
    start = end + 1;
  }
  return last.empty() ? "no output" : last;
}

// The first python3 that imports matplotlib (see the header), or an error naming what each
// candidate said and what to install. A stop signal while one is asked ends it and meshtp.
std::string find_python(const std::string& dir) {
  const ReportSignals stop;
  std::string tried;
  for (const char* python : {"python3", "/usr/bin/python3"}) {
    const Finished f = run_captured({python, kScript, "--check"}, kCheckTimeoutS);
    if (f.signal != 0) end_by(f.signal, dir);
    if (f.status == 0 && !f.timed_out) return python;
    tried += fmt::format(
        "; {}", f.timed_out    ? fmt::format("{} did not answer within {} s", python,
                                             kCheckTimeoutS)
                : f.status < 0 ? fmt::format("{}: cannot run it: {}", python, f.output)
                               : reason(f.output));
  }
  fail(
      "--report draws its plots with matplotlib, which no python3 here has{}: install "
      "Debian's python3-matplotlib (apt-get install python3-matplotlib; scripts/install.sh "
      "does)",
      tried);
}

// Removed when it goes out of scope.
struct TemporaryDir {
  std::string path;
  TemporaryDir() {
    std::string name = (fs::temp_directory_path() / "meshtp-report.XXXXXX").string();
    MESHTP_CHECK(mkdtemp(name.data()) != nullptr, "--report: cannot make '{}': {}", name,
                 std::strerror(errno));
    path = name;
  }
  ~TemporaryDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
  TemporaryDir(const TemporaryDir&) = delete;
  TemporaryDir& operator=(const TemporaryDir&) = delete;
};

// A value as a shell reads it back: quoted when it holds anything but [A-Za-z0-9_./:=,+-].
std::string shell_word(const std::string& s) {
  const bool plain = !s.empty() && s.find_first_not_of(
                                       "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                       "0123456789_./:=,+-") == std::string::npos;
  if (plain) return s;
  std::string out = "'";
  for (const char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

ReportDir::ReportDir(std::string dir) : dir_(std::move(dir)) {
  std::error_code ec;
  const fs::file_status st = fs::status(dir_, ec);
  if (fs::exists(st)) {
    MESHTP_CHECK(fs::is_directory(st),
                 "--report {}: not a directory (the report is a directory of files: "
                 "index.html and report.json)",
                 dir_);
    for (const char* name : {"report.json", "index.html"}) {
      check_output_path((fs::path(dir_) / name).string());
    }
    MESHTP_CHECK(access(dir_.c_str(), W_OK | X_OK) == 0, "--report {}: cannot write in it: {}",
                 dir_, std::strerror(errno));
  } else {
    fs::path path(dir_);
    if (!path.has_filename()) path = path.parent_path();  // "new/": new's folder is "."
    const fs::path parent = path.parent_path();
    const std::string folder = parent.empty() ? "." : parent.string();
    MESHTP_CHECK(fs::is_directory(folder, ec), "--report {}: the folder '{}' does not exist", dir_,
                 folder);
    // Made and removed again: the one sure test that it can be made (root passes access()
    // checks that mkdir then fails: a read-only filesystem, /proc, /sys).
    MESHTP_CHECK(mkdir(dir_.c_str(), 0777) == 0, "--report {}: cannot make the directory: {}", dir_,
                 std::strerror(errno));
    rmdir(dir_.c_str());
  }
  MESHTP_CHECK(fs::exists(kScript),
               "--report: the script that draws the page, '{}', is missing (meshtp finds it in "
               "the source tree it was built from)",
               kScript);
  python_ = find_python(dir_);
}

std::string ReportDir::write(const nlohmann::json& report) const {
  if (!enabled()) return "";
  const ReportSignals stop;
  try {
    return draw(report);
  } catch (const ReportStopped& s) {  // the temporary directory is gone, the interpreter too
    end_by(s.signal, dir_);
  }
}

std::string ReportDir::draw(const nlohmann::json& report) const {
  const TemporaryDir tmp;
  const std::string json_path = tmp.path + "/report.json";
  const std::string page_path = tmp.path + "/index.html";
  // Bytes that are not UTF-8 (a model path, a host name) are shown as U+FFFD, not refused
  // after the work: the page names what the command was given.
  const std::string json_text =
      report.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  write_file_atomically(json_path, json_text);
  const Finished f = run_captured({python_, kScript, json_path, page_path}, kDrawTimeoutS);
  if (f.signal != 0 || g_report_signal != 0)
    throw ReportStopped{f.signal != 0 ? f.signal : g_report_signal};
  MESHTP_CHECK(!f.timed_out,
               "--report {}: {} {} had not drawn the page after {} s: ended (it and its "
               "children), nothing written",
               dir_, python_, kScript, kDrawTimeoutS);
  MESHTP_CHECK(f.status == 0, "--report {}: the page could not be drawn ({} {} exited with {}): {}",
               dir_, python_, kScript, f.status, reason(f.output));
  const std::string page = read_file(page_path);
  const bool made = !fs::exists(dir_);
  if (made) {
    std::error_code ec;
    fs::create_directory(dir_, ec);
    MESHTP_CHECK(!ec, "--report {}: cannot make the directory: {}", dir_, ec.message());
  }
  try {
    write_file_atomically((fs::path(dir_) / "report.json").string(), json_text);
    write_file_atomically((fs::path(dir_) / "index.html").string(), page);
  } catch (const Error&) {
    std::error_code ignored;
    if (made) fs::remove(dir_, ignored);  // only when empty: never a file it did not write
    throw;
  }
  return (fs::path(dir_) / "index.html").string();
}

nlohmann::json report_json(std::string_view kind, const CLI::App& command,
                           const plan::Topology& topology, int devices, std::string_view model,
                           nlohmann::json result) {
  std::string line = "meshtp " + command.get_name();
  for (const CLI::Option* o : command.get_options()) {
    if (o->count() == 0 || o->get_name().empty()) continue;
    line += " " + o->get_name();
    if (o->get_expected_min() > 0) {
      for (const std::string& value : o->results()) line += " " + shell_word(value);
    }
  }
  return {{"report", kind},
          {"command", line},
          {"topology", topology.name},
          {"devices", devices},
          {"device_memory_gib", topology.memory_gib},
          {"model", model},
          {"result", std::move(result)}};
}

}  // namespace meshtp::cli
