"""The socialnet study's simulated-stores arm (issue 27: best ÷ std-async at the p99 objective on the real
graph beside the simulated one, from one run). The analysis from synthetic documents of both arms — each
ratio from its own points, the run's own figures unchanged by the arm's, why a skipped arm did not run —,
the section's side-by-side table and sentence, and the run's plumbing with fake engines (which graphs run
on which stores, how the arm's points are named and marked). No engines."""

from __future__ import annotations

import copy
import dataclasses
import json
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_socialnet_analysis import _load_doc

from tailscope.lab import topology
from tailscope.lab.stores import NO_STORES_REASON
from tailscope.report.blocks import Table
from tailscope.store import EngineDocument, RunRecord, Store
from tailscope.studies.base import RunContext
from tailscope.studies.socialnet import STUDY, analysis
from tailscope.studies.socialnet import run as run_mod
from tailscope.studies.socialnet import tracing as tracing_mod
from tailscope.studies.socialnet.analysis import (
    NARROWER_ON_REAL,
    OVERLAPPING,
    SIMULATED_ARM,
    STORES_ARM,
    WIDER_ON_REAL,
    best_at_objective,
    simulated_arm_models,
    simulated_arm_skip_reason,
    summarize,
    summarize_documents,
)
from tailscope.studies.socialnet.section import stores_comparison_line, stores_table, summary_notes

REAL = {"mode": "real", "reason": "memcached, redis-server and postgres found", "servers": []}
SIMULATED = {"mode": "simulated", "reason": "--stores simulated", "servers": []}


def _on(stores: dict | None, docs: list[dict]) -> list[dict]:
    """`docs` as measured on graphs that recorded `stores` (None: an engine before real stores)."""
    for d in docs:
        if stores is not None:
            d["stores"] = copy.deepcopy(stores)
    return docs


def _run_points(stores: dict | None = REAL) -> list[dict]:
    """The run's own points: std-async met the objective at 500/s and missed at 900/s; coroutine met it
    at 2 010/s and missed at 2 600/s (4.02×, the grid's bracket 2.23×–5.2×); pool-blocking in between."""
    return _on(
        stores,
        [
            _load_doc("std-async", "closed", 0, 1000, 80),
            _load_doc("std-async", "rate", 500, 500, 10),
            _load_doc("std-async", "rate", 900, 880, 90),
            _load_doc("pool-blocking", "closed", 0, 1500, 70),
            _load_doc("pool-blocking", "rate", 1000, 1000, 20),
            _load_doc("pool-blocking", "rate", 1300, 1000, 200),
            _load_doc("coroutine", "closed", 0, 3000, 60),
            _load_doc("coroutine", "rate", 1500, 1500, 12),
            _load_doc("coroutine", "rate", 2000, 2010, 30),
            _load_doc("coroutine", "rate", 2600, 2000, 300),
        ],
    )


def _arm_points(coroutine_miss: float = 2600, std_async: bool = True) -> list[dict]:
    """The simulated-stores arm: std-async met it at 1 400/s (a bisection) and missed at 1 800/s;
    coroutine met it at 2 000/s and missed at `coroutine_miss` (1.43×; bracket 1.11×–1.86× at 2 600)."""
    docs = [
        _load_doc("coroutine", "closed", 0, 3200, 60),
        _load_doc("coroutine", "rate", 2000, 2000, 20),
        _load_doc("coroutine", "rate", coroutine_miss, 2000, 400),
    ]
    if std_async:
        docs = [
            _load_doc("std-async", "closed", 0, 2000, 80),
            _load_doc("std-async", "rate", 1000, 1000, 10),
            _load_doc("std-async", "rate", 1800, 1700, 95),
            _load_doc("std-async", "refine", 1400, 1400, 40),
            *docs,
        ]
    for d in docs:
        d["socialnet_point"][STORES_ARM] = SIMULATED_ARM
    return _on(SIMULATED, docs)


# ---- the analysis ---------------------------------------------------------------------------------


