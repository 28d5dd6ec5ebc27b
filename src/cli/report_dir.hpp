// --report DIR (meshtp plan, plan --3d, plan --3d --evaluate, simulate): a page people can
// look at. The command's answer — the object its --json prints, unchanged — goes with a
// header (which report, the command line, the topology, its devices and their memory, the
// model) to DIR/report.json, and scripts/report.py (matplotlib, Agg backend) draws
// DIR/index.html from it: one self-contained page, its PNG plots embedded as data: URIs, so
// it can be mailed or attached as one file.
//
// The interpreter runs in a process group of its own, with a deadline (60 s to say whether
// it imports matplotlib, 300 s to draw): a python3 that hangs, or leaves a child holding its
// output, is killed with its children and named, not waited for. The numbers are the planner's
// and the simulator's; the script only arranges them (docs/reports.md).
//
// Nothing half-written: both files are made in a temporary directory ($TMPDIR, removed
// afterwards), then each written into DIR atomically (core/atomic_file.hpp: report.json,
// then the page). When drawing fails, DIR keeps the report it had, and a DIR this run made
// is removed again.
//
// The interpreter: `python3` as the PATH finds it, else Debian's /usr/bin/python3 — the
// first that imports matplotlib (Debian's python3-matplotlib is installed for
// /usr/bin/python3; a pyenv or virtual-environment python3 ahead of it on the PATH may lack
// it). It is asked before the command does its work (`report.py --check`), so a missing
// package is reported before a long simulation, not after it. The script is the source
// tree's scripts/report.py (MESHTP_SCRIPTS_DIR, compiled in, as the simulated binary's path
// is).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "cli/cli11.hpp"
#include "plan/topology.hpp"

namespace meshtp::cli {

class ReportDir {
 public:
  ReportDir() = default;  // no --report: write() does nothing
  // Before any work: DIR is a directory, or can be made (its folder exists and is writable);
  // DIR/report.json and DIR/index.html may be replaced (atomic_file's checks); the script is
  // there; a python3 imports matplotlib. Throws naming what is wrong and what to install.
  explicit ReportDir(std::string dir);

  bool enabled() const { return !dir_.empty(); }
  // Writes DIR/report.json and DIR/index.html for `report` (report_json's object); returns
  // the page's path. Throws with the script's error when it fails.
  // SIGINT, SIGTERM or SIGHUP while drawing ends the interpreter's group and removes the
  // temporary directory; meshtp then ends by that signal, one error line before.
  std::string write(const nlohmann::json& report) const;

 private:
  std::string draw(const nlohmann::json& report) const;

  std::string dir_;
  std::string python_;
};

// {"report": kind, "command": "meshtp plan --topology …", "topology", "devices",
// "device_memory_gib", "model", "result": result}; kind is plan, plan-3d, evaluate or
// simulate (scripts/report.py says what each result holds).
nlohmann::json report_json(std::string_view kind, const CLI::App& command,
                           const plan::Topology& topology, int devices, std::string_view model,
                           nlohmann::json result);

}  // namespace meshtp::cli
