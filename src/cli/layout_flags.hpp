// The layout flags `train`, `block` and `bench layer` share: either a plan file (--plan, as
// `meshtp plan --out` writes it) or the layout spelled out (--strategy, --chunks,
// --sequence-parallel, --stationary, --slices, --recompute). Giving both is an error naming the flag.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "cli/cli11.hpp"
#include "layout/plan.hpp"

namespace meshtp::cli {

struct LayoutFlags {
  std::string plan_file;
  std::string strategy = "atp";
  int chunks = 1;
  bool sequence_parallel = false;
  std::string stationary = "auto";
  int slices = 1;
  std::string recompute = "none";
  std::vector<const CLI::Option*> spelled_out;  // the flags --plan excludes

  // Registers the flags; without `with_chunks` the command lists chunks itself.
  void add_to(CLI::App* app, bool with_chunks = true);
  bool from_file() const { return !plan_file.empty(); }
  // The plan in --plan's file; throws if a spelled-out flag or one of `others` (the
  // command's mesh flags) was given as well.
  layout::Plan load(const std::vector<const CLI::Option*>& others = {}) const;
  // The layout the flags spell out, on `mesh` with `dp` replicas (validated).
  layout::Plan build(std::array<int, 2> mesh, int dp = 1) const;
};

}  // namespace meshtp::cli
