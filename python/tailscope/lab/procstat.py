"""/proc sampling for the thread-count study: CPU, run queue, load, context switches, run-queue wait.

A `ProcSampler` watches a set of processes (by name → pid) and the whole system over one
measured window:

- **every interval** (100 ms by default) it reads the instantaneous figures: `procs_running` and
  `procs_blocked` of /proc/stat (the system's run queue: running + runnable tasks, and tasks in
  uninterruptible sleep), and per process the state of every thread in /proc/PID/task/*/stat
  (`R` = running or runnable, `D` = uninterruptible);
- **at the start and the end** of the window it reads the cumulative counters, whose difference is
  the window's: CPU ticks (system and per process), voluntary and involuntary context switches and
  the run-queue wait of every thread (/proc/PID/task/*/status and /proc/PID/task/*/schedstat —
  schedstat's second field is the time the thread spent runnable but waiting for a CPU).
  Reading them only twice keeps the sampler cheap with 1000 threads; a thread that exits inside the
  window takes its counts with it (the study's pool threads live for the whole run).

Two load figures, because they answer different questions:

- `loadavg_1m_end`: the kernel's 1-minute load average (/proc/loadavg) at the end of the window.
  It is an exponentially damped average with a 1-minute time constant, so it describes *this*
  window only when the window ran for a minute or more; shorter windows mostly show what ran before.
- `instantaneous_load_mean`: the mean over the window's samples of runnable + uninterruptible
  tasks (`procs_running` − 1 + `procs_blocked`): the same quantity the kernel averages, without the
  damping. The − 1 removes the sampler itself, which is running while it reads /proc/stat.

The sampler's own CPU time is reported (`sampler_cpu_s`), so its cost is measured, not assumed.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")
CLK_TCK = os.sysconf("SC_CLK_TCK")
DEFAULT_INTERVAL_S = 0.1


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read().decode("ascii", "replace")
    except OSError:
        return None


def _stat_fields(text: str) -> list[str]:
    """Fields of a /proc/.../stat line after the command name (which may contain spaces and ')').

    Index 0 is the state (field 3 of proc(5)); utime is index 11, stime index 12."""
    return text[text.rindex(")") + 2 :].split()


@dataclass
class SystemSnapshot:
    procs_running: int
    procs_blocked: int
    cpu_busy_ticks: int
    cpu_total_ticks: int
    loadavg_1m: float
    cpu_steal_ticks: int = 0  # time a hypervisor ran something else while this VM's CPUs wanted to run


def read_system() -> SystemSnapshot:
    stat = _read("/proc/stat") or ""
    running = blocked = busy = total = steal = 0
    for line in stat.splitlines():
        if line.startswith("cpu "):
            ticks = [int(x) for x in line.split()[1:]]
            total = sum(ticks[:8])  # user nice system idle iowait irq softirq steal (guest is inside user)
            busy = total - ticks[3] - (ticks[4] if len(ticks) > 4 else 0)
            steal = ticks[7] if len(ticks) > 7 else 0
        elif line.startswith("procs_running "):
            running = int(line.split()[1])
        elif line.startswith("procs_blocked "):
            blocked = int(line.split()[1])
    load = (_read("/proc/loadavg") or "0").split()
    return SystemSnapshot(running, blocked, busy, total, float(load[0]), steal)


PRESSURE_RESOURCES = ("cpu", "io", "memory")


def read_pressure() -> dict[str, int] | None:
    """Cumulative stall time of the whole machine per resource, µs, from /proc/pressure/* (PSI):
    the `some` line's total — time in which at least one task was runnable but waiting for a CPU,
    or stalled on I/O or on memory. None when the kernel has no PSI (CONFIG_PSI off or psi=0)."""
    out: dict[str, int] = {}
    for resource in PRESSURE_RESOURCES:
        text = _read(f"/proc/pressure/{resource}")
        if text is None:
            return None
        for line in text.splitlines():
            if line.startswith("some "):
                for part in line.split():
                    if part.startswith("total="):
                        out[resource] = int(part[6:])
    return out if len(out) == len(PRESSURE_RESOURCES) else None


def _tcp_sockets(pid: int) -> dict[str, tuple[int, int, bool]]:
    """inode → (local port, remote port, listening) of the TCP sockets in `pid`'s network namespace."""
    table: dict[str, tuple[int, int, bool]] = {}
    for name in ("tcp", "tcp6"):
        for line in (_read(f"/proc/{pid}/net/{name}") or "").splitlines()[1:]:
            f = line.split()
            if len(f) < 10:
                continue
            try:
                local, remote = int(f[1].rsplit(":", 1)[1], 16), int(f[2].rsplit(":", 1)[1], 16)
            except (IndexError, ValueError):
                continue
            table[f[9]] = (local, remote, f[3] == "0A")  # st 0A: LISTEN
    return table


def fd_kinds(pid: int, port_names: dict[int, str] | None = None) -> dict[str, int] | None:
    """What a process's open descriptors are, counted by kind: "listen :PORT", "tcp from NAME" (an
    accepted connection; NAME is the listening port's owner when known), "tcp to NAME" (a
    connection it opened), "unix", "pipe", "eventpoll", "eventfd", "timerfd", "file" …; None when
    the process is gone. A descriptor count that grows says *how much*; this says *which*."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    names = port_names or {}
    tcp = _tcp_sockets(pid)
    listening = {local for local, _, listen in tcp.values() if listen}
    kinds: dict[str, int] = {}
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue  # closed while listed
        if target.startswith("socket:["):
            sock = tcp.get(target[8:-1])
            if sock is None:
                kind = "socket (unix or other)"
            elif sock[2]:
                kind = f"listen :{sock[0]}"
            elif sock[0] in listening:
                kind = "tcp from a client"
            else:
                kind = f"tcp to {names.get(sock[1], f':{sock[1]}')}"
        elif target.startswith("anon_inode:"):
            kind = target[11:].strip("[]")
        elif target.startswith("pipe:"):
            kind = "pipe"
        else:
            kind = "file" if target.startswith("/") else target.split(":", 1)[0]
        kinds[kind] = kinds.get(kind, 0) + 1
    return kinds


def listen_ports(pid: int) -> list[int]:
    """The TCP ports `pid` listens on (a service's own, for naming the connections to it)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return []
    tcp = _tcp_sockets(pid)
    ports = []
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        sock = tcp.get(target[8:-1]) if target.startswith("socket:[") else None
        if sock and sock[2]:
            ports.append(sock[0])
    return sorted(set(ports))


def thread_states(pid: int) -> tuple[int, int, int]:
    """(runnable, uninterruptible, threads) of one process right now, from /proc/PID/task/*/stat."""
    runnable = blocked = threads = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0, 0, 0
    for tid in tids:
        text = _read(f"/proc/{pid}/task/{tid}/stat")
        if not text:
            continue
        threads += 1
        state = _stat_fields(text)[0]
        runnable += state == "R"
        blocked += state == "D"
    return runnable, blocked, threads


@dataclass
class ProcessSnapshot:
    cpu_ticks: int  # utime + stime of the whole process (dead threads included)
    threads: dict[str, tuple[int, int, int, int]]  # tid → (voluntary, involuntary, run_ns, wait_ns)
    schedstat: bool  # /proc/PID/task/*/schedstat was readable


def process_cpu_ticks(pid: int) -> int | None:
    """utime + stime of a whole process (its dead threads included), in CLK_TCK ticks; None when gone."""
    text = _read(f"/proc/{pid}/stat")
    if not text:
        return None
    f = _stat_fields(text)
    return int(f[11]) + int(f[12])


def process_cpu_ns(pid: int) -> int | None:
    """CPU time of a whole process (every thread, dead ones included), ns; None when it is gone.

    Read from the kernel's per-process CPU clock (clock_getcpuclockid(3): clock id
    ((~pid) << 3) | CPUCLOCK_SCHED), one system call, where /proc/PID/stat counts in CLK_TCK ticks: a
    10 ms tick is 1 % of a 1 s window, the size of the differences the tracing study measures."""
    try:
        return time.clock_gettime_ns(((~pid) << 3) | 2)
    except OSError:
        return None


def window_cpu(pids: dict[str, int], run: Callable[[], T]) -> tuple[T, dict]:
    """Runs run() and reads every named process's utime+stime before and after it (a container's
    processes too, by their host PIDs): their CPU over that window alone, start-up and shut-down
    excluded. Returns (run()'s value, {"cpu_s", "processes"} or {"cpu_s": None, "unavailable"})."""
    before = {n: process_cpu_ticks(p) for n, p in pids.items()}
    value = run()
    after = {n: process_cpu_ticks(p) for n, p in pids.items()}
    gone = sorted(n for n in pids if before[n] is None or after[n] is None)
    if not pids or gone:
        why = f"/proc unreadable for {', '.join(gone)}" if gone else "no service process was found"
        return value, {"cpu_s": None, "unavailable": why}
    ticks = sum((after[n] or 0) - (before[n] or 0) for n in pids)
    return value, {"cpu_s": ticks / CLK_TCK, "processes": len(pids)}


def cpus_allowed_list(pid: int) -> str | None:
    """The CPUs a process may run on as the kernel states them (/proc/PID/status Cpus_allowed_list,
    e.g. "0-1"): the affinity or cpuset it really got; None when it is gone."""
    text = _read(f"/proc/{pid}/status")
    for line in (text or "").splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    return None


def group_cpu_ticks(leader: int) -> int | None:
    """utime + stime of every live process in `leader`'s process group or whose parent is the leader,
    plus the leader's reaped children, in CLK_TCK ticks; None when the leader is gone. A store server
    that forks per connection (PostgreSQL's backends) spends most of its CPU outside the leader's own
    counters, and PostgreSQL's backends call setsid(): a live one is in a process group of its own,
    found only by its parent. The same sum as the engine's store_server_cpu_s
    (native/svc/stores/store_servers.cc)."""
    text = _read(f"/proc/{leader}/stat")
    if not text:
        return None
    f = _stat_fields(text)
    ticks = int(f[13]) + int(f[14])  # cutime + cstime: children reaped by the leader
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        s = _read(f"/proc/{name}/stat")
        if s:
            g = _stat_fields(s)
            # pgrp (field 5 of proc(5)) or ppid (field 4); the leader itself matches its own pgrp once.
            if int(g[2]) == leader or int(g[1]) == leader:
                ticks += int(g[11]) + int(g[12])
    return ticks


def read_process(pid: int) -> ProcessSnapshot | None:
    text = _read(f"/proc/{pid}/stat")
    if not text:
        return None
    f = _stat_fields(text)
    snap = ProcessSnapshot(int(f[11]) + int(f[12]), {}, True)
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return snap
    for tid in tids:
        status = _read(f"/proc/{pid}/task/{tid}/status")
        if status is None:
            continue
        vol = invol = 0
        for line in status.splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                vol = int(line.split()[1])
            elif line.startswith("nonvoluntary_ctxt_switches:"):
                invol = int(line.split()[1])
        sched = _read(f"/proc/{pid}/task/{tid}/schedstat")
        run_ns = wait_ns = 0
        if sched:
            parts = sched.split()
            run_ns, wait_ns = int(parts[0]), int(parts[1])
        else:
            snap.schedstat = False
        snap.threads[tid] = (vol, invol, run_ns, wait_ns)
    return snap


# The fixed-work probe: the same loop, timed in this thread's CPU time (preemption and waiting do not
# count), read beside a long run. If the graph's CPU per request rises and the probe's CPU time rises
# with it, the machine ran the same work slower (a busier host, a lower clock, caches shared with a
# neighbour: without a PMU nothing else here sees it); if the probe held, the graph's own work grew.
# 10 000 iterations take about 1 ms in CPython 3.11 on this 2-core VM: read once a second, the
# probe costs ~0.1 % of a CPU.
PROBE_ITERATIONS = 10_000


def fixed_work_cpu_ns(iterations: int = PROBE_ITERATIONS) -> int:
    """This thread's CPU time for a fixed integer loop, ns."""
    t0 = time.thread_time_ns()
    acc = 0
    for i in range(iterations):
        acc = (acc * 31 + i) & 0xFFFFFFFF
    return time.thread_time_ns() - t0


class PeriodicSampler:
    """A daemon thread that calls `tick()` every `period_s` between `__enter__` and `__exit__`:
    the shell of the samplers that run beside a load (the soak's machine sampler, the placement
    study's CPU series). `begin()` runs on the thread before the first period, `end()` on the
    caller's thread after the last."""

    def __init__(self, period_s: float, name: str) -> None:
        self.period_s = period_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def begin(self) -> None:
        pass

    def tick(self) -> None:
        raise NotImplementedError

    def end(self) -> None:
        pass

    def _run(self) -> None:
        self.begin()
        while not self._stop.wait(self.period_s):
            self.tick()

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.end()


@dataclass
class _Series:
    runnable: list[int] = field(default_factory=list)
    blocked: list[int] = field(default_factory=list)
    threads: list[int] = field(default_factory=list)


def _mean(xs: list) -> float | None:
    return sum(xs) / len(xs) if xs else None


class ProcSampler:
    """Samples `pids` (name → pid) and the system every `interval_s` between start() and stop()."""

    def __init__(self, pids: dict[str, int], interval_s: float = DEFAULT_INTERVAL_S):
        if interval_s <= 0:
            raise ValueError(f"interval_s must be > 0 (got {interval_s})")
        self.pids = dict(pids)
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._sys_running: list[int] = []
        self._sys_blocked: list[int] = []
        self._series = {name: _Series() for name in self.pids}
        self._start_sys: SystemSnapshot | None = None
        self._start_proc: dict[str, ProcessSnapshot | None] = {}
        self._t0 = self._t1 = 0.0
        self._cpu_s = 0.0

    def __enter__(self) -> ProcSampler:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()

    def start(self) -> None:
        self._start_sys = read_system()
        self._start_proc = {name: read_process(pid) for name, pid in self.pids.items()}
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="procstat", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        started = time.thread_time()
        next_t = time.monotonic()
        while not self._stop.is_set():
            s = read_system()
            self._sys_running.append(max(s.procs_running - 1, 0))  # minus the sampler itself
            self._sys_blocked.append(s.procs_blocked)
            for name, pid in self.pids.items():
                r, d, n = thread_states(pid)
                ser = self._series[name]
                ser.runnable.append(r)
                ser.blocked.append(d)
                ser.threads.append(n)
            next_t += self.interval_s
            self._stop.wait(max(0.0, next_t - time.monotonic()))
        self._cpu_s = time.thread_time() - started

    def stop(self) -> dict:
        """Stops sampling and returns the window's summary (see the module docstring)."""
        if self._thread is None:
            raise RuntimeError("ProcSampler.stop() before start()")
        self._stop.set()
        self._thread.join()
        self._thread = None
        self._t1 = time.monotonic()
        end_sys = read_system()
        window_s = self._t1 - self._t0
        start_sys = self._start_sys
        assert start_sys is not None
        total = end_sys.cpu_total_ticks - start_sys.cpu_total_ticks
        inst = [r + b for r, b in zip(self._sys_running, self._sys_blocked)]
        system = {
            "cpus": len(os.sched_getaffinity(0)),
            "cpu_busy_pct": 100.0 * (end_sys.cpu_busy_ticks - start_sys.cpu_busy_ticks) / total if total > 0 else None,
            "procs_running_mean": _mean(self._sys_running),
            "procs_running_max": max(self._sys_running, default=None),
            "procs_blocked_mean": _mean(self._sys_blocked),
            "instantaneous_load_mean": _mean(inst),
            "loadavg_1m_start": start_sys.loadavg_1m,
            "loadavg_1m_end": end_sys.loadavg_1m,
        }
        processes = {}
        for name, pid in self.pids.items():
            before, after = self._start_proc.get(name), read_process(pid)
            ser = self._series[name]
            p: dict = {
                "pid": pid,
                "runnable_threads_mean": _mean(ser.runnable),
                "runnable_threads_max": max(ser.runnable, default=None),
                "uninterruptible_threads_mean": _mean(ser.blocked),
                "threads_max": max(ser.threads, default=None),
            }
            if before is None or after is None:
                p["unavailable"] = "the process was not readable at the start or the end of the window"
            else:
                p["cpu_pct"] = (
                    100.0 * (after.cpu_ticks - before.cpu_ticks) / CLK_TCK / window_s if window_s > 0 else None
                )
                # Per thread: end − start; a thread born inside the window counts from 0.
                vol = invol = run_ns = wait_ns = 0
                for tid, (v, i, r, w) in after.threads.items():
                    v0, i0, r0, w0 = before.threads.get(tid, (0, 0, 0, 0))
                    vol, invol, run_ns, wait_ns = vol + v - v0, invol + i - i0, run_ns + r - r0, wait_ns + w - w0
                p["voluntary_ctx_switches"] = vol
                p["involuntary_ctx_switches"] = invol
                if before.schedstat and after.schedstat:
                    p["run_ns"] = run_ns
                    p["runqueue_wait_ns"] = wait_ns
                else:
                    p["runqueue_wait_ns"] = None
                    p["runqueue_wait_unavailable"] = (
                        "/proc/PID/task/*/schedstat is not readable (kernel without schedstats?)"
                    )
            processes[name] = p
        return {
            "interval_s": self.interval_s,
            "samples": len(self._sys_running),
            "window_s": window_s,
            "system": system,
            "processes": processes,
            "sampler_cpu_s": self._cpu_s,
        }
