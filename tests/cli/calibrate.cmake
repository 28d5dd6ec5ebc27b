# meshtp calibrate and meshtp bench plan: a 2-rank smoke run whose file the planner reads and
# the validator runs on, and the bad inputs. The sizes span 256x so that the bandwidth term
# dominates the largest even on a loaded machine (4K-64K alone once fitted a negative slope).
# Included from tests/cli/CMakeLists.txt.
set(MESHTP_CAL_DIR ${CMAKE_CURRENT_BINARY_DIR}/calibrate)
set(MESHTP_CAL_FILE ${MESHTP_CAL_DIR}/tiny-np2.json)
file(MAKE_DIRECTORY ${MESHTP_CAL_DIR})

add_test(NAME cli_calibrate_np2
         COMMAND ${MESHTP_MPIEXEC} -np 2 ${MESHTP_BIN} calibrate --out ${MESHTP_CAL_FILE}
                 --sizes 4K,64K,1M --gemm 64x64x64 --seconds 0.02)
set_tests_properties(cli_calibrate_np2 PROPERTIES ENVIRONMENT "${MESHTP_MPI_ENV}" TIMEOUT 120
  PROCESSORS 2 FIXTURES_SETUP calibrated_np2
  PASS_REGULAR_EXPRESSION "    2      1 all_reduce .*2D GeMM steps: MeshSlice OS 512x256x512 on mesh 2x1, .* S=64 [0-9.]+/[0-9.]+ ms; [0-9.]+ us per step .*wrote .*tiny-np2.json: topology 'tiny-np2', 2 devices")

add_test(NAME cli_calibrate_plan_reads_file
         COMMAND ${MESHTP_BIN} plan --topology ${MESHTP_CAL_FILE} --devices 2 --model atp-m1
                 --json)
set_tests_properties(cli_calibrate_plan_reads_file PROPERTIES ENVIRONMENT "${MESHTP_MPI_ENV}"
  TIMEOUT 60 FIXTURES_REQUIRED calibrated_np2
  PASS_REGULAR_EXPRESSION "\"bandwidth_source\":\\[(\"calibrated\",null|null,\"calibrated\")\\]")

# Every strategy, the 2D GeMMs among the top candidates (--top 20): each runs, is checked
# against the serial reference, and is listed.
add_test(NAME cli_bench_plan_np2
         COMMAND ${MESHTP_MPIEXEC} -np 2 ${MESHTP_BIN} bench plan --topology ${MESHTP_CAL_FILE}
                 --hidden 32 --heads 4 --seq 8 --batch 2 --layers 1 --seconds 0.02 --top 20)
set_tests_properties(cli_bench_plan_np2 PROPERTIES ENVIRONMENT "${MESHTP_MPI_ENV}" TIMEOUT 120
  PROCESSORS 2 FIXTURES_REQUIRED calibrated_np2
  PASS_REGULAR_EXPRESSION "meshslice [12]x[12] .*communication estimate vs replayed collectives: mean [|]error[|] [0-9.]+%.*predicted best: .*; measured best: ")

add_test(NAME cli_calibrate_no_partial_file
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/calibrate_no_partial_file.sh
                 ${MESHTP_CAL_DIR}/failures ${MESHTP_BIN} ${MESHTP_MPIEXEC})
set_tests_properties(cli_calibrate_no_partial_file PROPERTIES ENVIRONMENT "${MESHTP_MPI_ENV}"
  TIMEOUT 120 PROCESSORS 2 LABELS failure)

meshtp_failure_test(cli_calibrate_mesh_mismatch
                    REGEX "error: --mesh 2x2 has 4 ranks but the world has 2"
                    NP 2 COMMAND ${MESHTP_BIN} calibrate --mesh 2x2 --out ${MESHTP_CAL_DIR}/x.json)
meshtp_failure_test(cli_calibrate_out_is_directory
                    REGEX "error: '${MESHTP_CAL_DIR}' is a directory, not a regular file: meshtp writes only regular files"
                    NP 2 COMMAND ${MESHTP_BIN} calibrate --out ${MESHTP_CAL_DIR})
