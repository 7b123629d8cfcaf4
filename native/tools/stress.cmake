# tailscope-stress: interference kernels (issue 10) and the counter probe of `tailscope doctor`.
if(TARGET tailscope_stress)
  tailscope_engine(tailscope-stress SOURCES ${CMAKE_CURRENT_LIST_DIR}/stress_main.cc DEPS tailscope_stress)
endif()
