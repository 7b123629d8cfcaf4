"""`tailscope soak` / `make soak`: the socialnet graph held under load over time.

Each concurrency model in turn: start the graph (tracing at the socialnet
study's sampling), measure its closed-loop ceiling, find the highest open-loop
rate that meets the socialnet study's p99 objective (a grid of fractions of the
ceiling, then bisections of the bracket, each point judged as the socialnet
study judges it: p99 within 50 ms, no errors, the rate served), then drive it
open loop at a fraction (default 80 %) of that rate for back-to-back intervals
(default 60 s). A soak exists to find leaks and drift at a load the system is
meant to carry: 80 % of the *closed-loop* ceiling left a thread-per-call model
on 2 cores with < 5 % idle CPU, so its p99 "drift" was a CPU queue, not a fault. After each interval every service process is read from /proc: resident
memory, threads, open descriptors. What a soak is for is what a short study
cannot see — leaks and drift — so the verdicts compare each interval with the
first one:

- errors: zero in every interval;
- growth: RSS and fds of every service at the last interval within 5 % of the
  first interval's (the first interval is the warm state: pools, caches and
  connection tables are filled by then);
- drift: the last interval's p99 within 10 % of the first interval's.

Beside the drift verdict, what could explain a drift, read in the same
intervals: the graph's own CPU time per request (a graph that gets slower
spends more per request), the CPU the hypervisor stole and the CPU other
processes used (a machine that gets busier leaves the graph less), the p99 of
every interval with its Theil–Sen trend (a leak is a trend; noise is not), and
the rank correlation of p99 with the other processes' CPU. Before the first
interval a short settle run at the same rate fills pools and caches, so every
interval is measured alike (no warm-up inside interval 1).

An interval's p99 can come from a few seconds inside it. While each interval
runs, the machine is sampled every 100 ms (idle CPU from /proc/stat, runnable
tasks from procs_running) and the load generator writes one histogram per
second; a second with less than 5 % idle CPU is a CPU-saturation episode, and
the p99 of the requests started more than a second away from any episode is
reported beside the interval's p99. A thread-per-call model at 80 % of its
ceiling on 2 cores showed why (docs/soak.md): most intervals held a steady
p99, one held a ~4-second episode (idle 1–2 %, 30–90 runnable tasks instead
of ~10) that made its p99 six times larger.

Beside each interval's worst second: what set it apart, read in the same run — the share of the
second the machine stalled on a CPU, on I/O or on memory (PSI) against the interval's median second,
a service or store that took more CPU then than in its median second, an episode or a document-store
maintenance pass near it. Maintenance itself runs between intervals by default (`MAINTENANCE_MODES`).

The wall-clock budget is the whole soak (`--minutes`, split evenly over the
models, at least one interval each). Every figure printed is read from the
load generator's documents and /proc in this run; the JSON written beside it
holds the same numbers.
"""

from __future__ import annotations

import bisect
import itertools
import json
import os
import resource
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tailscope.lab import procstat, redis_stats, topology
from tailscope.lab.docstore_stats import (
    DocstoreActivity,
    DocstoreMark,
    MaintenancePass,
    activity,
    hold_maintenance,
    read_mark,
    run_maintenance,
)
from tailscope.lab.engines import EngineError
from tailscope.lab.graph import graph, run_front_load
from tailscope.lab.redis_stats import RedisActivity
from tailscope.lab.stores import stores_of
from tailscope.measure.hlog import new_histogram, read_intervals
from tailscope.measure.intervals import QuantileInterval, from_latency
from tailscope.measure.verdict import UNDECIDED, IntervalVerdict, ratio_within
from tailscope.studies.common import stores_text
from tailscope.studies.socialnet import analysis as socialnet
from tailscope.units import fmt_ns

GROWTH_LIMIT = 0.05
DRIFT_LIMIT = 0.10
CEILING_DURATION_S = 5.0
# The open-loop search for the rate the graph carries within the p99 objective: fractions of the
# closed-loop ceiling, then bisections of the bracket (highest met, lowest missed above it).
OBJECTIVE_FRACTIONS = (0.4, 0.6, 0.8, 1.0)
OBJECTIVE_BISECTIONS = 2
OBJECTIVE_POINT_S = 4.0
OBJECTIVE_WARMUP_S = 1.0
# A rate the system is meant to carry also leaves the machine this much idle CPU while the search
# point runs: pool-callback met the p99 objective up to its ceiling on 2 cores, so 80 % of "the
# highest rate meeting it" still held the machine at ~4 % idle and the soak measured a CPU queue
# (docs/measurements.md, 2026-11-26). A point with less headroom counts as not carried.
HEADROOM_IDLE_SHARE = 0.20
SETTLE_S = 5.0
# The graph's CPU per request is a reading beside the targets, not a target of the issue; a
# change larger than this is called a cost drift (the graph's own, not the machine's).
COST_DRIFT_LIMIT = 0.05
# An interval whose machine had less idle CPU than this had no headroom: requests queued for a
# CPU, and its p99 is that queue (a saturated point), not a property of the graph over time.
SATURATED_IDLE_SHARE = 0.05
# A 1 s window in which the hypervisor took at least this share of the VM's CPU time (/proc/stat
# steal): the guest's tasks wanted to run and did not — on the quiet 2-core VM of 2026-11-26 the
# soak's worst stalls (a 5.2 s p99 at 7 % steal over its minute, std-async's p99 rising 20–60× while
# steal went from 0.1 % to 18–25 %) came with it. Such a second is an episode like a saturated one:
# the machine's, not the graph's.
STOLEN_SHARE = 0.20
# Inside an interval: the machine is sampled this often, and judged (idle share, runnable tasks)
# per window of this length, the load generator's histogram interval too.
MACHINE_SAMPLE_S = 0.1
EPISODE_WINDOW_S = 1.0
# The graph's processes' CPU is read on every 10th machine sample (once a second): a store's process
# group is found by scanning /proc (procstat.group_cpu_ticks), a few ms each time here.
PROCESS_SAMPLE_EVERY = 10
# At an interval's worst second, a process whose CPU exceeded its median second by at least this
# share of one CPU is named beside the second (at most WORST_SECOND_PROCESSES of them, largest first).
EXCESS_CPU_SHARE = 0.05
WORST_SECOND_PROCESSES = 3
# A resource stalled (PSI `some`) for at least this share of the worst second, and at least
# PRESSURE_RATIO times its median second's share, is that second's stall.
PRESSURE_STALL_SHARE = 0.10
PRESSURE_RATIO = 2.0
# A document-store maintenance event (autovacuum, autoanalyze, checkpoint) this close to an interval's
# worst second is named beside it: the views give a pass's end time, and a pass on a table of ~10⁵ rows
# lasts well under a second here.
MAINTENANCE_NEAR_S = 2.0
# When the document store's own maintenance runs (a real PostgreSQL only): `between` holds it to the
# gaps between intervals (autovacuum off, checkpoints on request; a VACUUM (ANALYZE) and a CHECKPOINT
# before each interval, while no load runs), `during` leaves PostgreSQL's own schedule. The quiet
# 30-minute soak of 2026-11-27 found a pass ending within 2 s of the worst second in 11 of 30
# intervals under `during`: autovacuum's launcher wakes every 60 s, the intervals last ~61 s, so a
# pass lands in some intervals and not in others, and the drift compares two intervals.
MAINTENANCE_MODES = ("between", "during")
MAINTENANCE_TEXT = {
    "between": "held between intervals (autovacuum and timed checkpoints off)",
    "during": "PostgreSQL's own schedule (autovacuum every 60 s, a checkpoint every 5 min)",
}
# A load second within this many windows of a saturated one is counted in the episode: its
# requests queued behind the episode's, or were still queued when it began.
EPISODE_MARGIN_WINDOWS = 1


@dataclass
class ProcessSample:
    service: str
    rss_bytes: int | None
    threads: int | None
    fds: int | None
    # The descriptors by kind (procstat.fd_kinds: "tcp to redis", "listen :40001", "pipe", …), so a
    # count that grew says which kind did; None where /proc could not tell.
    fd_kinds: dict[str, int] | None = None


