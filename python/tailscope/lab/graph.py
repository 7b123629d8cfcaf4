"""The microservice graph as the studies start it: `tailscope-svc --all` (one process per service)
and tailscope-load against its HTTP front."""

from __future__ import annotations

import functools
import os
import resource
import signal
import subprocess
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tailscope.lab.engines import EngineError, EngineStartError, find_engine, run_engine, serve
from tailscope.lab.load import http_load_args
from tailscope.lab.procstat import ProcSampler
from tailscope.lab.stores import StoresRecordError, stores_args, stores_of

SVC = "tailscope-svc"
LOAD = "tailscope-load"
# The compose-post front of topologies/socialnet.yaml (DeathStarBench's wrk2 path).
PATH = "/wrk2-api/post/compose"
# The pool sizes the threads study and the advice try on the pool models (the article's 10 vs 100, and 2).
POOL_SIZES = [2, 10, 100]


@functools.cache
def svc_models() -> tuple[str, ...]:
    """tailscope-svc's concurrency models in the engine's order (`tailscope-svc --list-models`): the
    one list, so a model added to the engine is a choice everywhere without another edit here."""
    exe = find_engine(SVC)
    try:
        r = subprocess.run([str(exe), "--list-models"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise EngineError(f"{exe} --list-models failed: {e}") from e
    models = tuple(r.stdout.split())
    if r.returncode != 0 or not models:
        raise EngineError(f"{exe} --list-models exited {r.returncode} with no model names: {r.stderr.strip()[:300]}")
    return models


# Kept by name for the studies that catch it: the graph exited before it was ready.
GraphStartError = EngineStartError


@contextmanager
def graph(
    topology_json: Path,
    model: str,
    out: Path,
    trace_sample: float = 0.0,
    traces: Path | None = None,
    extra: list[str] | None = None,
    cpu: int | Iterable[int] | None = None,
    stores: str | None = None,
    work: str | None = None,
) -> Iterator[tuple[int, dict]]:
    """Starts the whole graph (tailscope-svc --all); yields (front_port, ready_line).

    `work` is the run's --work (real | simulated; None = real, the engine's default): whether work stages
    do their real work or burn the busy loop each keeps (docs/microservices.md). The ready line's `work`
    says which (an engine before work modes prints none: "real").

    `stores` is the run's --stores (real | simulated | auto; None = auto, the engine's default). The
    ready line's `stores` object is checked and normalised here (lab/stores.py), so every study reads
    `ready["stores"]` the same way — present even from an engine that predates real stores — and
    `store_pids(ready)` names the store processes for /proc sampling.

    `cpu` pins the supervisor, and so every service process it forks, to one CPU
    (`tailscope run --cpus CLIENT,SERVER`) or a set of CPUs; by default nothing is pinned. The
    supervisor stops its 12 service processes on SIGTERM and merges their
    documents into `out`, which can take a while on a loaded machine: hence the
    long stop timeout."""
    args = [
        "--topology",
        str(topology_json),
        "--all",
        "--model",
        model,
        "--port",
        "0",
        "--trace-sample",
        str(trace_sample),
        "--out",
        str(out),
        *stores_args(stores),
        *(["--work", work] if work else []),
        *(extra or []),
    ]
    if traces is not None:
        args += ["--traces", str(traces)]
    with serve(
        SVC,
        args,
        ready_timeout_s=60.0,
        stop_timeout_s=30.0,
        cpus=None if cpu is None else ({cpu} if isinstance(cpu, int) else set(cpu)),
    ) as server:
        try:
            server.ready["stores"] = stores_of(server.ready).record()
        except StoresRecordError as e:
            raise EngineError(f"{SVC} --all printed a ready line with a malformed stores object: {e}") from e
        server.ready.setdefault("work", "real")
        yield server.port, server.ready


def set_trace_sampling(ready: dict, on: bool) -> None:
    """Resumes (`on`) or pauses the running graph's root sampling: SIGUSR2 / SIGUSR1 to the supervisor
    (its ready line's `pid`), which forwards it to every service (native/svc/tracer.h). Paused, every new
    request is unsampled, as with --trace-sample 0; resumed, sampled at the graph's --trace-sample.
    Requests already in flight keep their decision (a load point's own warm-up covers them)."""
    pid = ready.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        raise EngineError(f"{SVC} --all printed a ready line without its pid: cannot switch its sampling")
    try:
        os.kill(pid, signal.SIGUSR2 if on else signal.SIGUSR1)
    except ProcessLookupError as e:
        raise EngineError(f"{SVC} --all (pid {pid}) is gone: cannot switch its sampling") from e


def store_pids(ready: dict) -> dict[str, int]:
    """The store servers' processes of a running graph (name → pid; none when its stores are simulated),
    to sample beside its services (ProcSampler, run_point)."""
    return stores_of(ready).pids()


def run_front_load(
    port: int,
    rate: float,
    connections: int,
    duration_s: float,
    warmup_s: float,
    timeout_s: float,
    client_cpu: int | None = None,
    extra: list[str] | None = None,
    path: str = PATH,
) -> dict:
    """One tailscope-load run against the graph's front (rate 0 = closed loop) → its document."""
    args = http_load_args(
        port,
        path,
        connections,
        rate,
        duration_s,
        warmup_s,
        timeout="2s",
        cpus=None if client_cpu is None else [client_cpu],
    )
    return run_engine(LOAD, args + (extra or []), timeout_s=timeout_s).document


@contextmanager
def pinned_graph(topo: Path, model: str, out: Path, cpus: list[int], workers: int, stores: str | None = None):
    """graph() pinned to `cpus` (every process and thread of the graph inherits it, the store servers too
    unless the topology's store_servers pins them)."""
    with graph(topo, model, out, extra=["--workers", str(workers)], cpu=set(cpus) or None, stores=stores) as (
        port,
        ready,
    ):
        yield port, ready


def run_point(
    port: int,
    path: str,
    users: int,
    rate: float,
    duration_s: float,
    warmup_s: float,
    load_cpus: list[int],
    hlog: Path,
    pids: dict[str, int],
) -> tuple[dict, dict]:
    """One tailscope-load run with /proc sampled over its measured window → (load doc, procstat)."""
    args = http_load_args(port, path, users, rate, duration_s, warmup_s, timeout="5s", cpus=load_cpus)
    args += ["--hlog", str(hlog), "--hlog-interval", f"{duration_s + 1:.3f}"]
    sampler = ProcSampler(pids)
    # The sampler starts when the warm-up ends, so its window is (close to) the measured one.
    timer = threading.Timer(warmup_s, sampler.start)
    timer.start()
    try:
        doc = run_engine(LOAD, args, timeout_s=duration_s + warmup_s + 60).document
    finally:
        timer.cancel()
        timer.join()
    stats = sampler.stop() if sampler._thread is not None else {"unavailable": "the run ended before its warm-up"}
    return doc, stats


def raise_nofile() -> int:
    """Soft RLIMIT_NOFILE up to the hard limit (the graph inherits it: the front holds one
    descriptor per user). Returns the hard limit, which bounds the users a point can reach."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard
