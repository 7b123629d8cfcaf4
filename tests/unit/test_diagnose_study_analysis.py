"""Study `diagnose` (studies/diagnose/analysis.py, section.py): which HotROD fix each finding licenses,
on both sides of every condition; measured figures and ratios from stored documents; the twin's
prediction held null with its reason; a skipped study says why."""

from __future__ import annotations

from typing import Any

import pytest

from tailscope.store import EngineDocument
from tailscope.studies.diagnose import analysis
from tailscope.studies.diagnose.analysis import PREDICTION_UNAVAILABLE, analyse, fixes_from
from tailscope.studies.diagnose.section import build_section


def population(service: str, operation: str, verdict: str, servers: int | None, **kw: Any) -> dict:
    cap = {"verdict": verdict, "servers": servers, "confidence": "medium", "spans": 200, "service_p50_ns": 300e6}
    cap["wait_p99_ns"] = 600e6
    return {"kind": kw.get("kind", "operation"), "service": service, "operation": operation,
            "parent_service": kw.get("parent_service"), "parent_operation": kw.get("parent_operation"),
            "capacity": cap}  # fmt: skip


def fan_out(service: str, operation: str, k: int, calls_max: int) -> dict:
    return {"parent_service": "frontend", "parent_operation": "/dispatch", "service": service,
            "operation": operation, "k": k, "calls_max": calls_max, "calls_p50": calls_max,
            "instances": 50, "bounded": 48}  # fmt: skip


def diagnosis(pops=(), fan_outs=(), chains=()) -> dict:
    return {"populations": list(pops), "bounded_fan_outs": list(fan_outs), "sequential_chains": list(chains)}


def ids(fixes) -> list[str]:
    return [f.id for f in fixes]


def test_a_db_lock_of_one_licenses_removing_it_and_a_faster_db():
    fixes, not_applied = fixes_from(diagnosis([population("mysql", "SQL SELECT", "limit", 1)]))
    assert ids(fixes) == ["-M", "-D 150ms"]
    m, d = fixes
    assert (m.kind, m.from_value, m.to_value, m.flags) == ("capacity", 1, None, {"db_mutex_disabled": True})
    assert (d.kind, d.from_value, d.to_value, d.flags) == ("faster", 300, 150, {"db_delay_ms": 150.0})
    assert m.evidence["confidence"] == "medium" and not_applied == []


def test_a_db_capacity_above_one_is_no_mutex_but_still_a_stage_to_speed_up():
    fixes, not_applied = fixes_from(diagnosis([population("mysql", "SQL SELECT", "limit", 2)]))
    assert ids(fixes) == ["-D 150ms"]
    assert [n["finding"] for n in not_applied] == ["capacity 2 at mysql:SQL SELECT"]


@pytest.mark.parametrize("verdict", ["no_limit_seen", "not_identifiable", "changed"])
def test_no_limit_at_the_db_licenses_nothing(verdict):
    assert fixes_from(diagnosis([population("mysql", "SQL SELECT", verdict, None)])) == ([], [])


def test_a_limit_elsewhere_is_listed_as_not_applied():
    fixes, not_applied = fixes_from(diagnosis([population("customer", "/customer", "limit", 1)]))
    assert fixes == [] and not_applied[0]["finding"] == "capacity 1 at customer:/customer"
    # The same names as a call site are not the db operation.
    call = population("mysql", "SQL SELECT", "limit", 1, kind="call_site", parent_service="customer",
                      parent_operation="/customer")  # fmt: skip
    assert fixes_from(diagnosis([call]))[0] == []


@pytest.mark.parametrize(("service", "operation"), [("route", "/route"), ("frontend", "HTTP GET → route:/route")])
def test_a_bounded_route_fan_out_licenses_a_pool_as_large_as_the_most_calls(service, operation):
    fixes, _ = fixes_from(diagnosis(fan_outs=[fan_out(service, operation, 3, 10)]))
    assert ids(fixes) == ["-W 10"]
    assert (fixes[0].from_value, fixes[0].to_value, fixes[0].flags) == (3, 10, {"route_workers": 10})


def test_a_fan_out_elsewhere_or_with_no_more_calls_than_k_is_not_applied():
    for f in (fan_out("driver", "FindNearest", 3, 10), fan_out("frontend", "HTTP GET → routex:/route", 3, 10),
              fan_out("route", "/route", 3, 3)):  # fmt: skip
        fixes, not_applied = fixes_from(diagnosis(fan_outs=[f]))
        assert fixes == [] and len(not_applied) == 1