def test_each_arm_has_its_own_ratio_from_its_own_points():
    s = summarize([*_run_points(), *_arm_points()], {})
    c = s.stores
    assert c is not None and s.best == "coroutine"
    assert (c.run.stores, c.simulated.stores) == ("real", "simulated")
    assert c.run.best == c.simulated.best == "coroutine"
    assert c.run.ratio == pytest.approx(2010 / 500) and c.run.target == s.target
    assert c.simulated.ratio == pytest.approx(2000 / 1400)
    assert c.simulated.per["std-async"].ceiling_per_s == 2000 and c.simulated.per["std-async"].bisections == 1
    assert set(c.simulated.per) == {"std-async", "coroutine"} and set(c.run.per) == {"std-async", "coroutine"}
    assert c.run_over_simulated == pytest.approx((2010 / 500) / (2000 / 1400))
    # No point has a p99 interval here: the ranges are the grid's brackets, and they do not overlap.
    assert c.run.ratio_range == pytest.approx((2010 / 900, 2600 / 500))
    assert c.simulated.ratio_range == pytest.approx((2000 / 1800, 2600 / 1400))
    assert c.difference == WIDER_ON_REAL


def test_the_runs_own_figures_are_unchanged_by_the_arms_points_and_graphs():
    graphs = {"std-async/graph": {"totals": {"cpu_s": 2.0, "front": {"requests": 1000}}, "services": {}}}
    arm_graphs = {"std-async/simulated-stores/graph": {"totals": {"cpu_s": 9.0, "front": {"requests": 10}}}}
    alone = summarize(_run_points(), graphs)
    both = summarize([*_run_points(), *_arm_points()], graphs | arm_graphs)
    assert dataclasses.replace(both, stores=None) == dataclasses.replace(alone, stores=None)
    assert both.per["std-async"].ceiling_per_s == 1000 and both.per["std-async"].cpu_per_request_ns == 2e6
    # The arm's own graph gives its CPU per request, keyed like the run's.
    assert both.stores is not None and both.stores.simulated.per["std-async"].cpu_per_request_ns == 9e8
    # Only the stores line of the notes differs.
    assert [n for n in summary_notes(both) if not n.startswith("Stores:")] == [
        n for n in summary_notes(alone) if "simulated stores: not measured" not in n
    ]


@pytest.mark.parametrize(
    ("loads", "why"),
    [
        (
            _run_points(SIMULATED),
            "the run's stores were simulated (--stores simulated): its ratio above already is the simulated one",
        ),
        (
            _run_points(None),
            f"the run's stores were simulated ({NO_STORES_REASON}): its ratio above already is the simulated one",
        ),
        (
            [d for d in _run_points() if d["socialnet_point"]["model"] != "std-async"],
            "std-async was not among the run's models: the ratio has no denominator",
        ),
        (_run_points(), "the run stored no simulated-stores arm (a run from before the arm)"),
        (
            _run_points()[:3] + _run_points(SIMULATED)[3:],
            "the run's graphs ran on real and on simulated stores (real: memcached, redis-server and postgres "
            "found; simulated: --stores simulated): there is no one real-store ratio to set a simulated one beside",
        ),
    ],
    ids=["simulated", "engine-before-stores", "no-std-async", "before-the-arm", "mixed"],
)
def test_an_arm_that_did_not_run_is_none_with_the_reason(loads, why):
    c = summarize(loads, {}).stores
    assert c is not None
    assert c.simulated.unavailable == why
    assert c.simulated.target is None and c.simulated.ratio is None and c.simulated.per == {}
    assert c.run_over_simulated is None and c.difference is None


def test_the_run_decides_with_the_same_reason_from_its_ready_lines():
    models = ["std-async", "coroutine"]
    assert simulated_arm_skip_reason([REAL, REAL], models) is None
    assert simulated_arm_skip_reason([REAL, SIMULATED], models).startswith("the run's graphs ran on real and on")
    assert simulated_arm_skip_reason([SIMULATED], models).startswith("the run's stores were simulated (--stores")
    assert simulated_arm_skip_reason([None], models) == (
        f"the run's stores were simulated ({NO_STORES_REASON}): its ratio above already is the simulated one"
    )
    assert simulated_arm_skip_reason([], models) == "the run measured no graph"
    assert simulated_arm_skip_reason([REAL], ["coroutine"]) == (
        "std-async was not among the run's models: the ratio has no denominator"
    )


def test_the_arm_runs_std_async_and_the_same_best_model_the_analysis_names():
    loads = _run_points()
    by_model: dict[str, list[dict]] = {}
    for d in loads:
        if d["socialnet_point"]["kind"] != "closed":
            by_model.setdefault(d["socialnet_point"]["model"], []).append(d)
    assert best_at_objective(by_model) == summarize(loads, {}).best == "coroutine"
    assert best_at_objective({}) is None
    assert simulated_arm_models(["std-async", "pool-blocking", "coroutine"], "coroutine") == ["std-async", "coroutine"]
    assert simulated_arm_models(["std-async", "coroutine"], "std-async") == ["std-async"]
    assert simulated_arm_models(["coroutine"], "coroutine") == ["coroutine"]