meshtp_failure_test(cli_calibrate_one_size
                    REGEX "error: --sizes 8K,8K: the fit needs at least 2 distinct message sizes"
                    NP 2 COMMAND ${MESHTP_BIN} calibrate --out ${MESHTP_CAL_DIR}/x.json
                                 --sizes 8K,8K)
meshtp_failure_test(cli_calibrate_base_mismatch
                    REGEX "error: --base topology 'pcie-8xa100' has 8 devices but this run has 2 ranks"
                    NP 2 COMMAND ${MESHTP_BIN} calibrate --out ${MESHTP_CAL_DIR}/x.json
                                 --base pcie-8xa100)
meshtp_failure_test(cli_calibrate_one_rank REGEX "error: calibrate needs at least 2 ranks"
                    COMMAND ${MESHTP_BIN} calibrate --out ${MESHTP_CAL_DIR}/x.json)
meshtp_failure_test(cli_bench_plan_device_mismatch
                    REGEX "error: topology 'pcie-8xa100' has 8 devices but this run has 2 ranks"
                    NP 2 COMMAND ${MESHTP_BIN} bench plan --topology pcie-8xa100)
meshtp_failure_test(cli_bench_plan_unknown_strategy
                    REGEX "error: .*unknown strategy 'fsdp'"
                    NP 2 COMMAND ${MESHTP_BIN} bench plan --topology nvlink-network-2
                                 --strategies atp,fsdp)

# calibrate --from-nccl-tests: the logs of tests/plan/data/nccl-tests fitted into the
# nvswitch-8xa100 preset; the file's group is what `topo show` then uses; malformed input and
# conflicting flags are refused naming the line or the flag.
set(MESHTP_NCCL_DATA ${PROJECT_SOURCE_DIR}/tests/plan/data/nccl-tests)
set(MESHTP_NCCL_FILE ${MESHTP_CAL_DIR}/nccl-8xa100.json)
add_test(NAME cli_calibrate_nccl_tests
         COMMAND ${MESHTP_BIN} calibrate --from-nccl-tests ${MESHTP_NCCL_DATA}/all_reduce_perf.log
                 ${MESHTP_NCCL_DATA}/all_gather_perf.log ${MESHTP_NCCL_DATA}/sendrecv_perf.log
                 --base nvswitch-8xa100 --out ${MESHTP_NCCL_FILE})
set_tests_properties(cli_calibrate_nccl_tests PROPERTIES ENVIRONMENT "${MESHTP_MPI_ENV}"
  TIMEOUT 60 FIXTURES_SETUP nccl_calibrated LABELS cli
  PASS_REGULAR_EXPRESSION "all_reduce on 8 ranks .*largest size 8G: busbw 230.10 GB/s in the log, [0-9.]+ fitted \\(-1\\.[0-9]%\\).*one ring step: .*wrote .*nccl-8xa100.json: topology 'nvswitch-8xa100-nccl' \\(8 devices\\), 1 calibrated group")
add_test(NAME cli_calibrate_nccl_tests_topo_show
         COMMAND ${MESHTP_BIN} topo show ${MESHTP_NCCL_FILE} --mesh 1x8)
set_tests_properties(cli_calibrate_nccl_tests_topo_show PROPERTIES ENVIRONMENT "${MESHTP_MPI_ENV}"
  TIMEOUT 60 FIXTURES_REQUIRED nccl_calibrated LABELS cli
  PASS_REGULAR_EXPRESSION "dim 1: 1 groups of 8 ranks, stride 1;.* used B'=226.6 GB/s, .*\\(calibrated\\)")
meshtp_failure_test(cli_calibrate_nccl_tests_malformed
                    REGEX "error: '.*malformed_all_reduce_perf.log' line 35: '1048576  262144  float  sum  -1  32.54  32.22' has 7 fields, but the column header on line 16 has 13"
                    COMMAND ${MESHTP_BIN} calibrate --from-nccl-tests
                            ${MESHTP_NCCL_DATA}/malformed_all_reduce_perf.log
                            --base nvswitch-8xa100 --out ${MESHTP_CAL_DIR}/x.json)