def test_a_sequential_chain_has_no_flag():
    chain = {"parent_service": "driver", "parent_operation": "FindNearest", "service": "redis", "operation": "Get"}
    assert fixes_from(diagnosis(chains=[chain]))[1][0]["finding"].startswith("sequential chain")


# ---- stored documents → values -------------------------------------------------------------------


def load_doc(p50_ms: float, p99_ms: float, count: int, kind: str, rate: float, point: str) -> EngineDocument:
    latency = {"count": count, "percentiles": {"50": p50_ms * 1e6, "99": p99_ms * 1e6},
               "percentile_ci": {"50": [p50_ms * 0.9e6, p50_ms * 1.1e6]},
               "percentile_ci_unavailable": {"99": "fewer than 368 samples"}}  # fmt: skip
    doc = {"measurements": [{"name": "latency_intended", "latency": latency}], "unavailable": [],
           "load": {"errors": {"read": 1, "timeout": 0}},
           "hotrod": {"kind": kind, "rate_per_s": rate, "flags": {}, "traces": count}}  # fmt: skip
    return EngineDocument("diagnose", analysis.LOAD_ENGINE, doc, point)


def plan(fixes: list[dict], skipped: str | None = None) -> EngineDocument:
    doc = {"schema": analysis.PLAN_SCHEMA, "skipped": skipped, "fixes": fixes, "not_applied": [],
           "window_s": 25.0, "load_cpus": [0], "server_cpus": [1], "diagnosed_at_per_s": 2.0,
           "measurements": [], "unavailable": []}  # fmt: skip
    return EngineDocument("diagnose", analysis.PLAN_ENGINE, doc, "plan")


def fix_entry(point: str, unavailable: str | None = None) -> dict:
    return {"id": "-M", "kind": "capacity", "target": "mysql:SQL SELECT", "sentence": "remove the lock",
            "point": point, "rate_per_s": 2.0, "unavailable": unavailable}  # fmt: skip


def stored() -> list[EngineDocument]:
    return [
        load_doc(700, 1200, 25, "baseline", 1.0, "baseline@1/s"),
        load_doc(760, 1400, 50, "baseline", 2.0, "baseline@2/s"),
        load_doc(380, 700, 50, "fix", 2.0, "fix -M@2/s"),
        plan([fix_entry("fix -M@2/s")]),
    ]


def test_a_fix_is_measured_against_the_baseline_at_its_rate_and_its_prediction_stays_null():
    v = analyse(stored())
    assert v.skipped is None
    assert [b.point for b in v.baselines] == ["baseline@1/s", "baseline@2/s"]
    (r,) = v.fixes
    assert r.baseline is not None and r.baseline.point == "baseline@2/s"
    assert r.p50_ratio_to_baseline == pytest.approx(0.5) and r.p99_ratio_to_baseline == pytest.approx(0.5)
    assert r.measured is not None and r.measured.latency is not None
    assert (r.measured.latency.samples, r.measured.latency.errors) == (50, 1)
    assert r.measured.latency.p50.lo_ns == pytest.approx(380 * 0.9e6)
    assert r.measured.latency.p99.unavailable == "fewer than 368 samples"
    assert (r.prediction.p50_ns, r.prediction.p99_ns, r.prediction.unavailable) == (None, None, PREDICTION_UNAVAILABLE)
    assert r.predicted_over_measured_p50 is None and r.predicted_over_measured_p99 is None


def test_a_fix_whose_phase_failed_says_why():
    docs = [*stored()[:2], plan([fix_entry("fix -M@2/s", "the phase failed: hotrod exited")])]
    (r,) = analyse(docs).fixes
    assert r.measured is None and r.p99_ratio_to_baseline is None
    assert r.unavailable == "the phase failed: hotrod exited"


def test_a_skipped_study_carries_its_reason_and_nothing_else():
    v = analyse([plan([], skipped="hotrod (…) is not at /x: no Go >= 1.23")])
    assert v.skipped == "hotrod (…) is not at /x: no Go >= 1.23" and v.fixes == () and v.baselines == ()
    assert analyse([]).skipped == "the run stored no plan document for this study"


