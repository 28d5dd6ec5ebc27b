# meshtp gemm: distributed results checked from outside (a pure-Python product of the same
# safetensors inputs), and every bad input failing with its message. Included from
# tests/cli/CMakeLists.txt.
set(GEMM2D_DATA ${PROJECT_SOURCE_DIR}/tests/data/gemm2d)
find_package(Python3 COMPONENTS Interpreter)

# name NP MESH ALGO DATAFLOW SLICES: run meshtp gemm, then check_product.py on its output.
function(meshtp_gemm_cli_test name np mesh algo dataflow slices)
  set(input ${GEMM2D_DATA}/${dataflow}.safetensors)
  set(output ${CMAKE_CURRENT_BINARY_DIR}/${name}.safetensors)
  add_test(NAME ${name}
           COMMAND sh -c "\"$0\" \"$@\" && ${Python3_EXECUTABLE} ${GEMM2D_DATA}/check_product.py ${input} ${output} ${dataflow}"
                   ${MESHTP_MPIEXEC} -np ${np} $<TARGET_FILE:meshtp> gemm --a ${input} --b ${input}
                   --mesh ${mesh} --algo ${algo} --dataflow ${dataflow} --slices ${slices}
                   --out ${output} --check)
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "${MESHTP_MPI_ENV}" TIMEOUT 120
    PROCESSORS 2 PASS_REGULAR_EXPRESSION "max abs difference 0\n")
endfunction()

if(Python3_Interpreter_FOUND)
  meshtp_gemm_cli_test(cli_gemm_meshslice_os_np4 4 2x2 meshslice os 2)
  meshtp_gemm_cli_test(cli_gemm_meshslice_ls_np4 4 1x4 meshslice ls 3)
  meshtp_gemm_cli_test(cli_gemm_wang_rs_np2 2 2x1 wang rs 1)
  meshtp_gemm_cli_test(cli_gemm_cannon_ls_np4 4 2x2 cannon ls 1)
  meshtp_gemm_cli_test(cli_gemm_summa_rs_np4 4 4x1 summa rs 2)
  meshtp_gemm_cli_test(cli_gemm_collective_os_np2 2 1x2 collective os 1)
endif()

set(GEMM2D_OS ${GEMM2D_DATA}/os.safetensors)
set(GEMM2D_OUT ${CMAKE_CURRENT_BINARY_DIR}/gemm2d_failure.safetensors)
meshtp_failure_test(cli_gemm_slices_do_not_divide
  REGEX "error: MeshSlice slices=3 does not divide the local k extents k/Nr=16 and k/Nc=8"
  NP 2 COMMAND $<TARGET_FILE:meshtp> gemm --a ${GEMM2D_OS} --b ${GEMM2D_OS} --mesh 1x2
               --algo meshslice --slices 3 --out ${GEMM2D_OUT})
meshtp_failure_test(cli_gemm_dim_not_divisible_by_mesh
  REGEX "error: m=9 is not divisible by mesh dim 0 \\(size 2\\)"
  NP 2 COMMAND $<TARGET_FILE:meshtp> gemm --a ${GEMM2D_DATA}/odd_m.safetensors
               --b ${GEMM2D_DATA}/odd_m.safetensors --mesh 2x1 --algo collective
               --out ${GEMM2D_OUT})
meshtp_failure_test(cli_gemm_cannon_rectangular_mesh
  REGEX "error: Cannon's algorithm needs a square mesh, got 1x2"
  NP 2 COMMAND $<TARGET_FILE:meshtp> gemm --a ${GEMM2D_OS} --b ${GEMM2D_OS} --mesh 1x2
               --algo cannon --out ${GEMM2D_OUT})
meshtp_failure_test(cli_gemm_wrong_tensor_names
  REGEX "error: missing tensor 'a' in .*wrong_names.safetensors \\(it has: x, y\\)"
  NP 2 COMMAND $<TARGET_FILE:meshtp> gemm --a ${GEMM2D_DATA}/wrong_names.safetensors
               --b ${GEMM2D_OS} --mesh 1x2 --out ${GEMM2D_OUT})
