tailscope_engine(tailscope-load SOURCES ${CMAKE_CURRENT_LIST_DIR}/load_main.cc DEPS tailscope_load)