class FakeStore:
    def __init__(self, docs: list[EngineDocument]):
        self.docs = docs

    def documents(self, run_id: str, study: str | None = None) -> list[EngineDocument]:
        return self.docs

    def unavailable(self, run_id: str) -> list[tuple]:
        return []


class Study:
    name = "diagnose"
    title = "Diagnose"


def test_the_section_shows_the_prediction_as_unavailable_never_a_number():
    sec = build_section(Study(), FakeStore(stored()), "r")  # type: ignore[arg-type]
    fixes = sec.blocks[1]
    (row,) = fixes.rows
    assert (row[0], row[4]) == ("-M", "0.5×")
    assert row[5] == row[6] == f"unavailable ({PREDICTION_UNAVAILABLE})"


def test_the_section_of_a_skipped_study_says_why():
    sec = build_section(Study(), FakeStore([plan([], skipped="no Go")]), "r")  # type: ignore[arg-type]
    assert sec.blocks == [] and sec.notes == ["Not measured: no Go."]


# ---- the twin's predictions (wired: run.predictions stores them) -------------------------------------


def prediction_doc(
    point: str, p50_ms: float | None, p99_ms: float | None, why: str | None = None, p50_ci_ms=None, p99_ci_ms=None
) -> EngineDocument:
    doc = {"schema": analysis.PREDICTION_SCHEMA, "rate_per_s": 2.0, "speed_up": 10.0, "whatif": "w", "requests": 300,
           "p50_ns": None if p50_ms is None else p50_ms * 1e6, "p99_ns": None if p99_ms is None else p99_ms * 1e6,
           "twin_rate_per_s": 20.0, "flags": [], "measurements": [], "unavailable": []}  # fmt: skip
    if p50_ci_ms is not None:
        doc["p50_ci_ns"] = [p50_ci_ms[0] * 1e6, p50_ci_ms[1] * 1e6]
        doc["p99_ci_ns"] = None if p99_ci_ms is None else [p99_ci_ms[0] * 1e6, p99_ci_ms[1] * 1e6]
        doc["ci_unavailable"] = {} if p99_ci_ms is not None else {"p99": "fewer than 368 samples"}
    if why:
        doc["prediction_unavailable"] = why
    return EngineDocument("diagnose", analysis.PREDICTION_ENGINE, doc, point)


def test_stored_predictions_give_predicted_over_measured_per_fix_and_the_twin_error_per_rate():
    docs = [
        *stored(),
        prediction_doc("prediction fix -M@2/s", 418, 630),
        prediction_doc("prediction baseline@2/s", 760, 1540),
        prediction_doc("prediction baseline@1/s", None, None, "the twin run failed: engine exited"),
    ]
    v = analyse(docs)
    (r,) = v.fixes
    assert r.predicted_over_measured_p50 == pytest.approx(1.1) and r.predicted_over_measured_p99 == pytest.approx(0.9)
    assert (r.prediction.speed_up, r.prediction.requests) == (10.0, 300)
    low, top = v.twin_errors
    assert (low.rate_per_s, low.fitted, low.p50_ratio) == (1.0, False, None)
    assert low.prediction.unavailable == "the twin run failed: engine exited"
    assert (top.fitted, top.p50_ratio) == (True, pytest.approx(1.0)) and top.p99_ratio == pytest.approx(1.1)
    sec = build_section(Study(), FakeStore(docs), "r")  # type: ignore[arg-type]
    (row,) = sec.blocks[1].rows
    assert row[5].startswith("418 ms / 630 ms (300 twin requests)")
    # A prediction stored before predictions kept intervals: the ratio, with no verdict and why.
    assert (
        row[6]
        == f"1.1×; verdict unavailable (the twin's p50 has no interval ({analysis.NO_STORED_INTERVAL}; 300 samples))"
    )
    assert row[7].startswith("0.9×; verdict unavailable (")
    assert "10× faster than real time" in sec.blocks[1].caption
    errors = sec.blocks[2]
    assert [r[0] for r in errors.rows] == ["1/s (not fitted: the load dependence)", "2/s (fitted here)"]
    assert errors.rows[0][4] == "unavailable (the twin run failed: engine exited)"


