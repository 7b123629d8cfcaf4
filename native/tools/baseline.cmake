tailscope_engine(tailscope-baseline SOURCES ${CMAKE_CURRENT_LIST_DIR}/baseline_main.cc DEPS tailscope_baseline)
