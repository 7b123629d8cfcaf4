"""Study `threads`, the analysis (tailscope.studies.threads.analysis) on small synthetic documents:
per-request figures, the recommended N and the rule of thumb, the article's comparison and where the
shape differs, tail verdicts, the graphs' health — each verdict on both sides of its threshold — and
a few golden tests of the section's wording. No engines."""

from __future__ import annotations

import pytest

from tailscope.studies.threads.analysis import (
    ARTICLE_RISE,
    ARTICLE_SAME_THROUGHPUT,
    COMPARE,
    LOADAVG_MIN_WINDOW_S,
    RULE_OF_THUMB_FACTOR,
    TAIL_NOT_ANALYSED,
    GraphFailure,
    analyze,
    compare_threads,
    graph_health,
    objective_ns_of,
    point_from_document,
    recommend,
    tail_reading,
)
from tailscope.studies.threads.run import DEFAULT_OBJECTIVE_MS, FRONT, unavailable_graph_document
from tailscope.studies.threads.section import closing_line, notes

MS = 1e6

TAIL = {
    "verdict": {
        "kind": "heavy",
        "xi": 0.31,
        "xi_low": 0.1,
        "xi_high": 0.5,
        "hill": {"n": 5000, "k": 70, "alpha": 2.5, "ci_low": 2.1, "ci_high": 3.0, "threshold": 4e6},
        "mean_excess_slope": 0.4,
        "exponential_scale": 1e6,
        "tail_fraction": 0.014,
        "evidence": "CI above 0",
    },
    "ccdf": [[1e6, 4e6], [0.5, 0.01]],
    "samples": 5000,
}


def point_doc(
    threads: int = 10,
    users: int = 100,
    *,
    workload: str = "passthrough",
    variant: str = "blocking",
    kind: str = "closed",
    achieved: float = 1000.0,
    mean_ns: float | None = 1 * MS,
    p99_ns: float | None = 5 * MS,
    errors: int = 0,
    window_s: float = 1.0,
    front_cpu_pct: float | None = 10.0,
    inst_load: float | None = 2.0,
    procs_running: float | None = 1.5,
    front_runnable: float | None = 1.0,
    tail: dict | None = None,
    flags: tuple[str, ...] = (),
    graph_cpus: tuple[int, ...] = (1,),
    cpus: int = 2,
    objective_ms: float | None = 50.0,
) -> dict:
    """A stored load point as run.py writes it (only the fields the analysis reads)."""
    front = {
        "cpu_pct": front_cpu_pct,
        "runnable_threads_mean": front_runnable,
        "threads_max": threads + 2,
        "voluntary_ctx_switches": 4000,
        "involuntary_ctx_switches": 1000,
        "runqueue_wait_ns": 2_000_000_000,
    }
    return {
        "load": {"achieved_per_s": achieved, "requests_completed": int(achieved * window_s), "errors_total": errors},
        "measurements": [
            {"name": "latency", "latency": {"mean": 1.0}},
            {
                "name": "latency_intended",
                "latency": {
                    "mean": mean_ns,
                    "count": 1234,
                    "percentiles": {"50": 0.5 * MS, "90": 2 * MS, "99": p99_ns, "99.9": 9 * MS},
                    "low_confidence": ["99.9"],
                },
            },
        ],
        "threads_point": {
            "workload": workload,
            "variant": variant,
            "threads": threads,
            "users": users,
            "kind": kind,
            "objective_ms": objective_ms,
            "pinning": {"load_cpus": [0], "graph_cpus": list(graph_cpus)},
            "procstat": {
                "window_s": window_s,
                "system": {
                    "cpu_busy_pct": 55.0,
                    "procs_running_mean": procs_running,
                    "instantaneous_load_mean": inst_load,
                    "loadavg_1m_end": 0.7,
                    "cpus": cpus,
                },
                "processes": {FRONT: front},
            },
            "tail": tail if tail is not None else TAIL,
            "flags": list(flags),
        }
        | ({"rate_per_s": 500.0, "fraction": 0.5} if kind == "open" else {}),
    }


