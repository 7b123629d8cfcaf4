"""Study `tracing` (studies/tracing.py): every model at 100 % and 1 % by the socialnet study's own
tracing pairs, one graph per (model, sampling), rendered as the socialnet tracing-cost table; not in
the default run."""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path

import pytest
from test_socialnet_tracing import TEST_PLAN, FakeSwitchedLab

from tailscope.lab import topology
from tailscope.report.blocks import Table
from tailscope.studies import registry, tracing
from tailscope.studies.base import RunContext
from tailscope.studies.socialnet import analysis
from tailscope.studies.socialnet import tracing as tracing_mod
from tailscope.studies.socialnet.tracing import SWITCH_SLOTS, tracing_order

COST = 0.02


class FakeLab(FakeSwitchedLab):
    """FakeSwitchedLab behind the study's graph(): each graph records its model, sampling and stores."""

    def __init__(self):
        super().__init__(COST)
        self.graphs: list[tuple[str, float, str | None]] = []  # (model, trace_sample, stores)

    @contextmanager
    def graph(self, topo, model, out, trace_sample=0.0, traces=None, stores=None, **_):
        self.graphs.append((model, trace_sample, stores))
        ready = {"pid": 4242, "pids": {}, "stores": {"mode": "simulated", "reason": "test"}, "work": "real"}
        yield len(self.graphs) - 1, ready
        Path(out).write_text("{}")


def _run(monkeypatch, tmp_path, options):
    lab = FakeLab()
    monkeypatch.setattr(tracing, "graph", lab.graph)
    monkeypatch.setattr(tracing_mod, "run_front_load", lab.load_args)
    monkeypatch.setattr(tracing_mod, "set_trace_sampling", lab.switch)
    monkeypatch.setattr(tracing_mod, "PLAN", TEST_PLAN)
    monkeypatch.setattr(topology, "to_engine_json", lambda _src, out: Path(out))
    ctx = RunContext("quick", tmp_path, lambda *_: None, {"stores": "simulated"} | options)
    return lab, tracing.STUDY.run(ctx)


def _switches(pairs: int) -> list[bool]:
    """One switched run's switches: paused before the warm-up, then wherever ABBA changes the state."""
    order = [on for _, on in tracing_order(pairs)]
    return [order[0]] + [on for i, on in enumerate(order) if i and on != order[i - 1]]


def test_every_model_at_both_samplings_on_one_graph_each(monkeypatch, tmp_path):
    lab, docs = _run(monkeypatch, tmp_path, {"tracing_models": ["std-async", "coroutine"], "tracing_pairs": 2})
    assert lab.graphs == [
        ("std-async", 1.0, "simulated"),
        ("std-async", 0.01, "simulated"),
        ("coroutine", 1.0, "simulated"),
        ("coroutine", 0.01, "simulated"),
    ]
    assert lab.switches == _switches(2) * 4
    points = [d.document["socialnet_point"] for d in docs]
    assert len(points) == 4  # one switched run per (model, sampling)
    assert {p["tracing_switch"] for p in points} == {SWITCH_SLOTS}
    assert all(len(p["tracing_sides"]) == 4 for p in points)
    assert all(d.study == "tracing" and d.document["stores"]["mode"] == "simulated" for d in docs)
    rows = analysis.tracing_costs([d.document for d in docs])
    assert [(r.model, r.sample, r.pairs) for r in rows] == [
        ("std-async", 1.0, 2),
        ("std-async", 0.01, 2),
        ("coroutine", 1.0, 2),
        ("coroutine", 0.01, 2),
    ]
    # Two pairs, the fake's drift alternating in sign: the median of the two is the 2 % cost.
    assert all(r.cost == pytest.approx(COST, abs=0.004) and r.switched for r in rows)
    # The fake graph has no service process: the CPU cost says why, the throughput cost stands.
    assert all(r.cpu_cost is None and "CPU clock was unreadable" in r.cpu_unavailable for r in rows)
    assert not (tmp_path / "tracing" / "traces").exists() or not any((tmp_path / "tracing" / "traces").iterdir())


@pytest.mark.parametrize("pairs", [0, 401])
def test_a_pair_count_out_of_range_is_refused(monkeypatch, tmp_path, pairs):
    with pytest.raises(ValueError, match="tracing_pairs"):
        _run(monkeypatch, tmp_path, {"tracing_models": ["coroutine"], "tracing_pairs": pairs})


@pytest.mark.parametrize(("form", "scale", "pairs"), [("quick", 0.05, 1), ("quick", 0.5, 4), ("full", 4.0, 96)])
def test_scale_multiplies_the_pairs(monkeypatch, tmp_path, form, scale, pairs):
    seen: list[int] = []
    monkeypatch.setattr(tracing, "run_switched_tracing", lambda *a: seen.append(a[5]))
    monkeypatch.setattr(topology, "to_engine_json", lambda _src, out: Path(out))
    ctx = RunContext(form, tmp_path, lambda *_: None, {"tracing_models": ["coroutine"], "scale": scale})
    tracing.STUDY.run(ctx)
    assert seen == [pairs, pairs]  # one switched run per sampling


def test_a_scale_beyond_the_longest_run_is_refused(monkeypatch, tmp_path):
    ctx = RunContext("full", tmp_path, lambda *_: None, {"tracing_models": ["coroutine"], "scale": 20.0})
    with pytest.raises(ValueError, match="--scale 20 asks for 480 tracing pairs per row, more than 400"):
        tracing.STUDY.run(ctx)


def test_the_section_renders_the_socialnet_tracing_table(monkeypatch, tmp_path):
    _, docs = _run(monkeypatch, tmp_path, {"tracing_models": ["coroutine"], "tracing_pairs": 1})

    class FakeStore:
        def documents(self, run_id, study):
            return [d for d in docs if d.study == study]

        def unavailable(self, run_id):
            return []

    sec = tracing.STUDY.section(FakeStore(), "r1")
    (table,) = [b for b in sec.blocks if isinstance(b, Table)]
    assert table.title.startswith("Tracing cost")
    assert [row[0] for row in table.rows] == ["coroutine", "coroutine"]
    assert json.dumps(table.rows)  # plain cells


def test_the_study_is_registered_but_not_in_the_default_run():
    assert registry.study_by_name("tracing") is tracing.STUDY
    assert "tracing" not in {s.name for s in registry.default_studies()}
    assert [s.name for s in registry.default_studies()] == [
        s.name for s in registry.all_studies() if s.name != "tracing"
    ]
