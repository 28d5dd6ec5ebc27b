// Process-level fault handling for the CLI: graceful stop on SIGTERM/SIGINT, and ranks that
// end when their launcher does.
//
// Graceful stop: the first SIGTERM or SIGINT only records the signal; the training loop
// reads it once per step, all ranks agree (train/trainer.hpp), finish the step, write a
// checkpoint if --checkpoint-dir is set, and exit non-zero (128 + signal). A second signal
// ends the process at once (the default action, re-raised). Under mpirun, a signal sent to
// mpirun reaches the ranks only after Open MPI's odls_base_sigkill_timeout (default 1 s),
// which is also how long they then have before SIGKILL; scheduler pre-emption signals sent
// to the ranks themselves have no such limit.
//
// Launcher death: Open MPI starts each rank in its own process group, so when mpirun (or
// orted) is killed outright nothing tells the ranks, which went on training for ~1 s until
// their next write to a closed pipe. watch_launcher() asks the kernel for SIGHUP when the
// parent dies (prctl PR_SET_PDEATHSIG) and ends the rank with a message.
#pragma once

namespace meshtp::cli {

// Installs the SIGTERM/SIGINT handlers (idempotent). `rank` prefixes the handler's note.
void install_stop_handlers(int rank);
// 0 until a stop signal arrived, then its number.
int stop_signal();

// Under mpirun (OMPI_COMM_WORLD_SIZE set): exit with a message as soon as the launcher
// that started this process is gone. No-op otherwise.
void watch_launcher(int rank);

}  // namespace meshtp::cli