meshtp_failure_test(cli_calibrate_nccl_tests_no_base
                    REGEX "error: --from-nccl-tests needs --base TOPOLOGY"
                    COMMAND ${MESHTP_BIN} calibrate --from-nccl-tests
                            ${MESHTP_NCCL_DATA}/all_reduce_perf.log --out ${MESHTP_CAL_DIR}/x.json)
meshtp_failure_test(cli_calibrate_nccl_tests_measuring_flag
                    REGEX "error: --sizes sets what calibrate measures; with --from-nccl-tests nothing is measured"
                    COMMAND ${MESHTP_BIN} calibrate --from-nccl-tests
                            ${MESHTP_NCCL_DATA}/all_reduce_perf.log --base nvswitch-8xa100
                            --sizes 1M,2M --out ${MESHTP_CAL_DIR}/x.json)
meshtp_failure_test(cli_calibrate_min_bytes_alone
                    REGEX "error: --min-bytes needs --from-nccl-tests"
                    NP 2 COMMAND ${MESHTP_BIN} calibrate --min-bytes 1M --out ${MESHTP_CAL_DIR}/x.json)
meshtp_failure_test(cli_calibrate_nccl_tests_base_too_small
                    REGEX "error: '.*all_reduce_perf_2x8.log' times 16 ranks, which do not divide the 8 devices of topology 'nvswitch-8xa100'"
                    COMMAND ${MESHTP_BIN} calibrate --from-nccl-tests
                            ${MESHTP_NCCL_DATA}/all_reduce_perf_2x8.log --base nvswitch-8xa100
                            --out ${MESHTP_CAL_DIR}/x.json)
add_test(NAME cli_calibrate_nccl_tests_json
         COMMAND ${MESHTP_BIN} calibrate --from-nccl-tests ${MESHTP_NCCL_DATA}/all_reduce_perf.log
                 --base nvswitch-8xa100 --out ${MESHTP_CAL_DIR}/nccl-json.json --json)
set_tests_properties(cli_calibrate_nccl_tests_json PROPERTIES ENVIRONMENT "${MESHTP_MPI_ENV}"
  TIMEOUT 60 LABELS cli
  PASS_REGULAR_EXPRESSION "\"largest\":\\{\"busbw_gbps\":230.1,\"bytes\":8589934592,\"error\":-0.01[0-9]*,\"fitted_busbw_gbps\":226.[0-9]*\\}")

# calibrate --from-step-log: a synthetic Megatron-LM log (tests/plan/data/step-logs, made-up
# times) on dgx-a100-1x8; one constant of its sourced ranges fitted (value, source range,
# residual), the topology written; a log without its arguments, or without --base, refused.
set(MESHTP_STEP_LOGS ${PROJECT_SOURCE_DIR}/tests/plan/data/step-logs)
add_test(NAME cli_calibrate_step_log
         COMMAND ${MESHTP_BIN} calibrate --from-step-log ${MESHTP_STEP_LOGS}/megatron-22b-synthetic.log
                 --base dgx-a100-1x8 --fit /device/elementwise_gbps --out ${MESHTP_CAL_DIR}/step-log.json)
set_tests_properties(cli_calibrate_step_log PROPERTIES ENVIRONMENT "${MESHTP_MPI_ENV}"
  TIMEOUT 60 LABELS cli
  PASS_REGULAR_EXPRESSION "dp=1 pp=1 tp=8 m=1 recompute=full; step 1.6 s \\(median of 4 logged iterations, the first dropped\\).*fitted /device/elementwise_gbps = [0-9.]+ \\(source range 1244 … 1815: OUTSIDE\\); priced 1.6[0-9]* s, residual [+-]0.0[0-9]%.*wrote .*step-log.json")
