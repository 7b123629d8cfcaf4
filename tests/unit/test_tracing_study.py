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


@pytest.mark.parametrize("pairs", [0, tracing.MAX_PAIRS + 1])
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
    ctx = RunContext("full", tmp_path, lambda *_: None, {"tracing_models": ["coroutine"], "scale": 100.0})
    with pytest.raises(ValueError, match="--scale 100 asks for 2400 tracing pairs per row, more than 1600"):
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


def test_one_sampling_of_one_model_runs_alone(monkeypatch, tmp_path):
    lab, docs = _run(
        monkeypatch, tmp_path, {"tracing_models": ["pool-callback"], "tracing_samplings": [1.0], "tracing_pairs": 2}
    )
    assert lab.graphs == [("pool-callback", 1.0, "simulated")]
    rows = analysis.tracing_costs([d.document for d in docs])
    assert [(r.model, r.sample, r.pairs) for r in rows] == [("pool-callback", 1.0, 2)]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"tracing_models": ["fibers"]}, "tracing_models: fibers is not a model"),
        ({"tracing_samplings": [0.5]}, "tracing_samplings"),
    ],
)
def test_a_model_or_sampling_the_study_does_not_run_is_refused(monkeypatch, tmp_path, options, message):
    with pytest.raises(ValueError, match=message):
        _run(monkeypatch, tmp_path, {"tracing_pairs": 1} | options)


def test_bench_tracing_passes_its_row_options_to_the_study(monkeypatch):
    from click.testing import CliRunner

    from tailscope.cli import main
    from tailscope.cli import run as cli_run

    got: list[dict] = []
    monkeypatch.setattr(cli_run, "run_and_report", lambda names, full, results, options, **kw: got.append(options))
    args = ["bench", "tracing", "--model", "std-thread", "--model", "pool-callback", "--sampling", "100"]
    r = CliRunner().invoke(main, [*args, "--pairs", "192"])
    assert r.exit_code == 0, r.output
    assert got[0]["tracing_models"] == ["std-thread", "pool-callback"]
    assert got[0]["tracing_samplings"] == [1.0]
    assert got[0]["tracing_pairs"] == 192
    r = CliRunner().invoke(main, ["bench", "tracing"])  # nothing given: the study's defaults
    assert r.exit_code == 0, r.output
    assert not {"tracing_models", "tracing_samplings", "tracing_pairs"} & set(got[1])


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--pairs", "0"], "--pairs"),
        (["--pairs", str(tracing.MAX_PAIRS + 1)], "--pairs"),
        (["--sampling", "50"], "--sampling"),
        (["--model", "fibers"], "--model"),
    ],
)
def test_bench_tracing_refuses_a_bad_row_option_naming_it(monkeypatch, args, flag):
    from click.testing import CliRunner

    from tailscope.cli import main
    from tailscope.cli import run as cli_run

    monkeypatch.setattr(cli_run, "run_and_report", lambda *a, **kw: pytest.fail("ran with a bad option"))
    r = CliRunner().invoke(main, ["bench", "tracing", *args])
    assert r.exit_code == 2
    assert flag in r.output


def test_only_bench_tracing_takes_the_row_options():
    from click.testing import CliRunner

    from tailscope.cli import main

    r = CliRunner().invoke(main, ["bench", "echo", "--pairs", "4"])
    assert r.exit_code == 2 and "--pairs" in r.output
