"""Tracing cost pairs inside one switched run on one graph (socialnet/tracing.py): the ABBA order, the
sampling switched on the load generator's slot boundaries, the sides read from its interval histograms
and the switcher's CPU marks, the document the analysis pairs, and the socialnet run's step 4 built on
them. A FakeSwitchedLab stands in for the graph and the load generator in real (shortened) time."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from test_socialnet_analysis import _load_doc
from test_socialnet_stores_arm import _run

from tailscope.lab import procstat
from tailscope.measure.hlog import new_histogram
from tailscope.studies.socialnet import analysis
from tailscope.studies.socialnet import tracing as tracing_mod
from tailscope.studies.socialnet.tracing import (
    SWITCH_SIGNAL,
    SWITCH_SLOTS,
    SlotMark,
    SwitchPlan,
    run_switched_tracing,
    switched_sides_table,
    tracing_order,
)

# A plan short enough for a unit test: 50 ms slots, sides of 0.25 s (0.2 s used), 0.1 s lead and warm-up.
# The skew bound is generous: a loaded test machine may wake the switcher late; the sides the fake
# counts follow the switches as they happened, so a late one moves no figure.
TEST_PLAN = SwitchPlan(slot_s=0.05, guard_slots=1, used_slots=4, lead_s=0.1, warmup_s=0.1, max_skew_s=1.0)


def test_the_sides_alternate_abba():
    assert tracing_order(4) == [
        (0, False),
        (0, True),
        (1, True),
        (1, False),
        (2, False),
        (2, True),
        (3, True),
        (3, False),
    ]
    assert tracing_order(0) == []


@pytest.mark.parametrize("pairs", [2, 4, 6])
def test_a_linear_drift_adds_as_much_to_each_side(pairs):
    # Throughput growing by one unit per side: ABBA gives the on and off sides the same total time.
    at = {p: t for t, p in enumerate(tracing_order(pairs))}
    on = sum(t for (i, side), t in at.items() if side)
    off = sum(t for (i, side), t in at.items() if not side)
    assert on == off


def test_the_plan_counts_its_slots_and_seconds():
    plan = SwitchPlan()
    assert plan.side_slots == 5 and plan.used_slots * plan.slot_s == 1.0
    assert plan.seconds(24) == 60.0  # the full form's 24 pairs: one minute of switched run


class FakeSwitchedLab:
    """A graph and a closed-loop load generator in real time: the load sleeps through its schedule
    (--start-at, --warmup, -d) and writes an .hlog of --hlog-interval slots whose request counts drift
    linearly with time and drop by `cost` while the sampling (as the switches really happened) was on."""

    def __init__(self, cost: float = 0.02, per_slot: int = 10_000, drift_per_s: float = 0.05):
        self.cost, self.per_slot, self.drift = cost, per_slot, drift_per_s
        self.timeline: list[tuple[float, bool]] = []  # (time, on) of every switch
        self.switches: list[bool] = []
        self.starts: list[tuple[float, Path]] = []
        self.loads: list[list[str]] = []
        self.graph_stopped = False

    @contextmanager
    def start(self, sample: float, traces: Path):
        self.starts.append((sample, traces))
        traces.mkdir(parents=True)
        (traces / "front.spans.bin").write_bytes(b"x")
        self.graph_stopped = False
        try:
            yield 7, {"pid": 4242, "pids": {"me": os.getpid()}}
        finally:
            self.graph_stopped = True

    def switch(self, ready: dict, on: bool) -> None:
        assert ready["pid"] == 4242
        self.timeline.append((time.time(), on))
        self.switches.append(on)

    def on_at(self, t: float) -> bool:
        state = True  # a graph starts sampled
        for at, on in self.timeline:
            if at <= t:
                state = on
        return state

    def load_args(self, port, rate, connections, duration, warmup, timeout, client_cpu=None, extra=None) -> dict:
        assert rate == 0  # closed loop
        args = dict(zip(extra[::2], extra[1::2]))
        self.loads.append(extra)
        start_s = float(args["--start-at"]) + warmup
        slot_s = float(args["--hlog-interval"])
        time.sleep(max(0.0, start_s + duration - time.time()))
        lines = [f"#[StartTime: {start_s:.3f} (seconds since epoch), test]", f"#[BaseTime: {start_s:.3f}]"]
        for k in range(round(duration / slot_s)):
            mid = start_s + (k + 0.5) * slot_s
            n = self.per_slot * (1 + self.drift * (mid - start_s)) * (1 - self.cost if self.on_at(mid) else 1)
            h = new_histogram()
            h.record_value(1_000_000, round(n))
            lines.append(f"Tag=latency_intended,{k * slot_s:.3f},{slot_s:.3f},0.001,{h.encode().decode()}")
        Path(args["--hlog"]).write_text("\n".join(lines) + "\n")
        return _load_doc("coroutine", "x", 0, self.per_slot / slot_s, 50)

    def load(self, port: int, start_at_s: float, hlog: Path, pairs: int = 4) -> dict:
        extra = ["--start-at", f"{start_at_s:.6f}", "--hlog", str(hlog), "--hlog-interval", f"{TEST_PLAN.slot_s:g}"]
        return self.load_args(port, 0, 64, TEST_PLAN.seconds(pairs), TEST_PLAN.warmup_s, 60, None, extra)


def _switched(monkeypatch, tmp_path: Path, sample: float, pairs: int, cost: float = 0.02):
    lab = FakeSwitchedLab(cost)
    monkeypatch.setattr(tracing_mod, "set_trace_sampling", lab.switch)
    monkeypatch.setattr(tracing_mod, "PLAN", TEST_PLAN)
    stored: list[tuple[dict, str, str]] = []

    def record(d: dict, kind: str, point: str) -> None:
        d["socialnet_point"] = {"model": "coroutine", "kind": kind}
        stored.append((d, kind, point))

    steps: list[str] = []
    traces = tmp_path / "tracing-cost" / "coroutine"
    run_switched_tracing(
        lab.start,
        lambda port, at, hlog: lab.load(port, at, hlog, pairs),
        record,
        "coroutine",
        sample,
        pairs,
        traces,
        steps.append,
    )
    return lab, stored, steps, traces


def test_one_run_switched_on_the_side_boundaries(monkeypatch, tmp_path):
    lab, stored, steps, traces = _switched(monkeypatch, tmp_path, 0.01, 2)
    assert lab.starts == [(0.01, traces)]  # one graph, started at the sampling under test
    assert len(lab.loads) == 1  # one load run carries every pair
    # Paused before the warm-up (pair 0 starts off), then a switch where the state changes: off on | on off.
    assert lab.switches == [False, True, False]
    ((doc, kind, point),) = stored
    assert (kind, point) == ("tracing-switched", "coroutine/tracing/1/switched")
    p = doc["socialnet_point"]
    assert p["trace_sample"] == 0.01 and p["tracing_switch"] == SWITCH_SLOTS
    assert p["tracing_slots"] == {"slot_s": 0.05, "guard_slots": 1, "used_slots": 4}
    # The switcher asks for a real-time policy so a busy graph cannot delay it; refused, it says why.
    assert p["tracing_switcher"] == "SCHED_FIFO 1" or p["tracing_switcher"].startswith(
        "SCHED_OTHER (SCHED_FIFO refused: "
    )
    sides = p["tracing_sides"]
    assert [(s["pair"], s["on"]) for s in sides] == tracing_order(2)
    assert all(s["dropped"] == "" and s["seconds"] == pytest.approx(0.2) for s in sides)
    # The switches fell on their boundaries, the marks read the CPU of the "service" (this process).
    assert all(s["skew_ms"] < 1000 and s["services_cpu_s"] >= 0 and s["machine_busy_s"] >= 0 for s in sides)
    assert steps and "2 pairs switched inside one 1 s run" in steps[0]
    assert not traces.exists() and not (traces.parent / "coroutine.hlog").exists()  # spans and slots not kept


def test_the_guard_slot_is_not_counted(monkeypatch, tmp_path):
    # Four used slots of 10 000 requests, drifting 5 %/s: a side's requests are ~4 × 10 000, not 5 ×.
    _, stored, _, _ = _switched(monkeypatch, tmp_path, 1.0, 2, cost=0.0)
    sides = stored[0][0]["socialnet_point"]["tracing_sides"]
    assert all(39_000 < s["requests"] < 42_000 for s in sides)


def test_the_analysis_pairs_the_sides_and_finds_the_cost(monkeypatch, tmp_path):
    _, stored, _, _ = _switched(monkeypatch, tmp_path, 1.0, 6, cost=0.02)
    (row,) = analysis.tracing_costs([d for d, _, _ in stored])
    assert (row.model, row.sample, row.pairs, row.switched, row.one_graph) == ("coroutine", 1.0, 6, True, True)
    # The drift (5 %/s) moves each pair's ratio by ~1 % in alternating directions: the median stays at 2 %.
    assert row.cost == pytest.approx(0.02, abs=0.004)
    assert row.cost_interval is not None and row.cost_interval[0] <= 0.02 <= row.cost_interval[1] + 1e-9
    assert row.slots == (0.05, 1, 4, 0.0)  # the fake's document has no config; a real one records its warm-up
    # Every side had its services' CPU read (the machine's busy ticks over an idle 0.2 s may be 0, which
    # the analysis refuses to divide by, saying so: not asserted here).
    assert all("services_cpu_s" in s for s in stored[0][0]["socialnet_point"]["tracing_sides"])


def test_a_failed_load_leaves_no_spans_no_slots_and_no_switcher(monkeypatch, tmp_path):
    lab = FakeSwitchedLab()
    monkeypatch.setattr(tracing_mod, "set_trace_sampling", lab.switch)
    monkeypatch.setattr(tracing_mod, "PLAN", TEST_PLAN)

    def failing_load(port: int, at: float, hlog: Path) -> dict:
        hlog.write_text("partial")
        raise RuntimeError("load failed")

    traces = tmp_path / "t"
    with pytest.raises(RuntimeError):
        run_switched_tracing(lab.start, failing_load, lambda *a: None, "m", 1.0, 2, traces, lambda _: None)
    assert not traces.exists() and not (tmp_path / "t.hlog").exists()
    assert lab.graph_stopped
    assert not any(t.name == "tracing-switcher" for t in __import__("threading").enumerate())


def test_a_failed_switch_says_so_instead_of_pairing(monkeypatch, tmp_path):
    lab = FakeSwitchedLab()

    def gone(ready: dict, on: bool) -> None:
        raise RuntimeError("tailscope-svc --all (pid 4242) is gone: cannot switch its sampling")

    monkeypatch.setattr(tracing_mod, "set_trace_sampling", gone)
    monkeypatch.setattr(tracing_mod, "PLAN", TEST_PLAN)
    stored = []
    run_switched_tracing(
        lab.start,
        lambda port, at, hlog: lab.load(port, at, hlog, 2),
        lambda d, kind, point: stored.append(d) or d.__setitem__("socialnet_point", {"model": "m", "kind": kind}),
        "m",
        1.0,
        2,
        tmp_path / "t",
        lambda _: None,
    )
    (doc,) = stored
    assert doc["socialnet_point"]["tracing_unavailable"].startswith("the sampling switch failed: tailscope-svc")
    assert "tracing_sides" not in doc["socialnet_point"]
    assert analysis.tracing_costs([doc]) == []  # no pair: no row, never a 0 % cost


def _marks(start_s: float, plan: SwitchPlan, sides: int, late: dict[int, float] | None = None, cpu=None) -> list:
    """A mark on every slot boundary, `late[k]` seconds after it; CPU 10 ms and 1 tick per slot."""
    late = late or {}
    return [
        SlotMark(k, start_s + k * plan.slot_s + late.get(k, 0.0), (cpu or {}).get(k, k * 10_000_000), k)
        for k in range(sides * plan.side_slots + 1)
    ]


def test_a_side_off_its_boundaries_or_without_cpu_is_dropped_with_the_reason():
    plan = SwitchPlan(slot_s=0.25, guard_slots=1, used_slots=4, max_skew_s=0.02)
    start = 1000.0
    requests = {k: 100 for k in range(20)}
    rows = switched_sides_table(_marks(start, plan, 4), start, requests, 2, plan)
    assert [r["dropped"] for r in rows] == ["", "", "", ""]
    assert [r["requests"] for r in rows] == [400] * 4  # slot 0 of each side is its guard
    assert rows[0]["services_cpu_s"] == pytest.approx(0.04)  # slots 1..5: 4 × 10 ms
    assert rows[0]["machine_busy_s"] == pytest.approx(4 / procstat.CLK_TCK)
    # The switch into side 1 (slot 5) 30 ms late: sides 0 and 1 both end or start on it.
    rows = switched_sides_table(_marks(start, plan, 4, late={5: 0.03}), start, requests, 2, plan)
    assert [bool(r["dropped"]) for r in rows] == [True, True, False, False]
    assert rows[0]["dropped"] == "a switch or CPU mark 30 ms off its slot boundary (> 20 ms)"
    # No CPU reading at slot 11 (side 2's first used slot): side 2 still pairs by throughput, its CPU says why it is missing.
    gone = switched_sides_table(_marks(start, plan, 4, cpu={11: None}), start, requests, 2, plan)
    assert gone[2]["dropped"] == "" and "services_cpu_s" not in gone[2]
    assert gone[2]["cpu_unavailable"] == "a service's CPU clock was unreadable (no process, or it was gone)"
    doc = _load_doc("coroutine", "tracing-switched", 0, 1000, 50)
    doc["socialnet_point"] |= {"trace_sample": 1.0, "tracing_switch": SWITCH_SLOTS, "tracing_sides": gone}
    (row,) = analysis.tracing_costs([doc])
    assert row.pairs == 2 and row.cpu_cost is None and row.cpu_unavailable == gone[2]["cpu_unavailable"]
    # The switcher stopped after slot 12: sides 2 and 3 never ended.
    rows = switched_sides_table(_marks(start, plan, 4)[:13], start, requests, 2, plan)
    assert [r["dropped"] for r in rows][2:] == ["the switcher stopped before the side ended"] * 2
    # Only complete pairs count: pair 1 lost a side, so the analysis has one pair and says why.
    doc = _load_doc("coroutine", "tracing-switched", 0, 1000, 50)
    doc["socialnet_point"] |= {"trace_sample": 1.0, "tracing_switch": SWITCH_SLOTS, "tracing_sides": rows}
    (row,) = analysis.tracing_costs([doc])
    assert row.pairs == 1 and row.dropped == ("the switcher stopped before the side ended",) * 2


def test_process_cpu_ns_reads_another_process_and_says_when_it_is_gone():
    burner = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\nt = time.thread_time()\nwhile time.thread_time() - t < 0.2: pass\ntime.sleep(5)",
        ]
    )
    try:
        deadline = time.time() + 10
        while (procstat.process_cpu_ns(burner.pid) or 0) < 0.2e9 and time.time() < deadline:
            time.sleep(0.05)
        ns = procstat.process_cpu_ns(burner.pid)
        ticks = procstat.process_cpu_ticks(burner.pid)
        assert ns is not None and ns >= 0.2e9
        # The same CPU as /proc's ticks, to within a tick per counter (utime and stime round separately).
        assert abs(ns / 1e9 - ticks / procstat.CLK_TCK) <= 2 / procstat.CLK_TCK
    finally:
        burner.kill()
        burner.wait()
    assert procstat.process_cpu_ns(burner.pid) is None


def test_the_quick_socialnet_run_measures_the_best_at_100_and_1_percent_in_one_run_each(monkeypatch, tmp_path):
    lab = FakeSwitchedLab()
    monkeypatch.setattr(tracing_mod, "PLAN", TEST_PLAN)
    monkeypatch.setattr(tracing_mod, "run_front_load", lab.load_args)
    socialnet_lab, docs, _ = _run(monkeypatch, tmp_path, "real", stub_tracing=False)
    tracing = [d.document for d in docs if d.document["socialnet_point"]["kind"].startswith("tracing-")]
    assert len(tracing) == 2  # one switched run per sampling
    assert {d["socialnet_point"]["tracing_switch"] for d in tracing} == {SWITCH_SLOTS}
    rows = analysis.tracing_costs(tracing)
    pairs = tracing_mod.TRACING_PAIRS
    assert [(r.model, r.sample, r.pairs) for r in rows] == [("coroutine", 1.0, pairs), ("coroutine", 0.01, pairs)]
    art = tmp_path / "socialnet"
    assert sorted(p.name for p in art.glob("graph-*-tracing-*.json")) == [
        "graph-coroutine-tracing-1.json",
        "graph-coroutine-tracing-100.json",
    ]
    # Per run: paused before the warm-up, then a switch wherever ABBA changes the state.
    per_run = [False] + [
        on for i, (_, on) in enumerate(tracing_order(pairs)) if i and on != tracing_order(pairs)[i - 1][1]
    ]
    assert socialnet_lab.switches == per_run * 2
    assert not (art / "tracing-cost").exists() or not any((art / "tracing-cost").iterdir())


def test_the_table_says_where_the_pairs_ran(monkeypatch, tmp_path):
    from tailscope.studies.socialnet.section import tracing_table

    _, stored, _, _ = _switched(monkeypatch, tmp_path, 1.0, 2)
    (row,) = analysis.tracing_costs([d for d, _, _ in stored])
    caption = tracing_table([row]).caption
    assert (
        "each side 0.2 s of ONE closed-loop run per row" in caption
        and "the 0.05 s after each switch discarded" in caption
    )
    assert "the sides' median rate (lowest–highest)" in caption
    assert f", the switching thread under {row.switcher} —" in caption and row.switcher
    assert tracing_table([row]).rows[0][2].count("–") == 1  # median (lowest–highest), not every side
    points = [
        _load_doc("coroutine", kind, 0, per_s, 50) | {} for kind, per_s in (("tracing-off", 1000), ("tracing-on", 990))
    ]
    for d in points:
        d["socialnet_point"]["tracing_switch"] = SWITCH_SIGNAL
    (one_graph,) = analysis.tracing_costs(points)
    assert one_graph.one_graph and not one_graph.switched
    assert "on one graph per row" in tracing_table([one_graph]).caption
    old = [_load_doc("coroutine", kind, 0, per_s, 50) for kind, per_s in (("tracing-off", 1000), ("tracing-on", 990))]
    (old_row,) = analysis.tracing_costs(old)
    assert not old_row.one_graph
    assert "on fresh graphs" in tracing_table([old_row]).caption
    assert "the others on fresh graphs" in tracing_table([one_graph, old_row]).caption


def _cpu_pair(i: int, on_cpu_s: float, off_cpu_s: float = 1.0, busy_s: float = 2.0) -> list[dict]:
    """One alternated pair of 1000 requests each: the services' CPU on and off, the machine's busy CPU off."""
    docs = []
    for kind, cpu_s in (("tracing-off", off_cpu_s), ("tracing-on", on_cpu_s)):
        d = _load_doc("coroutine", kind, 0, 1000, 50)
        d["load"]["requests_completed"] = 1000
        d["socialnet_point"] |= {
            "trace_sample": 1.0,
            "pair": i,
            "tracing_switch": SWITCH_SIGNAL,
            "tracing_cpu": {"services_cpu_s": cpu_s, "machine_busy_s": busy_s},
        }
        docs.append(d)
    return docs


def test_the_same_pairs_are_judged_by_cpu_per_request():
    from tailscope.studies.socialnet.section import tracing_lines, tracing_table

    # Tracing adds 0.01–0.03 s of services' CPU to 1000 requests whose machine work is 2 s: 0.5–1.5 %.
    extra = [0.01, 0.015, 0.02, 0.02, 0.025, 0.03]
    docs = [d for i, x in enumerate(extra) for d in _cpu_pair(i, 1.0 + x)]
    (row,) = analysis.tracing_costs(docs)
    assert row.cpu_cost == pytest.approx(0.01)  # median of 0.5, 0.75, 1, 1, 1.25, 1.5 %
    assert row.cpu_cost_interval == (pytest.approx(0.005), pytest.approx(0.015))
    assert row.cpu_verdict.verdict == "met"  # the interval's top, 1.5 %, is within 2 %
    assert row.cost == pytest.approx(0.0)  # throughput did not see it
    t = tracing_table([row])
    col = {c: i for i, c in enumerate(t.columns)}
    assert t.rows[0][col["CPU cost [95 % interval]"]] == "1.0 % [0.5–1.5 %]"
    assert t.rows[0][col["CPU verdict"]] == "met"
    assert "CPU cost: the same pairs judged by work instead of throughput" in t.caption
    assert tracing_lines([row])[-1] == (
        "Tracing at 100 % sampling by CPU per request (the same pairs): met for 1 of 1 model(s); the highest, "
        "1.0 % of the machine's work per request on coroutine (median of 6 pairs, 95 % interval 0.5–1.5 %)."
    )
    # A point without the reading: the whole row's CPU cost is unavailable with the reason, never 0.
    docs[3]["socialnet_point"]["tracing_cpu"] = {"unavailable": "/proc unreadable for text-service"}
    (gone,) = analysis.tracing_costs(docs)
    assert gone.cpu_cost is None and gone.cpu_unavailable == "/proc unreadable for text-service"
    assert tracing_table([row, gone]).rows[1][-2:] == ["unavailable (/proc unreadable for text-service)", "—"]


def test_runs_without_the_cpu_reading_keep_their_table():
    from tailscope.studies.socialnet.section import tracing_table

    old = [_load_doc("coroutine", kind, 0, per_s, 50) for kind, per_s in (("tracing-off", 1000), ("tracing-on", 990))]
    (row,) = analysis.tracing_costs(old)
    assert row.cpu_cost is None and row.cpu_unavailable == "the run did not read its points' CPU"
    assert "CPU verdict" not in tracing_table([row]).columns


def test_the_switcher_says_when_it_was_refused_a_real_time_policy(monkeypatch):
    def refused(pid, policy, param):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(tracing_mod.os, "sched_setscheduler", refused)
    assert tracing_mod.realtime_policy() == "SCHED_OTHER (SCHED_FIFO refused: [Errno 1] Operation not permitted)"
