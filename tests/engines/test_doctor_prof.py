"""`tailscope doctor`'s counter and SMT rows: one verdict per event (counted, or
unavailable with the reason and errno), and SMT siblings from sysfs."""

from __future__ import annotations

import os
from pathlib import Path

from conftest import needs_engine
from tailscope.lab import machine

PROBE = {
    "cpu_identity": {"vendor": "AuthenticAMD", "family": 25, "model": 17},
    "pmu_sysfs": None,
    "pmu_reason": "the kernel lists no core PMU",
    "pipeline_width": 6,
    "process": {
        "task_clock_ns": {"counted": True, "opened": True, "value": 5, "source": "software"},
        "cycles": {
            "counted": False,
            "opened": False,
            "value": None,
            "reason": "ENOENT (...): no PMU",
            "source": "generic",
        },
        "instructions": {
            "counted": False,
            "opened": True,
            "value": None,
            "reason": "opened but never counted (time_running = 0)",
            "source": "generic",
        },
    },
    "cpu": {"task_clock_ns": {"counted": False}},
}


def test_one_row_per_event_with_its_verdict_and_reason() -> None:
    rows = {c.name: c for c in machine.counter_checks(PROBE)}
    assert rows["PMU"].verdict == machine.UNAVAILABLE and "no core PMU" in rows["PMU"].value
    assert rows["counter task_clock_ns"].verdict == machine.OK
    assert "per-CPU mode does not count" in rows["counter task_clock_ns"].detail
    assert rows["counter cycles"].verdict == machine.UNAVAILABLE
    assert rows["counter cycles"].value == "does not open: ENOENT (...): no PMU"
    assert rows["counter instructions"].value.startswith("opens but never counts: ")


def _fake_topology(root: Path, siblings: dict[int, str]) -> None:
    for cpu, text in siblings.items():
        d = root / f"cpu{cpu}" / "topology"
        d.mkdir(parents=True)
        (d / "thread_siblings_list").write_text(text + "\n")


def test_smt_siblings_are_named_when_cores_share_threads(tmp_path: Path) -> None:
    allowed = sorted(os.sched_getaffinity(0))
    _fake_topology(tmp_path, {c: ",".join(map(str, allowed)) for c in allowed})
    check = machine.check_smt(str(tmp_path))
    if len(allowed) > 1:
        assert check.value == ",".join(map(str, allowed))
    else:
        assert check.value.startswith("none")


def test_no_smt_and_no_sysfs_are_said_so(tmp_path: Path) -> None:
    allowed = sorted(os.sched_getaffinity(0))
    _fake_topology(tmp_path / "alone", {c: str(c) for c in allowed})
    assert machine.check_smt(str(tmp_path / "alone")).value.startswith(f"none: {len(allowed)} cores")
    assert machine.check_smt(str(tmp_path / "missing")).verdict == machine.UNAVAILABLE


@needs_engine("tailscope-stress")
def test_doctor_probes_this_machines_counters() -> None:
    probe = machine.probe_counters()
    rows = {c.name: c for c in machine.counter_checks(probe)}
    assert rows["counter task_clock_ns"].verdict == machine.OK  # software counters always count
    for name in ("cycles", "instructions", "l1d_load_misses", "branch_misses"):
        row = rows[f"counter {name}"]
        assert row.verdict == machine.OK or (row.verdict == machine.UNAVAILABLE and ":" in row.value), row
