"""The echo study's run: the plan (quick or full form, options), the engines it starts, the documents
it stores. What the run adapts to what it measured (the common rate, the floor's model) is decided by
analysis.py; nothing here writes the report."""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from tailscope.lab.cpus import cpu_pair, requested_cpus
from tailscope.lab.engines import EngineError, EngineUnavailable, run_engine, serve
from tailscope.lab.load import load_pacing, load_pacing_args
from tailscope.measure.measurement import achieved_per_s
from tailscope.store import EngineDocument
from tailscope.studies.base import RunContext
from tailscope.studies.common import StepProgress, point_times, run_scale
from tailscope.studies.echo.analysis import (
    BASELINE,
    CLOSED,
    ECHO,
    LOAD,
    MODELS,
    RATE,
    common_rate_per_s,
    fastest_model,
)

MULTI_THREADED = {"poll-pool", "asio-mt", "epoll-reuseport", "asio-coro"}
QUICK_CONNECTIONS = [8, 100, 1000]
FULL_CONNECTIONS = [8, 25, 50, 100, 250, 500, 1000, 2000, 5000, 10000]
PAYLOAD_BYTES = 64
SERVER_THREADS = 2
# Coordinated-omission demo: the server stalls STALL_MS every STALL_EVERY_MS.
STALL_EVERY_MS = 500
STALL_MS = 50
CO_RATE = 2000
CO_CONNECTIONS = 8
# One load thread per this many connections, at most one per client CPU: a second thread on
# the same core adds context switches, not cycles (docs/load-generator.md, "Threads").
CONNECTIONS_PER_LOAD_THREAD = 250
# How tailscope-load moves bytes (`load_io` option, docs/echo-study.md "The generator's I/O path"):
# "by-connections" (default) uses its io_uring path (`--io auto`: io_uring when the kernel has it,
# else epoll, with the reason in the document) from URING_GENERATOR_FROM connections up, and epoll
# below. On the 2-core VM (2026-11-26, server on CPU 1, generator busy-polling on CPU 0, closed
# loop, one or two runs each): at 100 and 1000 connections the io_uring generator drove poll and
# io-uring servers 1.27–1.35× faster than the epoll one, which had been the limit; at 8
# connections epoll was 1.06–1.31× faster. "epoll" or "uring" forces one path for every point.
LOAD_IOS = ("by-connections", "epoll", "uring")
URING_GENERATOR_FROM = 100
# Seconds a point costs beyond its warm-up and window (server start/stop, connect phase),
# for the run-time estimate printed at the start (docs/echo-study.md, "How long").
POINT_OVERHEAD_S = 1.5


# Kept by name for the studies that catch it: the engine exited with "unavailable".
UnavailableModel = EngineUnavailable


@contextmanager
def echo_server(
    model: str, server_cpu: int, protocol: str = "echo", extra: list[str] | None = None
) -> Iterator[tuple[int, int, dict]]:
    """Starts tailscope-echo on an ephemeral port; yields (port, pid, features): what the model
    probed and uses (io-uring's kernel features, each with its fallback reason), from the ready line.
    An unavailable model raises UnavailableModel (engines.EngineUnavailable)."""
    args = [
        "--model",
        model,
        "--port",
        "0",
        "--cpus",
        str(server_cpu),
        "--protocol",
        protocol,
        "--threads",
        str(SERVER_THREADS),
        *(extra or []),
    ]
    with serve(ECHO, args, ready_timeout_s=30.0, stop_timeout_s=5.0) as server:
        yield server.port, server.proc.pid, dict(server.ready.get("features") or {})


@dataclass
class Timing:
    duration_s: float
    warmup_s: float


@dataclass
class LoadPlan:
    """Where the load generator runs: its CPUs (never the server's) and how it paces."""

    cpus: list[int]
    pacing: str  # lab.load.load_pacing: "busy-poll" (default) or "sleep"
    io: str = "by-connections"  # one of LOAD_IOS

    def threads(self, connections: int) -> int:
        """Enough load threads not to be the bottleneck, at most one per client CPU."""
        return max(1, min(len(self.cpus), math.ceil(connections / CONNECTIONS_PER_LOAD_THREAD)))

    def io_args(self, connections: int) -> list[str]:
        """tailscope-load's --io for a point at `connections`: the cheaper path where it can be the limit."""
        uring = self.io == "uring" or (self.io == "by-connections" and connections >= URING_GENERATOR_FROM)
        return ["--io", "auto" if uring else "epoll"]


