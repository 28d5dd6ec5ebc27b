// meshtp-gpu: `meshtp gpu …`'s commands in a binary without MPI or BLAS (gpu_command.hpp).
#include <cstdio>
#include <exception>

#include "cli/gpu_command.hpp"

int main(int argc, char** argv) {
  CLI::App app{"meshtp-gpu: the GPU as meshtp sees it (probe, gemm, step, calibrate, train)",
               "meshtp-gpu"};
  app.require_subcommand(1);
  app.failure_message([](const CLI::App* a, const CLI::Error& e) {
    return "error: " + CLI::FailureMessage::simple(a, e);
  });
  meshtp::cli::add_gpu_subcommands(app);
  meshtp::cli::add_gpu_train_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
