// nccl-tests logs → the planner's calibration (`meshtp calibrate --from-nccl-tests FILE…`).
//
// The input is the standard output of NVIDIA's nccl-tests ("nccl-tests" in
// docs/references.md) — all_reduce_perf, all_gather_perf, reduce_scatter_perf, sendrecv_perf,
// one collective per file, in the format printed since 2019 (nccl-tests 2.0):
//
//   # nThread 1 nGpus 8 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 …
//   # Using devices
//   #  Rank  0 Group  0 Pid   4242 on     node01 device  0 [0x07] NVIDIA A100-SXM4-80GB
//   …                                              (one Rank line per GPU of the run)
//   #       size     count    type   redop    root     time   algbw   busbw #wrong     time …
//   #        (B) (elements)                             (us)  (GB/s)  (GB/s)            (us) …
//       1048576     262144   float     sum      -1    40.12   26.14   45.74      0    39.80 …
//   # Avg bus bandwidth    : 123.4
//
// Also read: Rank lines without `Group` (before 2022) or with `Pid` only; no `root` column and
// `error` (a maximum deviation, not a count) for `#wrong` (2019–2022); no `redop` column
// (2019's all_gather); `cputime` for `time` (-C); per-iteration columns (-I); a timestamp
// column; `N/A` for #wrong (-c 0); every line prefixed by `mpirun --tag-output`
// (`[1,0]<stdout>:`) or `srun -l` (`0: `); NCCL's own `NCCL INFO` / `NCCL WARN` lines
// (NCCL_DEBUG) anywhere. Rows of size 0 (`-b 0`) move nothing and are left out. Any other
// line after the first header line — not a '#' comment, not a result row of the column
// header's shape — is an error naming its line number and text; so are a Rank listed twice
// (each process ran alone: nccl-tests built without MPI=1), a row before the column header,
// a row whose #wrong is not 0 (the collective returned wrong values), rows of several types
// or reduction ops (-d all, -o all: give one), and a row whose printed busbw disagrees with
// size/time (below: the log is not of the collective or rank count it seems to be).
//
// Which collective: the `# Collective test starting: all_reduce_perf` line newer nccl-tests
// print, else the file name (all_reduce / allreduce, all_gather, reduce_scatter, sendrecv).
//
// Sizes. nccl-tests prints size = max(sendBytes, recvBytes) (src/common.cu) and count = the
// per-rank element count c; with e bytes per element and P ranks:
//   all_reduce      send = recv = c·e              → size = c·e     the buffer
//   all_gather      send = c·e,   recv = P·c·e     → size = P·c·e   the gathered output
//   reduce_scatter  send = P·c·e, recv = c·e       → size = P·c·e   the input
//   sendrecv        send = recv = c·e              → size = c·e     what each rank sends
// meshtp's `bytes` (calibration_fit.hpp) is the all_reduce buffer, all_gather's output,
// reduce_scatter's input, and for send/recv what each rank sends: the same number in every
// case, so bytes = size with no conversion. Two checks that the log is what it seems:
//   - for the types whose size is known (int8 … double, bfloat16, fp8), size = c·e for
//     all_reduce / sendrecv and P·c·e for all_gather / reduce_scatter;
//   - where the log's busbw is ≥ 1 GB/s (two printed decimals, so ≤ 0.5% rounding), it equals
//     (size/time)·f within 2%, f = bus_factor(collective, P) (calibration_fit.hpp; nccl-tests'
//     doc/PERFORMANCE.md: 2(P−1)/P for all_reduce, (P−1)/P for gather/scatter, 1 send/recv).
// Time: the out-of-place `time` column, µs (the mean over the iterations; in-place saves a
// copy on some paths and is not what a runtime with separate buffers sees).
//
// Ranks: one Rank line per GPU (-g G GPUs per process and -t T threads each list theirs);
// P = their count, rank ids 0…P−1 each once. Hosts: the `on HOST` field; every host must have
// the same number G of ranks.
//
// The group a log characterises: all its P ranks, as consecutive ranks of the topology —
// (size P, stride 1) (topology.hpp). On one host, P GPUs of a node. Across H hosts of G
// ranks, H whole nodes: meshtp numbers ranks node by node, so the topology it goes into must
// have a level whose members are blocks of exactly G devices (calibrated_from_nccl_tests
// checks). NCCL lays its rings over the hardware, not over the rank numbers, so how mpirun
// placed ranks on hosts does not matter, only the count per host. A log does not give the
// inter-node level's own group (H ranks one per node, stride G): a 16-rank ring over 2 nodes
// shares each node's NICs among its 8 GPUs' channels, not as mesh 2x8's dim-0 groups do.
// A log with one GPU per host (G = 1) is that inter-node group: H ranks one per node, the
// size (H, stride N) with N the devices of a member of the topology's outermost level (its
// nodes; N = 1 on a base of one-GPU nodes, such as `topo from-nvidia-smi --nodes` of a
// one-GPU matrix).
//
// Also refused, each naming the line: a row of a size already given (two runs in one file),
// a `#wrong` above 0 in any column (out-of-place or in-place), nccl-tests' own verdict
// "# Out of bounds values : N FAILED", a time outside 0.01 … 10^10 µs, a count whose bytes
// overflow 64 bits. Read past: NCCL's bare "NCCL version …" line (NCCL_DEBUG=VERSION), and
// lines a log collector indented. The collective is read from the file's own name, not its
// folders'.
//
// The fit: rows with size ≥ min_bytes, as a CollectiveSeries (P, stride 1, samples (size,
// time)) into fit_calibration — the same least squares `meshtp calibrate` uses — or, for
// sendrecv, fit_ring_line with one step (calibration_fit.hpp). fit_calibration shares one
// launch cost among the groups of a collective whose step counts differ; here only among
// logs of the same host count (logs of one GPU per host, the inter-node group, apart from
// those of several), each such class fitted alone: a launch over the network
// (NCCL's proxy threads, the NICs) is not the launch inside a node, and one value fitted
// across both once put 139 µs on NVLink groups that alone fit 0. So a 1-host and a 2-host log
// each keep their own split (with one log per host count: T_launch 0, the intercept per ring
// step), and their times are each exactly as fitted alone. Why a minimum size: NCCL
// picks per message size among its protocols (LL, LL128, Simple), each a line of its own
// latency and bandwidth (NCCL's tuning model prices them so); one line through all of them
// fits none. On a log made of three such lines (A100-like: 14 µs and 45 GB/s busbw, 22 and
// 170, 34 and 232; 8 B to 8 GiB) the fit from 8 B puts the largest size's busbw 6.9% low,
// from 64 KiB 4.4%, from 1 MiB 1.5% (tests/plan/nccl_tests_test.cpp). The default, 1 MiB,
// is below the messages of the models worth planning (one layer's activations, b·s·h·2
// bytes, are 4 MiB at b=1, s=2048, h=1024) and within the protocol that carries them.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "plan/calibration_fit.hpp"
#include "plan/topology.hpp"

