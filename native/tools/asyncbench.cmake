# tailscope-asyncbench: scheduling and join delay of async calls per concurrency model.
if(TARGET tailscope_asyncbench)
  tailscope_engine(tailscope-asyncbench SOURCES ${CMAKE_CURRENT_LIST_DIR}/asyncbench_main.cc DEPS tailscope_asyncbench)
endif()
