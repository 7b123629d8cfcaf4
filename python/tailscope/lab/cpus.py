"""Which CPUs the client (load generator) and the server side run on."""

from __future__ import annotations

import os


def requested_cpus(options: dict) -> tuple[int, int] | None:
    """(client_cpu, server_cpu) from `--cpus CLIENT,SERVER` (checked by the CLI), or None."""
    text = options.get("cpus")
    if not text:
        return None
    client, server = (int(x) for x in str(text).split(",")[:2])
    return client, server


def cpu_pair(options: dict) -> tuple[int, int]:
    """--cpus CLIENT,SERVER, else the first and the last CPU this process may use."""
    requested = requested_cpus(options)
    if requested is not None:
        return requested
    cpus = sorted(os.sched_getaffinity(0))
    return cpus[0], cpus[-1]


def cpu_split(options: dict) -> tuple[list[int], list[int]]:
    """(generator CPUs, graph CPUs): --cpus CLIENT,SERVER, else the first allowed CPU for the
    generator and the others for the graph; one CPU only → both unpinned ([], [])."""
    if options.get("cpus"):
        client, server = (int(x) for x in str(options["cpus"]).split(",")[:2])
        return [client], [server]
    cpus = sorted(os.sched_getaffinity(0))
    return ([cpus[0]], cpus[1:]) if len(cpus) > 1 else ([], [])