namespace meshtp::plan {

// One result row: its out-of-place columns.
struct NcclTestsRow {
  int line = 0;            // 1-based line number in the log
  std::int64_t bytes = 0;  // the `size` column = meshtp's bytes (above)
  std::int64_t count = 0;  // elements per rank
  double time_us = 0;
  double algbw_gbps = 0;
  double busbw_gbps = 0;
};

struct NcclTestsLog {
  std::string source;   // the file, for messages
  std::string program;  // "all_reduce_perf", … from the log's own line; empty if it has none
  CollectiveKind collective = CollectiveKind::kAllReduce;  // or kAllGather, kReduceScatter,
                                                           // kSendRecv
  int ranks = 0;                                           // P
  std::vector<std::string> hosts;  // distinct, in the order of their first rank
  int ranks_per_host = 0;          // G
  // The GPU names the Rank lines give after the bus id ("NVIDIA A100-SXM4-80GB"), distinct, in
  // rank order; empty when none does.
  std::vector<std::string> gpus;
  std::string type;                // element type of the rows ("float")
  std::string redop;               // reduction op ("sum"; "none" or empty for gather/sendrecv)
  std::vector<NcclTestsRow> rows;  // size > 0, in log order
};

// Throws meshtp::Error naming `source`, the line number and the text for everything the
// header lists as an error, and for a log with no Rank line or no result row.
NcclTestsLog parse_nccl_tests(std::string_view text, const std::string& source);

// The smallest size fitted by default (above: NCCL's protocols).
inline constexpr std::int64_t kNcclTestsMinBytes = std::int64_t{1} << 20;

// One row against the fitted model.
struct NcclTestsPoint {
  NcclTestsRow row;
  double fitted_busbw_gbps = 0;  // bytes / fitted_time · bus_factor
  bool fitted = false;           // size ≥ min_bytes: the row went into the fit
  // fitted busbw / the row's busbw − 1, the row's busbw taken from its time (bytes/time · f:
  // its printed busbw to within the two printed decimals, which are all of it for the
  // smallest sizes).
  double error = 0;
};

struct NcclTestsLogFit {
  std::string source;
  CollectiveKind collective = CollectiveKind::kAllReduce;
  int size = 0, stride = 1;               // the group: (P, 1)
  CollectiveFit fit;                      // what the planner prices the group's collective with
  std::vector<NcclTestsPoint> points;     // every row, log order
  const NcclTestsPoint& largest() const;  // the row of the largest size (the last if repeated)
};

struct NcclTestsFit {
  CalibrationFit calibration;         // the all_reduce / all_gather / reduce_scatter logs' groups
  int host_counts = 0;  // classes of those logs by host count (each fitted alone, above)
  std::vector<NcclTestsLogFit> logs;  // one per log, input order (sendrecv included)
};

// Fits every log's rows of size ≥ min_bytes. Throws naming the log: fewer than 2 distinct
// sizes ≥ min_bytes, two logs of one collective on one group (give one), and whatever
// fit_calibration refuses.
NcclTestsFit fit_nccl_tests(std::span<const NcclTestsLog> logs, std::int64_t min_bytes);

// `base` with the fitted groups put into its calibration: a group of the same (size,
// stride) is replaced, the others and the base's GeMM and elementwise rates are kept (nccl-
// tests measure neither). Every fitted number rounded to 4 significant digits. Named `name`
// (or the base's name + "-nccl"), calibration.source = `source`. Throws when a log's group
// does not fit the base: P not dividing its device count, or a multi-host log whose ranks
// per host are no block of the base's levels (above).
Topology calibrated_from_nccl_tests(const Topology& base, std::span<const NcclTestsLog> logs,
                                    const NcclTestsFit& fit, const std::string& name,
                                    const std::string& source);

}  // namespace meshtp::plan
