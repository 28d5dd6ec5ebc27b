#!/usr/bin/env bash
# Times from-scratch builds of meshtp, one per configuration, in one run on this machine, and
# says where each one's time went (scripts/build_times.py). docs/building.md quotes it.
#
#   scripts/bench-build.sh [--target meshtp|all] [--configs fast,no-unity,no-pch,plain]
#                          [--jobs N] [--out DIR]
#
# --target meshtp  the binary alone, as the demo builds it (BUILD_TESTING=OFF; default)
# --target all     the binary and every test, as the test command builds build/
# configs: fast (unity build + precompiled headers: the default), no-unity, no-pch, and
# plain (neither: how every object was compiled before them). Each builds in OUT/<config>
# (default: a temporary directory, removed afterwards) with -j N (default: nproc); the
# ratios are to the last configuration given, run in the same invocation. The machine's load
# moves wall times: compare the ratios, and run it on an idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."

target=meshtp configs=fast,plain jobs=$(nproc) out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --target) target=${2:?}; shift 2 ;;
    --configs) configs=${2:?}; shift 2 ;;
    --jobs) jobs=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    *) echo "error: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
  esac
done
case "$target" in
  meshtp) testing=OFF build_target=(--target meshtp) ;;
  all) testing=ON build_target=() ;;
  *) echo "error: --target '$target' must be meshtp or all" >&2; exit 2 ;;
esac
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "error: --jobs '$jobs' must be a positive integer" >&2; exit 2; }
command -v ninja >/dev/null || { echo "error: ninja not found (scripts/install.sh installs it)" >&2; exit 1; }
keep=1
if [ -z "$out" ]; then out=$(mktemp -d); keep=0; fi
mkdir -p "$out"
cleanup() { [ $keep -eq 1 ] || rm -rf "$out"; }
trap cleanup EXIT

IFS=, read -r -a config_list <<<"$configs"
declare -A wall
for config in "${config_list[@]}"; do
  case "$config" in
    fast) flags=() ;;
    no-unity) flags=(-DMESHTP_UNITY_BUILD=OFF) ;;
    no-pch) flags=(-DMESHTP_PRECOMPILED_HEADERS=OFF) ;;
    plain) flags=(-DMESHTP_UNITY_BUILD=OFF -DMESHTP_PRECOMPILED_HEADERS=OFF) ;;
    *) echo "error: config '$config' must be fast, no-unity, no-pch or plain" >&2; exit 2 ;;
  esac
  dir="$out/$config"
  rm -rf "$dir"
  cmake -G Ninja -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=$testing \
    -DMESHTP_CCACHE=OFF "${flags[@]}" >/dev/null
  t0=$(date +%s.%N)
  cmake --build "$dir" -j "$jobs" "${build_target[@]}" >"$dir/build.log" 2>&1 ||
    { tail -20 "$dir/build.log"; echo "error: the $config build failed ($dir/build.log)" >&2; exit 1; }
  t1=$(date +%s.%N)
  wall[$config]=$(python3 -c "print(f'{$t1 - $t0:.1f}')")
  echo "== $config: ${wall[$config]} s wall, target $target, -j $jobs =="
  python3 scripts/build_times.py "$dir" --top 5
  python3 scripts/build_times.py "$dir" --json >"$dir/times.json"
done
baseline=${config_list[-1]}
echo "== wall time, ratio to $baseline (same run) =="
for config in "${config_list[@]}"; do
  python3 -c "print(f'  {\"$config\":10s} {${wall[$config]}:7.1f} s  {${wall[$config]} / ${wall[$baseline]}:.2f}x')"
done