meshtp_failure_test(cli_calibrate_step_log_no_arguments
                    REGEX "error: '?.*no-arguments.log'?: no Megatron-LM arguments block"
                    COMMAND ${MESHTP_BIN} calibrate --from-step-log ${MESHTP_STEP_LOGS}/no-arguments.log
                            --base dgx-a100-1x8 --out ${MESHTP_CAL_DIR}/x.json)
meshtp_failure_test(cli_calibrate_step_log_no_base
                    REGEX "error: --from-step-log needs --base TOPOLOGY"
                    COMMAND ${MESHTP_BIN} calibrate --from-step-log ${MESHTP_STEP_LOGS}/megatron-22b-synthetic.log
                            --out ${MESHTP_CAL_DIR}/x.json)

# calibrate --from-step-log on meshtp's own --metrics (a 2-rank train --model tiny) with this
# machine's calibration (the file of cli_calibrate_np2, whose ranges are its sweeps) as the
# base; the bad metrics files each refused in one line, writing nothing.
add_test(NAME cli_calibrate_step_log_meshtp_metrics
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/calibrate_from_metrics.sh ${MESHTP_CAL_DIR}/metrics
                 ${MESHTP_BIN} ${MESHTP_CAL_FILE} ${MESHTP_MPIEXEC})
set_tests_properties(cli_calibrate_step_log_meshtp_metrics PROPERTIES
  ENVIRONMENT "${MESHTP_MPI_ENV}" TIMEOUT 180 PROCESSORS 2 FIXTURES_REQUIRED calibrated_np2
  LABELS cli PASS_REGULAR_EXPRESSION "ok: calibrate --from-step-log fitted meshtp's metrics")
# Logs of different host counts (the real corpus: a 2-GPU one-host log and a 2 × 8 H100 log):
# each host count's launch cost fitted alone, not one shared (issue 48: 12.86 µs imposed).
set(MESHTP_REAL_DATA ${PROJECT_SOURCE_DIR}/tests/data/real)
add_test(NAME cli_calibrate_nccl_tests_host_counts
         COMMAND ${MESHTP_BIN} calibrate --from-nccl-tests
                 ${MESHTP_REAL_DATA}/all_reduce_perf_nccl_version.log
                 ${MESHTP_REAL_DATA}/all_reduce_perf_h100_2x8.log --base ib-2x8xa100
                 --out ${MESHTP_CAL_DIR}/host-counts.json)
set_tests_properties(cli_calibrate_nccl_tests_host_counts PROPERTIES ENVIRONMENT "${MESHTP_MPI_ENV}"
  TIMEOUT 60 LABELS cli
  PASS_REGULAR_EXPRESSION "the logs span 2 host counts: each host count's launch cost is fitted alone.*group \\(2, stride 1\\): T_launch 0 us, L_sync 10 us.*group \\(16, stride 1\\): T_launch 0 us, L_sync 3.999 us")
# The device from the GPU the log names: an H100 log on an A100 base takes the H100 datasheet's
# device; an A100 log on an A100 preset keeps the base's; the flags override; a GPU without a
# datasheet row keeps the base's and says so.
add_test(NAME cli_calibrate_nccl_tests_gpu_device
         COMMAND ${MESHTP_BIN} calibrate --from-nccl-tests
                 ${MESHTP_REAL_DATA}/all_reduce_perf_h100_2x8.log --base ib-2x8xa100
                 --out ${MESHTP_CAL_DIR}/h100-device.json)
set_tests_properties(cli_calibrate_nccl_tests_gpu_device PROPERTIES ENVIRONMENT "${MESHTP_MPI_ENV}"
  TIMEOUT 60 LABELS cli
  PASS_REGULAR_EXPRESSION "device: the logs' GPU 'NVIDIA H100 80GB HBM3': the H100 SXM5 80GB datasheet's 80 GiB, 791.5 TFLOP/s \\(0.8 of its 989.4 peak\\) and elementwise 2680 GB/s \\(0.8 of its 3350 GB/s\\), not the base's 80 GiB, 250 TFLOP/s \\(NVIDIA H100 Tensor Core GPU datasheet")