@dataclass
class IntervalCost:
    """Where the machine's CPU went during one interval's load run (cumulative /proc counters,
    read before and after it). Shares are of all CPUs' time; None where a counter was unreadable."""

    requests: int
    graph_cpu_per_request_ns: float | None  # the service processes' user+sys ÷ completed requests
    graph_cpu_share: float | None
    load_cpu_share: float | None  # the load generator (a reaped child of this process)
    steal_share: float | None  # the hypervisor ran something else
    other_cpu_share: float | None  # busy time that was neither the graph, its stores, the load nor stolen
    idle_share: float | None = None  # idle + iowait: what was left; near 0 the graph queued for CPU
    # Each real store server's process group (store:memcached, …); None: its /proc entry was gone.
    store_cpu_shares: dict[str, float | None] = field(default_factory=dict)
    # Each service's own CPU ÷ completed requests (ns): which service a graph-wide cost drift is in.
    service_cpu_per_request_ns: dict[str, float | None] = field(default_factory=dict)


@dataclass
class Episodes:
    """Episodes inside one interval — seconds of CPU saturation (the graph queued for a CPU) or of
    stolen time (the hypervisor did not run the VM) — and the p99 without them.

    Offsets are seconds from the interval's load start. None where it could not be read (no
    machine samples, no per-second histograms)."""

    windows: int  # 1-second windows with machine samples at both ends
    saturated_s: list[int]  # offsets of the windows with < SATURATED_IDLE_SHARE idle
    runnable_max: int | None  # most runnable tasks seen (procs_running, this sampler excluded)
    runnable_median: float | None
    worst_second_s: int | None  # offset of the load second with the highest p99
    worst_second_p99_ns: float | None
    p99_outside_ns: float | None  # p99 of requests started away from every episode
    samples_outside: int = 0
    samples_total: int = 0
    stolen_s: list[int] = field(default_factory=list)  # offsets of the windows with ≥ STOLEN_SHARE stolen
    start_epoch_s: float | None = None  # the load log's start: offsets are from here
    # What the worst second was beside the interval's ordinary second: the share of its wall time the
    # machine stalled per resource (PSI `some`: cpu, io, memory) and the median second's; None
    # without PSI readings.
    worst_second_pressure: dict[str, float] | None = None
    median_pressure: dict[str, float] | None = None
    # The named processes (services, stores) that took more CPU in the ~1 s reading nearest the worst
    # second than in their median one: (name, share of one CPU then, median share), largest excess
    # first; `worst_second_machine` the same for the whole machine's busy CPU not stolen (CPUs).
    worst_second_processes: list[tuple[str, float, float]] = field(default_factory=list)
    worst_second_processes_read: bool = False

    @property
    def any(self) -> bool:
        return bool(self.saturated_s or self.stolen_s)


@dataclass
class Interval:
    index: int
    requested_per_s: float
    achieved_per_s: float
    p50_ns: float | None
    p99_ns: float | None
    errors: int
    processes: list[ProcessSample]
    cost: IntervalCost | None = None
    episodes: Episodes | None = None
    # The document store's own maintenance during the interval (lab/docstore_stats.py); None with the
    # reason when the graph had no real document store or its counters could not be read.
    docstore: DocstoreActivity | None = None
    docstore_reason: str = ""
    # The graph's Redis: its memory against its cap, evictions, hits and misses (lab/redis_stats.py).
    redis: RedisActivity | None = None
    redis_reason: str = ""
    # The document store's VACUUM (ANALYZE) + CHECKPOINT run just before this interval's load, when the
    # soak holds maintenance between intervals (None with the reason otherwise).
    maintenance: MaintenancePass | None = None
    maintenance_reason: str = ""
    # The p99's distribution-free 95 % interval as the load generator computed it (measure.intervals),
    # over `samples` requests; None with the reason when there was none.
    p99_ci_ns: tuple[float, float] | None = None
    p99_ci_unavailable: str = ""
    samples: int = 0
    # The fixed-work probe's median CPU time over the interval (procstat.fixed_work_cpu_ns) and how many
    # probes it is the median of: the machine's own speed, read beside the graph's cost.
    probe_cpu_ns: float | None = None
    probes: int = 0


@dataclass
class ModelSoak:
    model: str
    ceiling_per_s: float
    rate_per_s: float
    intervals: list[Interval] = field(default_factory=list)
    verdicts: list[str] = field(default_factory=list)
    settle_errors: int = 0
    # The highest open-loop rate that met the p99 objective with the machine at least
    # HEADROOM_IDLE_SHARE idle (None: no tried rate did, and the soak held a fraction of the
    # lowest tried rate instead), every (rate, met the objective) tried, and each point's idle
    # share (None: /proc/stat gave no reading).
    objective_rate_per_s: float | None = None
    objective_points: list[tuple[float, bool]] = field(default_factory=list)
    objective_idle_shares: list[float | None] = field(default_factory=list)
    # What the graph's stores were ("real", or "simulated (reason)": studies.common.stores_text).
    stores: str = ""
    # When the document store's maintenance ran (MAINTENANCE_MODES), said as a sentence; "" without a
    # real document store.
    docstore_maintenance: str = ""


def sample_process(service: str, pid: int, port_names: dict[int, str] | None = None) -> ProcessSample:
    """RSS, threads and open descriptors (counted and by kind) of one live process; None where /proc
    cannot tell. `port_names` names the graph's listening ports (its services and stores)."""
    rss = threads = fds = None
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except (OSError, ValueError):
        pass
    return ProcessSample(service, rss, threads, fds, procstat.fd_kinds(pid, port_names) if fds is not None else None)


def settled_samples(
    pids: dict[str, int], timeout_s: float = 3.0, step_s: float = 0.1, port_names: dict[int, str] | None = None
) -> list[ProcessSample]:
    """Samples every process once its descriptor count has stopped changing.

    An interval's load generator has just closed its connections when the sample is taken, and a
    server closes its side only when it reads the FIN; sampling at once counted those sockets in
    some intervals and not in others (the first 30-minute soak saw the front's fds alternate
    70/102, 32 being the load's connections). Waiting until two samples agree (or timeout_s) makes
    intervals comparable; a count that is still moving at the timeout is reported as read.
    """
    deadline = time.monotonic() + timeout_s
    previous = [sample_process(s, p, port_names) for s, p in sorted(pids.items())]
    while time.monotonic() < deadline:
        time.sleep(step_s)
        current = [sample_process(s, p, port_names) for s, p in sorted(pids.items())]
        if [c.fds for c in current] == [p.fds for p in previous]:
            return current
        previous = current
    return previous


@dataclass
class CpuMark:
    """Cumulative CPU counters at one moment: the machine's, the graph's and this process's reaped children's."""

    system: procstat.SystemSnapshot
    graph_ticks: int | None  # None: a service's /proc entry was gone
    children_cpu_s: float
    store_ticks: dict[str, int | None] = field(default_factory=dict)  # by store process name
    service_ticks: dict[str, int | None] = field(default_factory=dict)  # by service


def cpu_mark(pids: dict[str, int], store_pids: dict[str, int] | None = None) -> CpuMark:
    by_service = {name: procstat.process_cpu_ticks(p) for name, p in pids.items()}
    ticks = list(by_service.values())
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    graph = None if any(t is None for t in ticks) else sum(t for t in ticks if t is not None)
    stores = {name: procstat.group_cpu_ticks(pid) for name, pid in (store_pids or {}).items()}
    return CpuMark(procstat.read_system(), graph, ru.ru_utime + ru.ru_stime, stores, by_service)


def interval_cost(before: CpuMark, after: CpuMark, requests: int) -> IntervalCost:
    """The interval's CPU split. The load generator is the only child reaped between the marks (it
    runs as a child of this process and is waited for), so the children's CPU difference is its."""
    total = after.system.cpu_total_ticks - before.system.cpu_total_ticks
    if total <= 0:
        return IntervalCost(requests, None, None, None, None, None, None)
    tick_s = 1.0 / procstat.CLK_TCK
    load = (after.children_cpu_s - before.children_cpu_s) / tick_s
    steal = after.system.cpu_steal_ticks - before.system.cpu_steal_ticks
    busy = after.system.cpu_busy_ticks - before.system.cpu_busy_ticks
    idle = max(0.0, 1.0 - busy / total)
    store: dict[str, float | None] = {}
    for name, b in before.store_ticks.items():
        a = after.store_ticks.get(name)
        store[name] = None if a is None or b is None else max(0, a - b) / total
    if before.graph_ticks is None or after.graph_ticks is None:
        return IntervalCost(requests, None, None, load / total, steal / total, None, idle, store)
    graph = after.graph_ticks - before.graph_ticks
    per_request = graph * tick_s * 1e9 / requests if requests > 0 else None
    services: dict[str, float | None] = {}
    for name, b in before.service_ticks.items():
        a = after.service_ticks.get(name)
        services[name] = None if a is None or b is None or requests <= 0 else (a - b) * tick_s * 1e9 / requests
    # Tick rounding can make the remainder slightly negative on an otherwise idle machine. A store
    # whose share is unreadable stays in "other" (the line says it is unavailable).
    stores_ticks = sum(s * total for s in store.values() if s is not None)
    other = max(0.0, busy - steal - graph - load - stores_ticks)
    return IntervalCost(
        requests, per_request, graph / total, load / total, steal / total, other / total, idle, store, services
    )