def graph_doc(threads: int = 10, *, failures: int = 0, rejections: int = 0, dispatchers: int | None = 1) -> dict:
    md = {"workers": threads, "thread_create_failures": failures}
    if dispatchers is not None:
        md["io_dispatchers"] = dispatchers
    return {
        "services": {
            "front": {"model_details": md, "counters": {"rejections": rejections}},
            "backend": {"model_details": {"thread_create_failures": failures}},
        },
        "threads_point": {"workload": "passthrough", "variant": "blocking", "threads": threads, "kind": "graph"},
    }


def points(*docs: dict):
    return [point_from_document(d) for d in docs]


# ---- one point ------------------------------------------------------------------------------------------


def test_per_request_figures_divide_by_the_requests_served_in_the_sampler_window():
    # 1000/s over 2 s: 2000 requests in the window.
    p = point_from_document(point_doc(achieved=1000.0, window_s=2.0, front_cpu_pct=50.0))
    assert p.vcs_per_req == pytest.approx(4000 / 2000)
    assert p.ics_per_req == pytest.approx(1000 / 2000)
    assert p.rq_wait_per_req_ns == pytest.approx(2e9 / 2000)
    # The front busy 50 % of one CPU for 2 s = 1 s of CPU over 2000 requests.
    assert p.compute_ns == pytest.approx(1e9 / 2000)
    assert (p.mean_ns, p.p99_ns, p.p999_ns, p.count) == (1 * MS, 5 * MS, 9 * MS, 1234)
    assert p.low_confidence == ("99.9",)
    assert p.combo == ("passthrough", "blocking")


@pytest.mark.parametrize("achieved, window_s", [(0.0, 1.0), (1000.0, 0.0)])
def test_no_per_request_figure_without_requests_or_window(achieved, window_s):
    p = point_from_document(point_doc(achieved=achieved, window_s=window_s))
    assert (p.vcs_per_req, p.ics_per_req, p.rq_wait_per_req_ns, p.compute_ns) == (None, None, None, None)


def test_a_point_without_latency_intended_or_front_reads_as_unavailable_not_zero():
    doc = point_doc()
    doc["measurements"] = [m for m in doc["measurements"] if m["name"] != "latency_intended"]
    del doc["threads_point"]["procstat"]["processes"][FRONT]
    p = point_from_document(doc)
    assert (p.mean_ns, p.p99_ns, p.count, p.low_confidence) == (None, None, None, ())
    assert (p.front_cpu_pct, p.front_runnable, p.compute_ns, p.vcs_per_req) == (None, None, None, None)


def test_tail_reading_of_a_verdict_and_of_an_unavailable_tail():
    t = tail_reading(TAIL)
    assert (t.kind, t.verdict, t.unavailable) == ("heavy", "heavy", None)
    assert t.fit is not None and (t.fit.n, t.fit.k, t.fit.alpha, t.fit.xi) == (5000, 70, 2.5, 0.31)
    assert (t.fit.threshold_ns, t.fit.tail_fraction, t.fit.exponential_scale_ns) == (4e6, 0.014, 1e6)
    assert t.ccdf == ([1e6, 4e6], [0.5, 0.01])
    u = tail_reading({"unavailable": "only 3 distinct values above the tail threshold"})
    assert (u.kind, u.verdict, u.fit, u.ccdf) == (None, "unavailable", None, None)
    assert u.unavailable == "only 3 distinct values above the tail threshold"
    for missing in (None, {}):
        assert tail_reading(missing).unavailable == TAIL_NOT_ANALYSED


def test_objective_is_the_recorded_one_else_the_default():
    assert objective_ns_of([point_doc(objective_ms=5.0)]) == 5 * MS
    assert objective_ns_of([point_doc(objective_ms=None)]) == DEFAULT_OBJECTIVE_MS * MS
    assert objective_ns_of([]) == DEFAULT_OBJECTIVE_MS * MS


# ---- the recommended N -----------------------------------------------------------------------------------


