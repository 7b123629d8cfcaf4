# Shared build rules: warnings, sanitizers and the three kinds of target
# (library, unit test, engine) every module uses.
find_package(Threads REQUIRED)
find_package(ZLIB REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(GTest REQUIRED)

add_library(tailscope_flags INTERFACE)
target_compile_options(tailscope_flags INTERFACE -Wall -Wextra -Werror)
target_include_directories(tailscope_flags INTERFACE ${PROJECT_SOURCE_DIR}/native)

# A sanitizer report needs function names, files and lines in its stack traces,
# not the types and locals full debug info describes: line tables only (gcc -g1,
# clang -gline-tables-only) compile the sanitizer trees in about a fifth less
# time (docs/testing.md). -O1 stays: gcc's UBSan object-size check finds
# nothing at -O0, and TSan's run time wants the optimizer.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  set(TAILSCOPE_SANITIZER_DEBUG -g1)
else()
  set(TAILSCOPE_SANITIZER_DEBUG -gline-tables-only)
endif()
if(TAILSCOPE_SANITIZER STREQUAL "asan")
  target_compile_options(tailscope_flags INTERFACE
    -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
    ${TAILSCOPE_SANITIZER_DEBUG} -O1)
  target_link_options(tailscope_flags INTERFACE -fsanitize=address,undefined)
elseif(TAILSCOPE_SANITIZER STREQUAL "tsan")
  target_compile_options(tailscope_flags INTERFACE -fsanitize=thread -fno-omit-frame-pointer
    ${TAILSCOPE_SANITIZER_DEBUG} -O1)
  target_link_options(tailscope_flags INTERFACE -fsanitize=thread)
elseif(NOT TAILSCOPE_SANITIZER STREQUAL "")
  message(FATAL_ERROR "TAILSCOPE_SANITIZER must be '', asan or tsan (got '${TAILSCOPE_SANITIZER}')")
endif()

# tailscope_library(NAME SOURCES a.cc b.cc DEPS other_lib ...)
function(tailscope_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_link_libraries(${name} PUBLIC tailscope_flags ${ARG_DEPS})
endfunction()

# tailscope_tests: every unit-test binary and nothing else. The sanitizer trees
# build this target instead of `all` (make build-asan / build-tsan), so a
# library no test links (tailscope_asyncbench, the engines' own code) is never
# compiled under a sanitizer.
add_custom_target(tailscope_tests)

# Precompiled headers (TAILSCOPE_PCH, off by default until a whole tree has been
# built with it; docs/testing.md has the measured gain): gtest and nlohmann/json are
# parsed by most test files and many libraries, in three trees. One PCH, built
# once per tree by tailscope_test_pch, is reused by every unit test (REUSE_FROM:
# valid because every test compiles with the same tailscope_flags); multi-file
# libraries that include nlohmann/json get their own. ccache keeps hitting with
# PCH only with sloppiness=pch_defines,time_macros (the Makefile exports it) and,
# for gcc, -fpch-preprocess. clang-tidy cannot read gcc's .gch files:
# scripts/lint-native removes the PCH flags from the commands it runs.
# gcc only: the fuzz tree (clang) would need -fno-pch-timestamp for ccache hits,
# and builds too few files for a PCH to pay.
option(TAILSCOPE_PCH "Precompiled headers for gtest and nlohmann/json (gcc)" OFF)
set(TAILSCOPE_PCH_HEADERS <nlohmann/json.hpp> <string> <vector> <string_view> <memory> <cstdint>)
set(TAILSCOPE_USE_PCH OFF)
if(TAILSCOPE_PCH AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  set(TAILSCOPE_USE_PCH ON)
endif()
# ccache hashes the preprocessed text of a file built with a PCH only when gcc
# leaves the #pragma GCC pch_preprocess marker in it: -fpch-preprocess, given
# only to targets that use a PCH (other files keep their ccache entries).
set(TAILSCOPE_PCH_OPTIONS -fpch-preprocess)
if(TAILSCOPE_USE_PCH)
  # Written only when its content changes, so a re-configure rebuilds nothing.
  file(CONFIGURE OUTPUT ${CMAKE_BINARY_DIR}/tailscope_test_pch.cc
       CONTENT "// The source of the shared unit-test PCH (cmake/Tailscope.cmake).\n")
  add_library(tailscope_test_pch OBJECT ${CMAKE_BINARY_DIR}/tailscope_test_pch.cc)
  target_link_libraries(tailscope_test_pch PRIVATE tailscope_flags GTest::gtest nlohmann_json::nlohmann_json)
  # No definitions of its own: gcc refuses a PCH (-Winvalid-pch, an error here)
  # in a file that lacks a macro the PCH was made with, while macros a test adds
  # (TAILSCOPE_VERSION from tailscope_core, fixture paths) do not affect it.
  target_compile_options(tailscope_test_pch PRIVATE ${TAILSCOPE_PCH_OPTIONS})
  target_precompile_headers(tailscope_test_pch PRIVATE <gtest/gtest.h> ${TAILSCOPE_PCH_HEADERS})
endif()

# tailscope_pch(TARGET): the library's own PCH of the shared heavy headers;
# used by multi-file libraries (one PCH pays off from the second file on).
function(tailscope_pch target)
  if(TAILSCOPE_USE_PCH)
    target_link_libraries(${target} PRIVATE nlohmann_json::nlohmann_json)
    target_compile_options(${target} PRIVATE ${TAILSCOPE_PCH_OPTIONS})
    target_precompile_headers(${target} PRIVATE ${TAILSCOPE_PCH_HEADERS})
  endif()
endfunction()

# tailscope_test(NAME SOURCES x_test.cc DEPS lib ...) — one gtest binary, one ctest entry.
# LABELS "slow" keeps a test out of the sanitizer runs when it is only about speed.
function(tailscope_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT_S" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE tailscope_flags ${ARG_DEPS} GTest::gtest GTest::gtest_main)
  add_dependencies(tailscope_tests ${name})
  if(TAILSCOPE_USE_PCH)
    target_link_libraries(${name} PRIVATE nlohmann_json::nlohmann_json)
    target_compile_options(${name} PRIVATE ${TAILSCOPE_PCH_OPTIONS})
    target_precompile_headers(${name} REUSE_FROM tailscope_test_pch)
  endif()
  add_test(NAME ${name} COMMAND ${name})
  if(NOT ARG_TIMEOUT_S)
    set(ARG_TIMEOUT_S 300)
  endif()
  set_tests_properties(${name} PROPERTIES TIMEOUT ${ARG_TIMEOUT_S} LABELS "unit;${ARG_LABELS}")
endfunction()

# tailscope_engine(NAME SOURCES main.cc DEPS lib ...) — a standalone engine executable.
function(tailscope_engine name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE tailscope_flags ${ARG_DEPS})
endfunction()

# tailscope_benchmark(NAME SOURCES x_benchmark.cc DEPS lib ...) — Google Benchmark, run by `make bench`.
function(tailscope_benchmark name)
  if(NOT TAILSCOPE_BENCHMARKS OR NOT TAILSCOPE_SANITIZER STREQUAL "")
    return()
  endif()
  find_package(benchmark QUIET)
  if(NOT benchmark_FOUND)
    message(STATUS "Google Benchmark not found: skipping ${name}")
    return()
  endif()
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE tailscope_flags ${ARG_DEPS} benchmark::benchmark)
endfunction()

# tailscope_fuzzer(NAME SOURCES x_fuzz.cc DEPS lib ...) — libFuzzer target (clang only).
# tailscope_fuzzers: all of them (scripts/build-fuzzers builds it before they run at once).
if(TAILSCOPE_FUZZERS)
  add_custom_target(tailscope_fuzzers)
endif()
function(tailscope_fuzzer name)
  if(NOT TAILSCOPE_FUZZERS)
    return()
  endif()
  add_dependencies(tailscope_fuzzers ${name})
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_compile_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(${name} PRIVATE tailscope_flags ${ARG_DEPS})
endfunction()
