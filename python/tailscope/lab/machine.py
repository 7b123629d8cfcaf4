"""Machine facts and the `tailscope doctor` checks.

Each check returns a verdict (ok / warn / unavailable) and the reason, so a
figure that cannot be measured here is reported as unavailable with its cause
rather than silently as zero.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import resource
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tailscope.lab.engines import EngineError, find_engine

OK, WARN, UNAVAILABLE = "ok", "warn", "unavailable"


@dataclass
class Check:
    name: str
    verdict: str
    value: str
    detail: str = ""


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def cpu_model() -> str:
    text = _read("/proc/cpuinfo") or ""
    for line in text.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def facts() -> dict:
    """What every run records about the machine."""
    allowed = sorted(os.sched_getaffinity(0))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return {
        "hostname": socket.gethostname(),
        "kernel": platform.release(),
        "cpu_model": cpu_model(),
        "online_cpus": os.cpu_count(),
        "allowed_cpus": ",".join(map(str, allowed)),
        "smt_siblings_cpu0": _read("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list") or "unknown",
        "governor": _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor") or "unavailable (no cpufreq)",
        "mem_total_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
        "rlimit_nofile": [soft, hard],
        "python": platform.python_version(),
    }


def check_perf() -> Check:
    perf = shutil.which("perf")
    paranoid = _read("/proc/sys/kernel/perf_event_paranoid")
    if not perf:
        return Check("perf counters", UNAVAILABLE, "no perf binary", "install linux-perf (scripts/bootstrap does)")
    try:
        r = subprocess.run(
            [perf, "stat", "-x,", "-e", "instructions,cycles", "true"], capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return Check("perf counters", UNAVAILABLE, "perf failed to run", str(e))
    text = r.stderr + r.stdout
    counted = [ln for ln in text.splitlines() if ",instructions" in ln or ",cycles" in ln]
    if r.returncode == 0 and counted and all(ln.split(",")[0].strip().isdigit() for ln in counted):
        return Check("perf counters", OK, "instructions and cycles countable", f"perf_event_paranoid={paranoid}")
    why = "hardware counters not supported (typical in VMs without PMU passthrough)"
    if "not supported" not in text and "not counted" not in text:
        why = (text.strip().splitlines() or ["perf stat failed"])[-1]
    return Check("perf counters", UNAVAILABLE, why, f"perf_event_paranoid={paranoid}")


def check_io_uring() -> Check:
    disabled = _read("/proc/sys/kernel/io_uring_disabled")
    if disabled not in (None, "0"):
        return Check("io_uring", UNAVAILABLE, f"disabled by sysctl (kernel.io_uring_disabled={disabled})")
    # io_uring_setup(2) with one entry: the honest test is to ask the kernel.
    nr_io_uring_setup = 425
    libc = ctypes.CDLL(None, use_errno=True)
    params = ctypes.create_string_buffer(120)
    fd = libc.syscall(nr_io_uring_setup, 1, params)
    if fd >= 0:
        os.close(fd)
        return Check("io_uring", OK, "io_uring_setup succeeded", f"kernel {platform.release()}")
    err = ctypes.get_errno()
    return Check(
        "io_uring",
        UNAVAILABLE,
        f"io_uring_setup failed: {os.strerror(err)}",
        "seccomp or container policy may block it",
    )


def check_nofile() -> Check:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = 2 * 10_000 + 64  # 10 000 connections, both ends on one host
    hard_s = "unlimited" if hard == resource.RLIM_INFINITY else str(hard)
    if hard == resource.RLIM_INFINITY or hard >= need:
        return Check(
            "RLIMIT_NOFILE",
            OK,
            f"soft {soft}, hard {hard_s}",
            "engines raise the soft limit to the hard limit themselves",
        )
    return Check(
        "RLIMIT_NOFILE",
        WARN,
        f"soft {soft}, hard {hard_s}",
        f"10 000-connection points need about {need}; raise the hard limit (ulimit -Hn)",
    )


def check_governor() -> Check:
    gov = _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    if gov is None:
        return Check(
            "frequency governor",
            UNAVAILABLE,
            "no cpufreq in /sys",
            "usual in VMs: the host controls frequency; expect more run-to-run noise",
        )
    if gov == "performance":
        return Check("frequency governor", OK, gov)
    return Check("frequency governor", WARN, gov, "set 'performance' for stable latency figures")


def check_cpus() -> Check:
    allowed = sorted(os.sched_getaffinity(0))
    n = len(allowed)
    value = f"{n} usable ({','.join(map(str, allowed))}) of {os.cpu_count()} online"
    if n >= 2:
        return Check("cores", OK, value, "server and load generator are pinned to different cores by default")
    return Check("cores", WARN, value, "one core: server and client share it; cross-core figures are unavailable")


def check_engines() -> Check:
    try:
        path = find_engine("tailscope-baseline")
        return Check("engines", OK, str(path.parent))
    except EngineError as e:
        return Check("engines", WARN, "not built", str(e))


PROBE_TIMEOUT_S = 60  # the probe opens a few events and spins ~10 ms; a hang is a bug


def probe_counters() -> dict:
    """`tailscope-stress --probe-counters`: which perf events open and count here.
    Raises EngineError when the engine is not built or the probe fails."""
    stress = find_engine("tailscope-stress")
    try:
        r = subprocess.run([str(stress), "--probe-counters"], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        raise EngineError(f"{stress} --probe-counters did not answer within {PROBE_TIMEOUT_S} s") from e
    if r.returncode != 0:
        raise EngineError(f"{stress} --probe-counters exited {r.returncode}: {r.stderr.strip()}")
    return json.loads(r.stdout)["counters_probe"]


def counter_checks(probe: dict) -> list[Check]:
    """One row per event of the process mode (what `tailscope-svc --counters process`
    opens), with per-CPU mode's verdict beside it; the reason (and errno) when not counted."""
    rows = []
    pmu = probe.get("pmu_sysfs")
    rows.append(
        Check(
            "PMU",
            OK if pmu else UNAVAILABLE,
            pmu or probe.get("pmu_reason", "no core PMU in sysfs"),
            f"{probe['cpu_identity']['vendor'] or 'unknown vendor'} family {probe['cpu_identity']['family']} "
            f"model {probe['cpu_identity']['model']}; top-down pipeline width {probe['pipeline_width']}",
        )
    )
    for name, e in probe["process"].items():
        per_cpu = probe.get("cpu", {}).get(name, {})
        cpu_word = "counts" if per_cpu.get("counted") else "does not count"
        if e["counted"]:
            rows.append(Check(f"counter {name}", OK, "opens and counts", f"{e['source']}; per-CPU mode {cpu_word}"))
        else:
            opened = "opens but never counts" if e["opened"] else "does not open"
            rows.append(Check(f"counter {name}", UNAVAILABLE, f"{opened}: {e['reason']}", e["source"]))
    return rows


