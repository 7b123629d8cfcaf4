# tailscope-critpath: the trace analysis engine (docs/critical-path.md).
if(TARGET tailscope_analyze)
  tailscope_engine(tailscope-critpath
    SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/critpath_main.cc
    DEPS tailscope_analyze)
endif()
