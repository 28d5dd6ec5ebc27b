# The 2D GeMM benchmark driver and its ScaLAPACK baseline. Included from bench/CMakeLists.txt.
target_sources(meshtp_bench PRIVATE gemm2d.cpp)
target_link_libraries(meshtp_bench PUBLIC meshtp_parallel)
# Debian's libscalapack-openmpi-dev (BLACS included); without it the baseline column is
# skipped with a note. The simulated build never links it (it is built on Open MPI).
if(NOT MESHTP_SIMULATE)
  find_library(MESHTP_SCALAPACK_LIBRARY NAMES scalapack-openmpi scalapack)
endif()
if(MESHTP_SCALAPACK_LIBRARY)
  target_sources(meshtp_bench PRIVATE scalapack_gemm.cpp)
  target_compile_definitions(meshtp_bench PRIVATE MESHTP_HAVE_SCALAPACK)
  target_link_libraries(meshtp_bench PRIVATE ${MESHTP_SCALAPACK_LIBRARY})
elseif(NOT MESHTP_SIMULATE)
  message(STATUS "ScaLAPACK not found: bench gemm2d runs without the psgemm baseline")
endif()
