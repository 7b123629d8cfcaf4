"""The ranking of what-ifs by twin runs (python/tailscope/twin/whatif_advice.py) on fabricated rung
results: no engine runs, the twin's latency at each rate is made up per what-if, so the ladder, the
flags, the bound at the objective, the ratios to the baseline, the validation per rate and the order
are checked against known answers."""

from __future__ import annotations

import json

import pytest

from conftest import front_and_locked_store
from tailscope.traces.spans import Span, Trace, TraceSet
from tailscope.twin import whatif as w
from tailscope.twin import whatif_advice as wa
from tailscope.twin.validate import TwinRun

RATE = 100.0
MS = 1_000_000


def topology() -> dict:
    return front_and_locked_store(
        name="tiny",
        store_service="store",
        front_span="GET /get",
        latency={"kind": "constant", "us": 1000},
        call_timeout_ms=1000,
    )


def traces(n: int = 40) -> TraceSet:
    out = []
    for i in range(n):
        root = Span(f"r{i}", None, "front", "GET /get", "server", i * 10 * MS, i * 10 * MS + 2 * MS)
        out.append(Trace(f"t{i}", root, root.start_ns, 2 * MS + (i % 7) * 100_000, {"front": MS}, 1, 0, 0))
    return TraceSet(out, [], {}, n)


def which(topo: dict) -> str:
    store = topo["services"][1]["endpoints"][0]["stages"][0]["store"]
    if store["latency"]["us"] != 1000:
        return "faster"
    return {1: "baseline", 2: "doubled"}.get(store.get("capacity"), "removed")


# p50, p99 (ms) and served share per what-if at 1×, 2×, 4× the recorded rate.
TABLE = {
    "baseline": {1: (20, 80, 1.0), 2: (90, 400, 0.9), 4: (500, 900, 0.5)},
    "doubled": {1: (2, 10, 1.0), 2: (3, 20, 1.0), 4: (8, 45, 1.0)},
    "removed": {1: (2, 9, 1.0), 2: (3, 12, 1.0), 4: (5, 30, 0.7)},  # 4×: saturated
    "faster": {1: (5, 30, 1.0), 2: (30, 60, 1.0), 4: (90, 300, 1.0)},
}


def fake_run(ts: TraceSet, calls: list):
    def run_at(topo: dict, rate: float) -> TwinRun:
        name = which(topo)
        k = int(round(rate / RATE))
        calls.append((name, k))
        p50, p99, served = TABLE[name][k]
        load = {
            "load": {"achieved_per_s": rate * served, "requested_per_s": rate, "errors_total": 0},
            "measurements": [
                {
                    "name": "latency_intended",
                    "latency": {"count": 500 * k, "percentiles": {"50": p50 * MS, "99": p99 * MS}},
                }
            ],
        }
        return TwinRun(ts, load, {}, rate, 1.0)

    return run_at


def advise(validations=None, calls=None):
    ts = traces()
    cands = w.whatifs(topology(), {"populations": []}, faster_percent=50, cpus=(2, [0, 1]))
    return wa.advise_whatifs(
        ts,
        topology(),
        cands,
        rate_per_s=RATE,
        model="coroutine",
        objective_ms=50,
        duration_s=1,
        validations=validations,
        run_at=fake_run(ts, calls if calls is not None else []),
        check=lambda t, origin: t,
    )


def test_ranked_by_the_objective_then_the_bound_then_p99():
    doc = advise()
    assert [r["id"].split("/")[0] + ":" + str(r["to"]) for r in doc["ranked"]] == [
        "capacity:2",  # meets 50 ms up to 4× (every rung)
        "capacity:removed",  # meets at 1× and 2×, 4× saturated
        "faster:500.0",  # meets at 1× only
    ]
    doubled, removed, faster = doc["ranked"]
    assert doubled["max_rate_at_objective_per_s"] == 4 * RATE and "every rung" in doubled["max_rate_bound"]
    assert removed["max_rate_at_objective_per_s"] == 2 * RATE
    assert "< 400/s" in removed["max_rate_bound"] and "saturated" in removed["points"][2]["flags"][0]
    assert faster["max_rate_at_objective_per_s"] == RATE
    assert doc["baseline"]["max_rate_at_objective_per_s"] is None


def test_predictions_at_the_recorded_rate_and_twice_with_ratios_to_the_baseline():
    doc = advise()
    doubled = doc["ranked"][0]
    at1, at2 = doubled["predictions"]
    assert (at1["rate_per_s"], at1["p50_ns"], at1["p99_ns"], at1["requests"]) == (RATE, 2 * MS, 10 * MS, 500)
    assert at1["p99_ratio_to_baseline"] == pytest.approx(10 / 80)
    assert at2["p99_ratio_to_baseline"] == pytest.approx(20 / 400)
    assert at2["p50_ratio_to_baseline"] == pytest.approx(3 / 90)
    # the baseline ran 2× although 1× already missed the objective (the first two rungs always run)
    base = doc["baseline"]["predictions"]
    assert [p["p99_ns"] for p in base] == [80 * MS, 400 * MS]
    assert base[1]["flags"] and "saturated" in base[1]["flags"][0]