def load_plan(options: dict, client_cpu: int, server_cpu: int) -> LoadPlan:
    """--cpus CLIENT,SERVER pins the generator to CLIENT; otherwise it may use every allowed CPU
    but the server's (one on a 2-core machine)."""
    if requested_cpus(options) is not None:
        cpus = [client_cpu]
    else:
        cpus = [c for c in sorted(os.sched_getaffinity(0)) if c != server_cpu] or [client_cpu]
    io = str(options.get("load_io") or "by-connections")
    if io not in LOAD_IOS:
        raise ValueError(f"load_io: '{io}' is not one of {', '.join(LOAD_IOS)}")
    return LoadPlan(cpus, load_pacing(options), io)


def estimated_duration_s(connections: list[int], models: list[str], t: Timing) -> float:
    """The sweep's wall time: every model closed loop and at the common rate per connection count,
    and poll's closed-loop repeat."""
    per_point = t.duration_s + t.warmup_s + POINT_OVERHEAD_S
    return len(connections) * (len(models) * 2 + ("poll" in models)) * per_point


def _load_args(
    port: int, pid: int, connections: int, rate: float, plan: LoadPlan, t: Timing, extra: list[str] | None = None
) -> list[str]:
    threads = plan.threads(connections)
    return [
        "--port",
        str(port),
        "-c",
        str(connections),
        "-t",
        str(threads),
        "-d",
        f"{t.duration_s:.3f}",
        "--warmup",
        f"{t.warmup_s:.3f}",
        "-R",
        f"{rate:.0f}",
        "--cpus",
        ",".join(map(str, plan.cpus[:threads])),
        *load_pacing_args(plan.pacing),
        *plan.io_args(connections),
        "--payload-bytes",
        str(PAYLOAD_BYTES),
        "--server-pid",
        str(pid),
        "--allow-errors",
        "--timeout",
        "10s",
        *(extra or []),
    ]


def _wrk_p99_ns(port: int, connections: int, seconds: float, client_cpu: int) -> tuple[float | None, str]:
    """wrk (closed loop, uncorrected) p99 against the same stalling server, if wrk is installed."""
    wrk = shutil.which("wrk")
    if not wrk:
        return None, "wrk is not installed"
    cmd = [wrk, "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--latency", f"http://127.0.0.1:{port}/"]
    if shutil.which("taskset"):
        cmd = ["taskset", "-c", str(client_cpu), *cmd]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 30)
    m = re.search(r"^\s*99%\s+([\d.]+)(us|ms|s)\s*$", r.stdout, re.M)
    if r.returncode != 0 or not m:
        return None, f"wrk failed: {r.stderr.strip() or r.stdout.strip()[:200]}"
    return float(m.group(1)) * {"us": 1e3, "ms": 1e6, "s": 1e9}[m.group(2)], ""


