#!/usr/bin/env bash
# Installs meshtp's dependencies from Debian packages, then configures and builds meshtp twice:
# build/ (Open MPI: the runtime) and build-sim/ (the same sources on SimGrid's SMPI: the
# simulated meshtp that `meshtp simulate` runs, docs/simulation.md).
# Idempotent: a second run only rebuilds what changed. Needs root (or sudo) for apt-get.
# --peers also installs python3-torch, for the PyTorch peer (scripts/bench-peer.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake pkg-config
  libopenmpi-dev openmpi-bin        # every collective; also the multi-node launcher
  libopenblas-dev                   # local GeMM (CBLAS)
  libscalapack-openmpi-dev          # ScaLAPACK psgemm, the 2D GeMM baseline
  libgtest-dev                      # tests
  nlohmann-json3-dev libcli11-dev libfmt-dev
  libsimgrid-dev                    # SimGrid: loads `meshtp topo platform` output, simulates
  zlib1g-dev                        # CRC-32 checksums of checkpoint tensors
  fortunes                          # default training corpus: /usr/share/games/fortunes
  python3                           # helper scripts
  python3-matplotlib                # plots of scripts/reproduce-papers.sh
)

# --peers: also the PyTorch peer of the benchmarks (scripts/bench-peer.sh).
for arg in "$@"; do
  case "$arg" in
    --peers) packages+=(python3-torch) ;;
    *) echo "error: unknown argument '$arg' (scripts/install.sh [--peers])" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  echo "installing: ${missing[*]}"
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}"
fi

build_dir=$(realpath -m "${MESHTP_BUILD_DIR:-build}")
sim_dir=$(realpath -m "${MESHTP_SIM_BUILD_DIR:-build-sim}")
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release \
  -DMESHTP_SIM_BINARY="$sim_dir/src/cli/meshtp" >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
echo "built: $build_dir/src/cli/meshtp"
cmake -S . -B "$sim_dir" -DCMAKE_BUILD_TYPE=Release -DMESHTP_SIMULATE=ON \
  -DMESHTP_HOST_BINARY="$build_dir/src/cli/meshtp" >/dev/null
cmake --build "$sim_dir" -j "$(nproc)"
echo "built: $sim_dir/src/cli/meshtp (simulated: runs under smpirun, see meshtp simulate)"