def test_the_ladder_stops_after_a_miss_beyond_the_predicted_rates():
    calls: list = []
    advise(calls=calls)
    assert [k for n, k in calls if n == "baseline"] == [1, 2]  # 2× missed: no 4×
    assert [k for n, k in calls if n == "faster"] == [1, 2]
    assert [k for n, k in calls if n == "doubled"] == [1, 2, 4]


def test_validated_at_the_recorded_rate_extrapolated_at_twice_unless_another_recording():
    doc = advise()
    at1, at2 = doc["ranked"][0]["predictions"]
    assert at1["validation"]["validated"] is True
    assert at1["validation"]["max_ratio_error"] == doc["validation"]["recorded_rate"]["max_ratio_error"]
    assert doc["validation"]["recorded_rate"]["max_ratio_error"] is not None
    assert at2["validation"] == {
        "validated": False,
        "reason": "extrapolated: no recording at about 200/s validated this twin",
    }
    second = {
        "schema": "tailscope.twin.validation/1",
        "rate_per_s": 190.0,
        "max_ratio_error": 0.12,
        "within_target": True,
    }
    at2 = advise(validations=[second])["ranked"][0]["predictions"][1]
    assert at2["validation"]["validated"] is True and at2["validation"]["max_ratio_error"] == 0.12
    far = {**second, "rate_per_s": 300.0}
    assert advise(validations=[far])["ranked"][0]["predictions"][1]["validation"]["validated"] is False
    # twin validate --second-traces: the second recording's rate inside the document
    both = {
        **far,
        "second_rate": {"rate_per_s": 205.0, "max_ratio_error": 0.08, "within_target": True, "traces": ["b.json"]},
    }
    v = advise(validations=[both])["ranked"][0]["predictions"][1]["validation"]
    assert v["validated"] is True and v["max_ratio_error"] == 0.08 and "second recording b.json" in v["source"]


def test_unavailable_whatifs_are_listed_not_run_and_the_document_is_json():
    doc = advise()
    assert [x["kind"] for x in doc["not_run"]] == ["cores"]
    assert doc["not_run"][0]["unavailable"]
    assert doc["schema"] == "tailscope.diagnosis.advice/1"
    json.dumps(doc, allow_nan=False)  # no NaN, every figure a number or null


def test_a_whatif_the_engine_refuses_is_unavailable_with_the_reason():
    from tailscope.lab.topology import TopologyError

    ts = traces()
    cands = w.whatifs(topology(), {"populations": []}, cpus=(2, [0, 1]))

    def check(t: dict, origin: str) -> dict:
        if which(t) == "removed":
            raise TopologyError(f"{origin}: refused")
        return t

    doc = wa.advise_whatifs(
        ts,
        topology(),
        cands,
        rate_per_s=RATE,
        model="coroutine",
        objective_ms=50,
        duration_s=1,
        run_at=fake_run(ts, []),
        check=check,
    )
    removed = next(r for r in doc["ranked"] if r["to"] == "removed")
    assert removed["rank"] == len(doc["ranked"])  # no prediction: last
    assert "refused" in removed["predictions"][0]["unavailable"]
    assert removed["predictions"][0]["p99_ns"] is None and removed["predictions"][0]["p99_ratio_to_baseline"] is None
    (line,) = [x for x in wa.advice_lines(doc) if "remove the limit" in x]
    assert (
        line.count("refused") == 1
        and "at 100/s unavailable (the twin with capacity/store/SELECT/removed: refused)" in line
    )
    assert "at 200/s unavailable (not run: an earlier rung failed)" in line


def test_lines_are_formatted_from_the_document():
    doc = advise()
    lines = wa.advice_lines(doc)
    assert lines[0].startswith("advice: twin of 40 traces under coroutine, validated at 100/s:")
    assert lines[1].startswith("baseline (no change): at 100/s p50 20 ms, p99 80 ms")
    assert lines[2].startswith(" 1. raise the connection pool of store → mysql 'SELECT' from 1 to 2: at 100/s p50 2 ms")
    assert "p99 10 ms (0.125× the baseline)" in lines[2] and "[extrapolated]" in lines[2]
    err = doc["validation"]["recorded_rate"]["max_ratio_error"]
    assert f"[validated, max error {err:.0%}]" in lines[2]
    assert lines[-1].startswith(" -  add cores: unavailable (the twin already runs on every CPU")


def test_predict_runs_the_twin_with_the_change_once(monkeypatch):
    from tailscope.twin import ladder as ladder_mod

    ts, seen = traces(), []

    def run_twin(topo, model, rate, **kw):
        seen.append((which(topo), model, rate, kw["duration_s"]))
        return fake_run(ts, [])(topo, rate)

    monkeypatch.setattr(ladder_mod, "run_twin", run_twin)
    doubled = next(x for x in w.whatifs(topology(), {"populations": []}, cpus=(2, [0, 1])) if x.to_value == 2)
    p = wa.predict(topology(), doubled, 2 * RATE, model="coroutine", duration_s=3, check=lambda t, o: t)
    assert seen == [("doubled", "coroutine", 2 * RATE, 3)]
    assert (p["whatif"], p["p50_ns"], p["p99_ns"], p["requests"], p["flags"]) == (doubled.id, 3 * MS, 20 * MS, 1000, [])
    base = wa.predict(topology(), None, RATE, model="coroutine", duration_s=3, check=lambda t, o: t)
    assert base["whatif"] is None and base["p99_ns"] == 80 * MS and "meets" not in base