def test_recommended_n_is_the_fastest_within_the_objective_and_without_errors():
    objective = 10 * MS
    pts = points(
        point_doc(2, achieved=500.0, p99_ns=1 * MS),
        point_doc(10, achieved=900.0, p99_ns=objective),  # exactly at the objective: met
        point_doc(100, achieved=1000.0, p99_ns=objective + 1),  # just above: not met
        point_doc(25, achieved=1200.0, p99_ns=1 * MS, errors=1),  # errors: not met
        point_doc(200, achieved=5000.0, p99_ns=1 * MS, kind="open"),  # open loop: not a candidate
        point_doc(4, achieved=2000.0, p99_ns=None),  # no p99: not a candidate
    )
    rec = recommend(pts, objective, cores=2)
    assert rec.best is not None and rec.best.threads == 10


def test_no_n_met_the_objective_is_a_value_with_no_rule_verdict():
    rec = recommend(points(point_doc(10, p99_ns=20 * MS), point_doc(100, p99_ns=30 * MS)), 10 * MS, cores=2)
    assert rec.best is None
    assert rec.analytic is not None and rec.rule_holds is None


def test_analytic_n_from_median_compute_and_the_least_loaded_points_wait():
    # compute = front CPU % × 1e7 / achieved (window 1 s): 10 % at 1000/s → 100 µs.
    pts = points(
        point_doc(2, users=10, mean_ns=0.5 * MS, front_cpu_pct=10.0),  # least loaded: wait = 500 − 100 µs
        point_doc(2, users=100, mean_ns=3 * MS, front_cpu_pct=5.0),  # 50 µs
        point_doc(10, users=100, mean_ns=2 * MS, front_cpu_pct=20.0),  # 200 µs
    )
    rec = recommend(pts, 50 * MS, cores=2)
    assert rec.compute_ns == pytest.approx(100e3)  # the median of 50, 100, 200 µs
    assert rec.wait_ns == pytest.approx(400e3)
    assert rec.wait_at == (2, 10)
    assert rec.analytic == pytest.approx(2 * (1 + 400e3 / 100e3))
    assert rec.cores == 2


def test_wait_is_never_negative_and_analytic_needs_compute():
    # The least-loaded point's mean below its compute: no wait, N ≈ cores.
    rec = recommend(points(point_doc(2, mean_ns=50e3, front_cpu_pct=10.0)), 50 * MS, cores=3)
    assert rec.wait_ns == 0.0 and rec.analytic == pytest.approx(3.0)
    # The front's CPU not sampled: no compute, no analytic N, no rule verdict.
    rec = recommend(points(point_doc(2, front_cpu_pct=None)), 50 * MS, cores=3)
    assert rec.best is not None
    assert (rec.compute_ns, rec.wait_ns, rec.analytic, rec.rule_holds) == (None, None, None, None)


@pytest.mark.parametrize(
    "best_n, holds",
    [(5, True), (4, False), (20, True), (21, False), (10, True)],
)
def test_rule_of_thumb_holds_within_its_factor_either_way(best_n, holds):
    # One point: compute 100 µs, mean 500 µs → wait 400 µs; 2 cores → analytic N = 10.
    rec = recommend(points(point_doc(best_n, mean_ns=0.5 * MS, front_cpu_pct=10.0)), 50 * MS, cores=2)
    assert rec.analytic == pytest.approx(10.0)
    assert RULE_OF_THUMB_FACTOR == 2.0
    assert rec.rule_holds is holds


# ---- the article's comparison ------------------------------------------------------------------------------


def test_comparison_is_the_articles_pair_at_the_most_users_when_run():
    pts = points(*(point_doc(n, users=u) for n in (2, 10, 100) for u in (10, 500)))
    c = compare_threads(pts)
    assert c is not None and (c.lo, c.hi, c.users) == (*COMPARE, 500)
    assert (c.at_lo.threads, c.at_lo.users, c.at_hi.threads, c.at_hi.users) == (10, 500, 100, 500)


