"""`tailscope advise` (docs/twin.md): ranking, flags, unavailable figures, the JSON document, bad input.

The twin runs are replaced by a fake `run_twin` whose p99 depends on the model and the rate, so
these tests check what advise does with the figures, never timing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_twin import jaeger, rpc, write

from conftest import needs_engine
from tailscope.cli import main
from tailscope.traces.spans import read_traces
from tailscope.twin import advise as advise_mod
from tailscope.twin.infer import InferOptions


def load_doc(p99_ns: float | None, rate: float, *, achieved: float | None = None, errors: int = 0, gen: bool = False):
    m = (
        []
        if p99_ns is None
        else [{"name": "latency_intended", "latency": {"percentiles": {"50": p99_ns / 2, "99": p99_ns}}}]
    )
    return {
        "measurements": m,
        "load": {
            "requested_per_s": rate,
            "achieved_per_s": rate if achieved is None else achieved,
            "errors_total": errors,
            "generator_bottleneck": gen,
        },
    }


class FakeRun:
    def __init__(self, load: dict, traces):
        self.load, self.traces, self.graph, self.rate_per_s, self.trace_sample = load, traces, {}, 0, 1.0


# The tests that use it: needs_engine("tailscope-critpath", "tailscope-svc") (the inferred topology
# is checked by the engine's validator).
@pytest.fixture
def traces(tmp_path):
    spans = []
    for n in range(40):
        t0 = n * 10_000  # 100 traces/s
        spans.append(
            [("r", None, "front", "/api", t0, 1000, "server"), *rpc("a", "r", "front", "svc-a", "work", t0 + 10, 500)]
        )
    return write(tmp_path, jaeger(spans))


def fake_runs(monkeypatch, traces_path: Path, behaviour):
    """behaviour(model, args, rate, topo) → load document; records every run."""
    ts = read_traces([traces_path])
    calls: list[tuple] = []

    def run_twin(topo, model, rate, *, extra_args=None, **_):
        calls.append((model, tuple(extra_args or ()), rate))
        return FakeRun(behaviour(model, list(extra_args or []), rate, topo), ts)

    monkeypatch.setattr(advise_mod, "run_twin", run_twin)
    return ts, calls


@needs_engine("tailscope-critpath", "tailscope-svc")
def test_ranks_by_max_rate_then_p99_and_flags_saturated_points(monkeypatch, traces):
    def behaviour(model, args, rate, topo):
        if model == "std-async":  # meets 50 ms at 1×, saturates at 4×
            return load_doc(20e6, rate) if rate < 200 else load_doc(90e6, rate, achieved=rate * 0.5)
        if model == "coroutine":
            return load_doc(5e6, rate)  # meets at every rung
        return load_doc(3e6, rate, errors=7)  # the pool: fast but with errors: flagged, never the leader

    ts, calls = fake_runs(monkeypatch, traces, behaviour)
    doc = advise_mod.advise(
        ts, "std-async", objective_ms=50, options=InferOptions(cpu_fraction=1.0), duration_s=1, quick=True
    )
    assert [r["alternative"] for r in doc["ranked"]] == ["coroutine", "std-async", "pool-blocking --workers 10"]
    coro, std, pool = doc["ranked"]
    assert coro["max_rate_bound"].endswith("(every rung tried met it)")
    assert std["max_rate_bound"].startswith("≥ ") and "the next rung missed" in std["max_rate_bound"]
    assert std["points"][1]["flags"] == [
        f"saturated (served {std['points'][1]['rate_per_s'] / 2:.4g} of {std['points'][1]['rate_per_s']:.4g}/s)"
    ]
    assert pool["predicted_flags"] == ["7 errors"] and pool["max_rate_at_objective_per_s"] is None
    assert doc["recommendation"]["alternative"] == "coroutine"
    assert std["validated_directly"] and not coro["validated_directly"]
    # cpu_fraction 1 cannot grow by 50 %: said, not clamped into a repeat of the base
    s = doc["sensitivity"]["points"]
    assert s[0]["cpu_fraction"] == 0.5 and s[0]["ratio_to_base"] == pytest.approx(1.0)
    assert s[1]["predicted_p99_ns"] is None and "> 1" in s[1]["unavailable"]
    lines = advise_mod.advice_lines(doc)
    assert any("[flagged: 7 errors]" in line for line in lines)
    json.dumps(doc, allow_nan=False)  # the notebook document is plain JSON


@needs_engine("tailscope-critpath", "tailscope-svc")
def test_nothing_clean_means_no_recommendation_and_unavailable_figures_are_null(monkeypatch, traces):
    ts, _ = fake_runs(monkeypatch, traces, lambda model, args, rate, topo: load_doc(None, rate, achieved=0.0))
    doc = advise_mod.advise(
        ts, "std-async", objective_ms=50, options=InferOptions(cpu_fraction=1.0), duration_s=1, quick=True
    )
    assert doc["recommendation"]["alternative"] is None and doc["recommendation"]["unavailable"]
    assert doc["ranked"], "no alternative ranked"
    for r in doc["ranked"]:
        assert r["predicted_p99_ns"] is None and r["predicted_p99_unavailable"] == "no request completed"
        assert r["max_rate_at_objective_per_s"] is None
    assert doc["sensitivity"]["unavailable"]
    assert "recommended: unavailable:" in "\n".join(advise_mod.advice_lines(doc))


@needs_engine("tailscope-svc")
def test_full_form_offers_every_model_and_the_threads_studys_pool_sizes():
    from tailscope.lab.graph import POOL_SIZES as SOCIALNET_THREADS
    from tailscope.lab.graph import svc_models

    names = [a.name for a in advise_mod.all_alternatives({"model": "std-async", "services_by_p99": []})]
    assert names[: len(svc_models())] == list(svc_models())
    assert SOCIALNET_THREADS, "no pool sizes"
    for n in SOCIALNET_THREADS:
        assert f"pool-blocking --workers {n}" in names and f"pool-callback --workers {n}" in names
    assert len(names) == len(set(names))
    assert [a.name for a in advise_mod.quick_alternatives("coroutine")] == ["coroutine", "pool-blocking --workers 10"]


@needs_engine("tailscope-critpath", "tailscope-svc")
def test_advise_bad_input(tmp_path, traces):
    r = CliRunner().invoke(main, ["advise", str(traces), "--objective-ms", "0"])
    assert r.exit_code == 2 and "--objective-ms" in r.output
    r = CliRunner().invoke(main, ["advise", str(traces), "--model", "goroutines"])
    assert r.exit_code == 2 and "unknown model goroutines" in r.output
    r = CliRunner().invoke(main, ["advise"])
    assert r.exit_code == 2
    mono = write(tmp_path, jaeger([[("r", None, "mono", "/x", 0, 100, "server")]]), "mono.json")
    out = tmp_path / "advice.json"
    r = CliRunner().invoke(main, ["advise", str(mono), "--json", str(out)])
    assert r.exit_code == 1 and "no cross-service span" in r.output
    assert not out.exists()


@needs_engine("tailscope-critpath", "tailscope-svc")
def test_a_flagged_leader_is_recommended_only_with_its_flags(monkeypatch, traces):
    ts, _ = fake_runs(monkeypatch, traces, lambda model, args, rate, topo: load_doc(4e6, rate, gen=True))
    doc = advise_mod.advise(
        ts, "std-async", objective_ms=50, options=InferOptions(cpu_fraction=1.0), duration_s=1, quick=True
    )
    rec = doc["recommendation"]
    assert rec["alternative"] is not None and rec["flags"] == ["generator-limited"]
    assert doc["ranked"], "no alternative ranked"
    assert all(r["max_rate_at_objective_per_s"] is None for r in doc["ranked"])  # a flagged rung never counts
    assert any(
        line.startswith("recommended:") and "[flagged: generator-limited]" in line
        for line in advise_mod.advice_lines(doc)
    )


def test_the_closing_line_gives_both_runs_samples_and_carries_flags():
    from tailscope.studies.twin import closing_line

    c = {
        "alternative": "pool-blocking --workers 10",
        "rate_per_s": 100.0,
        "duration_s": 10.0,
        "predicted_p99_ns": 9e6,
        "predicted_flags": [],
        "predicted_samples": 1000,
        "advise_rung_p99_ns": 12e6,
        "measured_p99_ns": 10e6,
        "measured_flags": ["generator-limited"],
        "measured_samples": 998,
        "ratio": 0.9,
        "p50_ratio": 1.02,
    }
    line = closing_line(c)
    assert "predicted (its twin) p99 9 ms" in line.replace(".00", "")
    assert "(1000 / 998 requests)" in line and "predicted ÷ measured 0.9" in line
    assert "[flagged: generator-limited]" in line  # a flagged measurement is never cited bare
    assert closing_line({"ratio": None, "unavailable": "no leader"}) == "unavailable: no leader"


@needs_engine("tailscope-critpath", "tailscope-svc")
def test_sensitivity_of_an_inferred_split_moves_every_share_towards_waiting_and_towards_cpu(monkeypatch, traces):
    """With --cpu-fraction auto each endpoint's share is 0 or 1: × 1.5 would not move a 0, so the reruns
    move every share half of the way to waiting and half of the way to CPU."""
    cpu_us: list[float] = []

    def behaviour(model, args, rate, topo):
        cpu = sum(
            st["cpu"].get("us", st["cpu"].get("median_us", 0))
            for s in topo["services"]
            for e in s["endpoints"]
            for st in e["stages"]
            if "cpu" in st
        )
        cpu_us.append(cpu)
        return load_doc(5e6, rate)

    ts, _ = fake_runs(monkeypatch, traces, behaviour)
    doc = advise_mod.advise(ts, "std-async", objective_ms=50, options=InferOptions(), duration_s=1, quick=True)
    s = doc["sensitivity"]
    assert "of the way to 0 and to 1" in s["varied"]
    assert [p["cpu_adjust"] for p in s["points"]] == [-0.5, 0.5]
    assert all(p["predicted_p99_ns"] is not None and p["cpu_fraction"] is None for p in s["points"])
    # 40 traces one at a time: the split is undecided (all CPU); −0.5 halves the CPU, +0.5 leaves it
    assert cpu_us[-2] == pytest.approx(cpu_us[0] / 2, rel=0.01) and cpu_us[-1] == pytest.approx(cpu_us[0], rel=0.01)
    assert any("towards waiting" in line for line in advise_mod.advice_lines(doc))
