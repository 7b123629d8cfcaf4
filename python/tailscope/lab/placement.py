"""CPU pools for placing services: a general pool and a performance pool, from sysfs's core topology,
and the tailscope-svc --placement flags that put named services on them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Pools:
    general: list[int]  # load generator, stores' callers, the least sensitive services
    performance: list[int]  # the knapsack's capacity
    smt: bool
    how: str


def sibling_groups(cpus: Sequence[int]) -> list[list[int]]:
    """The allowed CPUs grouped by physical core (sysfs thread_siblings_list), cores in CPU order."""
    groups: dict[str, list[int]] = {}
    for c in cpus:
        try:
            key = Path(f"/sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list").read_text().strip()
        except OSError:
            key = str(c)
        groups.setdefault(key, []).append(c)
    return sorted(groups.values(), key=lambda g: g[0])


def make_pools(cpus: Sequence[int], full: bool) -> Pools | None:
    """General pool = the first core(s), performance pool = the rest (quick: one core); None below 2 cores."""
    cores = sibling_groups(sorted(cpus))
    if len(cores) < 2:
        return None
    smt = any(len(g) > 1 for g in cores)
    n_general = max(1, len(cores) // 2) if full else 1
    general = [c for g in cores[:n_general] for c in g]
    performance = [c for g in cores[n_general : len(cores) if full else n_general + 1] for c in g]
    how = (
        f"{len(cores)} cores{' with SMT' if smt else ''}; general pool = "
        f"{n_general} core(s), performance pool = {len(cores) - n_general if full else 1} core(s)"
    )
    return Pools(general, performance, smt, how)


def cpu_text(cpus: Sequence[int]) -> str:
    return ",".join(map(str, cpus))


def placement_flags(performance: Sequence[str] | None, pools: Pools, services: Sequence[str]) -> list[str]:
    """tailscope-svc --placement flags: the named services on the performance pool, the rest on the general."""
    if performance is None:
        return []
    flags = []
    for s in services:
        flags += ["--placement", f"{s}={cpu_text(pools.performance if s in performance else pools.general)}"]
    return flags