def test_comparison_falls_back_to_the_smallest_and_largest_n():
    c = compare_threads(points(point_doc(2), point_doc(8), point_doc(4)))
    assert c is not None and (c.lo, c.hi) == (2, 8)


@pytest.mark.parametrize(
    "docs",
    [
        [],
        [point_doc(10, kind="open"), point_doc(100, kind="open")],  # no closed-loop point
        [point_doc(10), point_doc(10, users=10)],  # one N
        [point_doc(10, users=500), point_doc(100, users=10)],  # no N=100 point at the most users
    ],
)
def test_no_comparison_without_two_ns_at_the_most_users(docs):
    assert compare_threads(points(*docs)) is None


def test_comparison_ratios_are_hi_over_lo():
    c = compare_threads(
        points(
            point_doc(10, p99_ns=2 * MS, inst_load=2.0, procs_running=1.0, front_runnable=0.5, achieved=1000.0),
            point_doc(100, p99_ns=8 * MS, inst_load=5.0, procs_running=3.0, front_runnable=2.0, achieved=950.0),
        )
    )
    assert c is not None
    assert (c.p99_ratio, c.load_ratio, c.runq_ratio, c.front_runnable_ratio) == (4.0, 2.5, 3.0, 4.0)
    assert c.throughput_ratio == pytest.approx(0.95)
    assert not c.differs_from_article  # p99 and load rose, throughput within ±10 %
    ch = c.change("p99_ns")
    assert ch is not None and (ch.at_lo, ch.at_hi, ch.ratio) == (2 * MS, 8 * MS, 4.0)


def test_change_of_a_figure_missing_or_zero_at_lo():
    c = compare_threads(points(point_doc(10, inst_load=0.0, front_runnable=None), point_doc(100, inst_load=1.0)))
    assert c is not None
    assert c.change("front_runnable") is None
    ch = c.change("inst_load")
    assert ch is not None and (ch.at_lo, ch.at_hi, ch.ratio) == (0.0, 1.0, None)
    assert c.load_ratio is None and not c.load_did_not_rise


@pytest.mark.parametrize("ratio, did_not_rise", [(ARTICLE_RISE - 0.01, True), (ARTICLE_RISE + 0.01, False)])
def test_p99_and_load_did_not_rise_below_the_articles_rise(ratio, did_not_rise):
    c = compare_threads(
        points(point_doc(10, p99_ns=1 * MS, inst_load=1.0), point_doc(100, p99_ns=ratio * MS, inst_load=ratio))
    )
    assert c is not None
    assert c.p99_did_not_rise is did_not_rise and c.load_did_not_rise is did_not_rise
    assert c.differs_from_article is did_not_rise


@pytest.mark.parametrize(
    "hi_achieved, changed",
    [
        (1000.0 * (1 + ARTICLE_SAME_THROUGHPUT) - 1, False),
        (1000.0 * (1 + ARTICLE_SAME_THROUGHPUT) + 1, True),
        (1000.0 * (1 - ARTICLE_SAME_THROUGHPUT) + 1, False),
        (1000.0 * (1 - ARTICLE_SAME_THROUGHPUT) - 1, True),
        (0.0, True),  # nothing served at hi: changed by −100 %
    ],
)
def test_throughput_changed_beyond_the_articles_band(hi_achieved, changed):
    c = compare_threads(
        points(point_doc(10, achieved=1000.0, p99_ns=1 * MS), point_doc(100, achieved=hi_achieved, p99_ns=2 * MS))
    )
    assert c is not None and c.throughput_changed is changed
    assert c.throughput_ratio == pytest.approx(hi_achieved / 1000.0)


# ---- graphs and the whole study ------------------------------------------------------------------------------


