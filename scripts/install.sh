#!/usr/bin/env bash
# Installs meshtp's dependencies from Debian packages, then configures and builds what was
# asked for (docs/building.md has the measured times):
#   scripts/install.sh            the runtime: build/src/cli/meshtp (README command 1) and the
#                                 Python module meshtp, installed where python3 finds it
#   scripts/install.sh --tests    also GoogleTest and SimGrid, and every test target in build/
#   scripts/install.sh --sim      also SimGrid, and build-sim/: the same sources on SimGrid's
#                                 SMPI, the simulated meshtp that `meshtp simulate` runs
#                                 (with --tests, its tests too)
#   scripts/install.sh --peers    also python3-torch, for the PyTorch peer (bench-peer.sh)
# README command (2), scripts/test.sh, runs it with --tests --sim.
# Idempotent: a second run only rebuilds what changed. Needs root (or sudo) for apt-get.
set -euo pipefail
cd "$(dirname "$0")/.."

runtime_packages=(
  build-essential cmake ninja-build pkg-config
  libopenmpi-dev openmpi-bin        # every collective; also the multi-node launcher
  libopenblas-dev                   # local GeMM (CBLAS)
  libscalapack-openmpi-dev          # ScaLAPACK psgemm, the 2D GeMM baseline
  nlohmann-json3-dev libcli11-dev libfmt-dev
  zlib1g-dev                        # CRC-32 checksums of checkpoint tensors
  fortunes                          # default training corpus: /usr/share/games/fortunes
  python3                           # helper scripts
  pybind11-dev python3-dev          # the Python module meshtp (docs/python.md)
  python3-matplotlib                # the plots of `plan|simulate --report DIR` (docs/reports.md)
  iproute2                          # ip netns, tc: scripts/cluster.sh (docs/multinode.md)
)
sim_packages=(
  libsimgrid-dev                    # SMPI; a test also loads `meshtp topo platform` output
)
# chromium-headless-shell: the test cli_report_page loads the report pages in it (the same
# engine as Debian's chromium without its browser UI: 290 MB installed with chromium-common,
# against 357 MB; about a minute to install with its 16 dependencies on the dev machine).
test_packages=(libgtest-dev python3-pytest chromium-headless-shell "${sim_packages[@]}")

tests=0 sim=0 peers=0
for arg in "$@"; do
  case "$arg" in
    --tests) tests=1 ;;
    --sim) sim=1 ;;
    --peers) peers=1 ;;
    *) echo "error: unknown argument '$arg' (scripts/install.sh [--tests] [--sim] [--peers])" >&2
       exit 2 ;;
  esac
done
packages=("${runtime_packages[@]}")
[ $tests -eq 1 ] && packages+=("${test_packages[@]}")
[ $sim -eq 1 ] && packages+=("${sim_packages[@]}")
[ $peers -eq 1 ] && packages+=(python3-torch)

start=$SECONDS
phase() { printf '== [%s] %s ==\n' "$(date -u -d "@$((SECONDS - start))" +%M:%S)" "$*"; }

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  phase "install ${#missing[@]} Debian packages (about 1 minute on a fresh machine): ${missing[*]}"
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

jobs=$(nproc)
# configure DIR ARGS…: Ninja for a new build directory (it prints [n/N] as it goes); an
# existing one keeps the generator it was made with.
configure() {
  local dir=$1; shift
  local generator=()
  [ -f "$dir/CMakeCache.txt" ] || generator=(-G Ninja)
  cmake "${generator[@]}" -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
}
# build DIR WHAT EXPECTED [TARGET…]: EXPECTED is a from-scratch build's time on 2 cores.
build() {
  local dir=$1 what=$2 expected=$3 target=()
  [ $# -ge 4 ] && target=(--target "${@:4}")
  local note="rebuilding what changed"
  [ -f "$dir/.ninja_log" ] || [ -f "$dir/Makefile" ] || note="from scratch: about $expected on 2 cores"
  phase "build $what in $dir ($note)"
  configure "$dir" "${cmake_args[@]}"
  cmake --build "$dir" -j "$jobs" "${target[@]}"
}

# Whether the build directory's configuration builds the Python module (pybind11 found).
python_module() { grep -q '^MESHTP_HAVE_PYTHON:INTERNAL=ON' "$build_dir/CMakeCache.txt"; }

build_dir=$(realpath -m "${MESHTP_BUILD_DIR:-build}")
sim_dir=$(realpath -m "${MESHTP_SIM_BUILD_DIR:-build-sim}")
# The Python module is built for the python3 on PATH, the one it is installed for.
cmake_args=(-DMESHTP_SIM_BINARY="$sim_dir/src/cli/meshtp" -DPython_EXECUTABLE="$(command -v python3)")
if [ $tests -eq 1 ]; then
  cmake_args+=(-DBUILD_TESTING=ON)
  build "$build_dir" "meshtp and its tests" "6 minutes"
else
  cmake_args+=(-DBUILD_TESTING=OFF)
  targets=(meshtp)
  configure "$build_dir" "${cmake_args[@]}"
  python_module && targets+=(meshtp_python)
  build "$build_dir" "the meshtp binary and the Python module" "2.5 minutes" "${targets[@]}"
fi
phase "built $build_dir/src/cli/meshtp"

# The Python module (docs/python.md): copied where python3 finds it in a new shell, its
# site-packages (sysconfig's platlib: /usr/local/lib/python3.X/dist-packages for Debian's
# python3 as root) or, where that is not writable, the user's (python3 -m site --user-site),
# under a temporary name and then renamed, so an import never sees half a file.
if python_module; then
  module=$(find "$build_dir/src/python" -maxdepth 1 -name 'meshtp.*.so' | head -n 1)
  site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
  if ! { mkdir -p "$site" 2>/dev/null && [ -w "$site" ]; }; then
    site=$(python3 -m site --user-site)
    mkdir -p "$site"
  fi
  cp "$module" "$site/.meshtp.so.$$"
  mv -f "$site/.meshtp.so.$$" "$site/$(basename "$module")"
  if ! (cd / && python3 -c 'import meshtp' 2>/dev/null); then
    echo "error: python3 ($(command -v python3)) cannot import $site/$(basename "$module")" >&2
    exit 1
  fi
  phase "installed the Python module meshtp in $site (python3 -c 'import meshtp')"
else
  phase "no Python module: pybind11 or Python's headers were not found (cmake says which)"
fi
if [ $sim -eq 1 ]; then
  cmake_args=(-DMESHTP_SIMULATE=ON -DMESHTP_HOST_BINARY="$build_dir/src/cli/meshtp"
              -DBUILD_TESTING=$([ $tests -eq 1 ] && echo ON || echo OFF))
  build "$sim_dir" "the simulated meshtp$([ $tests -eq 1 ] && echo " and its tests")" "2.5 minutes"
  phase "built $sim_dir/src/cli/meshtp (simulated: runs under smpirun, see meshtp simulate)"
fi
