// The communication watchdog: every blocking wait on a collective or a point-to-point
// transfer gets a deadline, so a rank that is stopped, dead or stuck elsewhere turns into an
// error naming the operation, the group and the ranks that did not arrive — never a silent
// hang (what NCCL's and torch.distributed's collective timeouts do).
//
// How a wait is watched (T = comm_timeout(), G = grace = clamp(T/4, 1 s, 10 s)):
//
//   blocking op   start the non-blocking form (MPI_Iallreduce for all_reduce, …)
//   wait          loop { MPI_Testall; every 10 ms answer watchdog queries; if now > start+T
//                        break }       — MPI_Wait is the same progress loop inside Open MPI
//   diagnose      ask every other member of the group (a point-to-point peer: that peer) on
//                 a side channel (a duplicate of the world communicator) "how many
//                 collectives have you started on group g, and what are you waiting on?";
//                 ranks inside a watched wait answer within 10 ms; keep testing the
//                 operation itself for G more seconds (if it completes, it was only slow)
//   verdict       member m arrived iff it answered started(m, g) ≥ s, the sequence number
//                 of this operation on g (members start a group's collectives in the same
//                 order, so sequence numbers agree); a rank that did not answer is stopped,
//                 dead or computing. Throw meshtp::Error; the CLI aborts the job.
//                 Until one of its later waits completes, a rank that gave up answers
//                 queries with the wait it abandoned ("gave up waiting in …"), so a peer
//                 timing out later still learns where the deadlock was.
//
// Worked example: 4 ranks, mesh 2x2, rank 3 SIGSTOPped; rank 1 waits in all_reduce #12 on
// "mesh 2x2 dim 0" = world ranks {1, 3}. After T it asks rank 3 — no answer in G — and fails:
//   "all_reduce #12 on mesh 2x2 dim 0 (world ranks 1,3) did not complete within 5 s
//    (--comm-timeout): world rank 3 did not arrive (no answer: stopped, dead, or busy
//    outside communication)"
// while rank 0, waiting on dim 1 = {0, 1}, learns that rank 1 has arrived but is itself
// stuck, and says so.
//
// Cost: nothing on the normal path but a clock read per test of the request (~25 ns next to
// MPI_Test's progress call) and an MPI_Iprobe every 10 ms of waiting; blocking collectives run
// as their non-blocking forms (Open MPI's libnbc schedules). With the watchdog off —
// set_comm_timeout(0) at run time, or MESHTP_COMM_WATCHDOG=OFF at build time (simulated MPI,
// where busy-polling costs real time per simulated rank) — every call is the plain blocking
// MPI call or MPI_Wait, exactly as without this file.
#pragma once

namespace meshtp::comm {

// Seconds a blocking wait may last; 0 turns the watchdog off. Default: off (the CLI's
// --comm-timeout sets it). Throws for a negative or non-finite value.
void set_comm_timeout(double seconds);
double comm_timeout();

// False when built with MESHTP_COMM_WATCHDOG=OFF: set_comm_timeout() then has no effect.
bool watchdog_available();

// True once a wait has timed out: the job is going down, so pending requests are dropped
// rather than waited for again (a Request destroyed during unwinding would otherwise wait).
bool comm_failed();

}  // namespace meshtp::comm
