"""The `async` study's values (studies/asyncmodels/analysis.py), from small synthetic documents:
each verdict on both sides of its threshold, the ratios, the flags, and what is unavailable and why.
No engines, no sentences (test_asyncmodels_section.py checks the wording)."""

from __future__ import annotations

import pytest

from tailscope.report.blocks import HOLDS, UNAVAILABLE
from tailscope.studies.asyncmodels.analysis import (
    NOT_MEASURED,
    OVERLOADED,
    QUEUEING,
    BenchData,
    Ref,
    analyze,
    references,
    scheduling_cause,
)

REFS = {"condvar_handoff": Ref(20_000, 1000), "spin_handoff": Ref(200, 1000), "thread_create": Ref(40_000, 1000)}

# ---- small synthetic documents ------------------------------------------------------------------


def point(
    name: str,
    model: str,
    p50: float,
    *,
    mech: str = "future",
    payload: str = "long_long",
    load: float | None = 75.0,
    p99: float | None = None,
    saturated: bool = False,
    why: tuple[str, ...] = (),
    backlog: dict | None = None,
    common: bool = False,
) -> dict:
    """One asyncbench measurement with the fields the analysis reads."""
    m = {
        "name": name,
        "variant": f"{model}/{mech}/{payload}",
        "model": model,
        "mechanism": mech,
        "payload": payload,
        "load_pct": load,
        "offered_per_s": 1000.0,
        "achieved_per_s": 990.0,
        "saturated": saturated,
        "observed": {"why_saturated": list(why) or (["backlog grew"] if saturated else [])},
        "latency": {
            "count": 1000,
            "percentiles": {"50": p50, "90": p50 * 2, "99": p99 or p50 * 5, "99.9": p50 * 10},
            "low_confidence": [],
        },
        "cdf": [[p50 / 2, 0.0], [p50, 50.0], [p50 * 20, 100.0]],
    }
    if backlog is not None:
        m["observed"]["backlog"] = backlog
    if common:
        m["series"] = "payload_common_rate"
    return m


def bench(ms: list[dict], **doc) -> BenchData:
    return BenchData({"config": {"measure_at_pct": 75.0, "sweep_payload": "long_long"}, "measurements": ms, **doc})


def _latency(p50, count=1000):
    return {
        "unit": "ns",
        "count": count,
        "min": p50 // 2,
        "mean": p50 * 1.1,
        "stddev": 1.0,
        "max": p50 * 20,
        "percentiles": {"50": p50, "90": p50 * 2, "99": p50 * 5, "99.9": p50 * 10, "99.99": p50 * 20},
        "low_confidence": ["99.99"],
    }


