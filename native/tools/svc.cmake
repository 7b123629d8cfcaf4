# tailscope-svc: the microservice runtime — one service, or the whole graph
# (docs/microservices.md). The modes live in native/svc (tailscope_svc_process).
if(TARGET tailscope_svc_process)
  tailscope_engine(tailscope-svc SOURCES ${CMAKE_CURRENT_LIST_DIR}/svc_main.cc DEPS tailscope_svc_process)
endif()