@dataclass
class MachinePoint:
    t: float  # time.time(), the clock of the load generator's hlog timestamps
    busy_ticks: int
    total_ticks: int
    runnable: int  # procs_running minus the sampling thread itself
    steal_ticks: int = 0  # /proc/stat steal: the hypervisor ran something else
    # PSI's cumulative `some` stall per resource, µs (procstat.read_pressure); None without PSI.
    pressure_us: dict[str, int] | None = None
    # Every named process's cumulative CPU ticks (services: the process; stores: the process group),
    # read on every PROCESS_SAMPLE_EVERY-th sample only; None on the others.
    cpu_ticks: dict[str, int | None] | None = None
    # The fixed-work probe's CPU time (procstat.fixed_work_cpu_ns), on the same samples as cpu_ticks.
    probe_cpu_ns: int | None = None


class MachineSampler(procstat.PeriodicSampler):
    """Samples /proc/stat and /proc/pressure every MACHINE_SAMPLE_S on a thread while an interval's
    load runs (and once at each end), and the graph's processes' CPU on every
    PROCESS_SAMPLE_EVERY-th sample: what a second's stall was — a CPU queue, an I/O or memory stall,
    one process taking more CPU than it usually does — read beside the second itself."""

    def __init__(
        self,
        period_s: float = MACHINE_SAMPLE_S,
        pids: dict[str, int] | None = None,
        store_pids: dict[str, int] | None = None,
    ) -> None:
        super().__init__(period_s, "soak-machine-sampler")
        self.points: list[MachinePoint] = []
        self._pids = dict(pids or {})
        self._store_pids = dict(store_pids or {})
        self._ticks = 0

    def _process_ticks(self) -> dict[str, int | None] | None:
        if not self._pids and not self._store_pids:
            return None
        ticks: dict[str, int | None] = {n: procstat.process_cpu_ticks(p) for n, p in self._pids.items()}
        ticks.update({n: procstat.group_cpu_ticks(p) for n, p in self._store_pids.items()})
        return ticks

    def tick(self) -> None:
        snap = procstat.read_system()
        if snap.cpu_total_ticks > 0:
            every = self._ticks % PROCESS_SAMPLE_EVERY == 0
            processes = self._process_ticks() if every else None
            probe = procstat.fixed_work_cpu_ns() if every else None
            self._ticks += 1
            self.points.append(
                MachinePoint(
                    time.time(),
                    snap.cpu_busy_ticks,
                    snap.cpu_total_ticks,
                    max(0, snap.procs_running - 1),
                    snap.cpu_steal_ticks,
                    procstat.read_pressure(),
                    processes,
                    probe,
                )
            )

    begin = tick

    def end(self) -> None:
        self._ticks = 0  # the last sample reads the processes too: the final segment has both ends
        self.tick()


@dataclass(frozen=True)
class Window:
    """One 1 s window of machine samples: idle and stolen shares of its CPU time (None: too few
    samples), the runnable counts seen in it, and the share of its wall time each resource was
    stalled (PSI `some`; None without PSI readings at both ends)."""

    idle: float | None
    steal: float | None
    runnable: list[int]
    pressure: dict[str, float] | None = None


def machine_windows(points: list[MachinePoint], start: float, n: int, window_s: float = EPISODE_WINDOW_S):
    """n windows from `start`. The counters' difference spans the last sample before the window to
    the last one inside it."""
    times = [p.t for p in points]
    out: list[Window] = []
    for k in range(n):
        lo_i = bisect.bisect_left(times, start + k * window_s)
        hi_i = bisect.bisect_left(times, start + (k + 1) * window_s)
        inside = points[lo_i:hi_i]
        a = points[lo_i - 1] if lo_i > 0 else (inside[0] if inside else None)
        b = inside[-1] if inside else None
        idle = steal = None
        pressure = None
        if a is not None and b is not None and b.total_ticks > a.total_ticks:
            total = b.total_ticks - a.total_ticks
            idle = max(0.0, 1.0 - (b.busy_ticks - a.busy_ticks) / total)
            steal = max(0.0, (b.steal_ticks - a.steal_ticks) / total)
            if a.pressure_us and b.pressure_us and b.t > a.t:
                wall_us = (b.t - a.t) * 1e6
                pressure = {
                    r: min(1.0, max(0.0, (b.pressure_us[r] - a.pressure_us[r]) / wall_us))
                    for r in procstat.PRESSURE_RESOURCES
                    if r in a.pressure_us and r in b.pressure_us
                }
        out.append(Window(idle, steal, [p.runnable for p in inside], pressure))
    return out


@dataclass(frozen=True)
class ProcessSegment:
    """The named processes' CPU between two consecutive process readings (~1 s apart), each as a
    share of one CPU; None where a reading was missing."""

    mid_t: float
    cpu: dict[str, float | None]


def process_segments(points: list[MachinePoint]) -> list[ProcessSegment]:
    read = [p for p in points if p.cpu_ticks is not None]
    out = []
    for a, b in zip(read, read[1:]):
        wall_s = b.t - a.t
        if wall_s <= 0 or a.cpu_ticks is None or b.cpu_ticks is None:
            continue
        cpu: dict[str, float | None] = {}
        for name, after in b.cpu_ticks.items():
            before = a.cpu_ticks.get(name)
            cpu[name] = None if after is None or before is None else max(0, after - before) / procstat.CLK_TCK / wall_s
        out.append(ProcessSegment((a.t + b.t) / 2, cpu))
    return out


def per_second_histograms(hlog: Path, tag: str = "latency_intended") -> tuple[float, list[tuple[float, Any]]]:
    """(the log's start, epoch seconds; [(offset_s, histogram)]) from the load generator's .hlog."""
    start, rows = read_intervals(hlog, tag)
    if start is None:
        raise ValueError(f"{hlog}: no StartTime line")
    return start, rows


def docstore_activity(
    before: DocstoreMark | None, after: DocstoreMark | None, start_epoch_s: float, end_epoch_s: float
) -> DocstoreActivity | None:
    return activity(before, after, start_epoch_s, end_epoch_s) if before and after else None


