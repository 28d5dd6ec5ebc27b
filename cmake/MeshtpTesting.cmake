# Test helpers. Open MPI's root and oversubscription switches live here, so ctest works on
# a fresh machine as root with more ranks than cores and nobody has to export anything.
set(MESHTP_MPI_ENV
    OMPI_ALLOW_RUN_AS_ROOT=1
    OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    OMPI_MCA_rmaps_base_oversubscribe=1
    # Oversubscribed ranks must give the core away while they wait.
    OMPI_MCA_mpi_yield_when_idle=1
    OPENBLAS_NUM_THREADS=1
    MESHTP_BLAS_THREADS=1)
set(MESHTP_MPIEXEC ${MPIEXEC_EXECUTABLE} --oversubscribe)

# What every test may include from tests/ itself (error_of.hpp).
add_library(meshtp_test_support INTERFACE)
target_include_directories(meshtp_test_support INTERFACE ${PROJECT_SOURCE_DIR}/tests)

# A single-process GoogleTest executable.
function(meshtp_unit_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main meshtp_warnings
                                        meshtp_test_support)
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "${MESHTP_MPI_ENV}" TIMEOUT 120 LABELS unit)
endfunction()

# A GoogleTest executable run under mpirun at each rank count of NP: tests name_np1, _np2, …
# The main() comes from tests/mpi_main.cpp (MPI init + a result all-reduce so every rank
# agrees on failure).
function(meshtp_mpi_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS;NP" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} meshtp_test_mpi_main meshtp_warnings
                                        meshtp_test_support)
  foreach(np IN LISTS ARG_NP)
    add_test(NAME ${name}_np${np}
             COMMAND ${MESHTP_MPIEXEC} -np ${np} $<TARGET_FILE:${name}>)
    set_tests_properties(${name}_np${np} PROPERTIES
      ENVIRONMENT "${MESHTP_MPI_ENV}" TIMEOUT 300 LABELS mpi PROCESSORS 2)
  endforeach()
endfunction()

# A command that must fail: non-zero exit, and its output must match REGEX (the error
# message names the bad value). Runs under a timeout, so a hang is a failure too.
function(meshtp_failure_test name)
  cmake_parse_arguments(ARG "" "REGEX;NP" "COMMAND" ${ARGN})
  if(ARG_NP)
    set(cmd ${MESHTP_MPIEXEC} -np ${ARG_NP} ${ARG_COMMAND})
  else()
    set(cmd ${ARG_COMMAND})
  endif()
  add_test(NAME ${name}
           COMMAND ${PROJECT_SOURCE_DIR}/tests/expect_failure.sh "${ARG_REGEX}" ${cmd})
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "${MESHTP_MPI_ENV}" TIMEOUT 120
                                          LABELS failure)
endfunction()
