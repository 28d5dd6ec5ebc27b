// meshtp: entry point. Initialises MPI, pins BLAS threads, dispatches to a subcommand.
//
// Error policy: a command-line parse error is the same on every rank, so rank 0 prints it
// and every rank exits cleanly with CLI11's code. Any other error (meshtp::Error, or an
// unexpected exception) is printed as `error: …` and the whole job is aborted, so no rank
// is left waiting in a collective. Input errors are usually found by every rank at once:
// rank 0 reports and aborts at once, the others wait a moment first, so the user sees one
// message — unless the error is theirs alone, in which case they report it themselves.
#include <fmt/format.h>

// mallopt. SMPI's compiler wrapper defines malloc, calloc, realloc and free as macros, which
// break <malloc.h>'s declarations: set aside while it is read.
#pragma push_macro("malloc")
#pragma push_macro("calloc")
#pragma push_macro("realloc")
#pragma push_macro("free")
#undef malloc
#undef calloc
#undef realloc
#undef free
#include <malloc.h>
#pragma pop_macro("free")
#pragma pop_macro("realloc")
#pragma pop_macro("calloc")
#pragma pop_macro("malloc")

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cli/commands.hpp"
#include "cli/flag_checks.hpp"
#include "cli/stop_signals.hpp"
#include "comm/communicator.hpp"
#include "comm/watchdog.hpp"
#include "core/error.hpp"
#include "core/simulation.hpp"
#include "tensor/gemm.hpp"

namespace meshtp::cli {
namespace {

std::optional<comm::Communicator> g_world;
int g_exit_status = 0;

class NullBuffer : public std::streambuf {
 protected:
  int overflow(int c) override { return c; }
};

}  // namespace

const comm::Communicator& world() {
  if (!g_world) fail("internal error: this command runs without MPI but asked for its ranks");
  return *g_world;
}

bool root() { return !g_world || g_world->rank() == 0; }

int world_size() { return g_world ? g_world->size() : 1; }

void set_exit_status(int status) { g_exit_status = status; }

std::ostream& out() {
  static NullBuffer null_buffer;
  static std::ostream null_stream(&null_buffer);
  return root() ? std::cout : null_stream;
}

bool runs_without_mpi(int argc, char** argv) {
#ifdef MESHTP_SIMULATED_BUILD
  (void)argc;
  (void)argv;
  return false;  // run by smpirun: every rank is a simulated one
#else
  if (std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr) {
    return false;  // under a launcher: ranks beside this one
  }
  std::string_view command;
  bool from_logs = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--comm-timeout") {
      ++i;
      continue;
    }
    if (command.empty() && !a.empty() && a[0] != '-') command = a;
    if (a == "--from-nccl-tests" || a.rfind("--from-nccl-tests=", 0) == 0 ||
        a == "--from-step-log" || a.rfind("--from-step-log=", 0) == 0) {
      from_logs = true;
    }
  }
  // The commands whose ranks do the work; everything else is the planner's or an error.
  for (const std::string_view needs : {"bench", "gemm", "block", "train", "simulate-run"}) {
    if (command == needs) return false;
  }
  return command != "calibrate" || from_logs;
#endif
}

}  // namespace meshtp::cli

// The watchdog's deadline unless --comm-timeout says otherwise: long enough for any step
// of a model this runtime trains, short enough that a hung job is noticed.
constexpr double kDefaultCommTimeout = 300;

// Freed tensors stay in the process for the next allocation (glibc otherwise maps blocks of
// 128 KiB or more fresh, raising that threshold only as it sees them freed, and gives freed
// heap back above 128 KiB at the top). A step allocates and frees the
// same sizes again and again; a fresh mapping's first touch and first transfer cost several
// ms per MiB on a VM, on the critical path of a pipeline (docs/pipeline.md, "Measured
// bubble": 2-stage GPipe, m = 16, 1.72 → 1.07 × the formula). The simulated build too: its
// large buffers are reserved address space (comm/smpi_device.cpp), but SimGrid and the
// ranks' small buffers grew and trimmed the heap of the one process all ranks share on
// nearly every step (a fifth of a 64-device simulation's CPU in malloc and page faults;
// with this, about 15% less CPU and no more memory: docs/simulation.md, "Speed of the
// simulator"). Every rank sets the same.
void keep_freed_memory() {
  mallopt(M_MMAP_THRESHOLD, 64 << 20);  // blocks below 64 MiB come from the heap
  mallopt(M_TRIM_THRESHOLD, 1 << 30);   // and up to 1 GiB of freed heap is kept
}

// `meshtp gpu …` is meshtp-gpu, the binary built beside this one, run in this process's place
// before MPI starts. The CPU binary links no CUDA library: loading cuBLASLt costs every process
// about 0.5 s of CPU in its initialisers (measured: an empty program linked with it starts in
// 0.50 s, without it in 0.00 s), and every rank of every command would pay it.
int exec_gpu_binary(int argc, char** argv) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path gpu_binary =
      (ec ? std::filesystem::path(argv[0]) : self).parent_path() / "meshtp-gpu";
  std::vector<char*> args;
  const std::string program = gpu_binary.string();
  args.push_back(const_cast<char*>(program.c_str()));
  for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  execv(program.c_str(), args.data());
  std::fprintf(stderr, "error: meshtp gpu runs %s, which could not be started: %s\n",
               program.c_str(), std::strerror(errno));
  return 1;
}