def find_episodes(points: list[MachinePoint], hlog: Path | None) -> Episodes | None:
    """The interval's saturated and stolen windows, its worst second and its p99 away from them."""
    if hlog is None or not hlog.exists() or len(points) < 2:
        return None
    try:
        start, rows = per_second_histograms(hlog)
    except (OSError, ValueError):
        return None
    if not rows:
        return None
    n = int(max(off for off, _ in rows) // EPISODE_WINDOW_S) + 1
    windows = machine_windows(points, start, n)
    saturated = [k for k, w in enumerate(windows) if w.idle is not None and w.idle < SATURATED_IDLE_SHARE]
    stolen = [k for k, w in enumerate(windows) if w.steal is not None and w.steal >= STOLEN_SHARE]
    runnable = [r for w in windows for r in w.runnable]
    outside = new_histogram()
    total = 0
    worst: tuple[float, int] | None = None
    near = {k + d for k in {*saturated, *stolen} for d in range(-EPISODE_MARGIN_WINDOWS, EPISODE_MARGIN_WINDOWS + 1)}
    for off, h in rows:
        count = h.get_total_count()
        if count == 0:
            continue
        total += count
        second = int(off // EPISODE_WINDOW_S)
        p99 = float(h.get_value_at_percentile(99))
        if worst is None or p99 > worst[0]:
            worst = (p99, second)
        if second not in near:
            outside.add(h)
    kept = outside.get_total_count()
    pressure_at, pressure_median = _worst_second_pressure(windows, worst[1] if worst else None)
    processes, read = _worst_second_processes(points, start, worst[1] if worst else None)
    return Episodes(
        windows=sum(1 for w in windows if w.idle is not None),
        saturated_s=saturated,
        runnable_max=max(runnable) if runnable else None,
        runnable_median=float(statistics.median(runnable)) if runnable else None,
        worst_second_s=worst[1] if worst else None,
        worst_second_p99_ns=worst[0] if worst else None,
        p99_outside_ns=float(outside.get_value_at_percentile(99)) if kept else None,
        samples_outside=kept,
        samples_total=total,
        stolen_s=stolen,
        start_epoch_s=start,
        worst_second_pressure=pressure_at,
        median_pressure=pressure_median,
        worst_second_processes=processes,
        worst_second_processes_read=read,
    )


def _worst_second_pressure(
    windows: list[Window], worst: int | None
) -> tuple[dict[str, float] | None, dict[str, float] | None]:
    """PSI at the worst second and over the interval's median second, per resource."""
    if worst is None or worst >= len(windows) or windows[worst].pressure is None:
        return None, None
    read = [w.pressure for w in windows if w.pressure]
    median = {r: float(statistics.median(p[r] for p in read if r in p)) for r in procstat.PRESSURE_RESOURCES}
    return windows[worst].pressure, median


def _worst_second_processes(
    points: list[MachinePoint], start: float, worst: int | None
) -> tuple[list[tuple[str, float, float]], bool]:
    """The processes that took more CPU near the worst second than in their median reading (and
    whether the processes were read at all)."""
    segments = process_segments(points)
    if worst is None or len(segments) < 2:
        return [], False
    mid = start + (worst + 0.5) * EPISODE_WINDOW_S
    near = min(segments, key=lambda g: abs(g.mid_t - mid))
    excess = []
    for name, at in near.cpu.items():
        values = [v for g in segments if (v := g.cpu.get(name)) is not None]
        if at is None or not values:
            continue
        median = float(statistics.median(values))
        if at - median >= EXCESS_CPU_SHARE:
            excess.append((name, at, median))
    excess.sort(key=lambda x: x[2] - x[1])
    return excess[:WORST_SECOND_PROCESSES], True


PRESSURE_NAMES = {"cpu": "a CPU queue", "io": "an I/O stall", "memory": "a memory stall"}


def worst_second_causes(e: Episodes, maintenance: list[str] | None = None) -> list[str]:
    """What set the interval's worst second apart, each read in the run, strongest first: an episode
    it lay in (stolen time, saturation), a stalled resource (PSI), a process that took more CPU than
    in its median second, a document-store maintenance pass near it. Empty: nothing read set it apart."""
    if e.worst_second_s is None:
        return []
    causes = []
    w = e.worst_second_s
    if any(abs(k - w) <= EPISODE_MARGIN_WINDOWS for k in e.stolen_s):
        causes.append("stolen time")
    if any(abs(k - w) <= EPISODE_MARGIN_WINDOWS for k in e.saturated_s):
        causes.append("CPU saturation")
    if e.worst_second_pressure and e.median_pressure:
        for r in procstat.PRESSURE_RESOURCES:
            at, med = e.worst_second_pressure.get(r), e.median_pressure.get(r)
            if at is not None and med is not None and at >= PRESSURE_STALL_SHARE and at >= PRESSURE_RATIO * med:
                causes.append(f"{PRESSURE_NAMES[r]} ({at * 100:.0f} % of the second against {med * 100:.0f} %)")
    for name, at, med in e.worst_second_processes:
        causes.append(f"{name.removeprefix('store:')} at {at:.2f} CPU against {med:.2f}")
    causes.extend(maintenance or [])
    return causes


def pressure_text(p: dict[str, float] | None) -> str:
    if not p:
        return "unavailable"
    return ", ".join(f"{r} {p[r] * 100:.0f} %" for r in procstat.PRESSURE_RESOURCES if r in p)


def spans_text(seconds: list[int]) -> str:
    """[3, 4, 5, 9] -> "3–6 s, 9–10 s": runs of consecutive windows as time ranges."""
    runs: list[list[int]] = []
    for s in seconds:
        if runs and s == runs[-1][1]:
            runs[-1][1] = s + 1
        else:
            runs.append([s, s + 1])
    return ", ".join(f"{a}–{b} s" for a, b in runs)


def is_saturated(iv: Interval) -> bool:
    """The machine had (almost) no idle CPU during the interval."""
    return bool(iv.cost and iv.cost.idle_share is not None and iv.cost.idle_share < SATURATED_IDLE_SHARE)


def theil_sen_slope(points: list[tuple[float, float]]) -> float | None:
    """Median of the pairwise slopes: a trend that one burst cannot make (a least-squares line can)."""
    slopes = [(y2 - y1) / (x2 - x1) for (x1, y1), (x2, y2) in itertools.combinations(points, 2) if x2 != x1]
    return statistics.median(slopes) if slopes else None


def share_text(x: float | None) -> str:
    return "unavailable" if x is None else f"{x * 100:.1f} %"


def _growth(first: int | None, last: int | None) -> float | None:
    if first is None or last is None or first <= 0:
        return None
    return last / first - 1.0


def verdicts(soak: ModelSoak) -> list[str]:
    """One line per target, each computed from the intervals (nothing assumed)."""
    iv = soak.intervals
    if not iv:
        return ["no interval completed: nothing to judge"]
    out = []
    errors = sum(i.errors for i in iv) + soak.settle_errors
    settle = f" (+{soak.settle_errors} in the settle run)" if soak.settle_errors else ""
    out.append(f"errors: {errors} in {len(iv)} interval(s){settle} — {'met' if errors == 0 else 'NOT met'} (target 0)")
    if len(iv) < 2:
        out.append("growth and drift: unavailable — one interval only (raise --minutes)")
        return out
    first, last = iv[0], iv[-1]
    worst: tuple[float, str, int, str] | None = None
    by_kind = ""
    unknown = []
    for k, (a, b) in enumerate(zip(first.processes, last.processes)):
        for what, x, y in (("RSS", a.rss_bytes, b.rss_bytes), ("fds", a.fds, b.fds)):
            g = _growth(x, y)
            if g is None:
                unknown.append(f"{a.service} {what}")
            elif worst is None or g > worst[0]:
                worst = (g, f"{a.service} {what}", k, what)
    if worst is not None:
        ok = worst[0] <= GROWTH_LIMIT
        if not ok and worst[3] == "fds":
            by_kind = _fd_change_text(first.processes[worst[2]], last.processes[worst[2]])
        out.append(
            f"growth: largest {worst[0] * 100:+.1f} % ({worst[1]}, interval {last.index} vs 1) — "
            f"{'met' if ok else 'NOT met'} (target ≤ {GROWTH_LIMIT * 100:.0f} %)"
            + ("" if ok else _climb_text(iv, worst[2], worst[3]) + by_kind)
        )
    if unknown:
        out.append(f"growth unavailable for {', '.join(unknown)}: /proc could not be read (process gone?)")
    if first.p99_ns and last.p99_ns:
        drift = last.p99_ns / first.p99_ns - 1.0
        ok = abs(drift) <= DRIFT_LIMIT
        flagged = [str(i.index) for i in (first, last) if is_saturated(i)]
        out.append(
            f"p99 drift: {drift * 100:+.1f} % (interval {last.index} vs 1) — "
            f"{'met' if ok else 'NOT met'} (target within ±{DRIFT_LIMIT * 100:.0f} %)"
            + (f"; interval(s) {', '.join(flagged)} saturated the machine (see 'saturated')" if flagged else "")
            + _outside_drift_text(first, last)
            + drift_interval_text(first, last)
            + _machine_speed_text(first, last)
        )
    else:
        out.append("p99 drift: unavailable — an interval recorded no latency")
    out.extend(drift_readings(iv))
    out.extend(maintenance_lines(soak))
    return out


def _machine_speed_text(first: Interval, last: Interval) -> str:
    """Said on the drift line when the fixed-work probe moved beyond COST_DRIFT_LIMIT between the two
    intervals it compares: then the drift compares the graph on two machines, as far as the CPU goes
    (the soak of 2026-11-27 12:00: the probe moved −20 … +9 % within a model's six minutes, and the
    graph's CPU per request with it)."""
    change = probe_change(first, last)
    if change is None or abs(change) <= COST_DRIFT_LIMIT:
        return ""
    return (
        f"; the machine ran the same fixed work {abs(change) * 100:.1f} % {'slower' if change > 0 else 'faster'} "
        f"in interval {last.index} than in {first.index} (fixed-work probe): the drift compares the graph on a "
        "machine of another speed"
    )


def _climb_text(iv: list[Interval], k: int, what: str) -> str:
    """Whether a growth beyond the limit climbed in every interval (what a leak does) or fell
    between them (a count that follows the load, e.g. pooled connections), from the series."""
    series = []
    for i in iv:
        p = i.processes[k] if k < len(i.processes) else None
        series.append(None if p is None else (p.rss_bytes if what == "RSS" else p.fds))
    if len(series) < 3 or any(v is None for v in series):
        return ""
    values = [v for v in series if v is not None]
    text = ", ".join(f"{v / 2**20:.1f} MiB" if what == "RSS" else str(v) for v in values)
    if any(b < a for a, b in zip(values, values[1:])):
        return f"; not a steady climb: it fell between intervals ({text})"
    return f"; it never fell between intervals ({text})"


def _outside_drift_text(first: Interval, last: Interval) -> str:
    """The same drift over the requests started away from the episodes (CPU saturation, stolen
    time), when either interval had one to leave out (otherwise it is the drift above)."""
    a, b = first.episodes, last.episodes
    if a is None or b is None or not (a.any or b.any):
        return ""
    if not a.p99_outside_ns or not b.p99_outside_ns:
        return "; outside the episodes: unavailable (an interval was all episode)"
    d = b.p99_outside_ns / a.p99_outside_ns - 1.0
    ok = abs(d) <= DRIFT_LIMIT
    return f"; outside the episodes {d * 100:+.1f} % ({'within' if ok else 'beyond'} the target)"


def episode_readings(iv: list[Interval]) -> list[str]:
    """Per interval: its seconds of CPU saturation and of stolen time, its runnable tasks, its worst
    second, and its p99 away from the episodes — whether a p99 is one episode's or the whole interval's."""
    eps = [(i, i.episodes) for i in iv]
    if all(e is None for _, e in eps):
        return ["Episodes: unavailable — no per-second machine samples or load histograms were read"]
    parts = []
    for i, e in eps:
        if e is None:
            parts.append(f"#{i.index} unavailable")
            continue
        runnable = (
            f"runnable tasks up to {e.runnable_max} (median {e.runnable_median:g})"
            if e.runnable_max is not None and e.runnable_median is not None
            else "runnable tasks unavailable"
        )
        sat = f"{len(e.saturated_s)} s saturated ({spans_text(e.saturated_s)})" if e.saturated_s else "none saturated"
        if e.stolen_s:
            sat += f", {len(e.stolen_s)} s stolen ({spans_text(e.stolen_s)})"
        worst = (
            f"worst second {fmt_ns(e.worst_second_p99_ns)} p99 at {e.worst_second_s} s"
            if e.worst_second_p99_ns is not None
            else "no second recorded"
        )
        if e.worst_second_p99_ns is not None:
            causes = worst_second_causes(e, maintenance_near_worst(i))
            worst += (
                f" (stalled: {pressure_text(e.worst_second_pressure)}; median second {pressure_text(e.median_pressure)}"
                f"; {'; '.join(causes) if causes else 'nothing read set it apart'}"
                + ("" if e.worst_second_processes_read else "; processes' CPU not read")
                + ")"
            )
        outside = (
            f"p99 outside the episodes {fmt_ns(e.p99_outside_ns)} ({e.samples_outside:,} of {e.samples_total:,} requests)"
            if e.any and e.p99_outside_ns
            else ""
        )
        parts.append(f"#{i.index}: {sat} of {e.windows} s, {runnable}, {worst}" + (f", {outside}" if outside else ""))
    return [
        f"Episodes (1 s windows saturated — < {SATURATED_IDLE_SHARE * 100:.0f} % idle — or stolen — ≥ "
        f"{STOLEN_SHARE * 100:.0f} % of the CPU time taken by the hypervisor; requests started within "
        f"{EPISODE_MARGIN_WINDOWS} s of one are left out of 'p99 outside'): " + "; ".join(parts)
    ]


def drift_readings(iv: list[Interval]) -> list[str]:
    """What could explain a p99 drift, each read from the intervals: the p99s and their trend, the
    graph's own CPU per request, and the machine's stolen and other CPU (with their rank
    correlation to p99 when there are enough intervals to rank)."""
    out = []
    p99s = [(float(i.index), i.p99_ns) for i in iv if i.p99_ns]
    if len(p99s) >= 2:
        median = statistics.median(v for _, v in p99s)
        slope = theil_sen_slope(p99s)
        trend = "unavailable" if slope is None or median <= 0 else f"{slope / median * 100:+.1f} % of the median"
        out.append(f"p99 by interval: {', '.join(fmt_ns(v) for _, v in p99s)}; Theil–Sen trend {trend} per interval")
    out.extend(episode_readings(iv))
    out.extend(worst_second_summary(iv))
    first, last = iv[0].cost, iv[-1].cost
    if first is None or last is None:
        out.append("graph CPU per request: unavailable — the intervals' CPU was not read")
        return out
    a, b = first.graph_cpu_per_request_ns, last.graph_cpu_per_request_ns
    if a and b:
        d = b / a - 1.0
        verdict = "steady" if abs(d) <= COST_DRIFT_LIMIT else "DRIFTED"
        out.append(
            f"graph CPU per request: {fmt_ns(a)} → {fmt_ns(b)} ({d * 100:+.1f} %, interval {iv[-1].index} vs 1) — "
            f"{verdict} (a reading, ±{COST_DRIFT_LIMIT * 100:.0f} %: the graph's own cost)"
            + (_service_cost_text(first, last) if verdict == "DRIFTED" else "")
        )
        out.extend(cost_attribution(first, last, iv[0], iv[-1]))
    else:
        out.append("graph CPU per request: unavailable — a service's /proc entry was gone or no request completed")
    out.append(
        f"machine (interval 1 → {iv[-1].index}, of all CPUs' time): stolen by the hypervisor "
        f"{share_text(first.steal_share)} → {share_text(last.steal_share)}, other processes "
        f"{share_text(first.other_cpu_share)} → {share_text(last.other_cpu_share)}, load generator "
        f"{share_text(first.load_cpu_share)} → {share_text(last.load_cpu_share)}"
    )
    if first.store_cpu_shares:
        out.append(
            "store servers (process groups, of all CPUs' time): "
            + ", ".join(
                f"{name.removeprefix('store:')} {share_text(first.store_cpu_shares.get(name))} → "
                f"{share_text(last.store_cpu_shares.get(name))}"
                for name in sorted(first.store_cpu_shares)
            )
        )
    out.extend(docstore_lines(iv))
    out.extend(redis_lines(iv))
    saturated = [i.index for i in iv if is_saturated(i)]
    idle = ", ".join(share_text(i.cost.idle_share if i.cost else None) for i in iv)
    if saturated:
        out.append(
            f"saturated: interval(s) {', '.join(map(str, saturated))} left the machine < "
            f"{SATURATED_IDLE_SHARE * 100:.0f} % idle (idle by interval: {idle}): requests queued for a CPU there, "
            "so their p99 is that queue; a drift between saturated intervals says how busy the machine was, "
            "not how the graph aged"
        )
    else:
        out.append(f"idle CPU by interval: {idle} (no interval saturated the machine)")
    out.extend(
        rank_line(
            "p99 vs other processes' CPU",
            [(i.p99_ns, i.cost.other_cpu_share) for i in iv if i.cost and i.cost.other_cpu_share is not None],
        )
    )
    out.extend(rank_line("p99 vs the fixed-work probe's CPU time", [(i.p99_ns, i.probe_cpu_ns) for i in iv]))
    return out


def rank_line(what: str, pairs: list[tuple[float | None, float | None]]) -> list[str]:
    """ "WHAT over N intervals: Spearman ρ …" over the intervals where both readings exist; nothing
    below 4 such intervals (too few to rank), and unavailable for a constant series (its ranks say
    nothing)."""
    ranked = [(x, y) for x, y in pairs if x and y is not None]
    if len(ranked) < 4:
        return []
    xs, ys = [x for x, _ in ranked], [y for _, y in ranked]
    if len(set(xs)) < 2 or len(set(ys)) < 2:
        rho_text = "unavailable (a constant series)"
    else:
        from scipy.stats import spearmanr

        rho_text = f"{float(spearmanr(xs, ys).statistic):+.2f}"
    return [f"{what} over {len(ranked)} intervals: Spearman ρ {rho_text}"]


def worst_second_summary(iv: list[Interval]) -> list[str]:
    """Across the intervals: how many worst seconds something read in the run set apart, by kind,
    and which intervals' worst seconds nothing did (their cause is not named by this soak)."""
    judged = [i for i in iv if i.episodes and i.episodes.worst_second_s is not None]
    if not judged:
        return []
    kinds: dict[str, int] = {}
    unnamed = []
    for i in judged:
        assert i.episodes is not None
        causes = worst_second_causes(i.episodes, maintenance_near_worst(i))
        if not causes:
            unnamed.append(str(i.index))
        for c in causes:
            kind = c.split(" (")[0].split(" at ")[0]
            kinds[kind] = kinds.get(kind, 0) + 1
    named = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items(), key=lambda x: -x[1]))
    line = f"worst seconds set apart by a reading in {len(judged) - len(unnamed)} of {len(judged)} interval(s)"
    line += f" ({named})" if named else ""
    line += f"; by none in #{', #'.join(unnamed)}" if unnamed else ""
    return [line]


