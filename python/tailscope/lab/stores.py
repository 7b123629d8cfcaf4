"""The stores a graph ran on (issue 27): the `stores` object of `tailscope-svc --all`'s ready line.

`--stores real|simulated|auto` chooses them: `real` starts memcached, redis-server and PostgreSQL (the
document store serving DeathStarBench's MongoDB roles) as the supervisor's own children, `simulated`
keeps every `store:` stage a timed wait, `auto` (the engine's default) is real when the three
servers' binaries are installed, else simulated with the reason. The supervisor says which it chose in
its ready line (docs/stores.md):

    "stores": {"mode": "real", "reason": "...",
               "servers": [{"system": "redis", "server": "redis 7.0.15", "pid": 1234,
                            "address": "127.0.0.1:40000", "cpus": "0-1", "memory_mib": 64}, ...]}

`stores_of` reads that object (or the same object recorded in a study document) into a `GraphStores`:
one parser, so a malformed line fails with one clear message wherever it is read. An engine from before
real stores prints no `stores` object: its stores were simulated, and the reason says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

# What a user may ask for (`--stores`); the engine reports only the first two.
STORE_MODES = ("real", "simulated", "auto")
DEFAULT_STORE_MODE = "auto"
# DeathStarBench's role names; "mongodb" is served by PostgreSQL JSONB (docs/microservices.md).
STORE_SYSTEMS = ("memcached", "redis", "mongodb")
NO_STORES_REASON = "the engine reported no store mode (it predates real stores: every store is a timed wait)"


class StoresRecordError(ValueError):
    """A `stores` object that does not follow the interface (an engine bug or a hand-edited document)."""


@dataclass(frozen=True)
class StoreServer:
    """One store process a real-mode graph ran: sampled by /proc like a service (`process_name`)."""

    system: str  # memcached | redis | mongodb
    pid: int
    address: str  # host:port it listened on
    cpus: str | None  # the CPU list it was pinned to; None = the supervisor's affinity
    server: str | None = None  # e.g. "redis 7.0.15"
    memory_mib: int | None = None  # memcached -m / redis maxmemory; None when the engine did not say

    @property
    def process_name(self) -> str:
        """Its name among a run's sampled processes: beside the services, never one of them."""
        return f"store:{self.system}"


@dataclass(frozen=True)
class GraphStores:
    mode: str  # real | simulated (what the graph ran, never "auto")
    reason: str
    servers: tuple[StoreServer, ...] = ()

    def pids(self) -> dict[str, int]:
        """process name → pid of every store server, for procstat's samplers (a second server of one
        system, which the interface does not foresee but a topology might, gets "#2", never overwrites)."""
        named: dict[str, int] = {}
        for s in self.servers:
            name, n = s.process_name, 1
            while name in named:
                n += 1
                name = f"{s.process_name}#{n}"
            named[name] = s.pid
        return named

    def record(self) -> dict[str, Any]:
        """The JSON object a study document records (read back by stores_of)."""
        return {"mode": self.mode, "reason": self.reason, "servers": [asdict(s) for s in self.servers]}


def stores_args(mode: str | None) -> list[str]:
    """tailscope-svc's arguments for the requested mode. `auto` is the engine's own default and is
    not passed, so a graph that asks for nothing runs on an engine without the option too."""
    if mode is None or mode == DEFAULT_STORE_MODE:
        return []
    if mode not in STORE_MODES:
        raise ValueError(f"stores mode '{mode}' is not one of {', '.join(STORE_MODES)}")
    return ["--stores", mode]


def stores_of(holder: Mapping[str, Any]) -> GraphStores:
    """The `stores` object of a ready line or a study document → GraphStores (see the module doc).

    Absent: simulated (an engine from before real stores). Present but malformed: StoresRecordError
    naming the field."""
    raw = holder.get("stores")
    if raw is None:
        return GraphStores("simulated", NO_STORES_REASON)
    if not isinstance(raw, Mapping):
        raise StoresRecordError(f"'stores' is {type(raw).__name__}, not an object")
    mode = raw.get("mode")
    if mode not in ("real", "simulated"):
        raise StoresRecordError(f"stores.mode is {mode!r}, not 'real' or 'simulated'")
    reason = raw.get("reason")
    if not isinstance(reason, str):
        raise StoresRecordError(f"stores.reason is {reason!r}, not a string")
    servers = raw.get("servers") or []
    if not isinstance(servers, list):
        raise StoresRecordError(f"stores.servers is {type(servers).__name__}, not a list")
    parsed = tuple(_server(i, s) for i, s in enumerate(servers))
    if mode == "simulated" and parsed:
        raise StoresRecordError(f"stores.mode is 'simulated' but {len(parsed)} store server(s) are listed")
    return GraphStores(mode, reason, parsed)


def _server(i: int, raw: object) -> StoreServer:
    where = f"stores.servers[{i}]"
    if not isinstance(raw, Mapping):
        raise StoresRecordError(f"{where} is {type(raw).__name__}, not an object")
    system, pid, address = raw.get("system"), raw.get("pid"), raw.get("address")
    if system not in STORE_SYSTEMS:
        raise StoresRecordError(f"{where}.system is {system!r}, not one of {', '.join(STORE_SYSTEMS)}")
    # bool is an int in Python: refuse it explicitly, a pid of True is a bug.
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        raise StoresRecordError(f"{where}.pid is {pid!r}, not a process id")
    if not isinstance(address, str) or not address:
        raise StoresRecordError(f"{where}.address is {address!r}, not host:port")
    cpus, server, memory = raw.get("cpus"), raw.get("server"), raw.get("memory_mib")
    if cpus is not None and not isinstance(cpus, str):
        raise StoresRecordError(f"{where}.cpus is {cpus!r}, not a CPU list or null")
    if server is not None and not isinstance(server, str):
        raise StoresRecordError(f"{where}.server is {server!r}, not a string or null")
    if memory is not None and (not isinstance(memory, int) or isinstance(memory, bool) or memory < 0):
        raise StoresRecordError(f"{where}.memory_mib is {memory!r}, not a size in MiB or null")
    return StoreServer(system, pid, address, cpus, server, memory)
