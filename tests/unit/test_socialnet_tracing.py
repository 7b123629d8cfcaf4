"""Tracing cost pairs on one graph (socialnet/tracing.py): the ABBA order, the sampling switched before
every point, the documents the analysis groups, and the socialnet run's step 4 built on them."""

from __future__ import annotations

import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from test_socialnet_analysis import _load_doc
from test_socialnet_stores_arm import _run

from tailscope.studies.socialnet import analysis
from tailscope.studies.socialnet import tracing as tracing_mod
from tailscope.studies.socialnet.tracing import SWITCH_SIGNAL, run_tracing_pairs, tracing_order, tracing_steps


def test_the_pairs_alternate_abba():
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
    assert tracing_steps(4) == 9  # the warm-up and 8 points


@pytest.mark.parametrize("pairs", [2, 4, 6])
def test_a_linear_drift_adds_as_much_to_each_side(pairs):
    # Throughput growing by one unit per point: ABBA gives the on and off sides the same total time.
    at = {p: t for t, p in enumerate(tracing_order(pairs))}
    on = sum(t for (i, side), t in at.items() if side)
    off = sum(t for (i, side), t in at.items() if not side)
    assert on == off


class FakeGraph:
    """One graph per start; each load point's throughput drifts linearly with the graph's age and drops
    by `cost` while sampling is on (the graph starts sampled, as the engine does)."""

    def __init__(self, cost: float, drift_per_point: float = 10.0):
        self.cost, self.drift = cost, drift_per_point
        self.starts: list[tuple[float, Path]] = []
        self.events: list[str] = []
        self.sampling_on = True
        self.points = 0

    @contextmanager
    def start(self, sample: float, traces: Path):
        self.starts.append((sample, traces))
        traces.mkdir(parents=True)
        (traces / "front.spans.jsonl").write_text("{}\n")
        self.sampling_on = True
        yield 7, {"pid": 4242}
        self.events.append("stop")

    def switch(self, ready: dict, on: bool) -> None:
        assert ready["pid"] == 4242
        self.sampling_on = on
        self.events.append("resume" if on else "pause")

    def load(self, port: int) -> dict:
        assert port == 7
        self.points += 1
        per_s = (1000 + self.drift * self.points) * (1 - self.cost if self.sampling_on else 1)
        self.events.append(f"load {'on' if self.sampling_on else 'off'}")
        return _load_doc("coroutine", "x", 0, per_s, 50)


def _pairs(monkeypatch, tmp_path: Path, sample: float, pairs: int, cost: float = 0.02):
    fake = FakeGraph(cost)
    monkeypatch.setattr(tracing_mod, "set_trace_sampling", fake.switch)
    stored: list[tuple[dict, str, str]] = []

    def record(d: dict, kind: str, point: str) -> None:
        d["socialnet_point"] = {"model": "coroutine", "kind": kind}
        stored.append((d, kind, point))

    steps: list[str] = []
    traces = tmp_path / "tracing-cost" / "coroutine"
    run_tracing_pairs(fake.start, fake.load, record, "coroutine", sample, pairs, traces, steps.append)
    return fake, stored, steps, traces


def test_one_graph_a_discarded_warm_up_then_each_point_after_its_switch(monkeypatch, tmp_path):
    fake, stored, steps, traces = _pairs(monkeypatch, tmp_path, 0.01, 2)
    assert fake.starts == [(0.01, traces)]  # one graph, started at the sampling under test
    assert fake.events == [
        "load on",  # the warm-up, at the graph's sampling: not stored
        "pause",
        "load off",
        "resume",
        "load on",
        "resume",
        "load on",
        "pause",
        "load off",
        "stop",
    ]
    assert [(kind, point) for _, kind, point in stored] == [
        ("tracing-off", "coroutine/tracing/1/off/0"),
        ("tracing-on", "coroutine/tracing/1/on/0"),
        ("tracing-on", "coroutine/tracing/1/on/1"),
        ("tracing-off", "coroutine/tracing/1/off/1"),
    ]
    assert len(steps) == tracing_steps(2)
    assert not traces.exists()  # the on side's spans are not kept


