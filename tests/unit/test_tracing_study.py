"""Study `tracing` (studies/tracing.py): every model at 100 % and 1 % by the socialnet study's own
tracing pairs, one graph per (model, sampling), rendered as the socialnet tracing-cost table; not in
the default run."""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path

import pytest
from test_socialnet_analysis import _load_doc

from tailscope.lab import topology
from tailscope.report.blocks import Table
from tailscope.studies import registry, tracing
from tailscope.studies.base import RunContext
from tailscope.studies.socialnet import analysis
from tailscope.studies.socialnet import tracing as tracing_mod
from tailscope.studies.socialnet.tracing import SWITCH_SIGNAL, tracing_order

THROUGHPUT = {"std-async": 1000.0, "coroutine": 3000.0}
COST = 0.02


class FakeLab:
    def __init__(self):
        self.graphs: list[tuple[str, float, str | None]] = []  # (model, trace_sample, stores)
        self.on = True
        self.switches: list[bool] = []

    @contextmanager
    def graph(self, topo, model, out, trace_sample=0.0, traces=None, stores=None, **_):
        self.graphs.append((model, trace_sample, stores))
        self.on = True
        yield len(self.graphs) - 1, {"pid": 1, "stores": {"mode": "simulated", "reason": "test"}, "work": "real"}
        Path(out).write_text("{}")

    def switch(self, ready, on):
        self.on = on
        self.switches.append(on)

    def load(self, port, rate, connections, duration, warmup, timeout, client_cpu=None):
        model = self.graphs[port][0]
        per_s = THROUGHPUT[model] * (1 - COST if self.on else 1)
        return _load_doc(model, "x", rate, per_s, 50)


def _run(monkeypatch, tmp_path, options):
    lab = FakeLab()
    monkeypatch.setattr(tracing, "graph", lab.graph)
    monkeypatch.setattr(tracing, "run_front_load", lab.load)
    monkeypatch.setattr(tracing_mod, "set_trace_sampling", lab.switch)
    monkeypatch.setattr(topology, "to_engine_json", lambda _src, out: Path(out))
    ctx = RunContext("quick", tmp_path, lambda *_: None, {"stores": "simulated"} | options)
    return lab, tracing.STUDY.run(ctx)


def test_every_model_at_both_samplings_on_one_graph_each(monkeypatch, tmp_path):
    lab, docs = _run(monkeypatch, tmp_path, {"tracing_models": ["std-async", "coroutine"], "tracing_pairs": 2})
    assert lab.graphs == [
        ("std-async", 1.0, "simulated"),
        ("std-async", 0.01, "simulated"),
        ("coroutine", 1.0, "simulated"),
        ("coroutine", 0.01, "simulated"),
    ]
    assert lab.switches == [on for _ in range(4) for _, on in tracing_order(2)]
    points = [d.document["socialnet_point"] for d in docs]
    assert len(points) == 4 * 2 * 2
    assert {p["tracing_switch"] for p in points} == {SWITCH_SIGNAL}
    assert all(d.study == "tracing" and d.document["stores"]["mode"] == "simulated" for d in docs)
    rows = analysis.tracing_costs([d.document for d in docs])
    assert [(r.model, r.sample, r.pairs) for r in rows] == [
        ("std-async", 1.0, 2),
        ("std-async", 0.01, 2),
        ("coroutine", 1.0, 2),
        ("coroutine", 0.01, 2),
    ]
    assert all(r.cost == pytest.approx(COST) and r.one_graph for r in rows)
    assert not (tmp_path / "tracing" / "traces").exists() or not any((tmp_path / "tracing" / "traces").iterdir())


@pytest.mark.parametrize("pairs", [0, 101])
def test_a_pair_count_out_of_range_is_refused(monkeypatch, tmp_path, pairs):
    with pytest.raises(ValueError, match="tracing_pairs"):
        _run(monkeypatch, tmp_path, {"tracing_models": ["coroutine"], "tracing_pairs": pairs})


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
