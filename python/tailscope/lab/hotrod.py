"""HotROD, Jaeger's example application, as a lab server: `hotrod all` on loopback, exporting its
spans over OTLP/HTTP to a lab Jaeger (lab/jaeger.py).

HotROD runs four services in one process — frontend (HTTP, `/dispatch?customer=ID`), customer
(HTTP, behind it a simulated MySQL whose query holds one connection mutex), driver (gRPC, behind it
a simulated Redis) and route (HTTP, called by the frontend through a worker pool) — and each listens
on its own port. Every service's hostname is set to 127.0.0.1 and every port chosen free by us; the
Prometheus and expvar endpoints are served by the frontend's own listener (no extra port). Its three
"fix" flags are what the `diagnose` study changes (`HotrodFlags`).

The binary is the bootstrap's (lab/tools.py: `go build ./examples/hotrod` in Jaeger's module).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tailscope.lab import tools

# HotROD's customer ids (its simulated MySQL knows these four; another id is an error).
CUSTOMERS = (123, 392, 731, 567)
SERVICES = ("frontend", "customer", "driver", "route")
# HotROD's own defaults for what its fix flags change (examples/hotrod/services/config).
DEFAULT_DB_DELAY_MS = 300.0
DEFAULT_ROUTE_WORKERS = 3
MAX_ROUTE_WORKERS = 10_000
MAX_DB_DELAY_MS = 60_000.0


@dataclass(frozen=True)
class HotrodFlags:
    """HotROD's fix flags: -M (no mutex around the db connection), -W N (route worker pool size),
    -D DURATION (the simulated MySQL query's mean latency). None/False = HotROD's default."""

    db_mutex_disabled: bool = False
    route_workers: int | None = None
    db_delay_ms: float | None = None

    def __post_init__(self) -> None:
        if self.route_workers is not None and not 1 <= self.route_workers <= MAX_ROUTE_WORKERS:
            raise ValueError(f"route workers: {self.route_workers} is not in 1 … {MAX_ROUTE_WORKERS}")
        if self.db_delay_ms is not None and not 0 <= self.db_delay_ms <= MAX_DB_DELAY_MS:
            raise ValueError(f"db delay: {self.db_delay_ms:g} ms is not in 0 … {MAX_DB_DELAY_MS:g} ms")

    def args(self) -> list[str]:
        a: list[str] = []
        if self.db_mutex_disabled:
            a.append("-M")
        if self.route_workers is not None:
            a += ["-W", str(self.route_workers)]
        if self.db_delay_ms is not None:
            a += ["-D", f"{self.db_delay_ms * 1000:.0f}us"]
        return a

    def record(self) -> dict:
        """As a study document records it (every field, defaults filled in)."""
        return {
            "db_mutex_disabled": self.db_mutex_disabled,
            "route_workers": self.route_workers if self.route_workers is not None else DEFAULT_ROUTE_WORKERS,
            "db_delay_ms": self.db_delay_ms if self.db_delay_ms is not None else DEFAULT_DB_DELAY_MS,
            "args": self.args(),
        }


@dataclass(frozen=True)
class Hotrod:
    pid: int
    ports: dict[str, int]  # service → port

    @property
    def frontend(self) -> int:
        return self.ports["frontend"]

    def dispatch_path(self, customer: int) -> str:
        return f"/dispatch?customer={customer}"


def command(exe: Path, ports: dict[str, int], flags: HotrodFlags) -> list[str]:
    cmd = [str(exe), "all"]
    for service in SERVICES:
        cmd += [f"--{service}-service-hostname", "127.0.0.1", f"--{service}-service-port", str(ports[service])]
    # The UI's "find trace" links are never followed; pointing them at loopback keeps the page honest.
    return [*cmd, "--jaeger-ui", "http://127.0.0.1:1", *flags.args()]


@contextmanager
def hotrod(
    workdir: Path, otlp_url: str, flags: HotrodFlags = HotrodFlags(), *, cpus: set[int] | None = None
) -> Iterator[Hotrod]:
    """HotROD running until the block ends, exporting to `otlp_url` (a lab Jaeger's `otlp_url`).
    Ready when every service accepts connections. ToolUnavailable when it is not built,
    ToolStartError when it does not start (a port taken: the log says "address already in use")."""
    exe = tools.tool_path("hotrod")
    ports = {s: tools.free_port() for s in SERVICES}
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": otlp_url, "OTEL_EXPORTER_OTLP_INSECURE": "true"}

    def ready() -> bool:
        return all(tools.accepts(p) for p in ports.values())

    with tools.start("hotrod", command(exe, ports, flags), workdir / "hotrod.log", ready, env=env, cpus=cpus) as p:
        yield Hotrod(pid=p.pid, ports=ports)
