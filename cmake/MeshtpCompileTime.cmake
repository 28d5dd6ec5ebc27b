# Compile time: unity builds and precompiled headers (measured in docs/building.md).
#
# Why. Most of a fresh build's compiler time was not meshtp's own code but the same
# third-party code compiled again in every object: CLI11 (header-only in Debian's 2.1) costs
# 4.6 s of CPU to parse and about 7 s once a file registers one option — and each of the 18
# command files did; GoogleTest costs 2.0 s, nlohmann-json 1.6 s, fmt 1.0 s per object, plus
# their templates instantiated and optimised anew in each. Two standard CMake features remove
# the repetition:
#
# * Unity builds (MESHTP_UNITY_BUILD): a target's sources are compiled a batch at a time as
#   one translation unit, so shared headers and template instantiations are compiled once per
#   batch. The command line's 18 files become 2 objects (two, so both cores work). A unity
#   build needs every file-local name to be unique within its target: two files that define
#   the same helper are an error here, which is the point — the helper belongs in one place.
#   A file that must not see the macros of the files before it stays out of the batches
#   (SKIP_UNITY_BUILD_INCLUSION: the simulated build's comm/smpi_glue.cpp and smpi_device.cpp).
# * Precompiled headers (MESHTP_PRECOMPILED_HEADERS), three tiers:
#     meshtp_pch_lib   the standard library, fmt, nlohmann-json: every library and tool
#     meshtp_pch_test  the above and GoogleTest: every target that links GoogleTest
#     meshtp (the CLI) the above and CLI11: its own, the only target that parses CLI11
#     meshtp_pch_pic   meshtp_pch_lib's headers compiled -fPIC, for the libraries the Python
#                      module links (POSITION_INDEPENDENT_CODE: src/python/CMakeLists.txt)
#   A target reuses its tier's header (REUSE_FROM), so each is compiled once per build.
#   Not used where GCC cannot: the simulated build (smpicxx force-includes SMPI's headers
#   ahead of ours and a precompiled header must come first), targets with their own
#   code-generation flags (the SIMD kernels, ops' math flags: GCC rejects a header
#   precompiled with other -f options) and shared libraries (-fPIC). A mismatch is an error,
#   not a silently slow build: CMake passes -Winvalid-pch and meshtp_warnings has -Werror.
#
# Both hide a missing #include (a file compiles with what its batch-mates or the
# precompiled header brought in). -DMESHTP_UNITY_BUILD=OFF -DMESHTP_PRECOMPILED_HEADERS=OFF
# checks every file on its own (scripts/bench-build.sh --configs plain).
option(MESHTP_UNITY_BUILD "Compile each target's sources in batches (unity build)" ON)
option(MESHTP_PRECOMPILED_HEADERS "Precompile the heavy third-party headers" ON)

# Must be set before the targets are made: it is their UNITY_BUILD property's default.
set(CMAKE_UNITY_BUILD ${MESHTP_UNITY_BUILD})
set(CMAKE_UNITY_BUILD_BATCH_SIZE 8)

set(MESHTP_PCH_STD
    <algorithm> <array> <atomic> <chrono> <cmath> <cstdint> <cstdio> <cstdlib> <cstring>
    <filesystem> <fstream> <functional> <map> <memory> <mutex> <numeric> <optional> <set>
    <span> <sstream> <stdexcept> <string> <string_view> <thread> <tuple> <unordered_map>
    <utility> <variant> <vector>)
set(MESHTP_PCH_THIRD_PARTY <fmt/format.h> <fmt/ranges.h> <nlohmann/json.hpp>)

# Targets that keep their own flags (see above).
# The GPU backend's and NCCL transport's objects, shared with the CUDA plugin (src/device).
set(MESHTP_PCH_EXCLUDE meshtp_ops meshtp_kernels_4 meshtp_kernels_8 meshtp_kernels_16
                       meshtp_device_gpu_objects meshtp_comm_nccl_objects)