def test_the_documents_keep_the_shape_the_analysis_groups_by(monkeypatch, tmp_path):
    _, stored, _, _ = _pairs(monkeypatch, tmp_path, 1.0, 4, cost=0.02)
    docs = [d for d, _, _ in stored]
    for d, kind, _ in stored:
        p = d["socialnet_point"]
        assert p["kind"] == kind and p["trace_sample"] == 1.0 and p["tracing_switch"] == SWITCH_SIGNAL
    assert sorted(d["socialnet_point"]["pair"] for d in docs) == [0, 0, 1, 1, 2, 2, 3, 3]
    (row,) = analysis.tracing_costs(docs)
    assert (row.model, row.sample, row.pairs) == ("coroutine", 1.0, 4)
    # The drift moves each pair's ratio by under 1 %, in both directions: the median stays at the 2 % cost.
    assert row.cost == pytest.approx(0.02, abs=0.005)
    assert sum(row.on_per_s) / sum(row.off_per_s) == pytest.approx(0.98, rel=1e-3)


def test_the_traces_are_removed_when_a_point_fails(monkeypatch, tmp_path):
    fake = FakeGraph(0.02)
    monkeypatch.setattr(tracing_mod, "set_trace_sampling", fake.switch)

    def failing_load(port: int) -> dict:
        raise RuntimeError("load failed")

    traces = tmp_path / "t"
    with pytest.raises(RuntimeError):
        run_tracing_pairs(fake.start, failing_load, lambda *a: None, "m", 1.0, 1, traces, lambda _: None)
    assert not traces.exists()


def test_the_quick_socialnet_run_measures_the_best_at_100_and_1_percent_on_one_graph_each(monkeypatch, tmp_path):
    lab, docs, _ = _run(monkeypatch, tmp_path, "real")
    tracing = [d.document for d in docs if d.document["socialnet_point"]["kind"].startswith("tracing-")]
    assert len(tracing) == 2 * 2 * 4  # two samplings, four pairs, two sides
    assert {d["socialnet_point"]["tracing_switch"] for d in tracing} == {SWITCH_SIGNAL}
    rows = analysis.tracing_costs(tracing)
    assert [(r.model, r.sample, r.pairs) for r in rows] == [("coroutine", 1.0, 4), ("coroutine", 0.01, 4)]
    art = tmp_path / "socialnet"
    assert sorted(p.name for p in art.glob("graph-*-tracing-*.json")) == [
        "graph-coroutine-tracing-1.json",
        "graph-coroutine-tracing-100.json",
    ]
    assert lab.switches == [on for _ in range(2) for _, on in tracing_order(4)]
    assert not (art / "tracing-cost").exists() or not any((art / "tracing-cost").iterdir())


def test_the_table_says_where_the_pairs_ran(monkeypatch, tmp_path):
    from tailscope.studies.socialnet.section import tracing_table

    _, stored, _, _ = _pairs(monkeypatch, tmp_path, 1.0, 4)
    (row,) = analysis.tracing_costs([d for d, _, _ in stored])
    assert row.one_graph
    assert "on one graph per row" in tracing_table([row]).caption
    old = [_load_doc("coroutine", kind, 0, per_s, 50) for kind, per_s in (("tracing-off", 1000), ("tracing-on", 990))]
    (old_row,) = analysis.tracing_costs(old)
    assert not old_row.one_graph
    assert "on fresh graphs" in tracing_table([old_row]).caption
    assert "the others on fresh graphs" in tracing_table([row, old_row]).caption


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


def test_cpu_window_reads_the_services_and_the_machine_around_a_point():
    import os
    import subprocess
    import sys

    from tailscope.studies.socialnet.tracing import cpu_window

    def burn() -> dict:
        t0 = time.thread_time()
        while time.thread_time() - t0 < 0.2:
            pass
        return {"load": {}}

    doc, cpu = cpu_window({"me": os.getpid()}, burn)
    assert doc == {"load": {}}
    assert cpu["services_cpu_s"] >= 0.1 and cpu["machine_busy_s"] >= 0.1
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    _, cpu = cpu_window({"text-service": gone.pid}, lambda: {})
    assert cpu == {"unavailable": "/proc unreadable for text-service"}
