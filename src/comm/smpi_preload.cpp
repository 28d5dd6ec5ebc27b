// libmeshtp_smpi_preload.so: loaded into SimGrid's process (LD_PRELOAD) by `meshtp simulate`
// (sim/launch.cpp) when it sits next to the simulated meshtp. Compiled only with
// MESHTP_SIMULATE; it is not part of meshtp itself.
//
// Why: SMPI times the host code a rank runs between two MPI calls, to charge it as simulated
// compute (smpi/simulate-computation). meshtp turns that off — it charges its compute itself
// (core/simulation.hpp) — but SimGrid 3.32 still reads the thread's CPU clock on entry to and
// exit from every MPI call (smpi_bench_end / smpi_bench_begin → xbt_os_threadtimer_stop /
// _start → clock_gettime(CLOCK_THREAD_CPUTIME_ID), a system call each, and not a cheap one in
// a VM) and throws the result away. One simulated training step of a GPT-3 layer on 64
// devices makes about 570 000 MPI calls across its ranks and engines: those reads were about
// a third of the simulation's CPU time (docs/simulation.md, "Speed of the simulator").
//
// These definitions come first in the process's symbol lookup, so SimGrid's own calls (made
// through its PLT) land here: the timer is never started, its elapsed time stays 0 (SimGrid
// allocates it zeroed), and SMPI's only consumers of it — the benchmarked computation, which
// is off, and its statistics — see no host time. Nothing else of SimGrid is touched, and
// simulated times do not depend on the host's CPU time: they are identical with or without
// this library (smpi_device.cpp refuses to run with simulate-computation on).
#include <xbt/xbt_os_time.h>

void xbt_os_threadtimer_start(xbt_os_timer_t) {}
void xbt_os_threadtimer_resume(xbt_os_timer_t) {}
void xbt_os_threadtimer_stop(xbt_os_timer_t) {}