@pytest.mark.parametrize(
    ("coroutine_miss", "difference"),
    [(2600, WIDER_ON_REAL), (4000, OVERLAPPING)],  # 4 000 ÷ 1 400 = 2.86× reaches the run's 2.23×
)
def test_the_difference_is_decided_by_whether_the_ranges_overlap(coroutine_miss, difference):
    c = summarize([*_run_points(), *_arm_points(coroutine_miss)], {}).stores
    assert c is not None and c.difference == difference


def test_a_ratio_narrower_on_real_stores():
    # The run: coroutine met the objective at 600/s and missed at 700/s (1.2×, bracket 0.67×–1.4×). The
    # arm: coroutine met it at 3 000/s and missed at 3 400/s against std-async's 1 400/s (2.14×, bracket
    # 1.67×–2.43×): the ranges do not overlap, the run's below.
    run = [d for d in _run_points() if d["socialnet_point"]["model"] == "std-async"]
    run += _on(REAL, [_load_doc("coroutine", "rate", 600, 600, 10), _load_doc("coroutine", "rate", 700, 650, 90)])
    arm = [d for d in _arm_points() if d["socialnet_point"]["model"] == "std-async"]
    arm += _on(
        SIMULATED, [_load_doc("coroutine", "rate", 3000, 3000, 20), _load_doc("coroutine", "rate", 3400, 3000, 300)]
    )
    for d in arm:
        d["socialnet_point"][STORES_ARM] = SIMULATED_ARM
    c = summarize([*run, *arm], {}).stores
    assert c is not None and c.run.best == c.simulated.best == "coroutine"
    assert c.run.ratio_range == pytest.approx((600 / 900, 700 / 500))
    assert c.simulated.ratio_range == pytest.approx((3000 / 1800, 3400 / 1400))
    assert c.difference == NARROWER_ON_REAL


def test_an_arm_without_std_async_has_no_ratio_and_says_why():
    c = summarize([*_run_points(), *_arm_points(std_async=False)], {}).stores
    assert c is not None and c.simulated.target is None
    assert c.simulated.unavailable == "the arm stored no std-async point: the ratio has no denominator"
    assert c.run_over_simulated is None and c.difference is None


# ---- the section --------------------------------------------------------------------------------


def test_the_table_sets_the_two_arms_side_by_side():
    c = summarize([*_run_points(), *_arm_points()], {}).stores
    assert c is not None
    t = stores_table(c)
    assert t.title == "coroutine ÷ std-async at the p99 objective: the run's stores beside simulated ones"
    assert t.columns == ["", "stores: real", "stores: simulated"]
    rows = {r[0]: r[1:] for r in t.rows}
    assert list(rows) == [
        "std-async ceiling /s",
        "coroutine ceiling /s",
        "std-async max /s at p99 ≤ 50 ms",
        "coroutine max /s at p99 ≤ 50 ms",
        "coroutine ÷ std-async at p99 ≤ 50 ms",
        "plausible range",
        "target ≥ 4×",
    ]
    assert rows["std-async ceiling /s"] == ["1\u2009000", "2\u2009000"]
    assert rows["std-async max /s at p99 ≤ 50 ms"] == [
        "500 (missed at 900/s; 0 bisections)",
        "1\u2009400 (missed at 1\u2009800/s; 1 bisection)",
    ]
    assert rows["coroutine ÷ std-async at p99 ≤ 50 ms"] == ["4.02×", "1.43×"]
    assert rows["plausible range"] == ["2.23×–5.2×", "1.11×–1.86×"]
    assert rows["target ≥ 4×"][0].startswith("met by the estimates")
    assert rows["target ≥ 4×"][1].startswith("not met by the estimates")
    assert t.findings == [stores_comparison_line(c)]


def test_the_sentence_compares_the_two_ratios_with_computed_figures():
    c = summarize([*_run_points(), *_arm_points()], {}).stores
    assert c is not None
    assert stores_comparison_line(c) == (
        "Stores: on real stores coroutine's advantage over std-async at p99 ≤ 50 ms is 4.02× against 1.43× on "
        "simulated ones (real ÷ simulated 2.81×); wider on real stores: the ranges of plausible ratios "
        "(2.23×–5.2× on real, 1.11×–1.86× on simulated) do not overlap."
    )
    c = summarize([*_run_points(), *_arm_points(4000)], {}).stores
    assert c is not None
    assert stores_comparison_line(c).endswith(
        "the ranges of plausible ratios (2.23×–5.2× on real, 1.11×–2.86× on simulated) overlap: the difference "
        "is undecided at this length."
    )