int main(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) == "gpu") return exec_gpu_binary(argc, argv);
  keep_freed_memory();
  // The planner's commands run without MPI (commands.hpp, runs_without_mpi).
  std::optional<meshtp::comm::Environment> env;
  if (!meshtp::cli::runs_without_mpi(argc, argv)) {
    env.emplace(argc, argv);
    meshtp::cli::g_world.emplace(meshtp::comm::Communicator::world());
    meshtp::cli::watch_launcher(meshtp::cli::g_world->rank());
  }
  const bool root = meshtp::cli::root();
  if (root && meshtp::simhooks::simulated()) {
    // The simulated build (docs/simulation.md) says what its numbers are, once.
    std::fprintf(stderr, "%s\n",
                 meshtp::simhooks::values_meaningless()
                     ? "meshtp: simulated devices (SimGrid SMPI), charged mode: compute is "
                       "charged, not done — values are meaningless, times are simulated"
                     : "meshtp: simulated devices (SimGrid SMPI), values mode: values are "
                       "computed, times count communication only");
  }

  CLI::App app{"meshtp: adaptive tensor-parallel training runtime with a topology-aware planner",
               "meshtp"};
  app.set_version_flag("--version", std::string("meshtp ") + MESHTP_VERSION);
  app.require_subcommand(1);
  // One line: the error naming the flag and the value (CLI11's simple() adds "Run with --help").
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return "error: " + std::string(e.what()) + "\n";
  });
  // Global, and accepted after the subcommand too (fallthrough): `meshtp train --comm-timeout 5`.
  app.fallthrough();
  meshtp::comm::set_comm_timeout(kDefaultCommTimeout);
  app.add_option_function<double>(
         "--comm-timeout", [](const double& s) { meshtp::comm::set_comm_timeout(s); },
         fmt::format("Seconds a collective or transfer may wait for its peers before the job "
                     "fails naming them (0: no watchdog; default {:g})",
                     kDefaultCommTimeout))
      ->trigger_on_parse();
  meshtp::cli::add_bench_command(app);
  meshtp::cli::add_gemm_command(app);
  meshtp::cli::add_bench_gemm2d_command(app);
  meshtp::cli::add_block_command(app);
  meshtp::cli::add_bench_layer_command(app);
  meshtp::cli::add_bench_train_command(app);
  meshtp::cli::add_bench_rank_command(app);
  meshtp::cli::add_bench_elementwise_command(app);
  meshtp::cli::add_bench_attention_command(app);
  meshtp::cli::add_bench_pipeline_command(app);
  meshtp::cli::add_plan_command(app);
  meshtp::cli::add_topo_command(app);
  meshtp::cli::add_calibrate_command(app);
  meshtp::cli::add_bench_plan_command(app);
  meshtp::cli::add_train_command(app);
  meshtp::cli::add_simulate_command(app);
  // Listed for --help; `meshtp gpu …` never gets here (exec_gpu_binary), so reaching it means
  // a global flag came first.
  app.add_subcommand("gpu",
                     "The GPU backend: probe the GPU, time a GeMM, measure its device profile "
                     "(runs meshtp-gpu; `meshtp gpu --help`)")
      ->allow_extras()
      ->callback([] {
        meshtp::fail(
            "'gpu' must come first (`meshtp gpu …`): it runs meshtp-gpu, which takes "
            "no global flags");
      });
  meshtp::cli::require_decimal_integers(app);
  meshtp::cli::require_nonempty_text(app);

  int status = 0;
  try {
    try {
      meshtp::set_blas_threads(meshtp::blas_threads_from_env());
      // CLI11 would only say "A subcommand is required": name the word it did not know.
      if (argc > 1 && argv[1][0] != '-') {
        std::string known;
        bool found = false;
        for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
          known += " " + sub->get_name();
          found |= sub->get_name() == argv[1];
        }
        MESHTP_CHECK(found, "unknown command '{}'; the commands are:{}", argv[1], known);
      }
      app.parse(argc, argv);
    } catch (const CLI::ConversionError& e) {
      // The decimal check passed the text, so it only overflows a narrower option type
      // (int), where CLI11 would say "Could not convert: --dp = 4294967297".
      const std::string what = e.what();
      const std::string prefix = "Could not convert: ";
      const std::size_t eq = what.find(" = ");
      if (what.rfind(prefix, 0) == 0 && eq != std::string::npos) {
        if (root) {
          std::fprintf(stderr, "error: %s: '%s' is out of range for this flag\n",
                       what.substr(prefix.size(), eq - prefix.size()).c_str(),
                       what.substr(eq + 3).c_str());
        }
        status = e.get_exit_code();
      } else {
        status = root ? app.exit(e) : e.get_exit_code();
      }
    } catch (const CLI::ParseError& e) {
      // Same verdict on every rank: print once, exit everywhere with CLI11's code.
      status = root ? app.exit(e) : e.get_exit_code();
    }
  } catch (const std::exception& e) {
    std::cout.flush();
    if (!meshtp::cli::g_world) {
      // No MPI: one process, one line, its exit status.
      const bool oom = dynamic_cast<const std::bad_alloc*>(&e) != nullptr;
      std::fprintf(stderr, "error: %s%s\n",
                   oom ? "out of memory (a buffer could not be allocated): " : "", e.what());
      return 1;
    }
    const int rank = meshtp::cli::g_world->rank();
    if (rank != 0) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const bool oom = dynamic_cast<const std::bad_alloc*>(&e) != nullptr;
    std::fprintf(stderr, "error: %s%s%s\n",
                 oom ? "out of memory (a buffer could not be allocated): lower --batch, --seq or "
                       "the model size, or use more ranks; "
                     : "",
                 e.what(), rank != 0 ? fmt::format(" (rank {})", rank).c_str() : "");
    std::fflush(stderr);
    meshtp::comm::abort_job(1);
  }
  meshtp::cli::g_world.reset();
  return status != 0 ? status : meshtp::cli::g_exit_status;
}
