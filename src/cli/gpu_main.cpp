// meshtp-gpu: `meshtp gpu …`'s commands in a binary without MPI or BLAS (gpu_command.hpp).
#include <cstdio>
#include <exception>

#include <string>

#include "cli/flag_checks.hpp"
#include "cli/gpu_command.hpp"

int main(int argc, char** argv) {
  CLI::App app{"meshtp-gpu: the GPU as meshtp sees it (probe, gemm, calibrate)", "meshtp-gpu"};
  app.require_subcommand(1);
  // One line: the error naming the flag and the value (CLI11's simple() adds "Run with --help").
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return "error: " + std::string(e.what()) + "\n";
  });
  meshtp::cli::add_gpu_subcommands(app);
  // As meshtp's: integers decimal as typed (`--m 010` is ten, not octal eight; hex and
  // values past 64 bits refused naming the text), and no empty text values.
  meshtp::cli::require_decimal_integers(app);
  meshtp::cli::require_nonempty_text(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ConversionError& e) {
    // Past the decimal check, only a narrower option type overflows (int).
    const std::string what = e.what();
    const std::string prefix = "Could not convert: ";
    const std::size_t eq = what.find(" = ");
    if (what.rfind(prefix, 0) == 0 && eq != std::string::npos) {
      std::fprintf(stderr, "error: %s: '%s' is out of range for this flag\n",
                   what.substr(prefix.size(), eq - prefix.size()).c_str(),
                   what.substr(eq + 3).c_str());
      return e.get_exit_code();
    }
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