def maintenance_lines(soak: ModelSoak) -> list[str]:
    """How the document store's maintenance was scheduled, and the passes run between intervals."""
    if not soak.docstore_maintenance:
        return []
    passes = [i.maintenance for i in soak.intervals if i.maintenance is not None]
    if not passes:
        why = sorted({i.maintenance_reason for i in soak.intervals if i.maintenance_reason})
        return [f"document store maintenance: {soak.docstore_maintenance}" + (f" ({'; '.join(why)})" if why else "")]
    secs = [p.seconds for p in passes]
    dead = [p.dead_rows_before for p in passes]
    return [
        f"document store maintenance: {soak.docstore_maintenance}; VACUUM (ANALYZE) + CHECKPOINT before "
        f"{len(passes)} of {len(soak.intervals)} interval(s) took {min(secs):.2f}–{max(secs):.2f} s and found "
        f"{min(dead):,}–{max(dead):,} dead rows"
    ]


def _fd_change_text(a: ProcessSample, b: ProcessSample) -> str:
    """Which kinds of descriptor a process gained or lost between two samples."""
    if a.fd_kinds is None or b.fd_kinds is None:
        return ""
    changes = [
        f"{n - a.fd_kinds.get(k, 0):+d} {k}"
        for k in sorted(set(a.fd_kinds) | set(b.fd_kinds))
        if (n := b.fd_kinds.get(k, 0)) != a.fd_kinds.get(k, 0)
    ]
    return f"; by kind: {', '.join(changes)}" if changes else ""


