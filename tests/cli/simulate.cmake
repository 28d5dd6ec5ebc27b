# meshtp simulate: bad input is an error naming the value before any simulation starts.
set(MESHTP_SIM_DATA ${PROJECT_SOURCE_DIR}/tests/data/simulate)
meshtp_failure_test(cli_simulate_mesh_not_devices
                    REGEX "error: the layout dp=1 × pp=1 × mesh 2x2 = 4 ranks, but there are 8 \\(--devices\\)"
                    COMMAND ${MESHTP_BIN} simulate --topology pcie-8xa100 --model tiny --devices 8
                            --mesh 2x2)
meshtp_failure_test(cli_simulate_devices_not_topology
                    REGEX "error: topology 'pcie-8xa100' has 8 devices but --devices is 16"
                    COMMAND ${MESHTP_BIN} simulate --topology pcie-8xa100 --model tiny --devices 16)
meshtp_failure_test(cli_simulate_unknown_strategy
                    REGEX "error: unknown strategy 'foo'"
                    COMMAND ${MESHTP_BIN} simulate --topology pcie-8xa100 --model tiny --devices 8
                            --mesh 4x2 --strategy foo)
# cli_simulate_NAME: simulating a 2x2 mesh on the topology file NAME.json fails with REGEX.
function(meshtp_bad_topology_test name regex)
  meshtp_failure_test(cli_simulate_${name} REGEX "${regex}"
                      COMMAND ${MESHTP_BIN} simulate --topology ${MESHTP_SIM_DATA}/${name}.json
                              --model tiny --devices 4 --mesh 2x2)
endfunction()
meshtp_bad_topology_test(disconnected "error: disconnected graph: device 'dev3' cannot be reached")
meshtp_bad_topology_test(zero_bandwidth "link 3: bandwidth gbps=0 must be positive")
meshtp_bad_topology_test(negative_bandwidth "link 1: bandwidth gbps=-5 must be positive")
meshtp_bad_topology_test(shared_device "error: topology '[^']*shared_device.json', graph: \
placement: ranks 0 and 1 are both placed on device 2")
# A platform SimGrid cannot load, though every number passes the topology's checks: the
# conversion to SimGrid's units overflows to inf (SimGrid would abort inside smpirun).
meshtp_bad_topology_test(overflow_bandwidth
                         "error: link 'l3': bandwidth: gbps=1e\\+300 is inf Bps in SimGrid's units")
meshtp_failure_test(cli_simulate_overflow_speed
                    REGEX "error: platform: device speed: tflops=1e\\+300 is inf f in SimGrid's units"
                    COMMAND ${MESHTP_BIN} topo platform ${MESHTP_SIM_DATA}/overflow_speed.json
                            --out overflow_speed_platform)
# --predict-only: the planner's side alone (no simulator needed), best first; on ATP IC1 the
# chunked (2, 4) mesh leads (the two mesh dims' all-reduces pipeline over the chunks), at
# 96.2 ms: atp-m1 is an fp16 model, priced (and simulated) with 2-byte elements since the
# simulator runs the model's precision (190.7 ms when both moved fp32).
add_test(NAME cli_simulate_predict_only
         COMMAND ${MESHTP_BIN} simulate --topology pcie-8xa100 --model atp-m1 --devices 8
                 --top 3 --strategies atp,megatron --predict-only)
set_tests_properties(cli_simulate_predict_only PROPERTIES ENVIRONMENT "${MESHTP_MPI_ENV}"
  TIMEOUT 60 LABELS cli
  PASS_REGULAR_EXPRESSION "nothing simulated\n.*\n  atp 2x4 chunks=4 +96\\.2[0-9]+ ")

# scripts/reproduce_papers.py (the suite behind scripts/reproduce-papers.sh): a filter naming
# no algorithm or kind fails before any case is simulated, naming the value and the choices.
if(Python3_Interpreter_FOUND)
  meshtp_failure_test(cli_reproduce_papers_unknown_algorithm
                      REGEX "error: --algorithms: unknown algorithm 'bogus' \\(meshslice, collective, wang, summa, cannon\\)"
                      COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/reproduce_papers.py
                              ${CMAKE_CURRENT_BINARY_DIR}/reproduce_bad --algorithms cannon,bogus)
  meshtp_failure_test(cli_reproduce_papers_unknown_what
                      REGEX "--what: invalid choice: 'step'"
                      COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/reproduce_papers.py
                              ${CMAKE_CURRENT_BINARY_DIR}/reproduce_bad --what step)
endif()
# A layout flag without a mesh is refused, not dropped (the planner would choose another
# layout and the flag would silently not apply).
meshtp_failure_test(cli_simulate_strategy_without_mesh
                    REGEX "error: --strategy needs --mesh d1xd2: without a mesh the planner chooses the whole layout"
                    COMMAND ${MESHTP_BIN} simulate --topology pcie-8xa100 --model tiny --devices 8
                            --strategy cannon --predict-only)
meshtp_failure_test(cli_simulate_slices_without_mesh
                    REGEX "error: --slices needs --mesh d1xd2"
                    COMMAND ${MESHTP_BIN} simulate --topology pcie-8xa100 --model tiny --devices 8
                            --slices 2 --predict-only)
# A plan made for another batch of the same model runs, with a warning (other sizes are an
# error: tests/faults/bad_inputs.sh); it must also still run: the prediction line follows.
add_test(NAME cli_simulate_plan_for_another_batch
         COMMAND sh -c "d=$(mktemp -d) && \"$0\" plan --topology nvlink-network-2 --model tiny --out \"$d/p.json\" >/dev/null && \"$0\" simulate --topology nvlink-network-2 --model tiny --devices 2 --batch 4 --plan \"$d/p.json\" --predict-only 2>&1; rc=$?; rm -rf \"$d\"; exit $rc"
                 ${MESHTP_BIN})
set_tests_properties(cli_simulate_plan_for_another_batch PROPERTIES
  ENVIRONMENT "${MESHTP_MPI_ENV}" TIMEOUT 60 LABELS cli
  PASS_REGULAR_EXPRESSION "warning: --plan .*/p.json was made for another batch \\(batch 8 ≠ 4\\): its layout runs.*\n.*nothing simulated\n.*\n  megatron 2x1")
# Ctrl-C on a running simulation ends smpirun and every simulated process, removes the
# temporary directory and exits 130 (needs the simulated build, like the tests above).
add_test(NAME cli_simulate_interrupt
         COMMAND ${PROJECT_SOURCE_DIR}/tests/cli/simulate_interrupt.sh ${MESHTP_BIN})
set_tests_properties(cli_simulate_interrupt PROPERTIES ENVIRONMENT "${MESHTP_MPI_ENV}"
                     TIMEOUT 120 PROCESSORS 2 LABELS faults)