def test_graph_health_sums_the_services_and_lists_graphs_that_did_not_start():
    base = {"workload": "transform", "variant": "non-blocking", "model": "pool-callback", "threads": 100000}
    h = graph_health(
        [
            graph_doc(2, failures=1, rejections=3, dispatchers=1),
            unavailable_graph_document(base, "--workers 100000: above this process's thread limit"),
            graph_doc(10, failures=2, rejections=0, dispatchers=2),
            graph_doc(100, dispatchers=None),
        ]
    )
    assert (h.thread_create_failures, h.rejections) == (1 + 1 + 2 + 2, 3)  # front and backend each
    assert h.io_dispatchers == (1, 2)
    assert h.failed == (
        GraphFailure("transform", "non-blocking", 100000, "--workers 100000: above this process's thread limit"),
    )


def test_analysis_orders_combos_and_reads_cores_pinning_and_users():
    docs = [
        point_doc(10, users=50, workload="socialnet", variant="non-blocking"),
        point_doc(10, users=50, workload="transform", variant="non-blocking"),
        point_doc(10, users=50, workload="transform", variant="blocking", flags=("generator-limited",)),
        point_doc(10, users=500, workload="passthrough", variant="blocking"),
        point_doc(100, users=800, kind="open", p99_ns=3 * MS),
        point_doc(10, users=800, kind="open", p99_ns=9 * MS),
        point_doc(10, users=800, kind="open", p99_ns=None),
        graph_doc(10),
    ]
    a = analyze(docs)
    assert a.combos == (
        ("passthrough", "blocking"),
        ("transform", "blocking"),
        ("transform", "non-blocking"),
        ("socialnet", "non-blocking"),
    )
    assert len(a.points) == 7 and len(a.closed) == 4 and a.has_open
    assert a.threads == (10, 100)
    assert (a.cores, a.pinning.load_cpus, a.pinning.graph_cpus) == (1, (0,), (1,))
    assert (a.top_users, a.most_users) == (500, 800)
    assert a.worst_open is not None and (a.worst_open.threads, a.worst_open.p99_ns) == (10, 9 * MS)
    assert [(p.workload, p.flags) for p in a.flagged] == [("transform", ("generator-limited",))]
    assert set(a.recommendations) == set(a.comparisons) == set(a.combos)
    assert a.objective_ns == 50 * MS


@pytest.mark.parametrize("graph_cpus, cpus, cores", [((1, 2, 3), 8, 3), ((), 4, 4), ((), 0, 1)])
def test_cores_are_the_graphs_cpus_else_the_machines_else_one(graph_cpus, cpus, cores):
    assert analyze([point_doc(graph_cpus=graph_cpus, cpus=cpus)]).cores == cores


@pytest.mark.parametrize("window_s, describes", [(LOADAVG_MIN_WINDOW_S, True), (LOADAVG_MIN_WINDOW_S - 0.1, False)])
def test_the_one_minute_load_average_describes_points_of_a_minute_or_more(window_s, describes):
    a = analyze([point_doc(2, window_s=window_s), point_doc(10, window_s=1.0)])
    assert a.window_s == window_s
    assert a.loadavg_describes_points is describes


def test_analysis_of_graphs_only():
    a = analyze([graph_doc(2)])
    assert (a.points, a.combos, a.cores, a.top_users, a.worst_open) == ((), (), 1, 0, None)
    assert not a.has_open and a.pinning.graph_cpus == ()


# ---- wording (golden): the section formats these values --------------------------------------------------


def test_closing_line_wording_when_the_shape_differs_and_the_rule_does_not_hold():
    pts = points(
        point_doc(10, users=500, p99_ns=4 * MS, inst_load=2.0, procs_running=1.0, achieved=1000.0),
        point_doc(100, users=500, p99_ns=4.2 * MS, inst_load=2.1, procs_running=3.0, achieved=800.0),
        point_doc(2, users=10, mean_ns=0.5 * MS, p99_ns=1 * MS, achieved=1100.0),
    )
    c, rec = compare_threads(pts), recommend(pts, 50 * MS, cores=2)
    assert c is not None
    assert closing_line(("passthrough", "blocking"), c, rec) == (
        "passthrough, blocking, 100 vs 10 threads at 500 users: p99 1.05×, load 1.05× (instantaneous), "
        "run queue 3×, throughput -20 %; tail heavy at 10, heavy at 100. Recommended N = 2 (1\u2009100/s with p99 "
        "1 ms) vs the rule of thumb N ≈ 2 × (1 + 400 µs / 100 µs) = 10.0 — the rule does not hold here (off by "
        "more than 2×). Differs from the article: p99 did not rise (×1.05), load did not rise (×1.05), "
        "throughput changed by -20 %; measured cause: the system run queue averaged 3.0 tasks on 2 graph "
        "CPU(s) at 100 threads, the front had 1.0 runnable threads on average."
    )


