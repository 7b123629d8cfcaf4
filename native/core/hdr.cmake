# HdrHistogram and its interchange formats (V2 encoding, .hlog v1.3).
# Included by native/core/CMakeLists.txt after tailscope_core is defined.
# Paths are relative to this file, so the fragment works from any includer.
set(_hdr_dir ${CMAKE_CURRENT_LIST_DIR})

target_sources(tailscope_core PRIVATE ${_hdr_dir}/hdr_histogram.cc ${_hdr_dir}/hlog.cc)
target_link_libraries(tailscope_core PUBLIC ZLIB::ZLIB)

tailscope_test(core_hdr_histogram_test SOURCES ${_hdr_dir}/hdr_histogram_test.cc DEPS tailscope_core)
tailscope_test(core_hlog_test SOURCES ${_hdr_dir}/hlog_test.cc DEPS tailscope_core)
tailscope_benchmark(core_hdr_histogram_benchmark
  SOURCES ${_hdr_dir}/hdr_histogram_benchmark.cc DEPS tailscope_core)

# Engine-free helper for tests/test_hlog_interop.py: writes/reads .hlog files
# with a known data set so the PyPI hdrhistogram package can be compared.
if(TAILSCOPE_ENGINES)
  tailscope_engine(tailscope-hlog-fixture
    SOURCES ${_hdr_dir}/hlog_roundtrip_tool.cc DEPS tailscope_core)
  set_target_properties(tailscope-hlog-fixture PROPERTIES
    RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
endif()