add_test(NAME cli_calibrate_nccl_tests_gpu_device_flags
         COMMAND ${MESHTP_BIN} calibrate --from-nccl-tests
                 ${MESHTP_REAL_DATA}/all_reduce_perf_h100_2x8.log --base ib-2x8xa100
                 --memory-gib 94 --tflops 700 --out ${MESHTP_CAL_DIR}/h100-flags.json)
set_tests_properties(cli_calibrate_nccl_tests_gpu_device_flags PROPERTIES ENVIRONMENT "${MESHTP_MPI_ENV}"
  TIMEOUT 60 LABELS cli
  PASS_REGULAR_EXPRESSION "; memory 94 GiB \\(--memory-gib\\); a flat 700 TFLOP/s \\(--tflops\\)")
add_test(NAME cli_calibrate_nccl_tests_gpu_device_matches
         COMMAND ${MESHTP_BIN} calibrate --from-nccl-tests ${MESHTP_NCCL_DATA}/all_reduce_perf.log
                 --base nvswitch-8xa100 --out ${MESHTP_CAL_DIR}/a100-device.json)
set_tests_properties(cli_calibrate_nccl_tests_gpu_device_matches PROPERTIES ENVIRONMENT "${MESHTP_MPI_ENV}"
  TIMEOUT 60 LABELS cli
  PASS_REGULAR_EXPRESSION "device: the base's, which matches the logs' GPU 'NVIDIA A100-SXM4-80GB' \\(A100-SXM4-80GB\\)")
add_test(NAME cli_calibrate_nccl_tests_gpu_device_unknown
         COMMAND ${MESHTP_BIN} calibrate --from-nccl-tests
                 ${MESHTP_REAL_DATA}/all_reduce_perf_nccl_version.log --base pcie-8xa100
                 --out ${MESHTP_CAL_DIR}/rtx-device.json)
set_tests_properties(cli_calibrate_nccl_tests_gpu_device_unknown PROPERTIES ENVIRONMENT "${MESHTP_MPI_ENV}"
  TIMEOUT 60 LABELS cli
  PASS_REGULAR_EXPRESSION "device: the base's: the logs' GPU 'NVIDIA GeForce RTX 4090' has no datasheet row here")
meshtp_failure_test(cli_calibrate_nccl_tests_bad_tflops
                    REGEX "error: --tflops=-1 must be positive"
                    COMMAND ${MESHTP_BIN} calibrate --from-nccl-tests
                            ${MESHTP_REAL_DATA}/all_reduce_perf_h100_2x8.log --base ib-2x8xa100
                            --tflops -1 --out ${MESHTP_CAL_DIR}/x.json)
meshtp_failure_test(cli_calibrate_tflops_alone
                    REGEX "error: --tflops needs --from-nccl-tests"
                    NP 2 COMMAND ${MESHTP_BIN} calibrate --tflops 3 --out ${MESHTP_CAL_DIR}/x.json)
# A base with a GeMM model (dgx-h100-1x8) and A100 logs: the model's peak, bandwidth and SMs
# become the A100's too, not only the flat rate.
add_test(NAME cli_calibrate_nccl_tests_gpu_device_gemm
         COMMAND ${MESHTP_BIN} calibrate --from-nccl-tests ${MESHTP_NCCL_DATA}/all_reduce_perf.log
                 --base dgx-h100-1x8 --out ${MESHTP_CAL_DIR}/a100-on-h100.json --json)
set_tests_properties(cli_calibrate_nccl_tests_gpu_device_gemm PROPERTIES
  ENVIRONMENT "${MESHTP_MPI_ENV}" TIMEOUT 60 LABELS cli
  PASS_REGULAR_EXPRESSION "\"device\":\\{\"elementwise_gbps\":1631.0,\"gemm\":\\{\"efficiency\":0.835,\"kernel_us\":10.0,\"memory_gbps\":2039.0,\"peak_tflops\":312.0,\"split_k_min\":256,\"tile\":\\[128,256\\],\"units\":108\\},\"memory_gib\":80.0,\"tflops\":249.6\\}")