def test_a_skipped_arm_is_one_note_with_its_reason_and_no_table():
    s = summarize(_run_points(SIMULATED), {})
    assert s.stores is not None
    line = (
        "coroutine ÷ std-async at p99 ≤ 50 ms on simulated stores: not measured (the run's stores were simulated "
        "(--stores simulated): its ratio above already is the simulated one)."
    )
    assert stores_comparison_line(s.stores) == line
    assert line in summary_notes(s)


def _stored_section(tmp_path: Path, loads: list[dict]):
    names = [
        f"{d['socialnet_point']['model']}/"
        + (f"{analysis.SIMULATED_ARM_POINT}/" if analysis.in_simulated_arm(d) else "")
        + f"{d['socialnet_point']['kind']}/{i}"
        for i, d in enumerate(loads)
    ]
    docs = [EngineDocument("socialnet", "tailscope-load", d, n) for d, n in zip(loads, names, strict=True)]
    now = datetime(2026, 1, 1, 12, 0, 0)
    with Store(tmp_path / "t.duckdb") as store:
        store.save_run(RunRecord("r", now, now, "quick", ["socialnet"], {}, "test", docs))
        return STUDY.section(store, "r")


def test_the_section_states_the_runs_stores_and_shows_the_arm_in_its_own_table(tmp_path):
    sec = _stored_section(tmp_path, [*_run_points(), *_arm_points()])
    assert sec.notes[0] == "stores: real"  # the arm's simulated graphs are not the run's stores
    tables = [b for b in sec.blocks if isinstance(b, Table) and "beside simulated ones" in b.title]
    assert len(tables) == 1 and tables[0].columns == ["", "stores: real", "stores: simulated"]
    assert any(n.startswith("Stores: on real stores coroutine's advantage") for n in sec.notes)
    # The arm's points are not the run's: the per-model summary and the objective table list the run's only.
    objective = next(b for b in sec.blocks if isinstance(b, Table) and b.title.startswith("The p99 objective"))
    assert [r[1] for r in objective.rows if r[0] == "std-async"] == ["500", "900"]


def test_the_section_of_a_run_on_simulated_stores_says_why_the_arm_did_not_run(tmp_path):
    sec = _stored_section(tmp_path, _run_points(SIMULATED))
    assert sec.notes[0] == "stores: simulated (--stores simulated)"
    assert not [b for b in sec.blocks if isinstance(b, Table) and "beside simulated ones" in b.title]
    assert any("on simulated stores: not measured (the run's stores were simulated" in n for n in sec.notes)


# ---- the run's plumbing (fake engines) ------------------------------------------------------------

# Closed-loop ceilings per (model, stores) and the highest rate that meets the objective (0.9 × ceiling).
CEILINGS = {
    ("std-async", "real"): 1000.0,
    ("pool-blocking", "real"): 1500.0,
    ("coroutine", "real"): 3000.0,
    ("std-async", "simulated"): 2000.0,
    ("pool-blocking", "simulated"): 2500.0,
    ("coroutine", "simulated"): 3200.0,
}


class FakeLab:
    """graph() and tailscope-load stand-ins: each graph records its model and stores; a load point's
    p99 is within the objective up to 0.9 × that graph's ceiling."""

    def __init__(self, run_mode: str):
        self.run_mode = run_mode
        self.graphs: list[tuple[str, str | None, str]] = []  # (model, stores asked, stores ran)
        self.switches: list[bool] = []  # the tracing pairs' sampling switches (True: resumed)

    @contextmanager
    def graph(self, topo, model, out, trace_sample=0.0, traces=None, cpu=None, stores=None, work=None):
        ran = "simulated" if stores == "simulated" else self.run_mode
        self.graphs.append((model, stores, ran))
        ready = {"stores": REAL if ran == "real" else SIMULATED, "work": work or "real", "ports": {}, "pids": {}}
        yield len(self.graphs) - 1, copy.deepcopy(ready)
        Path(out).write_text(json.dumps({"services": {}, "totals": {"front": {"requests": 100}, "cpu_s": 0.1}}))

    def load(self, port, rate, connections, duration, warmup, timeout, client_cpu=None):
        model, _, ran = self.graphs[port]
        ceiling = CEILINGS[(model, ran)]
        achieved = ceiling if rate == 0 else min(rate, ceiling)
        p99_ms = 80 if rate == 0 else 10 if rate <= 0.9 * ceiling else 300
        return _load_doc(model, "x", rate, achieved, p99_ms)


