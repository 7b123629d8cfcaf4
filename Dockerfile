# The tailscope engines in one image, for `tailscope deploy k8s` (docs/deploy.md).
#
#   docker build -t REGISTRY/tailscope:TAG .     # then: tailscope deploy k8s --image REGISTRY/tailscope:TAG
#
# Not built in tailscope's own CI: its machines reach package registries but no
# container registry, so there is no base image to start from. The build steps
# are the ones `make build` runs (scripts/bootstrap's package list, CMake Release).

FROM debian:bookworm AS build
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      build-essential cmake ninja-build pkg-config \
      libboost-dev liburing-dev zlib1g-dev libssl-dev \
      libgtest-dev libgmock-dev libbenchmark-dev \
      nlohmann-json3-dev rapidjson-dev libcli11-dev libsimdjson-dev \
      libhiredis-dev libmemcached-dev libpq-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY CMakeLists.txt ./
COPY cmake cmake
COPY native native
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTAILSCOPE_BENCHMARKS=OFF \
 && cmake --build build --target tailscope-svc tailscope-load tailscope-echo tailscope-critpath

FROM debian:bookworm-slim
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends liburing2 zlib1g libssl3 libhiredis0.14 libmemcached11 libpq5 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/build/bin/tailscope-svc /src/build/bin/tailscope-load \
                  /src/build/bin/tailscope-echo /src/build/bin/tailscope-critpath /usr/local/bin/
# Engines are unprivileged; the static CPU manager pins the container, not the process.
USER 65534:65534
ENTRYPOINT []