def probe_change(a: Interval, b: Interval) -> float | None:
    """The fixed-work probe's relative change from interval a to b; None where either had no probe."""
    if not a.probe_cpu_ns or not b.probe_cpu_ns:
        return None
    return b.probe_cpu_ns / a.probe_cpu_ns - 1.0


def cost_attribution(first: IntervalCost, last: IntervalCost, a: Interval, b: Interval) -> list[str]:
    """Whether a change in the graph's cost is the machine's or the graph's, as values first: the
    services' CPU-per-request ratios (their median: the change they share; the services off it by more
    than COST_DRIFT_LIMIT: their own), the fixed-work probe's change over the same intervals (the
    machine's speed), and the shared change divided by the probe's: what is left when the machine's
    speed is taken out, judged against COST_DRIFT_LIMIT. The probe's loop lives in the L1 cache, the
    graph's work does not, so a host that slows memory more than arithmetic leaves part of its effect
    in that remainder: a DRIFTED remainder is an upper bound on the graph's own change."""
    ratios = {
        n: y / x
        for n, x in first.service_cpu_per_request_ns.items()
        if x and (y := last.service_cpu_per_request_ns.get(n))
    }
    probe = probe_change(a, b)
    probe_text = (
        f"unavailable (no probe reading in interval {a.index if not a.probe_cpu_ns else b.index})"
        if probe is None
        else f"{fmt_ns(a.probe_cpu_ns or 0)} → {fmt_ns(b.probe_cpu_ns or 0)} ({probe * 100:+.1f} %, medians of "
        f"{a.probes} and {b.probes})"
    )
    line = f"fixed-work probe (the same loop's CPU time, once a second): {probe_text}"
    if len(ratios) < 2:
        return [line]
    common = statistics.median(ratios.values()) - 1.0
    own = sorted(
        ((r - 1.0 - common, n) for n, r in ratios.items() if abs(r - 1.0 - common) > COST_DRIFT_LIMIT),
        key=lambda x: -abs(x[0]),
    )
    line += (
        f"; the {len(ratios)} services' CPU per request moved {common * 100:+.1f} % together (median), "
        f"range {(min(ratios.values()) - 1) * 100:+.0f}…{(max(ratios.values()) - 1) * 100:+.0f} %"
    )
    line += (
        "; off the shared change by more than "
        f"{COST_DRIFT_LIMIT * 100:.0f} %: "
        + ", ".join(f"{n.removesuffix('-service')} {d * 100:+.0f} %" for d, n in own)
        if own
        else f"; none off it by more than {COST_DRIFT_LIMIT * 100:.0f} %"
    )
    if probe is not None:
        own_change = (1.0 + common) / (1.0 + probe) - 1.0
        verdict = (
            "steady: the machine's speed accounts for the rest"
            if abs(own_change) <= COST_DRIFT_LIMIT
            else "DRIFTED: beyond the machine's speed, the graph's own work per request changed"
        )
        line += f"; divided by the probe's change, {own_change * 100:+.1f} % — {verdict}"
    return [line]


def _service_cost_text(first: IntervalCost, last: IntervalCost) -> str:
    """The services whose own CPU per request moved most between two intervals (largest change in ns
    first, at most three): where a graph-wide cost drift is."""
    moved = []
    for name, a in first.service_cpu_per_request_ns.items():
        b = last.service_cpu_per_request_ns.get(name)
        if a and b:
            moved.append((b - a, name, a, b))
    if not moved:
        return "; by service: unavailable (no per-service CPU was read)"
    moved.sort(key=lambda m: -abs(m[0]))
    return "; by service, largest change first: " + ", ".join(
        f"{name.removesuffix('-service')} {fmt_ns(a)} → {fmt_ns(b)} ({(b / a - 1) * 100:+.0f} %)"
        for _, name, a, b in moved[:3]
    )


def maintenance_near_worst(i: Interval) -> list[str]:
    """The document store's maintenance events within MAINTENANCE_NEAR_S of the interval's worst second."""
    e, pg = i.episodes, i.docstore
    if not e or not pg or e.worst_second_s is None or e.start_epoch_s is None:
        return []
    worst_mid_s = e.worst_second_s + EPISODE_WINDOW_S / 2
    near = []
    for ev in pg.events:
        at_s = ev.at_epoch_s - e.start_epoch_s
        if abs(at_s - worst_mid_s) <= MAINTENANCE_NEAR_S:
            near.append(f"{ev.kind}{' of ' + ev.table if ev.table else ''} at {at_s:.0f} s")
    return near


def unread_line(what: str, reasons: list[str]) -> list[str]:
    """A store reading no interval had: "WHAT: unavailable — why", or nothing for a soak from before it."""
    why = sorted({r for r in reasons if r})
    return [f"{what}: unavailable — {'; '.join(why)}"] if why else []


def docstore_lines(iv: list[Interval]) -> list[str]:
    """What the document store did on its own across the intervals, and whether it sat at the worst seconds."""
    read = [i for i in iv if i.docstore is not None]
    if not read:
        return unread_line("document store maintenance", [i.docstore_reason for i in iv])
    vac = sum(i.docstore.autovacuums for i in read if i.docstore)
    ana = sum(i.docstore.autoanalyzes for i in read if i.docstore)
    ckpt = sum(i.docstore.checkpoints for i in read if i.docstore)
    rows = ", ".join(f"{i.docstore.live_rows:,}" for i in read if i.docstore)
    hits = [(i.index, near) for i in read if (near := maintenance_near_worst(i))]
    judged = sum(1 for i in read if i.episodes and i.episodes.worst_second_s is not None)
    line = (
        f"document store (PostgreSQL) maintenance in {len(read)} interval(s): {vac} autovacuum and {ana} "
        f"autoanalyze pass(es), {ckpt} checkpoint(s); live rows at each interval's end: {rows}; "
        f"the worst second lay within {MAINTENANCE_NEAR_S:g} s of a maintenance event in {len(hits)} of {judged}"
    )
    if hits:
        line += " (" + "; ".join(f"#{k}: {', '.join(n)}" for k, n in hits) + ")"
    out = [line]
    out.extend(
        rank_line(
            "p99 vs the document store's CPU",
            [(i.p99_ns, i.cost.store_cpu_shares.get("store:mongodb")) for i in iv if i.cost],
        )
    )
    out.extend(docstore_io_lines(read))
    return out