def _run(
    monkeypatch, tmp_path: Path, run_mode: str, stub_tracing: bool = True
) -> tuple[FakeLab, list[EngineDocument], list[str]]:
    """The socialnet study's quick form on FakeLab. Its tracing step (a switched run in real time) is a
    stub that stores nothing unless `stub_tracing` is False (test_socialnet_tracing fakes that run)."""
    lab = FakeLab(run_mode)
    if stub_tracing:
        monkeypatch.setattr(run_mod, "run_switched_tracing", lambda *a, **k: None)
    monkeypatch.setattr(run_mod, "graph", lab.graph)
    monkeypatch.setattr(run_mod, "run_front_load", lab.load)
    monkeypatch.setattr(run_mod, "run_engine", lambda *a, **k: SimpleNamespace(document={"measurements": []}))
    monkeypatch.setattr(tracing_mod, "set_trace_sampling", lambda ready, on: lab.switches.append(on))

    def to_engine_json(_src: Path, out: Path) -> Path:
        Path(out).write_text('{"front": {"service": "nginx"}}')
        return Path(out)

    monkeypatch.setattr(topology, "to_engine_json", to_engine_json)
    said: list[str] = []
    ctx = RunContext(
        "quick",
        tmp_path,
        lambda what, _share: said.append(what),
        {"socialnet_models": ["std-async", "pool-blocking", "coroutine"], "stores": "auto"},
    )
    return lab, run_mod.run_study(ctx, "socialnet"), said


def test_on_real_stores_the_arm_runs_std_async_and_the_best_on_simulated_stores(monkeypatch, tmp_path):
    lab, docs, said = _run(monkeypatch, tmp_path, "real")
    arm = [d for d in docs if analysis.in_simulated_arm(d.document)]
    # Every arm graph asked for simulated stores, every other graph for the run's --stores.
    assert {(m, asked) for m, asked, _ in lab.graphs if asked == "simulated"} == {
        ("std-async", "simulated"),
        ("coroutine", "simulated"),
    }
    assert all(asked == "auto" for _, asked, ran in lab.graphs if ran == "real")
    assert {d.document["stores"]["mode"] for d in arm} == {"simulated"}
    assert all(d.point.split("/")[1] == analysis.SIMULATED_ARM_POINT for d in arm)
    assert all(analysis.SIMULATED_ARM_POINT not in d.point for d in docs if d not in arm)
    kinds = [(d.document["socialnet_point"]["model"], d.document["socialnet_point"]["kind"]) for d in arm]
    for model in ("std-async", "coroutine"):
        assert kinds.count((model, "closed")) == 1
        assert kinds.count((model, "rate")) == len(analysis.SWEEP_FRACTIONS)  # the same fractions, no common rate
        assert 1 <= kinds.count((model, "refine")) <= run_mod.REFINE_STEPS
        assert kinds.count((model, "graph")) == 2  # the ceiling's and the sweep's graph documents
    s = summarize_documents(docs)
    assert s is not None and s.stores is not None and s.best == "coroutine"
    assert s.stores.simulated.unavailable is None and s.stores.run.ratio == s.target.ratio
    # Real stores: std-async ~900/s, coroutine ~2 700/s; simulated: ~1 800/s and ~2 880/s.
    assert s.stores.run.ratio == pytest.approx(3.0, rel=0.15)
    assert s.stores.simulated.ratio == pytest.approx(1.6, rel=0.15)
    assert not any("skipped" in w for w in said)


def test_on_simulated_stores_the_arm_is_skipped_in_one_step_saying_why(monkeypatch, tmp_path):
    lab, docs, said = _run(monkeypatch, tmp_path, "simulated")
    assert not [d for d in docs if analysis.in_simulated_arm(d.document)]
    assert all(asked == "auto" for _, asked, _ in lab.graphs)
    assert [w for w in said if "skipped" in w] == [
        "socialnet: simulated-stores arm skipped: the run's stores were simulated (--stores simulated): its ratio "
        "above already is the simulated one"
    ]
    s = summarize_documents(docs)
    assert s is not None and s.stores is not None
    assert s.stores.simulated.unavailable == [w for w in said if "skipped" in w][0].split("skipped: ", 1)[1]
