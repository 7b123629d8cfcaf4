# Shared build rules: warnings, sanitizers and the three kinds of target
# (library, unit test, engine) every module uses.
find_package(Threads REQUIRED)
find_package(ZLIB REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(GTest REQUIRED)

add_library(tailscope_flags INTERFACE)
target_compile_options(tailscope_flags INTERFACE -Wall -Wextra -Werror)
target_include_directories(tailscope_flags INTERFACE ${PROJECT_SOURCE_DIR}/native)

if(TAILSCOPE_SANITIZER STREQUAL "asan")
  target_compile_options(tailscope_flags INTERFACE
    -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1)
  target_link_options(tailscope_flags INTERFACE -fsanitize=address,undefined)
elseif(TAILSCOPE_SANITIZER STREQUAL "tsan")
  target_compile_options(tailscope_flags INTERFACE -fsanitize=thread -fno-omit-frame-pointer -g -O1)
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

# tailscope_test(NAME SOURCES x_test.cc DEPS lib ...) — one gtest binary, one ctest entry.
# LABELS "slow" keeps a test out of the sanitizer runs when it is only about speed.
function(tailscope_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT_S" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE tailscope_flags ${ARG_DEPS} GTest::gtest GTest::gtest_main)
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
function(tailscope_fuzzer name)
  if(NOT TAILSCOPE_FUZZERS)
    return()
  endif()
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_compile_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(${name} PRIVATE tailscope_flags ${ARG_DEPS})
endfunction()
