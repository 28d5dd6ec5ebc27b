#!/usr/bin/env bash
# The prepared GPU check (docs/gpu.md). Two steps, because the GPU machine has the CUDA
# toolkit and driver but none of meshtp's Debian packages:
#
#   scripts/gpu-check.sh pack [DIR]        here: build meshtp-gpu, gpu_ops_test and
#                                          gpu_model_test (build/),
#                                          copy them into DIR (default .gpu-pack) with every
#                                          shared library they need that is not glibc's, the
#                                          compiler's or CUDA's (64 MiB at most)
#   scripts/gpu-check.sh run [DIR] [OUT]   there: probe; the bf16 GeMM ceiling (8192³); every
#                                          GPU op against the CPU reference (gpu_ops_test);
#                                          the serial block stack and GPT on the GPU against
#                                          the CPU backend's (gpu_model_test); the GPT's
#                                          training step timed (`gpu step`: h 4096, L 4, s 2048, b 4, V 50257,
#                                          bf16; MFU against the GeMM ceiling of the same run);
#                                          `gpu calibrate` (the device profile: GeMM time by
#                                          shape). Prints one summary table; writes
#                                          OUT/gpu-check.json, OUT/gpu-profile.json and the
#                                          tests' XML. Exit 0 only when every step passed.
#
# About 2 minutes on one H100 with the pack carried. With the device tool of this workplace:
#   run(command="scripts/gpu-check.sh run .gpu-pack $OUT", carry=[".gpu-pack"])
set -uo pipefail
cd "$(dirname "$0")/.."
step=${1:-}
case "$step" in
  pack)
    dir=${2:-.gpu-pack}
    cmake --build build --target meshtp-gpu gpu_ops_test gpu_model_test >/dev/null || {
      echo "error: building meshtp-gpu and the GPU tests in build/ failed (scripts/install.sh --tests first)" >&2
      exit 1
    }
    for b in build/src/cli/meshtp-gpu build/tests/device/gpu_ops_test build/tests/device/gpu_model_test; do
      [ -x "$b" ] || { echo "error: $b was not built: is the CUDA toolkit installed? (configure says)" >&2; exit 1; }
    done
    rm -rf "$dir" && mkdir -p "$dir/bin" "$dir/lib" "$dir/fallback"
    cp build/src/cli/meshtp-gpu build/tests/device/gpu_ops_test build/tests/device/gpu_model_test "$dir/bin/"
    strip "$dir"/bin/* 2>/dev/null || true
    # Libraries: everything ldd resolves except the C library, the compiler's runtime (kept
    # aside in fallback/, used only if the GPU machine's is older) and CUDA's (there already).
    ldd "$dir"/bin/* | awk '$3 ~ /^\// {print $3}' | sort -u | while read -r lib; do
      name=$(basename "$lib")
      case "$name" in
        libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*) ;;
        libstdc++.so*|libgcc_s.so*) cp -L "$lib" "$dir/fallback/$name" ;;
        libcuda.so*|libcudart.so*|libcublas*|libnccl*) ;;
        *) cp -L "$lib" "$dir/lib/$name" ;;
      esac
    done
    size=$(du -sm "$dir" | cut -f1)
    echo "packed $dir: $(ls "$dir/bin" | tr '\n' ' ')+ $(ls "$dir/lib" | wc -l) libraries, ${size} MiB"
    [ "$size" -le 64 ] || { echo "error: $dir is ${size} MiB, over the 64 MiB a device run carries" >&2; exit 1; }
    ;;
  run)
    dir=${2:-.gpu-pack}
    out=${3:-gpu-check-out}
    [ -x "$dir/bin/meshtp-gpu" ] || { echo "error: $dir/bin/meshtp-gpu not found: run 'scripts/gpu-check.sh pack $dir' first" >&2; exit 2; }
    mkdir -p "$out"
    cuda_libs=""
    for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
             $(python3 -c 'import nvidia, os; p=os.path.dirname(nvidia.__path__[0]); print(" ".join(os.path.join(p, "nvidia", x, "lib") for x in ("cublas", "cuda_runtime")))' 2>/dev/null); do
      [ -d "$d" ] && cuda_libs="$cuda_libs:$d"
    done
    export LD_LIBRARY_PATH="$PWD/$dir/lib$cuda_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    if ! "$dir/bin/meshtp-gpu" --help >/dev/null 2>"$out/loader.txt"; then
      if grep -q GLIBCXX "$out/loader.txt"; then
        export LD_LIBRARY_PATH="$PWD/$dir/fallback:$LD_LIBRARY_PATH"
        echo "note: this machine's libstdc++ is older than the build's; using the packed one"
      else
        cat "$out/loader.txt" >&2; exit 1
      fi
    fi
    export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-8}
    results=()
    run_step() {  # NAME COMMAND…: runs it (MESHTP_GPU_STEP_TIMEOUT s, default 150), logs to OUT/NAME.log, records pass/fail and seconds
      local name=$1; shift
      local t0=$SECONDS
      timeout -k 5 "${MESHTP_GPU_STEP_TIMEOUT:-150}" "$@" >"$out/$name.log" 2>&1
      local rc=$?
      local secs=$((SECONDS - t0))
      results+=("$name $rc $secs")
      printf '== %-10s rc=%d  %ds\n' "$name" "$rc" "$secs"
      tail -n 40 "$out/$name.log"
      return $rc
    }
    run_step probe "$dir/bin/meshtp-gpu" probe --json
    run_step gemm "$dir/bin/meshtp-gpu" gemm --m 8192 --n 8192 --k 8192 --type bf16 --repeats 50 --json
    run_step gemm_fp32 "$dir/bin/meshtp-gpu" gemm --m 8192 --n 8192 --k 8192 --type fp32 --repeats 10 --json
    run_step ops "$dir/bin/gpu_ops_test" --gtest_output="xml:$out/gpu_ops_test.xml"
    run_step model_test "$dir/bin/gpu_model_test" --gtest_output="xml:$out/gpu_model_test.xml"
    run_step step "$dir/bin/meshtp-gpu" step --hidden 4096 --heads 32 --layers 4 --seq 2048 --batch 4 --vocab 50257 --type bf16 --repeats 10 --json
    run_step calibrate "$dir/bin/meshtp-gpu" calibrate --out "$out/gpu-profile.json" --repeats 10
    if [ -n "${MESHTP_GPU_SANITIZE:-}" ] && command -v compute-sanitizer >/dev/null; then
      # Optional: the op tests under compute-sanitizer's memcheck (out-of-bounds and misaligned
      # accesses, leaks); slow, so only on request. Not the allocator's test: it asks for an
      # impossible size on purpose, which memcheck reports as an API error.
      run_step memcheck compute-sanitizer --tool memcheck --error-exitcode 3 \
        "$dir/bin/gpu_ops_test" --gtest_filter=-GpuAllocator.*
    fi
    python3 - "$out" "${results[@]}" <<'PY'
import json, sys
out, rows = sys.argv[1], sys.argv[2:]
steps = [dict(zip(("step", "rc", "seconds"), (r.split()[0], int(r.split()[1]), int(r.split()[2])))) for r in rows]
def load(name):
    try:
        text = open(f"{out}/{name}.log").read()
        return json.loads(text[text.index("{"):])
    except Exception:
        return None
probe, gemm, gemm32, step = load("probe"), load("gemm"), load("gemm_fp32"), load("step")
summary = {"steps": steps, "gpu": (probe or {}).get("gpu"),
           "bf16_gemm_8192_tflops": (gemm or {}).get("tflops"),
           "fp32_gemm_8192_tflops": (gemm32 or {}).get("tflops"),
           "step": step,
           "not_run": ["train on the GPU (1 rank, 2 ranks sharing it) and bench train: the runtime "
                       "does not run on the GPU backend yet; `gpu step` times a training step of "
                       "the serial GPT (forward, backward, AdamW; no data loader; docs/gpu.md)"]}
json.dump(summary, open(f"{out}/gpu-check.json", "w"), indent=2)
print("\n| step | result | seconds |\n| --- | --- | --- |")
for s in steps:
    print(f"| {s['step']} | {'pass' if s['rc'] == 0 else 'FAIL (rc %d)' % s['rc']} | {s['seconds']} |")
if gemm: print(f"\nbf16 GeMM 8192³: {gemm['tflops']:.1f} TFLOP/s (median of {gemm['repeats']})")
if gemm32: print(f"fp32 GeMM 8192³: {gemm32['tflops']:.1f} TFLOP/s")
if step:
    sh = step["shape"]
    print(f"GPT h {sh['hidden']} L {sh['layers']} s {sh['seq']} b {sh['batch']} V {sh['vocab']} "
          f"{step['type']}: training step {step['step_ms']:.2f} ms, {step['model_tflops']:.1f} "
          f"model TFLOP/s, MFU {100 * step['mfu']:.1f}% of the GeMM ceiling measured in the same run")
print(f"wrote {out}/gpu-check.json")
PY
    for r in "${results[@]}"; do set -- $r; [ "$2" -eq 0 ] || exit 1; done
    ;;
  *)
    echo "usage: scripts/gpu-check.sh pack [DIR] | run [DIR] [OUT]" >&2
    exit 2
    ;;
esac