def smt_siblings(cpu_root: str = "/sys/devices/system/cpu") -> dict[int, str] | None:
    """CPU -> its core's thread_siblings_list for each allowed CPU; None when sysfs has no topology."""
    out = {}
    for cpu in sorted(os.sched_getaffinity(0)):
        text = _read(f"{cpu_root}/cpu{cpu}/topology/thread_siblings_list")
        if text is None:
            return None
        out[cpu] = text
    return out


def check_smt(cpu_root: str = "/sys/devices/system/cpu") -> Check:
    siblings = smt_siblings(cpu_root)
    if siblings is None:
        return Check("SMT siblings", UNAVAILABLE, "no topology/thread_siblings_list in sysfs")
    cores = sorted(set(siblings.values()))
    shared = [c for c in cores if "," in c or "-" in c]
    if not shared:
        return Check(
            "SMT siblings",
            OK,
            f"none: {len(cores)} cores, one thread each",
            "a stress kernel beside a service shares its core by time-slicing, not as an SMT sibling",
        )
    return Check("SMT siblings", OK, "; ".join(shared), "CPUs listed together share one core's pipeline and L1/L2")


def doctor_checks() -> list[Check]:
    f = facts()
    return [
        check_cpus(),
        Check("CPU model", OK, f["cpu_model"]),
        Check("kernel", OK, f["kernel"]),
        check_perf(),
        check_io_uring(),
        check_nofile(),
        check_governor(),
        check_engines(),
        check_smt(),
        *_counter_rows(),
    ]


def _counter_rows() -> list[Check]:
    try:
        return counter_checks(probe_counters())
    except EngineError as e:
        return [Check("counters", UNAVAILABLE, "tailscope-stress --probe-counters could not run", str(e))]