def _m(name, model, mech, payload, load, p50):
    return {
        "name": name,
        "variant": f"{model}/{mech}/{payload}",
        "model": model,
        "mechanism": mech,
        "payload": payload,
        "load_pct": load,
        "offered_per_s": 1000.0,
        "achieved_per_s": 990.0,
        "saturated": load >= 100,
        "pinning": {"policy": "pinned"},
        "observed": {"load_pct": load},
        "latency": _latency(p50),
        "cdf": [[p50 // 2, 0.0], [p50, 50.0], [p50 * 20, 100.0]],
        "hlog_tag": f"{name}.{model}/{mech}/{payload}.load{load}",
    }


def synthetic_docs() -> tuple[dict, dict]:
    """(tailscope-baseline document, tailscope-asyncbench document) of a whole small run: five
    models at 25, 75 and 100 % of their max rate (100 % saturated), two payloads at the common rate,
    a spin pool queueing at 25 % and overloaded at 100 %, a coroutine resume of 12 ns."""
    base = {
        "schema": "tailscope.result/1",
        "engine": "tailscope-baseline",
        "machine": {},
        "unavailable": [],
        "warnings": [],
        "measurements": [
            {
                "name": n,
                "variant": "pinned",
                "latency": _latency(p),
                "cdf": [[p, 0.0], [p, 100.0]],
                "pinning": {"policy": "pinned", "client_cpu": 0, "server_cpu": 1},
            }
            for n, p in (("condvar_handoff", 20000), ("spin_handoff", 200), ("thread_create", 40000))
        ],
    }
    ms = []
    for model, mechs, p50 in (
        ("deferred", ("future", "continuation"), 300),
        ("std-async", ("future",), 60000),
        ("fixed-pool", ("future", "continuation"), 25000),
        ("spin-pool", ("future",), 500),
        ("coroutine", ("future", "resume"), 26000),
    ):
        for mech in mechs:
            for payload, k in (("long_long", 1), ("vector10000", 3)):
                for load in (25.0, 75.0, 100.0):
                    if payload != "long_long" and load != 75.0:
                        continue
                    f = load / 25.0
                    pt = [
                        _m("scheduling_delay", model, mech, payload, load, int(p50 * f)),
                        _m("join_delay", model, mech, payload, load, int(p50 / 10 * k)),
                        _m("total", model, mech, payload, load, int(p50 * 2 * k * f)),
                    ]
                    if model == "deferred":
                        pt.append(_m("deferral_wait", model, mech, payload, load, 5000))
                    if load == 75.0:  # the payload comparison: every payload at the common rate
                        ms += [
                            m | {"series": "payload_common_rate", "variant": m["variant"] + "/common-rate"} for m in pt
                        ]
                    if payload == "long_long":
                        ms += pt
    # The spin pool's 25 % point: queueing behind a worker that waited for a CPU; its 100 % point: overloaded.
    for m in ms:
        if m["model"] == "spin-pool" and m["load_pct"] == 25.0:
            m["observed"]["backlog"] = {
                "calls": 1000,
                "queue_p50": 87,
                "queue_mean": 143.0,
                "queue_max": 767,
                "queue_empty_fraction": 0.37,
                "in_flight_mean": 150.0,
                "in_flight_max": 800,
                "grew": False,
                "stall_fraction": 0.6,
                "stall_max_ns": 12_000_000,
                "empty_queue_scheduling_p50_ns": 600,
                "empty_queue_calls": 370,
                "lateness_first_quarter_p50_ns": 1_500_000,
                "lateness_last_quarter_p50_ns": 1_400_000,
                "worker_parks_per_call": 0.0,
                "sched": {
                    "window_ns": 360_000_000,
                    "workers": {"threads": 1, "run_ns": 130_000_000, "runqueue_wait_ns": 225_000_000, "timeslices": 40},
                },
            }
        if m["model"] == "spin-pool" and m["load_pct"] == 100.0:
            m["observed"]["backlog"] = {
                "calls": 1000,
                "grew": True,
                "queue_p50": 2000,
                "lateness_first_quarter_p50_ns": 2_000_000,
                "lateness_last_quarter_p50_ns": 40_000_000,
            }
    ms.append(
        {
            "name": "same_thread_resume",
            "variant": "coroutine/resume/void",
            "latency": _latency(12),
            "cdf": [[12, 0.0], [12, 100.0]],
            "hlog_tag": "same_thread_resume.coroutine/resume/void",
        }
    )
    doc = {
        "schema": "tailscope.result/1",
        "engine": "tailscope-asyncbench",
        "machine": {},
        "unavailable": [],
        "warnings": [],
        "config": {
            "measure_at_pct": 75.0,
            "sweep_payload": "long_long",
            "placement": "pinned",
            "producer_cpu": 0,
            "consumer_cpu": 1,
            "workers": 1,
            "worker_cpus": "any",
        },
        "max_rate_per_s": {
            "deferred": 900000.0,
            "std-async": 20000.0,
            "fixed-pool": 400000.0,
            "spin-pool": 500000.0,
            "coroutine": 380000.0,
        },
        "ramps": {m: {"steps": [{}], "saturation_found": True} for m in ("deferred", "std-async")},
        "measurements": ms,
    }
    return base, doc


# ---- the whole study from one run's documents -------------------------------------------------------


def test_analysis_of_a_whole_run():
    base, doc = synthetic_docs()
    a = analyze(doc, references([base]))
    assert a.missing_references == () and a.saturated_at_main == ()  # 100 % points are saturated, 75 % are not
    assert a.pinning.pinned and (a.main_load_pct, a.sweep_payload) == (75.0, "long_long")
    assert [p.delay for p in a.panels] == ["scheduling_delay", "join_delay", "total"]
    # Lowest p50 scheduling delay at 75 %: deferred (3 × 300 ns) = 0.045× the 20 µs condvar hand-off.
    ex = a.panels[0].extremes
    assert (ex.lowest, ex.lowest_p50_ns, ex.highest) == ("deferred/continuation", 900, "std-async/future")
    assert ex.lowest_to_condvar == pytest.approx(0.045) and ex.left_out == 0
    assert a.delay_rows and all(r.samples == 1000 for r in a.delay_rows)
    assert [r.model for r in a.max_rates.rows] == ["deferred", "std-async", "fixed-pool", "spin-pool", "coroutine"]
    assert a.max_rates.fastest_to_slowest == pytest.approx(45.0)
    # Targets at 25 %: fixed-pool 25 µs / 20 µs, spin-pool 500 ns / 200 ns; the spin pool's empty-queue
    # hand-off 600 ns / 200 ns = 3×, exactly its limit.
    by = {(r.label.split()[0], r.mechanism, r.load_pct, r.empty_queue_only): r for r in a.targets.rows}
    assert by[("fixed-pool", "future", 25.0, False)].ratio == pytest.approx(1.25)
    assert by[("fixed-pool", "future", 25.0, False)].met is True
    assert by[("spin-pool", "future", 25.0, False)].ratio == pytest.approx(2.5)
    assert (
        by[("spin-pool", "future", 25.0, True)].ratio == pytest.approx(3.0)
        and by[("spin-pool", "future", 25.0, True)].met
    )
    assert by[("fixed-pool", "future", 75.0, False)].met is False
    assert a.targets.resume is not None and a.targets.resume.met
    spin25 = next(r for r in a.backlog if (r.variant, r.load_pct) == ("spin-pool/future", 25.0))
    assert (spin25.queue_p50, spin25.backlog_grew, spin25.runqueue_share) == (87, False, pytest.approx(0.625))
    assert spin25.cause.kind == QUEUEING and spin25.cause.stalled and spin25.cause.waited_for_cpu
    assert spin25.cause.empty_queue is not None and spin25.cause.empty_queue.to_reference == pytest.approx(3.0)
    over = next(
        m
        for m in doc["measurements"]
        if (m.get("model"), m.get("load_pct"), m["name"]) == ("spin-pool", 100.0, "scheduling_delay")
    )
    assert scheduling_cause(over, {}).kind == OVERLOADED
    assert a.figure12.verdict == UNAVAILABLE and a.figure12.unavailable == NOT_MEASURED  # no std-thread here
    assert a.figures13_14.verdict == HOLDS and (a.figures13_14.changed_pairs, a.figures13_14.compared_pairs) == (8, 16)
    assert a.sweep is not None and a.sweep.growth is not None and a.sweep.growth.ratio == pytest.approx(3.0)
    assert [c.change.delay for c in a.payloads] == ["scheduling_delay", "join_delay"]


def test_analysis_names_the_missing_references():
    _, doc = synthetic_docs()
    a = analyze(doc, {"spin_handoff": Ref(200, 10)})
    assert a.missing_references == ("condvar_handoff", "thread_create")
    assert a.delay_rows and all(r.to_condvar is None and r.to_spin is not None for r in a.delay_rows)
    for m in doc["measurements"]:
        if m.get("load_pct") == 75.0 and m.get("model") == "coroutine":
            m["saturated"] = True
    assert analyze(doc, {}).saturated_at_main == ("coroutine/future/long_long", "coroutine/resume/long_long")