def run_study(ctx: RunContext, study: str) -> list[EngineDocument]:
    """The whole study: the floor, the sweep, the measurement floor and the coordinated-omission demo;
    its documents are stored under `study`."""
    full = ctx.form == "full"
    scale = run_scale(ctx.options)
    window_s, warmup_s = point_times(ctx, quick=(1.0, 0.3), full=(5.0, 1.0), floor=(0.2, 0.05))
    timing = Timing(duration_s=window_s, warmup_s=warmup_s)
    connections = FULL_CONNECTIONS if full else QUICK_CONNECTIONS
    models = list(ctx.options.get("echo_models") or MODELS)
    client_cpu, server_cpu = cpu_pair(ctx.options)
    plan = load_plan(ctx.options, client_cpu, server_cpu)
    docs: list[EngineDocument] = []
    unavailable: dict[str, str] = {}
    failed: list[dict] = []
    steps = 2 + len(connections) * (len(models) * 2 + 1) + 2
    progress = StepProgress(ctx, "echo", steps)

    timeout = timing.duration_s + timing.warmup_s + 90
    estimate_s = estimated_duration_s(connections, models, timing)
    ctx.progress(f"echo: about {estimate_s / 60:.0f} min for {len(connections)} connection counts", 0.0)
    art_dir = ctx.artifacts_dir / "echo"  # one .hlog per point (tags latency_intended / latency_actual)
    art_dir.mkdir(parents=True, exist_ok=True)

    # 1. The floor: blocking loopback ping-pong, same cores, same run.
    progress("baseline tcp_pingpong")
    base = run_engine(
        BASELINE,
        [
            "--only",
            "tcp_pingpong,empty_syscall",  # the floor; what a system call costs (the CPU-per-echo accounting)
            "--placement",
            "pinned",
            "--cpus",
            f"{client_cpu},{server_cpu}",
            "--scale",
            str(min(1.0, scale)),
        ],
        timeout_s=300,
    )
    docs.append(EngineDocument(study, BASELINE, base.document, "baseline"))

    def load_run(
        model: str,
        c: int,
        rate: float,
        point: str,
        extra_server: list[str] | None = None,
        extra_load: list[str] | None = None,
        t: Timing = timing,
    ) -> dict | None:
        if model in unavailable:
            return None
        hlog = art_dir / (point.replace("/", "_") + ".hlog")
        extra = [*(extra_load or []), "--hlog", str(hlog)]
        try:
            with echo_server(model, server_cpu, extra=extra_server) as (port, pid, features):
                r = run_engine(LOAD, _load_args(port, pid, c, rate, plan, t, extra), timeout_s=timeout)
        except UnavailableModel as e:
            unavailable[model] = e.reason
            return None
        except EngineError as e:  # one failed point must not sink the sweep: reported, not zero
            failed.append({"name": f"{model} {point}", "variant": "", "reason": str(e)})
            return None
        doc = r.document
        doc["echo_point"] = {
            "model": model,
            "connections": c,
            "mode": RATE if rate > 0 else CLOSED,
            "rate_per_s": rate,
            "server_cpu": server_cpu,
            "client_cpu": client_cpu,
            "server_threads": SERVER_THREADS if model in MULTI_THREADED else 1,
            "load_threads": plan.threads(c),
            "load_cpus": plan.cpus[: plan.threads(c)],
            "load_pacing": plan.pacing,
            "load_io": plan.io,
            "server_features": features,
            "estimated_sweep_s": estimate_s,
        }
        docs.append(EngineDocument(study, LOAD, doc, point))
        return doc

    # 2. The sweep: closed loop for every model, then a common fixed rate.
    max_at_8: dict[str, float] = {}
    for c in connections:
        achieved = {}
        for model in models:
            progress(f"{model} c={c} closed loop")
            d = load_run(model, c, 0, f"closed/{model}/{c}")
            if d is not None and achieved_per_s(d) > 0:
                achieved[model] = achieved_per_s(d)
        # poll (the ratios' denominator) once more, last: how far one model moves between two
        # runs of the same point in this run, the spread any ratio in the table must beat.
        if "poll" in achieved:
            progress(f"poll c={c} closed loop again")
            load_run("poll", c, 0, f"repeat/poll/{c}")
        if c == connections[0]:
            max_at_8 = dict(achieved)
        common = common_rate_per_s(achieved)
        for model in models:
            progress(f"{model} c={c} at {common:.0f}/s")
            if common > 0:
                load_run(model, c, common, f"rate/{model}/{c}")

    # 3. Measurement floor: the fastest model, one connection, low rate.
    progress("measurement floor")
    fastest = fastest_model(max_at_8)
    if fastest is not None:
        # One connection, one request in flight: closed loop is the same traffic as the ping-pong
        # (like for like); 1000/s adds the idle wake-ups a low rate costs both sides.
        load_run(fastest, 1, 0, f"floor/{fastest}/closed")
        load_run(fastest, 1, 1000, f"floor/{fastest}/rate")

    # 4. Coordinated omission: a stalling server at a fixed rate.
    progress("coordinated-omission demo")
    co_t = Timing(duration_s=max(1.0, 3.0 * scale), warmup_s=0.2)
    stall = ["--stall-every-ms", str(STALL_EVERY_MS), "--stall-ms", str(STALL_MS)]
    d = load_run("epoll", CO_CONNECTIONS, CO_RATE, "co/epoll/8", extra_server=stall, t=co_t)
    if d is not None:
        wrk_ns, why = None, ""
        try:
            with echo_server("epoll", server_cpu, protocol="http", extra=stall) as (port, _pid, _features):
                wrk_ns, why = _wrk_p99_ns(port, CO_CONNECTIONS, co_t.duration_s, client_cpu)
        except (EngineError, subprocess.SubprocessError, OSError) as e:
            why = f"wrk run failed: {e}"
        d["co_demo"] = {
            "stall_every_ms": STALL_EVERY_MS,
            "stall_ms": STALL_MS,
            "rate_per_s": CO_RATE,
            "connections": CO_CONNECTIONS,
            "wrk_p99_ns": wrk_ns,
            "wrk_unavailable": why,
        }
    # Unavailable models and failed points ride on the baseline document (always present).
    for model, reason in unavailable.items():
        docs[0].document.setdefault("unavailable", []).append(
            {"name": f"model {model}", "variant": "", "reason": reason}
        )
    docs[0].document.setdefault("unavailable", []).extend(failed)
    progress("done")
    return docs
