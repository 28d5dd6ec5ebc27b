# meshtp simulate: bad input is an error naming the value before any simulation starts.
set(MESHTP_SIM_DATA ${PROJECT_SOURCE_DIR}/tests/data/simulate)
meshtp_failure_test(cli_simulate_mesh_not_devices
                    REGEX "error: --mesh 2x2 has 4 devices but --devices is 8"
                    COMMAND ${MESHTP_BIN} simulate --topology pcie-8xa100 --model tiny --devices 8
                            --mesh 2x2)
meshtp_failure_test(cli_simulate_devices_not_topology
                    REGEX "error: topology 'pcie-8xa100' has 8 devices but --devices is 16"
                    COMMAND ${MESHTP_BIN} simulate --topology pcie-8xa100 --model tiny --devices 16)
meshtp_failure_test(cli_simulate_disconnected
                    REGEX "error: disconnected graph: device 'dev3' cannot be reached"
                    COMMAND ${MESHTP_BIN} simulate --topology ${MESHTP_SIM_DATA}/disconnected.json
                            --model tiny --devices 4 --mesh 2x2)
meshtp_failure_test(cli_simulate_zero_bandwidth
                    REGEX "link 3: bandwidth gbps=0 must be positive"
                    COMMAND ${MESHTP_BIN} simulate --topology ${MESHTP_SIM_DATA}/zero_bandwidth.json
                            --model tiny --devices 4 --mesh 2x2)
meshtp_failure_test(cli_simulate_unknown_strategy
                    REGEX "error: unknown strategy 'foo'"
                    COMMAND ${MESHTP_BIN} simulate --topology pcie-8xa100 --model tiny --devices 8
                            --mesh 4x2 --strategy foo)
