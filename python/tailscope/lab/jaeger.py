"""A real Jaeger v2 on loopback: in-memory storage, OTLP/HTTP in, the query API out.

The one way the lab starts Jaeger (the real-Jaeger tests, the `diagnose` study): every port it
opens is on 127.0.0.1 and chosen free by us (the OTLP/HTTP receiver, the query API's HTTP and gRPC
endpoints); its own telemetry is off, so it opens no metrics port. The binary is the bootstrap's
(lab/tools.py).
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tailscope.lab import tools

# The collector configuration: memstore holds at most MAX_TRACES (oldest dropped first); the batch
# processor's 100 ms timeout makes a span queryable soon after it arrives. `enable_tracing: false`:
# the query service would otherwise trace itself to 127.0.0.1:4317 (OTLP/gRPC, not listening here),
# log a refusal every second and wait 10 s for that exporter when stopped.
MAX_TRACES = 100_000
CONFIG = """
service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: {max_traces}
  jaeger_query:
    enable_tracing: false
    storage:
      traces: memstore
    http:
      endpoint: {host}:{query}
    grpc:
      endpoint: {host}:{query_grpc}
receivers:
  otlp:
    protocols:
      http:
        endpoint: {host}:{otlp}
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
"""


# The ports a Jaeger container listens on (its own network namespace: no other process to clash with).
CONTAINER_PORTS = {"otlp": 4318, "query": 16686, "query_grpc": 16685}


def config_text(host: str, *, otlp: int, query: int, query_grpc: int, max_traces: int = MAX_TRACES) -> str:
    """The collector configuration listening on HOST: 127.0.0.1 here, `${env:POD_IP}` in a container
    (the collector expands it from the environment: the pod's own address, never 0.0.0.0)."""
    return CONFIG.format(host=host, max_traces=max_traces, otlp=otlp, query=query, query_grpc=query_grpc)


@dataclass(frozen=True)
class Jaeger:
    pid: int
    query: int  # the query API's HTTP port (/api/traces, /api/services)
    query_grpc: int
    otlp: int  # the OTLP/HTTP receiver's port

    @property
    def query_url(self) -> str:
        return f"http://127.0.0.1:{self.query}"

    @property
    def otlp_url(self) -> str:
        """What an OTLP/HTTP exporter is pointed at (OTEL_EXPORTER_OTLP_ENDPOINT; /v1/traces is added)."""
        return f"http://127.0.0.1:{self.otlp}"

    @property
    def ports(self) -> tuple[int, ...]:
        return (self.query, self.query_grpc, self.otlp)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return bool(r.status == 200)
    except OSError:
        return False


@contextmanager
def jaeger(workdir: Path, *, cpus: set[int] | None = None) -> Iterator[Jaeger]:
    """Jaeger running until the block ends (config and log in `workdir`). ToolUnavailable when it
    is not built, ToolStartError when it does not start."""
    exe = tools.tool_path("jaeger")
    ports = {"query": tools.free_port(), "query_grpc": tools.free_port(), "otlp": tools.free_port()}
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "jaeger.yaml"
    config.write_text(config_text("127.0.0.1", **ports))
    j = Jaeger(pid=0, **ports)

    def ready() -> bool:
        return tools.accepts(j.otlp) and _answers(f"{j.query_url}/api/services")

    cmd = [str(exe), "--config", f"file:{config}"]
    with tools.start("jaeger", cmd, workdir / "jaeger.log", ready, cpus=cpus) as p:
        yield Jaeger(pid=p.pid, **ports)
