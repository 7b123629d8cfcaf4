# tailscope-svc: the microservice runtime (issue 6) — one service, or the whole graph.
if(TARGET tailscope_svc)
  tailscope_engine(tailscope-svc SOURCES ${CMAKE_CURRENT_LIST_DIR}/svc_main.cc DEPS tailscope_svc tailscope_prof)
endif()
