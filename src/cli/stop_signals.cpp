#include "cli/stop_signals.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string>

namespace meshtp::cli {
namespace {

volatile std::sig_atomic_t g_stop_signal = 0;
bool g_installed = false;
char g_stop_note[160];
char g_launcher_note[160];
pid_t g_parent = 0;

// Async-signal-safe: only write(2), fcntl(2), signal(2), raise(3), _exit(2) below.
void write_note(const char* note) { (void)!::write(STDERR_FILENO, note, std::strlen(note)); }

// Once a stop is requested, output must never block the stop: when the signal came through
// mpirun, mpirun stopped reading the ranks' output at once but passes the signal on only
// seconds later, so a rank may already sit in a write to a full pipe. Non-blocking, the
// (restarted) write returns and further output is dropped rather than waited for.
void never_block_on_output() {
  for (const int fd : {STDOUT_FILENO, STDERR_FILENO}) {
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags >= 0) (void)::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  }
}

extern "C" void on_stop_signal(int signal) {
  if (g_stop_signal != 0) {  // the second one: stop at once
    std::signal(signal, SIG_DFL);
    std::raise(signal);
    return;
  }
  g_stop_signal = signal;
  never_block_on_output();
  write_note(g_stop_note);
}

extern "C" void on_launcher_gone(int) {
  write_note(g_launcher_note);
  ::_exit(129);
}

}  // namespace

void install_stop_handlers(int rank) {
  if (g_installed) return;
  g_installed = true;
  std::snprintf(g_stop_note, sizeof g_stop_note,
                "meshtp rank %d: stop requested; finishing the current step (signal again to "
                "stop at once)\n",
                rank);
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
}

int stop_signal() { return g_stop_signal; }

void watch_launcher(int rank) {
  if (std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr) return;
  g_parent = ::getppid();
  std::snprintf(g_launcher_note, sizeof g_launcher_note,
                "error: rank %d: its launcher (mpirun/orted, pid %d) is gone; stopping at once "
                "(the last checkpoint written is intact)\n",
                rank, static_cast<int>(g_parent));
  struct sigaction action {};
  action.sa_handler = on_launcher_gone;
  sigemptyset(&action.sa_mask);
  sigaction(SIGHUP, &action, nullptr);
  ::prctl(PR_SET_PDEATHSIG, SIGHUP);
  if (::getppid() != g_parent) on_launcher_gone(SIGHUP);  // died before prctl took effect
}

}  // namespace meshtp::cli