def test_closing_line_wording_when_no_n_met_the_objective_and_compute_was_not_measured():
    pts = points(
        point_doc(10, p99_ns=60 * MS, inst_load=1.0, front_cpu_pct=None, tail={"unavailable": "too few"}),
        point_doc(100, p99_ns=90 * MS, inst_load=2.0, front_cpu_pct=None),
    )
    c, rec = compare_threads(pts), recommend(pts, 50 * MS, cores=2)
    assert c is not None
    assert closing_line(("transform", "non-blocking"), c, rec) == (
        "transform, non-blocking, 100 vs 10 threads at 100 users: p99 1.5×, load 2× (instantaneous), "
        "run queue 1×, throughput +0 %; tail unavailable at 10, heavy at 100. No N met the p99 objective. "
        "(analytic estimate unavailable: compute or wait not measured)."
    )


def test_notes_wording_flags_failed_graphs_health_and_pinning():
    base = {"workload": "passthrough", "variant": "blocking", "model": "pool-blocking", "threads": 100000}
    a = analyze(
        [
            point_doc(10, flags=("generator-limited", "fewer connections than users")),
            graph_doc(10, failures=1, rejections=2),
            unavailable_graph_document(base, "above this process's thread limit"),
        ]
    )
    assert notes(a) == [
        "flagged: passthrough blocking N=10 users=100 (closed): generator-limited; fewer connections than users",
        "passthrough blocking N=100000: the graph did not start — above this process's thread limit",
        "Threads the system refused to create: 2; requests rejected by the services: 2. IO dispatchers per "
        "pool service: 1 (fixed for every N). Pinning: generator on CPU [0], graph on CPU(s) [1].",
    ]


def _with_p99_ci(doc: dict, lo_ns: float, hi_ns: float) -> dict:
    lat = next(m["latency"] for m in doc["measurements"] if m["name"] == "latency_intended")
    lat["percentile_ci"] = {"99": [lo_ns, hi_ns]}
    return doc


@pytest.mark.parametrize(
    "hi_ms, verdict",
    [(45, "met"), (60, "undecided at this length")],  # the whole interval within 50 ms; straddling it
)
def test_the_recommended_points_objective_by_its_interval(hi_ms, verdict):
    pts = points(_with_p99_ci(point_doc(8, p99_ns=40 * MS, achieved=1000.0), 35 * MS, hi_ms * MS))
    rec = recommend(pts, 50 * MS, cores=2)
    assert rec.best is not None and rec.objective.verdict == verdict
    if verdict == "undecided at this length":
        # By hand: (60 − 40)² / (50 − 40)² = 4× the 1 234 samples, at 1 000/s.
        assert rec.objective.length_factor == pytest.approx(4.0) and rec.objective.samples_to_decide == 4936
        assert rec.objective.seconds_to_decide == pytest.approx(4.936)


def test_the_closing_line_states_the_interval_of_the_recommended_p99():
    pts = points(
        _with_p99_ci(point_doc(10, users=500, p99_ns=40 * MS), 35 * MS, 60 * MS),
        point_doc(100, users=500, p99_ns=80 * MS),
    )
    c, rec = compare_threads(pts), recommend(pts, 50 * MS, cores=2)
    assert c is not None
    line = closing_line(("passthrough", "blocking"), c, rec)
    assert (
        "Recommended N = 10 (1\u2009000/s with p99 40 ms [35–60 ms], undecided at this length against the "
        "objective: a run 4.0× as long (4\u2009936 samples, ~5 s) would decide it)"
    ) in line