# The build-system targets defined in DIR and below.
function(meshtp_targets_below dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    meshtp_targets_below(${sub} below)
    list(APPEND targets ${below})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# A tier's provider: an object library of one empty source whose precompiled header the tier's
# targets reuse. It links what they link that changes the headers' meaning (fmt::fmt defines
# FMT_SHARED, GTest::gtest GTEST_* macros; meshtp_warnings the -W flags), so the precompiled
# header matches their flags.
function(meshtp_pch_provider name)
  cmake_parse_arguments(ARG "" "" "HEADERS;LIBS" ${ARGN})
  add_library(${name} OBJECT ${PROJECT_SOURCE_DIR}/cmake/pch_anchor.cpp)
  target_link_libraries(${name} PRIVATE fmt::fmt nlohmann_json::nlohmann_json meshtp_warnings
                                        ${ARG_LIBS})
  target_precompile_headers(${name} PRIVATE ${ARG_HEADERS})
endfunction()

# Called once, after every subdirectory is added: the CLI's unity batches, and every eligible
# target's precompiled header.
function(meshtp_apply_compile_time_settings)
  # The CLI's 18 files in two batches: CLI11 compiled twice, and both cores busy.
  set_target_properties(meshtp PROPERTIES UNITY_BUILD_BATCH_SIZE 9)
  message(STATUS "meshtp: unity build ${MESHTP_UNITY_BUILD} (-DMESHTP_UNITY_BUILD=OFF to build "
                 "file by file)")

  if(NOT MESHTP_PRECOMPILED_HEADERS OR MESHTP_SIMULATE)
    message(STATUS "meshtp: precompiled headers off")
    return()
  endif()
  meshtp_pch_provider(meshtp_pch_lib HEADERS ${MESHTP_PCH_STD} ${MESHTP_PCH_THIRD_PARTY})
  if(BUILD_TESTING)
    meshtp_pch_provider(meshtp_pch_test HEADERS ${MESHTP_PCH_STD} ${MESHTP_PCH_THIRD_PARTY}
                        <gtest/gtest.h> LIBS GTest::gtest)
  endif()
  if(MESHTP_HAVE_PYTHON)
    meshtp_pch_provider(meshtp_pch_pic HEADERS ${MESHTP_PCH_STD} ${MESHTP_PCH_THIRD_PARTY})
    set_target_properties(meshtp_pch_pic PROPERTIES POSITION_INDEPENDENT_CODE ON)
  endif()
  # The CLI: its own header, with CLI11 (src/cli/cli11.hpp is how its sources include it).
  target_precompile_headers(meshtp PRIVATE ${MESHTP_PCH_STD} ${MESHTP_PCH_THIRD_PARTY}
                            <CLI/CLI.hpp>)

  meshtp_targets_below(${PROJECT_SOURCE_DIR} targets)
  set(used 0)
  foreach(t IN LISTS targets)
    get_target_property(type ${t} TYPE)
    if(t MATCHES "^meshtp_pch_" OR t STREQUAL "meshtp" OR t IN_LIST MESHTP_PCH_EXCLUDE
       OR NOT type MATCHES "^(STATIC_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
      continue()
    endif()
    # GoogleTest's targets define GTEST_* macros its header reads: only a target that links
    # it (directly or through the MPI test main) may reuse the header precompiled with it.
    get_target_property(libs ${t} LINK_LIBRARIES)
    get_target_property(pic ${t} POSITION_INDEPENDENT_CODE)
    if(pic)
      target_precompile_headers(${t} REUSE_FROM meshtp_pch_pic)
    elseif(BUILD_TESTING AND "${libs}" MATCHES "GTest::|meshtp_(sim_)?test_mpi_main")
      target_precompile_headers(${t} REUSE_FROM meshtp_pch_test)
    else()
      target_precompile_headers(${t} REUSE_FROM meshtp_pch_lib)
    endif()
    math(EXPR used "${used} + 1")
  endforeach()
  message(STATUS "meshtp: precompiled headers on (${used} targets reuse a tier's; "
                 "-DMESHTP_PRECOMPILED_HEADERS=OFF to build without)")
endfunction()
