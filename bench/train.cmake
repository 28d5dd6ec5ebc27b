# The training-step profile (bench train), one rank of a layout alone (bench rank), the
# elementwise kernels (bench elementwise), what calibrate and bench plan measure, and the BLAS
# baseline of the layer and training benchmarks. Included from bench/CMakeLists.txt.
target_sources(meshtp_bench PRIVATE blas_reference.cpp phase_profile.cpp train_profile.cpp
                                    elementwise_kernels.cpp calibration.cpp plan_validation.cpp
                                    rank_profile.cpp)
target_link_libraries(meshtp_bench PUBLIC meshtp_train meshtp_plan)
