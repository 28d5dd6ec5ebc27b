# One slice count S from every command to the 2D GeMM: SUMMA's S = 3 on a 2x1 mesh is
# Kp = lcm(2, 1)·3 = 6 panels, which divide none of these k (16, 32, 64). Each command must
# fail in gemm2d's own check naming S = 3 and Kp = 6: a command that converted S (to panels,
# or panels per block) or dropped it would name another number, or run. Included from
# tests/cli/CMakeLists.txt.
set(MESHTP_S3_REGEX "error: .*SUMMA slices=3 cuts k=[0-9]+ into Kp = lcm\\(Nr, Nc\\)·S = 2·3 = 6 panels")
set(MESHTP_S3_PLAN ${PROJECT_SOURCE_DIR}/tests/data/plans/summa_2x1_s3.json)
set(MESHTP_BLOCK_FILES ${CMAKE_BINARY_DIR}/tests/model/block_files)

meshtp_failure_test(cli_slices_reach_gemm2d_gemm REGEX "${MESHTP_S3_REGEX}"
  NP 2 COMMAND $<TARGET_FILE:meshtp> gemm --a ${GEMM2D_OS} --b ${GEMM2D_OS} --mesh 2x1
               --algo summa --slices 3 --out ${GEMM2D_OUT})
meshtp_failure_test(cli_slices_reach_gemm2d_block REGEX "${MESHTP_S3_REGEX}"
  NP 2 COMMAND $<TARGET_FILE:meshtp> block --weights ${MESHTP_BLOCK_FILES}/weights.safetensors
               --input ${MESHTP_BLOCK_FILES}/x.safetensors --mesh 2x1 --strategy summa
               --slices 3 --out ${MESHTP_BLOCK_FILES}/out_slices.safetensors)
set_tests_properties(cli_slices_reach_gemm2d_block PROPERTIES FIXTURES_REQUIRED model_block_files)
meshtp_failure_test(cli_slices_reach_gemm2d_block_plan REGEX "${MESHTP_S3_REGEX}"
  NP 2 COMMAND $<TARGET_FILE:meshtp> block --weights ${MESHTP_BLOCK_FILES}/weights.safetensors
               --input ${MESHTP_BLOCK_FILES}/x.safetensors --plan ${MESHTP_S3_PLAN}
               --out ${MESHTP_BLOCK_FILES}/out_slices.safetensors)
set_tests_properties(cli_slices_reach_gemm2d_block_plan
                     PROPERTIES FIXTURES_REQUIRED model_block_files)
meshtp_failure_test(cli_slices_reach_gemm2d_bench_layer REGEX "${MESHTP_S3_REGEX}"
  NP 2 COMMAND $<TARGET_FILE:meshtp> bench layer --mesh 2x1 --strategy summa --slices 3
               --hidden 64 --heads 4 --seq 8 --batch 2 --layers 1 --seconds 0.01)
meshtp_failure_test(cli_slices_reach_gemm2d_train_plan REGEX "${MESHTP_S3_REGEX}"
  NP 2 COMMAND $<TARGET_FILE:meshtp> train --model tiny --plan ${MESHTP_S3_PLAN} --steps 1
               --dry-run)
meshtp_failure_test(cli_slices_reach_gemm2d_train_flags REGEX "${MESHTP_S3_REGEX}"
  NP 2 COMMAND $<TARGET_FILE:meshtp> train --model tiny --mesh 2x1 --strategy summa --slices 3
               --steps 1 --dry-run)
meshtp_failure_test(cli_slices_reach_gemm2d_simulate_plan REGEX "${MESHTP_S3_REGEX}"
  COMMAND $<TARGET_FILE:meshtp> simulate --topology nvlink-network-2 --model tiny --devices 2
          --plan ${MESHTP_S3_PLAN} --predict-only)
meshtp_failure_test(cli_slices_reach_gemm2d_simulate_flags REGEX "${MESHTP_S3_REGEX}"
  COMMAND $<TARGET_FILE:meshtp> simulate --topology nvlink-network-2 --model tiny --devices 2
          --mesh 2x1 --strategy summa --slices 3 --predict-only)
