// meshtp calibrate --from-nccl-tests FILE… --base TOPOLOGY --out FILE [--min-bytes 1M]
//                  [--name N] [--json]
//
// Reads nccl-tests logs (all_reduce_perf, all_gather_perf, reduce_scatter_perf,
// sendrecv_perf), fits the planner's ring model to each (plan/nccl_tests.hpp: the format, the
// size convention, which group a log characterises, why --min-bytes), and writes --base with
// the fitted groups in its calibration. Prints, per log, the fit and a table of every row:
// size, the log's busbw, the fitted model's busbw, the error — the last row the log's largest
// size. Nothing is measured, so it runs without mpirun; under it every rank computes the same
// and rank 0 writes.
#include "cli/calibrate_nccl_tests.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/text.hpp"
#include "core/parse.hpp"
#include "plan/nccl_tests.hpp"
#include "plan/presets.hpp"
#include "topo/nvidia_smi.hpp"

namespace meshtp::cli {
namespace {

const plan::CollectiveFit* group_fit(const plan::Topology& t, const plan::NcclTestsLogFit& l) {
  const plan::GroupCalibration* g =
      t.calibration.groups.empty() ? nullptr : t.calibrated_group(l.size, l.stride);
  if (!g ||
      std::ranges::find(plan::kFitCollectives, l.collective) == std::end(plan::kFitCollectives)) {
    return nullptr;  // send/recv: printed, not written
  }
  const std::optional<plan::CollectiveFit>& f = plan::fit_slot(*g, l.collective);
  return f ? &*f : nullptr;
}

nlohmann::json log_json(const plan::NcclTestsLog& log, const plan::NcclTestsLogFit& l) {
  nlohmann::json rows = nlohmann::json::array();
  for (const plan::NcclTestsPoint& p : l.points) {
    rows.push_back({{"line", p.row.line},
                    {"bytes", p.row.bytes},
                    {"time_us", p.row.time_us},
                    {"busbw_gbps", p.row.busbw_gbps},
                    {"fitted_busbw_gbps", p.fitted_busbw_gbps},
                    {"error", p.error},
                    {"fitted", p.fitted}});
  }
  const plan::NcclTestsPoint& big = l.largest();
  return {{"source", log.source},
          {"program", log.program},
          {"collective", layout::name(log.collective)},
          {"ranks", log.ranks},
          {"hosts", log.hosts},
          {"ranks_per_host", log.ranks_per_host},
          {"type", log.type},
          {"group", {{"size", l.size}, {"stride", l.stride}}},
          {"fit",
           {{"t_launch_us", l.fit.t_launch_us},
            {"l_sync_us", l.fit.l_sync_us},
            {"bw_gbps", l.fit.bw_gbps}}},
          {"largest",
           {{"bytes", big.row.bytes},
            {"busbw_gbps", big.row.busbw_gbps},
            {"fitted_busbw_gbps", big.fitted_busbw_gbps},
            {"error", big.error}}},
          {"rows", std::move(rows)}};
}

// The device of the calibrated topology (NcclTestsCalibrateArgs): the base's, unless the logs
// name one GPU with a datasheet row (topo/nvidia_smi.hpp) that the base's device does not
// match (memory within 2%, and the GeMM model's peak within 1%, or the flat rate within 2% of
// the datasheet's share); then that datasheet's. The flags override either. Returns the line
// that says which, for the output and the description.
std::string set_device(plan::Topology& t, std::span<const plan::NcclTestsLog> logs,
                       const NcclTestsCalibrateArgs& a) {
  std::vector<std::string> names;
  for (const plan::NcclTestsLog& log : logs) {
    for (const std::string& g : log.gpus) {
      if (std::find(names.begin(), names.end(), g) == names.end()) names.push_back(g);
    }
  }
  std::string note;
  const auto near = [](double x, double y, double tolerance) {
    return std::abs(x - y) <= tolerance * y;
  };
  if (names.size() == 1) {
    const std::optional<topo::SmiGpu> gpu = topo::gpu_named(names.front());
    const std::optional<topo::DatasheetDevice> sheet =
        gpu ? topo::device_from_datasheet(*gpu) : std::nullopt;
    if (!sheet) {
      note = fmt::format("the base's: the logs' GPU '{}' has no datasheet row here",
                         escape_text(names.front()));
    } else if (near(t.memory_gib, sheet->memory_gib, 0.02) &&
               (t.gemm ? near(t.gemm->peak_tflops, sheet->peak_tflops, 0.01)
                       : near(t.tflops, sheet->tflops, 0.02))) {
      note = fmt::format("the base's, which matches the logs' GPU '{}' ({})",
                         escape_text(names.front()), gpu->variant);
    } else {
      note = fmt::format(
          "the logs' GPU '{}': the {} datasheet's {} GiB, {} TFLOP/s ({} of its {} peak) and "
          "elementwise {} GB/s ({} of its {} GB/s), not the base's {} GiB, {} TFLOP/s ({})",
          escape_text(names.front()), gpu->variant, sheet->memory_gib, sheet->tflops,
          topo::kDatasheetShare, sheet->peak_tflops, sheet->elementwise_gbps,
          topo::kDatasheetShare, sheet->memory_gbps, t.memory_gib, t.tflops, gpu->datasheet);
      t.memory_gib = sheet->memory_gib;
      t.tflops = sheet->tflops;
      t.elementwise_gbps = sheet->elementwise_gbps;
      if (t.gemm) {
        t.gemm->peak_tflops = sheet->peak_tflops;
        t.gemm->memory_gbps = sheet->memory_gbps;
        if (sheet->units > 0) t.gemm->units = sheet->units;
        t.gemm->attention_tflops = 0;  // the base GPU's attention kernel rate: not this one's
      }
    }
  } else if (names.size() > 1) {
    std::string list;
    for (const std::string& n : names) list += (list.empty() ? "'" : ", '") + escape_text(n) + "'";
    note = fmt::format("the base's: the logs name several GPUs ({})", list);
  } else {
    note = "the base's: the logs name no GPU";
  }
  if (a.memory_gib) {
    t.memory_gib = *a.memory_gib;
    note += fmt::format("; memory {} GiB (--memory-gib)", *a.memory_gib);
  }
  if (a.tflops) {
    t.tflops = *a.tflops;
    t.gemm.reset();
    note += fmt::format("; a flat {} TFLOP/s (--tflops)", *a.tflops);
  }
  return note;
}

}  // namespace

void run_calibrate_from_nccl_tests(const NcclTestsCalibrateArgs& a) {
  MESHTP_CHECK(!a.out.empty(), "--out FILE is required");
  MESHTP_CHECK(!a.base.empty(),
               "--from-nccl-tests needs --base TOPOLOGY (a preset, or the file `meshtp topo "
               "from-nvidia-smi` writes): nccl-tests measure the collectives, not the devices' "
               "memory and FLOP rate");
  std::int64_t min_bytes = plan::kNcclTestsMinBytes;
  if (!a.min_bytes.empty()) {
    try {
      min_bytes = parse_byte_size(a.min_bytes);
    } catch (const Error& e) {
      fail("--min-bytes: {}", e.what());
    }
  }
  // Paths go into the topology's JSON and --json: UTF-8 text, checked before any work.
  check_name("--out", a.out);
  for (const std::string& file : a.logs) check_name("--from-nccl-tests", file);
  const plan::Topology base = plan::load_topology(a.base);
  check_output_path(a.out);  // before the work, on every rank alike

  std::vector<plan::NcclTestsLog> logs;
  for (const std::string& file : a.logs)
    logs.push_back(plan::parse_nccl_tests(read_file(file), file));
  const plan::NcclTestsFit fit = plan::fit_nccl_tests(logs, min_bytes);
  std::string files;
  for (const std::string& file : a.logs) files += (files.empty() ? "" : " ") + escape_text(file);
  MESHTP_CHECK(!a.memory_gib || (std::isfinite(*a.memory_gib) && *a.memory_gib > 0),
               "--memory-gib={} must be positive", a.memory_gib.value_or(0));
  MESHTP_CHECK(!a.tflops || (std::isfinite(*a.tflops) && *a.tflops > 0),
               "--tflops={} must be positive", a.tflops.value_or(0));
  plan::Topology topology = plan::calibrated_from_nccl_tests(
      base, logs, fit, a.name,
      fmt::format("nccl-tests logs {} (meshtp calibrate --from-nccl-tests --min-bytes {})", files,
                  format_byte_size(min_bytes)));
  const std::string device = set_device(topology, logs, a);
  topology.description += fmt::format(" Device: {}.", device);
  topology.validate();
  const std::string text = plan::to_json(topology).dump(2) + "\n";
  plan::parse_topology(text, a.out);  // what `meshtp plan --topology` will read
  if (root()) write_file_atomically(a.out, text);

  std::ostream& os = out();
  if (a.json) {
    nlohmann::json j{{"out", a.out}, {"topology", plan::to_json(topology)}, {"device", device}};
    j["logs"] = nlohmann::json::array();
    for (std::size_t i = 0; i < logs.size(); ++i)
      j["logs"].push_back(log_json(logs[i], fit.logs[i]));
    os << j.dump() << '\n';
    return;
  }
  os << fmt::format(
      "calibrate --from-nccl-tests: {} log(s); rows of {} and more fitted (--min-bytes), "
      "out-of-place times; the topology keeps every row's time, and the planner prices those "
      "(the fitted line beyond the logged sizes)\n",
      logs.size(), format_byte_size(min_bytes));
  if (fit.host_counts > 1) {
    os << fmt::format(
        "the logs span {} host counts: each host count's launch cost is fitted alone (a launch "
        "across nodes is not one inside a node)\n",
        fit.host_counts);
  }
  for (std::size_t i = 0; i < logs.size(); ++i) {
    const plan::NcclTestsLog& log = logs[i];
    const plan::NcclTestsLogFit& l = fit.logs[i];
    os << fmt::format("\n{}: {} on {} ranks ({} host(s) × {}), {}{}{}\n", log.source,
                      layout::name(log.collective), log.ranks, log.hosts.size(), log.ranks_per_host,
                      log.type, log.redop.empty() ? "" : " ", log.redop);
    const plan::CollectiveFit* written = group_fit(topology, l);
    if (written) {
      os << fmt::format(
          "  group ({}, stride {}): T_launch {:.4g} us, L_sync {:.4g} us, BW {:.4g} "
          "GB/s{}\n",
          l.size, l.stride, written->t_launch_us, written->l_sync_us, written->bw_gbps,
          written->t_launch_us == 0 ? " (T_launch:=0: one step count)" : "");
    } else {
      os << fmt::format(
          "  one ring step: L_sync {:.4g} us, BW {:.4g} GB/s (printed only: the "
          "calibration holds no send/recv entry)\n",
          l.fit.l_sync_us, l.fit.bw_gbps);
    }
    os << fmt::format("  {:>6} {:>12} {:>12} {:>8}\n", "size", "busbw GB/s", "fitted GB/s",
                      "error");
    for (const plan::NcclTestsPoint& p : l.points) {
      os << fmt::format("  {:>6} {:>12.2f} {:>12.2f} {:>+7.1f}%{}\n", format_byte_size(p.row.bytes),
                        p.row.busbw_gbps, p.fitted_busbw_gbps, 100 * p.error,
                        p.fitted ? "" : "  (not fitted)");
    }
    const plan::NcclTestsPoint& big = l.largest();
    os << fmt::format("  largest size {}: busbw {:.2f} GB/s in the log, {:.2f} fitted ({:+.1f}%)\n",
                      format_byte_size(big.row.bytes), big.row.busbw_gbps, big.fitted_busbw_gbps,
                      100 * big.error);
  }
  os << fmt::format("\ndevice: {}\n", device);
  os << fmt::format(
      "\nwrote {}: topology '{}' ({} devices), {} calibrated group(s)\nnext: meshtp topo show {} "
      "--mesh d1xd2  |  meshtp plan --topology {} --model …\n",
      a.out, topology.name, topology.device_count(), topology.calibration.groups.size(), a.out,
      a.out);
}

}  // namespace meshtp::cli