def docstore_io_lines(read: list[Interval]) -> list[str]:
    """The document store's I/O per completed request by interval (lab/docstore_stats.IoActivity): whether
    its work per request grew with its tables — blocks read from outside its shared buffers, buffers a
    backend had to write itself to free one, WAL — and its database's size against shared_buffers."""
    with_io = [(i, i.docstore.io) for i in read if i.docstore and i.docstore.io and i.cost and i.cost.requests > 0]
    if not with_io:
        why = sorted({i.docstore.io_reason for i in read if i.docstore and i.docstore.io_reason})
        return [f"document store I/O: unavailable — {'; '.join(why) or 'not read in any interval'}"]

    def per_request(get: Callable[[Any], float], digits: int = 2) -> str:
        return ", ".join(f"{get(io) / i.cost.requests:.{digits}f}" for i, io in with_io if i.cost)

    mib = 1 << 20
    sizes = ", ".join(f"{io.database_bytes / mib:.0f}" for _, io in with_io)
    shared = with_io[-1][1].shared_buffers_bytes / mib
    over = next((i.index for i, io in with_io if io.database_bytes > io.shared_buffers_bytes), None)
    return [
        f"document store I/O per request by interval: blocks read from outside its shared buffers "
        f"{per_request(lambda io: io.blocks_read)}; buffers a backend wrote to free one "
        f"{per_request(lambda io: io.backend_writes)}; WAL KiB {per_request(lambda io: io.wal_bytes / 1024, 1)}; "
        f"database MiB at each interval's end {sizes} (shared_buffers {shared:.0f} MiB"
        + (f"; larger than them from interval {over})" if over else "; never larger than them)")
    ]


def redis_lines(iv: list[Interval]) -> list[str]:
    """The graph's Redis across the intervals: memory against its cap, evictions, misses."""
    read = [i.redis for i in iv if i.redis is not None]
    if not read:
        return unread_line("redis", [i.redis_reason for i in iv])
    cap = read[-1].maxmemory_bytes
    mib = ", ".join(f"{r.used_memory_bytes / 2**20:.1f}" for r in read)
    line = (
        f"redis: memory at each interval's end {mib} MiB"
        + (f" of its {cap / 2**20:.0f} MiB cap" if cap else " (no cap)")
        + f"; evicted keys by interval {', '.join(f'{r.evicted_keys:,}' for r in read)}; misses by interval "
        + ", ".join(
            f"{r.keyspace_misses:,} ({r.keyspace_misses / (r.keyspace_hits + r.keyspace_misses) * 100:.1f} %)"
            if r.keyspace_hits + r.keyspace_misses
            else "0"
            for r in read
        )
    )
    out = [line]
    # Whether the tail moved when Redis started evicting: the intervals' p99 before the first one with an
    # eviction against from it on (medians; both sides need an interval).
    capped = [i for i in iv if i.redis is not None and i.redis.evicted_keys > 0]
    if capped:
        first = capped[0].index
        before = [i.p99_ns for i in iv if i.index < first and i.p99_ns]
        after = [i.p99_ns for i in iv if i.index >= first and i.p99_ns]
        if before and after:
            a, b = statistics.median(before), statistics.median(after)
            out.append(
                f"p99 before Redis first evicted (intervals 1–{first - 1}) {fmt_ns(a)}, from interval {first} on "
                f"{fmt_ns(b)} ({(b / a - 1) * 100:+.1f} %, medians)"
            )
        else:
            out.append(f"Redis evicted from interval {first} on: no interval before it to compare the p99 with")
    return out


def p99_interval(doc: dict) -> QuantileInterval:
    """The p99 of a load document's intended-time latency with its interval (or why it has none)."""
    for m in doc.get("measurements", []):
        if m.get("name") == "latency_intended":
            return from_latency(m.get("latency") or {}, "99")
    return QuantileInterval(0.99, 0, None, unavailable="no latency_intended measurement")


def _interval_of(i: Interval) -> QuantileInterval:
    if i.p99_ci_ns is None:
        return QuantileInterval(0.99, i.samples, i.p99_ns, unavailable=i.p99_ci_unavailable or "not recorded")
    return QuantileInterval(0.99, i.samples, i.p99_ns, i.p99_ci_ns[0], i.p99_ci_ns[1])


def drift_by_intervals(first: Interval, last: Interval) -> IntervalVerdict:
    """The drift target judged by the two p99s' intervals: the last ÷ the first within ±DRIFT_LIMIT —
    met, not met, or undecided at this length (with how much longer a run would decide it)."""
    return ratio_within(
        _interval_of(last),
        _interval_of(first),
        (1.0 - DRIFT_LIMIT, 1.0 + DRIFT_LIMIT),
        last.achieved_per_s or None,
        first.achieved_per_s or None,
        names=(f"interval {last.index}", "interval 1"),
    )


def drift_interval_text(first: Interval, last: Interval) -> str:
    v = drift_by_intervals(first, last)
    if not v.verdict:
        return f"; by the p99s' 95 % intervals: unavailable ({v.unavailable})"
    spans = ", ".join(
        f"#{i.index} [{fmt_ns(i.p99_ci_ns[0])}–{fmt_ns(i.p99_ci_ns[1])}]" for i in (first, last) if i.p99_ci_ns
    )
    text = f"; by the p99s' 95 % intervals ({spans}): {v.verdict}"
    if v.verdict == UNDECIDED:
        text += (
            f" (intervals {v.length_factor:.1f}× as long would decide it)"
            if v.length_factor is not None
            else f" ({v.why_no_length})"
        )
    return text


def _summary(doc: dict) -> tuple[float, float | None, float | None, int]:
    load = doc.get("load", {})
    achieved = float(load.get("achieved_per_s") or 0.0)
    p50 = p99 = None
    for m in doc.get("measurements", []):
        if m.get("name") == "latency_intended":
            pct = m["latency"].get("percentiles", {})
            p50 = float(pct["50"]) if pct.get("50") is not None else None
            p99 = float(pct["99"]) if pct.get("99") is not None else None
    errors = int(load.get("errors_total") or 0)
    return achieved, p50, p99, errors


def idle_share_of(points: list[MachinePoint]) -> float | None:
    """The machine's idle share between the first and last sample (None: no usable pair)."""
    if len(points) < 2 or points[-1].total_ticks <= points[0].total_ticks:
        return None
    a, b = points[0], points[-1]
    return max(0.0, 1.0 - (b.busy_ticks - a.busy_ticks) / (b.total_ticks - a.total_ticks))


def carried(doc: dict) -> bool:
    """A search point the graph carries: the socialnet study's p99 objective met, and the machine
    left HEADROOM_IDLE_SHARE idle (an unreadable idle share does not veto it)."""
    idle = doc["socialnet_point"].get("idle_share")
    return socialnet.meets_objective(doc) and (idle is None or idle >= HEADROOM_IDLE_SHARE)


def objective_rate(
    port: int, ceiling_per_s: float, point_s: float | None = None
) -> tuple[float | None, list[tuple[float, bool]], list[float | None]]:
    """The highest open-loop rate (of the grid and its bisections) the graph carries (`carried`),
    or None when no tried rate did; every (rate, met the objective) tried, and each one's idle share."""
    point_s = OBJECTIVE_POINT_S if point_s is None else point_s
    tried: list[dict] = []

    def attempt(rate: float) -> dict:
        with MachineSampler() as machine:
            doc = run_front_load(port, rate, socialnet.CONNECTIONS, point_s, OBJECTIVE_WARMUP_S, point_s + 60)
        doc["socialnet_point"] = {"rate_per_s": rate, "idle_share": idle_share_of(machine.points)}
        tried.append(doc)
        return doc

    for f in OBJECTIVE_FRACTIONS:
        attempt(max(1.0, f * ceiling_per_s))
    for _ in range(OBJECTIVE_BISECTIONS):
        # The bracket is (highest carried, lowest not carried above it): headroom bounds it too.
        bracket = socialnet.objective_bracket(tried, judge=carried)
        if bracket is None or bracket[1] - bracket[0] < 2.0:
            break
        attempt((bracket[0] + bracket[1]) / 2)
    ok = [d["socialnet_point"]["rate_per_s"] for d in tried if carried(d)]
    points = [(d["socialnet_point"]["rate_per_s"], socialnet.meets_objective(d)) for d in tried]
    idles = [d["socialnet_point"]["idle_share"] for d in tried]
    return (max(ok) if ok else None), points, idles