meshtp_failure_test(cli_gemm_shapes_do_not_chain
  REGEX "error: A \\[8, 16\\] and B \\[12, 16\\] do not chain for os"
  NP 2 COMMAND $<TARGET_FILE:meshtp> gemm --a ${GEMM2D_OS} --b ${GEMM2D_DATA}/ls.safetensors
               --mesh 1x2 --out ${GEMM2D_OUT})
meshtp_failure_test(cli_gemm_mesh_not_2d
  REGEX "error: --mesh 2 is not a 2D mesh"
  NP 2 COMMAND $<TARGET_FILE:meshtp> gemm --a ${GEMM2D_OS} --b ${GEMM2D_OS} --mesh 2
               --out ${GEMM2D_OUT})
meshtp_failure_test(cli_gemm_unknown_algo
  REGEX "error: unknown 2D GeMM algorithm 'fox'"
  NP 2 COMMAND $<TARGET_FILE:meshtp> gemm --a ${GEMM2D_OS} --b ${GEMM2D_OS} --mesh 1x2
               --algo fox --out ${GEMM2D_OUT})

# meshtp bench gemm2d: a tiny smoke run (benchmarks are never timed tests) and its inputs.
add_test(NAME cli_bench_gemm2d_np4
         COMMAND ${MESHTP_MPIEXEC} -np 4 $<TARGET_FILE:meshtp> bench gemm2d --m 64 --n 32
                 --k 32 --mesh 2x2 --algo all --dataflow ls --slices 1,2 --seconds 0.001)
set_tests_properties(cli_bench_gemm2d_np4 PROPERTIES ENVIRONMENT "${MESHTP_MPI_ENV}"
  TIMEOUT 120 PROCESSORS 2 PASS_REGULAR_EXPRESSION "meshslice S=2 .*\n")
add_test(NAME cli_bench_gemm2d_json_np2
         COMMAND ${MESHTP_MPIEXEC} -np 2 $<TARGET_FILE:meshtp> bench gemm2d --m 32 --n 32
                 --k 64 --mesh 2x1 --algo wang,meshslice --slices 4 --seconds 0.001 --json)
set_tests_properties(cli_bench_gemm2d_json_np2 PROPERTIES ENVIRONMENT "${MESHTP_MPI_ENV}"
  TIMEOUT 120 PROCESSORS 2 PASS_REGULAR_EXPRESSION "\"case\":\"meshslice S=4\"")
meshtp_failure_test(cli_bench_gemm2d_cannon_only_on_rectangle
  REGEX "error: bench gemm2d: no requested algorithm runs here \\(cannon skipped: Cannon's algorithm needs a square mesh"
  NP 2 COMMAND $<TARGET_FILE:meshtp> bench gemm2d --m 32 --n 32 --k 32 --mesh 1x2 --algo cannon)
meshtp_failure_test(cli_bench_gemm2d_not_divisible
  REGEX "error: k=30 is not divisible by mesh dim 1 \\(size 4\\)"
  NP 4 COMMAND $<TARGET_FILE:meshtp> bench gemm2d --m 32 --n 32 --k 30 --mesh 1x4)

# --device cuda (the CUDA plugin, src/cli/cuda_plugin.hpp). Where no GPU answers (this
# machine: CUDA reports cudaErrorInsufficientDriver), every rank fails with one line naming
# CUDA's error, non-zero, no hang; where a GPU answers they are skipped (exit 77) and
# scripts/gpu-check.sh runs the real thing.
function(meshtp_gemm_cuda_failure_test name regex)
  add_test(NAME ${name}
           COMMAND sh -c "if \"$0\" probe | grep -q '^GPU: none'; then exec \"$@\"; fi; exit 77"
                   $<TARGET_FILE:meshtp-gpu> ${PROJECT_SOURCE_DIR}/tests/expect_failure.sh
                   "${regex}" ${ARGN})
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "${MESHTP_MPI_ENV}" TIMEOUT 120
                       LABELS failure SKIP_RETURN_CODE 77)
