"""A deployment's host groups as CPU sets: the capstone's split (front | compose-post and its children |
storage) runs on lab hosts (network namespaces), as container groups here, and as nodes elsewhere
(docs/deploy.md, "The split as container groups"). One plan of which CPUs each group gets, used by
the isolation study for both of its arms and by `tailscope cluster up --deployment`.

A group's CPUs are the deployment's `hosts.G.cpus` where it gives them; a group without them gets
cores read from sysfs (SMT siblings together), one core per group while there are cores, round robin
when there are fewer cores than groups — on this 2-core machine two of the three groups share a core,
and the plan says so (`shared`) rather than pretending to isolate them. The load agents get a core of
their own only when one is left over.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tailscope.lab import deployment as dep_mod
from tailscope.lab import machine

DeploymentError = dep_mod.DeploymentError


def cores_from_sysfs() -> list[tuple[int, ...]]:
    """The physical cores this process may use, each as its CPUs (SMT siblings together)."""
    siblings = machine.smt_siblings()
    allowed = sorted(os.sched_getaffinity(0))
    if siblings is None:
        return [(c,) for c in allowed]
    cores: dict[tuple[int, ...], None] = {}
    for _cpu, text in sorted(siblings.items()):
        cpus = tuple(c for c in dep_mod.parse_cpu_list(text, "sysfs thread_siblings_list") if c in allowed)
        cores[cpus] = None
    return list(cores)


def plan_cpus(service_hosts: list[str], cores: list[tuple[int, ...]]) -> tuple[dict[str, tuple[int, ...]], tuple]:
    """Each service host on a core of its own while there are cores, else round robin; the load
    agents get a core of their own only when one is left over (else they are not pinned).
    Returns (host -> CPUs, load CPUs or ())."""
    n = len(cores)
    load: tuple[int, ...] = ()
    usable = cores
    if n > len(service_hosts):
        load, usable = cores[-1], cores[:-1]
    plan: dict[str, list[int]] = {h: [] for h in service_hosts}
    if len(usable) >= len(service_hosts):
        for i, core in enumerate(usable):
            plan[service_hosts[i % len(service_hosts)]] += core
    else:
        for i, h in enumerate(service_hosts):
            plan[h] += usable[i % len(usable)]
    return {h: tuple(sorted(c)) for h, c in plan.items()}, tuple(load)


def shared_pairs(groups: Mapping[str, Iterable[int]]) -> list[tuple[str, str, list[int]]]:
    """Pairs of groups that have CPUs in common, with those CPUs (group names sorted)."""
    names = sorted(groups)
    sets = {g: set(groups[g]) for g in names}
    return [(a, b, sorted(sets[a] & sets[b])) for i, a in enumerate(names) for b in names[i + 1 :] if sets[a] & sets[b]]


def check_groups(dep: dep_mod.Deployment, services: list[str], allowed_cpus: set[int] | None = None) -> None:
    """The checks a deployment passes before its groups run as containers on this machine (nothing has
    started when this raises): every service of the topology in a group, every group running a service
    or the load, and every CPU a group or a pin names one this process may use (`allowed_cpus`,
    default its affinity). DeploymentError names the file and the key."""
    where = str(dep.path)
    if not dep.hosts:
        raise DeploymentError(f"{where}: hosts: no group is declared (the split needs groups, e.g. front, logic)")
    unplaced = [s for s in services if s not in dep.services or dep.services[s].host is None]
    if unplaced:
        raise DeploymentError(
            f"{where}: services: {', '.join(unplaced)} {'is' if len(unplaced) == 1 else 'are'} in no group "
            f"(give each `host: GROUP`, one of {', '.join(dep.hosts)})"
        )
    used = set(dep.service_hosts()) | set(dep.load_hosts)
    for name in dep.hosts:
        if name not in used:
            raise DeploymentError(
                f"{where}: hosts.{name}: the group is empty (no service names it with `host: {name}` and "
                "it is not in load.hosts): place a service there or remove it"
            )
    allowed = set(os.sched_getaffinity(0)) if allowed_cpus is None else set(allowed_cpus)
    named = [(f"hosts.{n}.cpus", h.cpus) for n, h in dep.hosts.items()]
    named += [(f"services.{n}.pin", s.pin) for n, s in dep.services.items()]
    for key, cpus in named:
        missing = sorted(set(cpus) - allowed)
        if missing:
            raise DeploymentError(
                f"{where}: {key}: CPU {missing[0]} is not on this machine (the CPUs this process may use: "
                f"{dep_mod.format_cpu_list(sorted(allowed))})"
            )


@dataclass(frozen=True)
class GroupPlan:
    deployment: dep_mod.Deployment  # every service group with its CPUs set
    cpus: dict[str, tuple[int, ...]]  # service group -> CPUs
    planned: tuple[str, ...]  # the groups whose CPUs were read from the machine (the file gave none)
    load_cpus: tuple[int, ...]  # () = the load is not pinned
    cores: tuple[tuple[int, ...], ...]

    @property
    def shared(self) -> list[tuple[str, str, list[int]]]:
        return shared_pairs(self.cpus)

    def record(self) -> dict:
        """What was assigned, for a study's document or the user's terminal."""
        return {
            "groups": {g: list(c) for g, c in self.cpus.items()},
            "planned": list(self.planned),
            "load": list(self.load_cpus),
            "cores": [list(c) for c in self.cores],
            "shared": [{"groups": [a, b], "cpus": c} for a, b, c in self.shared],
        }

    def text(self) -> str:
        groups = ", ".join(f"{g} on CPU {dep_mod.format_cpu_list(c)}" for g, c in self.cpus.items())
        shared = "; ".join(f"{a} and {b} share CPU {dep_mod.format_cpu_list(c)}" for a, b, c in self.shared)
        load = f"CPU {dep_mod.format_cpu_list(self.load_cpus)}" if self.load_cpus else "not pinned"
        return (
            f"groups: {groups} ({len(self.cores)} core(s) here"
            + (f"; {shared}" if shared else "; no two groups share a CPU")
            + f"); load: {load}"
        )


def plan_groups(
    dep: dep_mod.Deployment,
    services: list[str],
    cores: list[tuple[int, ...]] | None = None,
    allowed_cpus: set[int] | None = None,
    check: bool = True,
) -> GroupPlan:
    """check_groups (unless `check` is off: a file written for elsewhere, `deploy compose`), then every
    service group's CPUs: the file's where it gives them, else planned (plan_cpus) from `cores`
    (default: this machine's, from sysfs), those no group of the file holds first. The load's CPUs:
    its group's from the file, else the core plan_cpus left over (none on a small machine)."""
    if check:
        check_groups(dep, services, allowed_cpus)
    cores = cores if cores is not None else cores_from_sysfs()
    groups = dep.service_hosts()
    missing = [g for g in groups if not dep.hosts[g].cpus]
    # Planned groups go to the cores no group of the file holds, while there are such cores.
    taken = {c for h in dep.hosts.values() for c in h.cpus}
    pool = [core for core in cores if not set(core) & taken] or cores
    planned, spare = plan_cpus(missing, pool) if missing else ({}, ())
    cpus = {g: dep.hosts[g].cpus or planned[g] for g in groups}
    load_given = sorted({c for h in dep.load_hosts for c in dep.hosts[h].cpus})
    load = tuple(load_given) if load_given else tuple(spare)
    placed = dep_mod.with_host_cpus(dep, cpus)
    return GroupPlan(placed, cpus, tuple(missing), tuple(load), tuple(cores))
