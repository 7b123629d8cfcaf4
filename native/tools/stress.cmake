# tailscope-stress: interference kernels and the counter probe of `tailscope doctor` (docs/prof.md).
if(TARGET tailscope_stress)
  tailscope_engine(tailscope-stress SOURCES ${CMAKE_CURRENT_LIST_DIR}/stress_main.cc DEPS tailscope_stress)
endif()