endfunction()
if(MESHTP_HAVE_CUDA)
  set(GEMM2D_NO_GPU "error: --device cuda: no GPU to run on: no CUDA device: cudaError[A-Za-z]+ \\(")
  meshtp_gemm_cuda_failure_test(cli_gemm_cuda_no_gpu_np1 "${GEMM2D_NO_GPU}"
    ${MESHTP_MPIEXEC} -np 1 $<TARGET_FILE:meshtp> gemm --a ${GEMM2D_OS} --b ${GEMM2D_OS}
    --mesh 1x1 --out ${GEMM2D_OUT} --device cuda)
  meshtp_gemm_cuda_failure_test(cli_gemm_cuda_no_gpu_np2 "${GEMM2D_NO_GPU}"
    ${MESHTP_MPIEXEC} -np 2 $<TARGET_FILE:meshtp> gemm --a ${GEMM2D_OS} --b ${GEMM2D_OS}
    --mesh 1x2 --out ${GEMM2D_OUT} --device cuda --collectives host-staged)
  meshtp_gemm_cuda_failure_test(cli_gemm_cuda_no_gpu_no_mpirun "${GEMM2D_NO_GPU}"
    $<TARGET_FILE:meshtp> gemm --a ${GEMM2D_OS} --b ${GEMM2D_OS} --mesh 1x1 --out ${GEMM2D_OUT}
    --device cuda --collectives nccl)
  meshtp_gemm_cuda_failure_test(cli_bench_gemm2d_cuda_no_gpu_np2 "${GEMM2D_NO_GPU}"
    ${MESHTP_MPIEXEC} -np 2 $<TARGET_FILE:meshtp> bench gemm2d --m 64 --n 64 --k 64 --mesh 1x2
    --device cuda)
  # The training loop: every rank fails alike before any step (train --device cuda).
  meshtp_gemm_cuda_failure_test(cli_train_cuda_no_gpu_np2 "${GEMM2D_NO_GPU}"
    ${MESHTP_MPIEXEC} -np 2 $<TARGET_FILE:meshtp> train --model tiny --mesh 1x2 --steps 1
    --device cuda)
  # The plugin missing beside meshtp: the error names the path it looked for and dlopen's reason.
  meshtp_failure_test(cli_gemm_cuda_without_plugin
    REGEX "error: --device cuda: cannot load the CUDA plugin /[^ ]*/libmeshtp_cuda.so: .*No such file"
    COMMAND sh -c "d=$(mktemp -d) && trap 'rm -rf \"$d\"' EXIT && cp \"$0\" \"$d/meshtp\" && \"$d/meshtp\" gemm --a \"$1\" --b \"$1\" --mesh 1x1 --out \"$2\" --device cuda"
            $<TARGET_FILE:meshtp> ${GEMM2D_OS} ${GEMM2D_OUT})
endif()
# Refused before any GPU is looked for, with or without CUDA.
meshtp_failure_test(cli_gemm_cuda_collectives_mpi
  REGEX "error: --collectives mpi moves host memory, but --device cuda keeps tensors in device memory"
  NP 2 COMMAND $<TARGET_FILE:meshtp> gemm --a ${GEMM2D_OS} --b ${GEMM2D_OS} --mesh 1x2
               --out ${GEMM2D_OUT} --device cuda --collectives mpi)
meshtp_failure_test(cli_bench_gemm2d_cuda_collectives_mpi
  REGEX "error: --collectives mpi moves host memory, but --device cuda"
  NP 2 COMMAND $<TARGET_FILE:meshtp> bench gemm2d --m 64 --n 64 --k 64 --mesh 1x2
               --device cuda --collectives mpi)
meshtp_failure_test(cli_gemm_cpu_collectives_nccl
  REGEX "error: --collectives nccl moves device memory, but --device cpu"
  NP 2 COMMAND $<TARGET_FILE:meshtp> gemm --a ${GEMM2D_OS} --b ${GEMM2D_OS} --mesh 1x2
               --out ${GEMM2D_OUT} --collectives nccl)