def test_each_fix_is_matched_to_the_same_change_among_the_twins_what_ifs():
    from tailscope.twin.whatif import WhatIf

    topo = {"services": [{"name": "customer", "endpoints": [{"name": "customer", "stages": [
        {"store": {"span": "own"}}, {"store": {"span": "SQL SELECT"}}]}]}]}  # fmt: skip

    def w(kind: str, target: dict, to: object, unavailable: str | None = None) -> WhatIf:
        return WhatIf(f"{kind}/{to}", kind, target, 1, to, "s", {}, unavailable)  # type: ignore[arg-type]

    cap2 = w("capacity", {"service": "customer", "span": "SQL SELECT", "place": "store"}, 2)
    removed = w("capacity", {"service": "customer", "span": "SQL SELECT", "place": "store"}, "removed")
    other = w("capacity", {"service": "x", "span": "lock", "place": "store"}, "removed")
    fan10 = w("fan_out", {"service": "frontend", "endpoint": "dispatch", "stage": 5}, 10)
    own = w("faster", {"service": "customer", "endpoint": "customer", "stage": 0}, 0.5)
    db = w("faster", {"service": "customer", "endpoint": "customer", "stage": 1}, 0.5)
    offered = [cap2, other, removed, fan10, own, db]
    assert analysis.whatif_for({"kind": "capacity"}, offered, topo) is removed
    assert analysis.whatif_for({"kind": "fan_out", "to": 10}, offered, topo) is fan10
    assert analysis.whatif_for({"kind": "fan_out", "to": 12}, offered, topo) is None
    assert analysis.whatif_for({"kind": "faster"}, offered, topo) is db
    unavailable = w("capacity", {"service": "customer", "span": "SQL SELECT", "place": "store"}, "removed", "no")
    assert analysis.whatif_for({"kind": "capacity"}, [unavailable], topo) is None


def test_each_ratio_is_judged_against_its_band_by_both_sides_intervals():
    # Measured (stored()): fix p50 380 ms [342–418], p99 without an interval (50 requests).
    met = [*stored(), prediction_doc("prediction fix -M@2/s", 380, 700, p50_ci_ms=(370, 390), p99_ci_ms=(600, 800))]
    (r,) = analyse(met).fixes
    # [370/418, 390/342] = [0.885, 1.140] lies inside ±20 %.
    assert r.verdict_p50.verdict == "met"
    assert r.verdict_p99.unavailable == "the measurement's p99 has no interval (fewer than 368 samples; 50 samples)"
    twin_short = [*stored(), prediction_doc("prediction fix -M@2/s", 380, 700, p50_ci_ms=(370, 390))]
    assert analyse(twin_short).fixes[0].verdict_p99.unavailable == (
        "the twin's p99 has no interval (fewer than 368 samples; 300 samples)"
    )
    wide = [*stored(), prediction_doc("prediction fix -M@2/s", 418, 630, p50_ci_ms=(400, 440))]
    (r,) = analyse(wide).fixes
    # [400/418, 440/342] = [0.957, 1.287]: crosses 1.2 with the estimate 1.1 inside.
    assert r.verdict_p50.verdict == "undecided at this length"
    assert r.verdict_p50.length_factor == pytest.approx((440 / 342 - 1.1) ** 2 / (1.2 - 1.1) ** 2)
    # The slower side sets the seconds: HotROD's 50 requests at 2/s.
    assert r.verdict_p50.seconds_to_decide == pytest.approx(r.verdict_p50.length_factor * 25.0)
    far = [*stored(), prediction_doc("prediction fix -M@2/s", 600, 900, p50_ci_ms=(580, 620))]
    assert analyse(far).fixes[0].verdict_p50.verdict == "not met"  # [580/418, …] = [1.39, …]
    sec = build_section(Study(), FakeStore(wide), "r")  # type: ignore[arg-type]
    (row,) = sec.blocks[1].rows
    assert row[6].startswith("1.1×; undecided at this length: a run ") and "would decide it" in row[6]
    assert "±20 %" in sec.blocks[1].caption


def test_the_unchanged_twin_is_held_to_its_contract_band():
    docs = [*stored(), prediction_doc("prediction baseline@2/s", 800, 1540, p50_ci_ms=(790, 810))]
    (top,) = analyse(docs).twin_errors
    # Measured baseline 760 ms [684–836]: [790/836, 810/684] = [0.945, 1.184] crosses 1.15, not 1.2.
    assert top.verdict_p50.verdict == "undecided at this length"
    assert analysis.TWIN_CONTRACT_BAND == (0.85, 1.15)
