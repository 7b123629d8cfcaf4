tailscope_engine(tailscope-echo SOURCES ${CMAKE_CURRENT_LIST_DIR}/echo_main.cc DEPS tailscope_echo)
