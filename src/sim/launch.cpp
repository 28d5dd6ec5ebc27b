#include "sim/launch.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <thread>
#include <string_view>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "plan/topology_graph.hpp"

extern char** environ;

namespace meshtp::sim::detail {
extern const char* const kSmpirunOptionsText;  // smpirun_options.txt, compiled in
}  // namespace meshtp::sim::detail

namespace meshtp::sim {
namespace {

bool executable(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

// `name` itself when it holds a '/', else the first executable `name` on the PATH ("" if none).
std::string find_program(const std::string& name) {
  if (name.find('/') != std::string::npos) return executable(name) ? name : "";
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path == nullptr ? "" : path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (executable(candidate)) return candidate;
  }
  return "";
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

// The first line of the log that says what went wrong: the run's own `error: …`, else
// SimGrid's (a platform it cannot parse, a host it does not know, …).
std::string failure_reason(const std::string& log) {
  const auto lines = lines_of(log);
  for (const std::string& l : lines) {
    if (l.rfind("error: ", 0) == 0) return l.substr(7);
  }
  for (const std::string& l : lines) {
    if (l.find("CRITICAL") != std::string::npos || l.find("rror") != std::string::npos ||
        l.find("xbt_die") != std::string::npos) {
      return l;
    }
  }
  return lines.empty() ? "no output" : lines.back();
}

// The stop signal (SIGINT, SIGTERM, SIGHUP) that arrived while a simulation ran, or 0.
volatile sig_atomic_t g_stop_signal = 0;
void record_stop(int signal) { g_stop_signal = signal; }

// While alive: SIGINT, SIGTERM and SIGHUP are recorded instead of ending meshtp, and they
// interrupt waitpid (no SA_RESTART), so the simulation's processes can be ended first.
class StopSignals {
 public:
  StopSignals() {
    g_stop_signal = 0;
    struct sigaction action {};
    action.sa_handler = record_stop;
    sigemptyset(&action.sa_mask);
    for (std::size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &action, &old_[i]);
  }
  ~StopSignals() {
    for (std::size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &old_[i], nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  static constexpr std::array<int, 3> kSignals{SIGINT, SIGTERM, SIGHUP};
  std::array<struct sigaction, 3> old_{};
};

// Ends process group `group` (smpirun, the leader, and every simulated process it started):
// SIGTERM, then SIGKILL to whatever is left after 3 s. This process is a child subreaper
// (run_logged), so the simulated processes smpirun leaves behind become its children and are
// reaped here too: none is left running, nor as a zombie.
void end_group(pid_t group) {
  kill(-group, SIGTERM);
  int status = 0;
  for (int i = 0; i < 30 && waitpid(group, &status, WNOHANG) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  kill(-group, SIGKILL);
  for (int i = 0; i < 50; ++i) {  // until no process of the group is left (ECHILD)
    const pid_t reaped = waitpid(-group, &status, WNOHANG);
    if (reaped < 0 && errno != EINTR) break;
    if (reaped == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// argv under a guard that ends its process group when this process dies, even by SIGKILL
// (which no handler sees): util-linux's setpriv gives the shell a parent-death signal, SIGTERM,
// on which it removes $MESHTP_GUARD_REMOVE (Simulator::temporary_dir, if set) and kills the
// group — smpirun and every simulated process it started:
//   setpriv --pdeathsig TERM sh -c 'trap "…; kill -KILL 0" TERM; "$@" & wait $!' guard ARGV…
// The shell exits with argv's status. (util-linux is Essential: every Debian has setpriv.)
std::vector<std::string> guarded(const std::vector<std::string>& argv) {
  const std::string setpriv = find_program("setpriv");
  MESHTP_CHECK(!setpriv.empty(), "setpriv not found on PATH: install util-linux");
  std::vector<std::string> out{
      setpriv,
      "--pdeathsig",
      "TERM",
      "/bin/sh",
      "-c",
      "trap '[ -n \"$MESHTP_GUARD_REMOVE\" ] && rm -rf -- \"$MESHTP_GUARD_REMOVE\"; kill -KILL 0' "
      "TERM; \"$@\" & wait $!",
      "guard"};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

// Runs argv (guarded, above) in a process group of its own with stdout and stderr into
// `log_path`; returns the exit status. A stop signal ends the whole group within ~3 s and
// throws Interrupted: Ctrl-C on `meshtp simulate` leaves no smpirun or simulated process
// behind (they reach the terminal's signal only through here, being in another process
// group), and neither does a `kill -9` of meshtp (the guard).
int run_logged(const std::vector<std::string>& program, const std::vector<std::string>& extra_env,
               const std::string& log_path) {
  const std::vector<std::string> argv = guarded(program);
  const StopSignals stop_signals;
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_storage(extra_env);
  std::vector<char*> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view var(*e);
    const std::string_view name = var.substr(0, var.find('=') + 1);  // "NAME="
    const bool replaced = std::any_of(extra_env.begin(), extra_env.end(),
                                      [&](const std::string& x) { return x.starts_with(name); });
    if (!replaced) env.push_back(*e);
  }
  for (std::string& e : env_storage) env.push_back(e.data());
  env.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0].c_str(), &actions, &attributes, args.data(),
                             env.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  MESHTP_CHECK(rc == 0, "cannot start {}: {}", program[0], std::strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    MESHTP_CHECK(errno == EINTR, "waiting for {}: {}", program[0], std::strerror(errno));
    if (g_stop_signal != 0) {
      const int signal = g_stop_signal;
      end_group(pid);
      throw Interrupted(signal);
    }
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// LD_PRELOAD for SimGrid's process: comm/smpi_preload.cpp's library, from the simulated
// meshtp's directory (where the simulated build puts it), ahead of any preload already set.
// A simulated meshtp without one runs as well, only slower (same simulated times); then this
// is empty and the environment's own LD_PRELOAD, if any, is passed on as is.
std::string preload_env(const std::string& binary) {
  const auto lib = std::filesystem::absolute(binary).parent_path() / "libmeshtp_smpi_preload.so";
  if (!std::filesystem::exists(lib)) return "";
  const char* prior = std::getenv("LD_PRELOAD");
  const std::string rest = prior != nullptr && *prior != '\0' ? std::string(":") + prior : "";
  return "LD_PRELOAD=" + lib.string() + rest;
}

}  // namespace

std::vector<std::string> smpirun_options() {
  std::vector<std::string> out;
  for (std::string line : lines_of(detail::kSmpirunOptionsText)) {
    line = line.substr(0, line.find('#'));
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t')) line.pop_back();
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

void check_simulator(const Simulator& s) {
  MESHTP_CHECK(!find_program(s.smpirun).empty(),
               "smpirun not found ('{}'): install SimGrid (Debian libsimgrid-dev; "
               "scripts/install.sh --sim does)",
               s.smpirun);
  MESHTP_CHECK(executable(s.binary),
               "the simulated meshtp '{}' does not exist: build it with scripts/install.sh "
               "--sim (about 2.5 minutes on 2 cores; the demo does not build it) or pass "
               "--simulator PATH",
               s.binary);
  MESHTP_CHECK(s.streams >= 1 && s.streams <= 16, "--streams={} must be in [1, 16]", s.streams);
}

Launched launch(const plan::Topology& topology, const RunSpec& spec, const Simulator& s,
                const std::string& dir) {
  check_simulator(s);
  std::filesystem::create_directories(dir);
  // A pipeline's world is (dp·pp·d1) × d2 in the runtime's rank order (tensor parallelism
  // innermost): placed as that 2D mesh, the way the planner places its rings (layout_search's
  // link_of).
  const std::array<int, 2> placed = spec.what == What::kPipeline
                                        ? std::array{spec.ranks() / spec.mesh()[1], spec.mesh()[1]}
                                        : spec.mesh();
  const topo::PlatformFiles files = plan::write_platform(topology, placed, dir);
  const auto hosts = lines_of(read_file(files.hostfile));
  const int devices = static_cast<int>(hosts.size());
  std::string roles;
  for (int role = 0; role <= s.streams; ++role) {
    for (const std::string& h : hosts) roles += h + "\n";
  }
  const std::string smpi_hostfile = dir + "/smpi_hostfile";
  write_file_atomically(smpi_hostfile, roles);
  const std::string spec_path = dir + "/spec.json", result_path = dir + "/result.json";
  write_file_atomically(spec_path, to_json(spec).dump(2) + "\n");
  std::filesystem::remove(result_path);

  std::vector<std::string> argv{find_program(s.smpirun),
                                "-np",
                                std::to_string(devices * (s.streams + 1)),
                                "-platform",
                                files.platform,
                                "-hostfile",
                                smpi_hostfile};
  for (const std::string& o : smpirun_options()) argv.push_back(o);
  argv.insert(argv.end(), {s.binary, "simulate-run", "--spec", spec_path, "--out", result_path});
  Launched out;
  out.log = dir + "/simulation.log";
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> env{"MESHTP_SIM_STREAMS=" + std::to_string(s.streams),
                               std::string("MESHTP_SIM_MODE=") + (s.values ? "values" : "charged"),
                               "MESHTP_GUARD_REMOVE=" + s.temporary_dir,
                               "MESHTP_SIM_ELEMENT_BYTES=" + std::to_string(spec.element_bytes)};
  if (std::string preload = preload_env(s.binary); !preload.empty()) env.push_back(preload);
  const int status = run_logged(argv, env, out.log);
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (status != 0 || !std::filesystem::exists(result_path)) {
    fail("the simulation of {} on '{}' failed (smpirun exit {}): {} (log: {})",
         spec.model.layout.strategy, topology.name, status, failure_reason(read_file(out.log)), out.log);
  }
  try {
    out.result = run_result_from_json(nlohmann::json::parse(read_file(result_path)));
  } catch (const nlohmann::json::exception& e) {
    fail("{}: {}", result_path, e.what());
  }
  return out;
}

}  // namespace meshtp::sim
