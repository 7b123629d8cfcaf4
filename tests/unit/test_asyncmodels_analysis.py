"""The `async` study's values (studies/asyncmodels/analysis.py), from small synthetic documents:
each verdict on both sides of its threshold, the ratios, the flags, and what is unavailable and why.
No engines, no sentences (test_asyncmodels_section.py checks the wording)."""

from __future__ import annotations

import pytest

from tailscope.report.blocks import DOES_NOT_HOLD, HOLDS, PARTLY, UNAVAILABLE
from tailscope.studies.asyncmodels.analysis import (
    DEFERRED,
    FLAGGED,
    HANDOFF_PARKED,
    HANDOFF_RUNNING,
    NO_BACKLOG_DATA,
    NO_CALL_AHEAD,
    NO_UNFLAGGED_PAIR,
    NOT_MEASURED,
    ONE_PAYLOAD,
    OVERLOADED,
    PARKS_PER_CALL_WAKEUP,
    PAYLOAD_CHANGE,
    QUEUEING,
    RESUME_TARGET_NS,
    BenchData,
    Ref,
    analyze,
    backlog_rows,
    delay_extremes,
    delay_rows,
    figure12,
    figures13_14,
    load_sweep,
    max_rates,
    payload_change,
    payload_comparison,
    pinning,
    references,
    scheduling_cause,
    targets,
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


# ---- references and the document view -------------------------------------------------------------


def test_references_are_the_pinned_ones_and_the_first_document_wins():
    def doc(p50, variant="pinned", name="condvar_handoff"):
        return {
            "measurements": [{"name": name, "variant": variant, "latency": {"count": 7, "percentiles": {"50": p50}}}]
        }

    refs = references([doc(100), doc(999), doc(5, variant="unpinned", name="spin_handoff"), doc(3, name="other")])
    assert refs == {"condvar_handoff": Ref(100.0, 7)}
    assert references([]) == {}


def test_the_document_view_keeps_the_common_rate_series_apart():
    ms = [point("total", "fixed-pool", 10, load=25.0), point("total", "fixed-pool", 20, load=75.0)]
    ms.append(point("total", "fixed-pool", 30, load=60.0, common=True))
    data = bench(ms)
    assert data.loads() == [25.0, 75.0] and data.shown_loads() == [25.0, 75.0]
    assert [m["latency"]["percentiles"]["50"] for m in data.common_rate("total")] == [30]
    assert bench([]).shown_loads() == [75.0]  # no sweep: the main load alone


def test_pinning_is_read_from_the_config():
    assert pinning({"config": {"placement": "unpinned", "producer_cpu": 0}}).pinned is False
    p = pinning({"config": {"placement": "pinned", "producer_cpu": 0, "consumer_cpu": 1, "workers": 2}})
    assert (p.pinned, p.producer_cpu, p.consumer_cpu, p.workers, p.worker_cpus) == (True, 0, 1, 2, None)


# ---- the CDF figures' extremes ---------------------------------------------------------------------


def test_extremes_leave_the_flagged_points_out_and_count_them():
    rows = [
        point("total", "fixed-pool", 1_000),
        point("total", "fixed-pool", 4_837_000, saturated=True),
        point("total", "std-thread", 20_000),
    ]
    ex = delay_extremes(rows, REFS)
    assert ex.left_out == 1
    assert (ex.lowest, ex.lowest_p50_ns, ex.highest, ex.highest_p50_ns) == (
        "fixed-pool/future",
        1_000,
        "std-thread/future",
        20_000,
    )
    assert ex.lowest_to_condvar == pytest.approx(0.05) and ex.highest_to_lowest == pytest.approx(20.0)
    assert delay_extremes(rows, {}).lowest_to_condvar is None  # no reference: no ratio


def test_extremes_of_only_flagged_points_are_unavailable():
    ex = delay_extremes([point("total", "fixed-pool", 1_000, saturated=True)], REFS)
    assert ex.left_out == 1 and ex.lowest is None and ex.highest is None


# ---- payloads ----------------------------------------------------------------------------------------


def test_payload_change_names_the_biggest_unflagged_change():
    rows = [
        point("scheduling_delay", "fixed-pool", 1_000, payload="void"),
        point("scheduling_delay", "fixed-pool", 4_837_000, payload="vector10000", saturated=True),
        point("scheduling_delay", "std-thread", 20_000, payload="void"),
        point("scheduling_delay", "std-thread", 60_000, payload="vector10000"),
        point("scheduling_delay", "coroutine", 10_000, payload="void"),
        point("scheduling_delay", "coroutine", 5_000, payload="vector10000"),
    ]
    c = payload_change(rows, "scheduling_delay")
    # fixed-pool's 4 837× is the biggest change, but a point of it is flagged: never compared.
    assert c.unavailable is None and c.flagged_pairs == 1
    assert (c.variant, c.small, c.large, c.small_p50_ns, c.large_p50_ns) == (
        "std-thread/future",
        "void",
        "vector10000",
        20_000,
        60_000,
    )
    assert c.ratio == pytest.approx(3.0)


def test_payload_change_unavailable_says_why():
    rows = [
        point("join_delay", "fixed-pool", 1_000, payload="void"),
        point("join_delay", "fixed-pool", 9_000, payload="vector10000", saturated=True),
    ]
    flagged = payload_change(rows, "join_delay")
    assert (flagged.unavailable, flagged.variant, flagged.flagged_pairs) == (NO_UNFLAGGED_PAIR, None, 1)
    one = payload_change(rows[:1], "join_delay")
    assert (one.unavailable, one.small, one.large) == (ONE_PAYLOAD, None, None)


def test_payload_comparison_is_ordered_and_marks_the_flagged_bars():
    ms = [
        point("join_delay", "coroutine", 2_000, payload="vector10000", common=True, saturated=True),
        point("join_delay", "coroutine", 1_000, payload="void", common=True),
        point("join_delay", "deferred", 100, payload="void", common=True),
    ]
    c = payload_comparison(bench(ms, payload_common_rate_per_s={"coroutine": 5e4, "deferred": 1e6}), "join_delay")
    assert c is not None
    assert c.payloads == ("void", "vector10000") and c.variants == (("deferred", "future"), ("coroutine", "future"))
    assert c.common_rates_per_s == (("deferred", 1e6), ("coroutine", 5e4))
    flagged = {(p.model, p.payload): p.flagged for p in c.points}
    assert flagged == {("deferred", "void"): False, ("coroutine", "void"): False, ("coroutine", "vector10000"): True}
    assert c.change.unavailable == NO_UNFLAGGED_PAIR  # coroutine's pair is flagged, deferred has one payload
    assert payload_comparison(bench(ms[1:2]), "join_delay") is None  # one payload: no figure


# ---- the load sweep ------------------------------------------------------------------------------------


def test_tail_growth_is_between_unsaturated_points_only():
    ms = [
        point("total", "fixed-pool", 100, load=25.0, p99=1_000),
        point("total", "fixed-pool", 100, load=50.0, p99=4_000),
        point("total", "fixed-pool", 100, load=100.0, p99=900_000, saturated=True),
        point("total", "coroutine", 100, load=25.0, p99=1_000),
        point("total", "coroutine", 100, load=50.0, p99=2_000),
    ]
    s = load_sweep(bench(ms))
    assert s is not None and s.models == ("fixed-pool", "coroutine")
    assert [(line.model, line.loads_pct) for line in s.lines] == [
        ("fixed-pool", (25.0, 50.0, 100.0)),
        ("coroutine", (25.0, 50.0)),
    ]
    g = s.growth
    assert g is not None and (g.model, g.from_load_pct, g.to_load_pct) == ("fixed-pool", 25.0, 50.0)
    assert g.ratio == pytest.approx(4.0) and (g.from_p99_ns, g.to_p99_ns) == (1_000, 4_000)


def test_tail_growth_unavailable_without_two_unsaturated_points():
    ms = [point("total", "fixed-pool", 100, load=25.0), point("total", "fixed-pool", 100, load=100.0, saturated=True)]
    s = load_sweep(bench(ms))
    assert s is not None and len(s.lines) == 1 and s.growth is None
    assert load_sweep(bench(ms[:1])) is None  # one load: no sweep


# ---- tables ------------------------------------------------------------------------------------------


def test_delay_rows_divide_the_p50_by_each_reference():
    ms = [point("join_delay", "fixed-pool", 40_000), point("scheduling_delay", "fixed-pool", 10_000)]
    ms[1]["latency"]["low_confidence"] = ["99.9"]
    rows = delay_rows(bench(ms), {"condvar_handoff": REFS["condvar_handoff"]})
    assert [(r.variant, r.delay) for r in rows] == [
        ("fixed-pool/future", "scheduling_delay"),
        ("fixed-pool/future", "join_delay"),
    ]
    assert rows[0].to_condvar == pytest.approx(0.5) and rows[1].to_condvar == pytest.approx(2.0)
    assert rows[0].to_spin is None and rows[0].to_thread_start is None  # references missing from the run
    assert rows[0].low_confidence == frozenset({"99.9"}) and rows[1].low_confidence == frozenset()


def test_max_rates_ratio_and_budget():
    data = bench(
        [],
        max_rate_per_s={"coroutine": 100_000.0, "std-async": 20_000.0},
        ramps={"std-async": {"steps": [{}, {}], "saturation_found": True}},
    )
    r = max_rates(data, REFS)
    assert [x.model for x in r.rows] == ["std-async", "coroutine"]
    assert (r.fastest, r.slowest) == ("coroutine", "std-async") and r.fastest_to_slowest == pytest.approx(5.0)
    sa = r.rows[0]
    assert sa.per_call_ns == pytest.approx(50_000) and sa.budget_to_thread_start == pytest.approx(1.25)
    assert (sa.ramp_steps, sa.saturation_found, r.rows[1].saturation_found) == (2, True, False)
    assert max_rates(data, {}).rows[0].budget_to_thread_start is None
    zero = max_rates(bench([], max_rate_per_s={"coroutine": 100.0, "std-async": 0.0}), REFS)
    assert zero.fastest_to_slowest is None and zero.rows[0].per_call_ns is None


# ---- where a point's scheduling delay comes from -----------------------------------------------------


def _cause(model="fixed-pool", **backlog):
    return scheduling_cause(point("scheduling_delay", model, 5_000, backlog=backlog), REFS)


def test_scheduling_cause_kinds():
    assert _cause().kind == NO_BACKLOG_DATA
    over = _cause(grew=True, queue_p50=9, lateness_first_quarter_p50_ns=1e6, lateness_last_quarter_p50_ns=4e7)
    assert over.kind == OVERLOADED and (over.lateness_first_quarter_p50_ns, over.lateness_last_quarter_p50_ns) == (
        1e6,
        4e7,
    )
    assert _cause("deferred", calls=10).kind == DEFERRED
    assert _cause(queue_p50=3).kind == QUEUEING
    assert _cause(queue_p50=0, worker_parks_per_call=PARKS_PER_CALL_WAKEUP).kind == HANDOFF_PARKED
    assert _cause(queue_p50=0, worker_parks_per_call=0.49).kind == HANDOFF_RUNNING
    assert _cause(queue_p50=0).kind == NO_CALL_AHEAD


def test_queueing_names_stalls_and_run_queue_waits_above_five_percent():
    sched = {"window_ns": 1_000_000, "workers": {"threads": 2, "runqueue_wait_ns": 120_000}}  # 6 % of 2 workers
    c = _cause(queue_p50=3, stall_fraction=0.06, sched=sched)
    assert c.stalled and c.waited_for_cpu and c.runqueue_share == pytest.approx(0.06)
    quiet = {"window_ns": 1_000_000, "workers": {"threads": 2, "runqueue_wait_ns": 80_000}}  # 4 %
    c = _cause(queue_p50=3, stall_fraction=0.04, sched=quiet)
    assert not c.stalled and not c.waited_for_cpu and c.runqueue_share == pytest.approx(0.04)
    assert _cause(queue_p50=3).runqueue_share is None  # no schedstat: unavailable, not zero


def test_empty_queue_hand_off_is_compared_with_the_pools_own_reference():
    spin = _cause("spin-pool", queue_p50=3, empty_queue_scheduling_p50_ns=600, empty_queue_calls=370)
    assert spin.empty_queue is not None
    assert (spin.empty_queue.reference, spin.empty_queue.calls) == ("spin_handoff", 370)
    assert spin.empty_queue.to_reference == pytest.approx(3.0)
    fixed = _cause(queue_p50=3, empty_queue_scheduling_p50_ns=30_000)
    assert fixed.empty_queue is not None and fixed.empty_queue.reference == "condvar_handoff"
    assert fixed.empty_queue.to_reference == pytest.approx(1.5)
    no_ref = scheduling_cause(
        point("scheduling_delay", "fixed-pool", 5_000, backlog={"queue_p50": 3, "empty_queue_scheduling_p50_ns": 1}), {}
    )
    assert no_ref.empty_queue is not None and no_ref.empty_queue.to_reference is None
    assert (
        _cause(queue_p50=0, empty_queue_scheduling_p50_ns=600).empty_queue is None
    )  # no queue: the p50 is the hand-off


def test_saturation_reasons_besides_a_growing_backlog():
    m = point("scheduling_delay", "fixed-pool", 5_000, why=("backlog grew", "in-flight limit reached"))
    m["observed"]["backlog"] = {"queue_p50": 0, "in_flight_max": 64}
    c = scheduling_cause(m, REFS)
    assert c.why_saturated == ("in-flight limit reached",) and c.in_flight_limited and c.in_flight_max == 64
    assert not _cause(queue_p50=0).in_flight_limited


def test_backlog_rows_cover_the_lowest_and_the_main_load():
    ms = [
        point(
            "scheduling_delay",
            "fixed-pool",
            5_000,
            load=25.0,
            backlog={"queue_p50": 3, "in_flight_mean": 2.0, "in_flight_max": 9, "grew": False},
        ),
        point("scheduling_delay", "fixed-pool", 9_000, load=50.0, backlog={"grew": True}),
        point("scheduling_delay", "fixed-pool", 9_000, load=75.0),
    ]
    rows = backlog_rows(bench(ms), REFS)
    assert [r.load_pct for r in rows] == [25.0, 75.0]
    low, main = rows
    assert (low.has_backlog, low.backlog_grew, low.queue_p50, low.in_flight_mean, low.in_flight_max) == (
        True,
        False,
        3,
        2.0,
        9,
    )
    assert (main.has_backlog, main.queue_p50, main.in_flight_mean, main.cause.kind) == (
        False,
        None,
        None,
        NO_BACKLOG_DATA,
    )


# ---- targets -------------------------------------------------------------------------------------


def test_targets_met_and_not_met_either_side_of_the_limit():
    ms = [
        point("scheduling_delay", "fixed-pool", 30_000, load=25.0),  # 1.5× the condvar hand-off: met (≤ 1.5×)
        point("scheduling_delay", "fixed-pool", 31_000, load=75.0),  # 1.55×: not met
        point(
            "scheduling_delay",
            "spin-pool",
            700,
            load=75.0,
            backlog={"queue_p50": 5, "empty_queue_scheduling_p50_ns": 600, "empty_queue_calls": 12},
        ),
    ]
    t = targets(bench(ms), REFS)
    assert t.rows, "no target was judged"
    by = {(r.label.split()[0], r.load_pct, r.empty_queue_only): r for r in t.rows}
    assert by[("fixed-pool", 25.0, False)].met is True and by[("fixed-pool", 25.0, False)].ratio == pytest.approx(1.5)
    assert by[("fixed-pool", 75.0, False)].met is False
    spin = by[("spin-pool", 75.0, False)]
    assert spin.met is False and spin.ratio == pytest.approx(3.5) and spin.cause is not None
    empty = by[("spin-pool", 75.0, True)]
    assert (empty.met, empty.measured_p50_ns, empty.empty_queue_calls, empty.cause) == (True, 600, 12, None)
    assert empty.ratio == pytest.approx(3.0) and empty.limit == 3.0
    assert t.resume is None  # not measured


def test_targets_without_a_reference_have_no_verdict():
    t = targets(bench([point("scheduling_delay", "fixed-pool", 30_000)]), {})
    assert t.rows, "no target was judged"
    assert all(r.ratio is None and r.met is None and r.reference_p50_ns is None for r in t.rows)


def test_same_thread_resume_against_its_target():
    def resume(p50):
        return {"name": "same_thread_resume", "latency": {"percentiles": {"50": p50}}}

    fast = targets(bench([resume(12)]), REFS).resume
    assert fast is not None and fast.met and fast.ratio == pytest.approx(12 / RESUME_TARGET_NS)
    edge = targets(bench([resume(RESUME_TARGET_NS)]), REFS).resume
    assert edge is not None and edge.met
    slow = targets(bench([resume(51)]), REFS).resume
    assert slow is not None and not slow.met


# ---- capstone Figure 12 ---------------------------------------------------------------------------


def _launch_points(thread_join_p99=60_000):
    return [
        point("scheduling_delay", "std-async", 25_000, p99=300_000),
        point("join_delay", "std-async", 1_000, p99=70_000),
        point("scheduling_delay", "std-thread", 30_000, p99=170_000),
        point("join_delay", "std-thread", 500, p99=thread_join_p99),
        point("scheduling_delay", "deferred", 70, p99=90),
    ]


def test_figure12_holds_when_std_thread_beats_std_async_on_both_p99s():
    f = figure12(bench(_launch_points()))
    assert f.verdict == HOLDS and f.unavailable is None
    sched, join = f.delays
    assert (sched.delay, sched.thread_p99_ns, sched.async_p99_ns, sched.thread_wins) == (
        "scheduling_delay",
        170_000,
        300_000,
        True,
    )
    assert sched.thread_to_async == pytest.approx(170 / 300) and join.thread_wins
    assert (f.deferred_p50_ns, f.deferred_flags) == (70, ())
    assert (f.async_offered_per_s, f.thread_offered_per_s) == (1000.0, 1000.0)


def test_figure12_partly_and_does_not_hold():
    assert figure12(bench(_launch_points(thread_join_p99=90_000))).verdict == PARTLY  # join worse than std::async's
    worse = _launch_points(thread_join_p99=90_000)
    worse[2] = point("scheduling_delay", "std-thread", 30_000, p99=300_001)
    assert figure12(bench(worse)).verdict == DOES_NOT_HOLD
    tie = _launch_points(thread_join_p99=70_000)  # equal p99: std::thread does not lose
    assert figure12(bench(tie)).verdict == HOLDS


def test_figure12_unavailable_says_why():
    ms = _launch_points()
    ms[2] = point("scheduling_delay", "std-thread", 30_000, p99=400_000, saturated=True)
    flagged = figure12(bench(ms))
    assert (flagged.verdict, flagged.unavailable) == (UNAVAILABLE, FLAGGED)
    assert flagged.flagged == (("std-thread", "scheduling_delay", ("saturated (backlog grew)",)),)
    missing = figure12(bench(ms[:2]))
    assert (missing.verdict, missing.unavailable) == (UNAVAILABLE, NOT_MEASURED)
    assert missing.missing == (("std-thread", "scheduling_delay"), ("std-thread", "join_delay"))
    no_deferred = figure12(bench(_launch_points()[:4]))
    assert no_deferred.verdict == HOLDS and no_deferred.deferred_p50_ns is None  # deferred is optional


# ---- capstone Figures 13/14 (a std::async change and a flagged pair: test_reference_checks.py) ---------


def _pair(model, delay, void, vec, saturated=False):
    return [
        point(delay, model, void, payload="void", common=True),
        point(delay, model, vec, payload="vector10000", common=True, saturated=saturated),
    ]


def test_figures13_14_threshold_in_the_capstones_direction():
    at = _pair("std-async", "join_delay", 1_000, 1_000 * PAYLOAD_CHANGE)
    assert figures13_14(bench(at)).verdict == HOLDS
    below = _pair("std-async", "join_delay", 1_000, 1_490)
    assert figures13_14(bench(below)).verdict == DOES_NOT_HOLD
    # A delay that falls with a larger value goes against the capstone ("increases the overall delay").
    faster = figures13_14(bench(_pair("std-async", "join_delay", 1_500, 1_000)))
    assert faster.verdict == DOES_NOT_HOLD and faster.async_moves[0].changed and not faster.async_moves[0].rose


def test_figures13_14_other_models_are_counted_not_judged():
    still = _pair("std-async", "scheduling_delay", 20_000, 21_000) + _pair("std-async", "join_delay", 1_000, 1_100)
    f = figures13_14(bench(still + _pair("coroutine", "join_delay", 1_000, 9_000)))
    assert f.verdict == DOES_NOT_HOLD and (f.changed_pairs, f.compared_pairs) == (1, 3)
    one = _pair("std-async", "scheduling_delay", 20_000, 21_000) + _pair("std-async", "join_delay", 1_000, 3_000)
    assert figures13_14(bench(one)).verdict == PARTLY


def test_figures13_14_unavailable_without_an_unflagged_std_async_pair():
    assert figures13_14(bench([])).verdict == UNAVAILABLE
    flagged = figures13_14(bench(_pair("std-async", "join_delay", 1_000, 9_000, saturated=True)))
    assert (flagged.verdict, flagged.flagged_pairs, flagged.async_moves) == (UNAVAILABLE, 1, ())


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
    # Only the join delay grows with the payload here (×3), the scheduling delay does not: partly.
    assert a.figures13_14.verdict == PARTLY and (a.figures13_14.changed_pairs, a.figures13_14.compared_pairs) == (8, 16)
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