def soak_model(
    model: str,
    topo_json: Path,
    workdir: Path,
    *,
    intervals: int,
    interval_s: float,
    fraction: float,
    on_interval: Callable[[ModelSoak, Interval], None],
    stores: str | None = None,
    maintenance: str = "between",
) -> ModelSoak:
    out = workdir / f"graph-{model}.json"
    traces = workdir / "traces" / model
    if maintenance not in MAINTENANCE_MODES:
        raise ValueError(f"soak: maintenance {maintenance!r} is not one of {', '.join(MAINTENANCE_MODES)}")
    with graph(topo_json, model, out, socialnet.TRACE_SAMPLE, traces, stores=stores) as (port, ready):
        recorded = stores_of(ready)
        docstore = next((s.address for s in recorded.servers if s.system == "mongodb"), None)
        held = ""
        if docstore and maintenance == "between":
            why = hold_maintenance(docstore)
            held = MAINTENANCE_TEXT["between"] if not why else f"{MAINTENANCE_TEXT['during']}: not held ({why})"
        elif docstore:
            held = MAINTENANCE_TEXT["during"]
        ceiling_doc = run_front_load(
            port, 0, socialnet.CEILING_CONNECTIONS, CEILING_DURATION_S, 1.0, CEILING_DURATION_S + 60
        )
        ceiling = _summary(ceiling_doc)[0]
        if ceiling <= 0:
            raise EngineError(f"soak: {model} served nothing in its closed-loop ceiling run")
        carried_rate, points, idles = objective_rate(port, ceiling)
        base = carried_rate if carried_rate is not None else min(r for r, _ in points)
        rate = max(1.0, fraction * base)
        soak = ModelSoak(
            model,
            ceiling,
            rate,
            objective_rate_per_s=carried_rate,
            objective_points=points,
            objective_idle_shares=idles,
            stores=stores_text(recorded.mode, recorded.reason),
        )
        soak.docstore_maintenance = held
        between = bool(docstore) and held == MAINTENANCE_TEXT["between"]
        pids = {str(k): int(v) for k, v in ready.get("pids", {}).items()}
        store_pids = recorded.pids()
        redis = next((s.address for s in recorded.servers if s.system == "redis"), None)
        port_names = graph_port_names(pids, recorded.servers)
        settle = run_front_load(port, rate, socialnet.CONNECTIONS, SETTLE_S, 0.0, SETTLE_S + 60)
        soak.settle_errors = _summary(settle)[3]
        for i in range(1, intervals + 1):
            hlog = workdir / f"{model}-interval-{i}.hlog"
            hlog_args = ["--hlog", str(hlog), "--hlog-interval", f"{EPISODE_WINDOW_S:g}"]
            kept_up, kept_why = run_maintenance(docstore) if between and docstore else (None, "")
            before = cpu_mark(pids, store_pids)
            pg_before, pg_why = read_mark(docstore) if docstore else (None, "no real document store")
            rd_before, rd_why = redis_stats.read_mark(redis) if redis else (None, "no real Redis")
            start_epoch_s = time.time()
            with MachineSampler(pids=pids, store_pids=store_pids) as machine:
                doc = run_front_load(
                    port, rate, socialnet.CONNECTIONS, interval_s, 0.0, interval_s + 60, extra=hlog_args
                )
            after = cpu_mark(pids, store_pids)
            end_epoch_s = time.time()
            pg_after, why_after = read_mark(docstore) if docstore and pg_before else (None, pg_why)
            pg = docstore_activity(pg_before, pg_after, start_epoch_s, end_epoch_s)
            rd_after, rd_why = redis_stats.read_mark(redis) if redis and rd_before else (None, rd_why)
            rd = redis_stats.activity(rd_before, rd_after) if rd_before and rd_after else None
            achieved, p50, p99, errors = _summary(doc)
            requests = int(doc.get("load", {}).get("requests_completed") or 0)
            ci = p99_interval(doc)
            iv = Interval(
                i,
                rate,
                achieved,
                p50,
                p99,
                errors,
                settled_samples(pids, port_names=port_names),
                interval_cost(before, after, requests),
                find_episodes(machine.points, hlog),
                pg,
                "" if pg else why_after,
                rd,
                "" if rd else rd_why,
                kept_up,
                kept_why,
                None if ci.lo_ns is None or ci.hi_ns is None else (ci.lo_ns, ci.hi_ns),
                ci.unavailable,
                ci.count,
            )
            probes = [p.probe_cpu_ns for p in machine.points if p.probe_cpu_ns is not None]
            iv.probe_cpu_ns, iv.probes = (statistics.median(probes) if probes else None), len(probes)
            hlog.unlink(missing_ok=True)
            soak.intervals.append(iv)
            on_interval(soak, iv)
    soak.verdicts = verdicts(soak)
    return soak


def graph_port_names(pids: dict[str, int], servers) -> dict[int, str]:
    """Each listening port of the graph → its owner's name (a service, or a store system), so a
    descriptor to it is named (procstat.fd_kinds)."""
    names: dict[int, str] = {}
    for service, pid in pids.items():
        for p in procstat.listen_ports(pid):
            names[p] = service.removesuffix("-service")
    for s in servers:
        try:
            names[int(s.address.rpartition(":")[2])] = s.system
        except ValueError:
            continue
    return names


def objective_line(soak: ModelSoak) -> str:
    """How the soak's rate was chosen, from the rates it tried."""
    idles = soak.objective_idle_shares or [None] * len(soak.objective_points)
    tried = ", ".join(
        f"{r:.0f}/s {'met' if ok else 'missed'}, {share_text(idle)} idle"
        for (r, ok), idle in sorted(zip(soak.objective_points, idles, strict=False))
    )
    if soak.objective_rate_per_s is None:
        # Which way the search failed: a rate that missed the p99 objective while the machine kept its
        # headroom is the graph's own tail (on 2026-11-26 the thread models on real stores missed at
        # 44–54 % idle: 4 s points with p99s of 15–93 ms at one rate), not an overloaded machine.
        roomy = sum(
            1
            for (_, met), idle in zip(soak.objective_points, idles, strict=False)
            if not met and idle is not None and idle >= HEADROOM_IDLE_SHARE
        )
        why = (
            f"{roomy} of {len(soak.objective_points)} tried rates missed the p99 objective itself with the headroom "
            "left: the graph's tail at these rates, not a lack of CPU — the drift verdicts describe a graph "
            "held below every rate tried"
            if roomy
            else "the drift verdicts describe an overloaded graph"
        )
        return (
            f"no tried rate met the p99 objective with {HEADROOM_IDLE_SHARE * 100:.0f} % idle CPU left ({tried}); "
            f"held at {soak.rate_per_s:.0f}/s, a fraction of the lowest tried rate; {why}"
        )
    return (
        f"highest rate meeting the p99 objective with {HEADROOM_IDLE_SHARE * 100:.0f} % idle CPU left "
        f"{soak.objective_rate_per_s:.0f}/s ({tried}); held at {soak.rate_per_s:.0f}/s"
    )


def run_soak(
    minutes: float,
    models: list[str],
    *,
    interval_s: float = 60.0,
    fraction: float = 0.8,
    on_interval: Callable[[ModelSoak, Interval], None] = lambda s, i: None,
    on_model: Callable[[ModelSoak], None] = lambda s: None,
    stores: str | None = None,
    maintenance: str = "between",
) -> list[ModelSoak]:
    if not models:
        raise ValueError("soak: no models given")
    per_model_s = minutes * 60.0 / len(models)
    intervals = max(1, int(per_model_s // interval_s))
    results = []
    with tempfile.TemporaryDirectory(prefix="tailscope-soak-") as tmp:
        work = Path(tmp)
        topo_json = topology.to_engine_json(topology.SOCIALNET, work / "socialnet.json")
        for model in models:
            s = soak_model(
                model,
                topo_json,
                work,
                intervals=intervals,
                interval_s=interval_s,
                fraction=fraction,
                on_interval=on_interval,
                stores=stores,
                maintenance=maintenance,
            )
            on_model(s)
            results.append(s)
    return results


def to_json(results: list[ModelSoak]) -> str:
    return json.dumps([asdict(r) for r in results], indent=2)
