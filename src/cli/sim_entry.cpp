// The simulated meshtp run by hand. SMPI links the simulated build as a shared object, which
// smpirun loads once per simulated rank; started directly, such a file has no entry point
// and the process jumped to address 0 (SIGSEGV before main, even for --help). This gives it
// what glibc gives libc.so.6 so that it can be run: a program interpreter (the dynamic
// loader, found at configure time) and an entry point, which says how the file is meant to
// be run and exits 2. smpirun's dlopen ignores both. Compiled in the simulated build only.
#include <unistd.h>

extern "C" {

[[gnu::used, gnu::section(".interp")]] const char meshtp_program_interpreter[] =
    MESHTP_DYNAMIC_LOADER;

// Entered straight from the loader: no C runtime set-up, no constructors run, the stack as
// the kernel left it (hence the realignment). write and _exit need none of it.
[[noreturn, gnu::force_align_arg_pointer]] void meshtp_simulated_entry() {
  static const char message[] =
      "error: this is the simulated meshtp (build-sim/): it runs under SimGrid's smpirun, "
      "one simulated device per rank. Run it through `meshtp simulate` (build/src/cli/meshtp "
      "simulate --topology T --model M --devices N …), or tests/sim/smpirun.sh N "
      "build-sim/src/cli/meshtp …; build/src/cli/meshtp is the meshtp to run directly.\n";
  const ssize_t ignored = write(STDERR_FILENO, message, sizeof message - 1);
  (void)ignored;
  _exit(2);
}

}  // extern "C"
