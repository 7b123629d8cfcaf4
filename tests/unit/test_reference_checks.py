"""Each reference result beside this run's: the shared reference-vs-here
block of the report, and every study's check computed from synthetic points with hand-computed
verdicts — the capstone's Figures 6, 8, 9, 12 and 13/14, the article's 40k / 8k / 30k and the echo
thesis's recommendation. No engines."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from tailscope.report import Figure, ReferenceCheck, Section, Table, reference_overview
from tailscope.report.blocks import reference_table
from tailscope.store import EngineDocument, RunRecord, Store
from tailscope.studies.base import RunContext

# ---- the shared block ---------------------------------------------------------------------------


def test_a_check_says_whether_the_shape_holds_and_why():
    c = ReferenceCheck("capstone Figure 9", "×4 at 100", "×4.2 at 100", "holds", "p99 grew ×4.2")
    assert c.line() == "capstone Figure 9: the shape holds here — p99 grew ×4.2"
    u = ReferenceCheck("capstone Figure 9", "×4 at 100", "unavailable", "unavailable", "no point at 100")
    assert u.line() == "capstone Figure 9: unavailable: no point at 100"
    with pytest.raises(ValueError, match="verdict 'maybe'"):
        ReferenceCheck("x", "y", "z", "maybe", "w")


def test_reference_table_keeps_cells_short_and_puts_the_reasons_under_it():
    checks = [
        ReferenceCheck("A", "reported a", "here a", "holds", "why a"),
        ReferenceCheck("B", "reported b", "here b", "does not hold", "why b"),
    ]
    t = reference_table(checks)
    assert t.rows == [["A", "reported a", "here a", "holds"], ["B", "reported b", "here b", "does not hold"]]
    assert t.findings == [checks[0].line(), checks[1].line()]


def test_overview_collects_every_sections_checks_at_the_top():
    a = Section("async", "Async", "intro")
    a.add_references([ReferenceCheck("capstone Figure 12", "r", "h", "partly holds", "w")])
    b = Section("echo", "Echo", "intro")
    b.add_references([ReferenceCheck("echo thesis", "r", "h", "unavailable", "no point")])
    plain = Section("baseline", "Baseline", "intro")
    overview = reference_overview([a, plain, b])
    assert overview is not None and overview.id == "references"
    table = overview.blocks[0]
    assert isinstance(table, Table)
    assert [r[:2] for r in table.rows] == [["capstone Figure 12", "async"], ["echo thesis", "echo"]]
    assert "2 compared: 1 partly holds; 1 unavailable" in overview.intro
    assert reference_overview([plain]) is None
    # Each section shows its own table too.
    assert isinstance(a.blocks[-1], Table) and a.blocks[-1].findings == [a.references[0].line()]


def test_table_findings_are_rendered_under_the_table():
    from tailscope.report import _env

    sec = Section("s", "S", "intro")
    sec.add_references([ReferenceCheck("R", "rep", "here", "holds", "because 2 > 1")])
    html = (
        _env()
        .get_template("report.html.j2")
        .render(
            run={"form": "quick", "status": "complete", "tailscope_version": "0"},
            run_id="r",
            started="",
            duration_s=1.0,
            study_wall=[],
            machine=[],
            sections=[sec],
            css="",
            fmt_count=str,
        )
    )
    assert '<p class="finding">R: the shape holds here — because 2 &gt; 1</p>' in html


# ---- capstone Figure 9 (contention) -------------------------------------------------------------


def test_figure9_holds_partly_and_unavailable():
    from tailscope.studies.contention import figure9_check

    grows = {20: 1e6, 80: 3.2e6, 100: 4.5e6}
    flat = {20: 1e6, 80: 1.1e6, 100: 1.2e6}
    held = figure9_check({("std-async", "scheduling"): grows, ("std-async", "join"): grows})
    assert held.verdict == "holds" and "std-async scheduling ×4.5 at 100" in held.here
    part = figure9_check({("std-async", "scheduling"): grows, ("coroutine", "scheduling"): flat})
    assert part.verdict == "partly holds" and "not for coroutine scheduling" in part.why
    none = figure9_check({("coroutine", "join"): {20: 1e6, 40: 2e6}})
    assert none.verdict == "unavailable" and "no point at 80 or 100 connections" in none.why
    assert figure9_check({}).verdict == "unavailable"


# ---- capstone Figures 12 and 13/14 (async study) ------------------------------------------------


def _bench_point(name, model, p50, p99, *, payload="long_long", load=75.0, saturated=False, common=False):
    m = {
        "name": name,
        "model": model,
        "mechanism": "future",
        "payload": payload,
        "load_pct": load,
        "offered_per_s": 1000.0,
        "saturated": saturated,
        "observed": {"why_saturated": ["backlog grew"] if saturated else []},
        "latency": {"count": 1000, "percentiles": {"50": p50, "99": p99}},
    }
    if common:
        m["series"] = "payload_common_rate"
    return m


def _bench(ms):
    from tailscope.studies.asyncmodels.analysis import BenchData

    return BenchData({"config": {"measure_at_pct": 75.0, "sweep_payload": "long_long"}, "measurements": ms})


def test_figure12_std_thread_beats_std_async_from_the_p99s():
    from tailscope.studies.asyncmodels.analysis import FLAGGED, figure12

    ms = [
        _bench_point("scheduling_delay", "std-async", 25_000, 300_000),
        _bench_point("join_delay", "std-async", 1_000, 70_000),
        _bench_point("scheduling_delay", "std-thread", 30_000, 170_000),
        _bench_point("join_delay", "std-thread", 500, 60_000),
        _bench_point("scheduling_delay", "deferred", 70, 90),
    ]
    c = figure12(_bench(ms))
    assert c.verdict == "holds"
    sched = c.delays[0]
    assert (sched.delay, sched.thread_p99_ns, sched.async_p99_ns) == ("scheduling_delay", 170_000, 300_000)
    assert sched.thread_to_async == pytest.approx(0.567, abs=1e-3) and c.deferred_p50_ns == 70
    ms[3] = _bench_point("join_delay", "std-thread", 500, 90_000)  # join now worse than std::async's
    assert figure12(_bench(ms)).verdict == "partly holds"
    ms[2] = _bench_point("scheduling_delay", "std-thread", 30_000, 400_000, saturated=True)
    flagged = figure12(_bench(ms))
    assert flagged.verdict == "unavailable" and flagged.unavailable == FLAGGED
    assert flagged.flagged == (("std-thread", "scheduling_delay", ("saturated (backlog grew)",)),)
    assert figure12(_bench(ms[:2])).verdict == "unavailable"


def test_figures13_14_judge_std_async_and_skip_flagged_pairs():
    from tailscope.studies.asyncmodels.analysis import figures13_14

    def pair(model, delay, void, vec, saturated=False):
        return [
            _bench_point(delay, model, void, void * 2, payload="void", common=True),
            _bench_point(delay, model, vec, vec * 2, payload="vector10000", common=True, saturated=saturated),
        ]

    ms = pair("std-async", "scheduling_delay", 20_000, 21_000) + pair("std-async", "join_delay", 1_000, 3_000)
    ms += pair("fixed-pool", "scheduling_delay", 1_000, 5_000_000, saturated=True)
    c = figures13_14(_bench(ms))
    assert c.verdict == "holds"
    moves = [(mv.delay, mv.small, mv.large, round(mv.ratio, 2), mv.changed) for mv in c.async_moves]
    assert moves == [
        ("scheduling_delay", "void", "vector10000", 1.05, False),
        ("join_delay", "void", "vector10000", 3.0, True),
    ]
    assert (c.changed_pairs, c.compared_pairs, c.flagged_pairs) == (1, 2, 1)
    still = pair("std-async", "scheduling_delay", 20_000, 21_000) + pair("std-async", "join_delay", 1_000, 1_100)
    assert figures13_14(_bench(still)).verdict == "does not hold"
    others = still + pair("coroutine", "join_delay", 1_000, 9_000)
    assert figures13_14(_bench(others)).verdict == "partly holds"
    assert figures13_14(_bench([])).verdict == "unavailable"


def test_async_section_carries_both_capstone_checks(tmp_path):
    from tailscope.studies.asyncmodels import STUDY
    from tailscope.studies.asyncmodels.analysis import ENGINE

    ms = [
        _bench_point("scheduling_delay", "std-async", 25_000, 300_000),
        _bench_point("join_delay", "std-async", 1_000, 70_000),
        _bench_point("scheduling_delay", "std-thread", 30_000, 170_000),
        _bench_point("join_delay", "std-thread", 500, 60_000),
    ]
    for m in ms:
        m |= {
            "variant": f"{m['model']}/future/long_long",
            "cdf": [[1, 0.0], [m["latency"]["percentiles"]["99"], 100.0]],
        }
        p50, p99 = m["latency"]["percentiles"]["50"], m["latency"]["percentiles"]["99"]
        m["latency"] |= {"unit": "ns", "mean": 1.0, "min": 1, "max": 1, "stddev": 0.0}
        m["latency"]["percentiles"] |= {"90": (p50 + p99) / 2, "99.9": p99, "99.99": p99}
    bench = {"schema": "tailscope.result/1", "engine": ENGINE, "machine": {}, "measurements": ms}
    bench |= {"config": {"measure_at_pct": 75.0, "sweep_payload": "long_long"}, "max_rate_per_s": {}}
    now = datetime(2026, 1, 1)
    with Store(tmp_path / "t.duckdb") as store:
        store.save_run(RunRecord("r", now, now, "quick", ["async"], {}, "t", [EngineDocument("async", ENGINE, bench)]))
        sec = STUDY.section(store, "r")
    assert [c.reference for c in sec.references] == ["capstone Figure 12", "capstone Figures 13/14"]
    assert sec.references[0].verdict == "holds" and sec.references[1].verdict == "unavailable"


# ---- capstone Figures 6 and 8 (analyze, socialnet) ------------------------------------------------


def _timeline_entry(label, e2e_ns, on_path_ns, pairs=1):
    rpc = [{"client_span_id": "c", "server_span_id": "s", "scheduling_ns": 1, "join_ns": 1, "rule": "tag"}] * pairs
    return {
        "label": label,
        "analysis": {
            "trace_id": label,
            "analyzed": True,
            "end_to_end_ns": e2e_ns,
            "delays": {"on_path_ns": on_path_ns, "rpc": rpc},
        },
        "spans": [],
    }


def test_figure6_reads_the_drawn_traces_delay_on_the_path():
    from tailscope.studies.analyze import figure6_check

    # Stored p99 first (as the engine wrote them before the fix): read median first all the same.
    doc = {"timelines": [_timeline_entry("p99", 68_000_000, 21e6), _timeline_entry("median", 29_000_000, 9_500_000)]}
    c = figure6_check(doc)
    assert c.verdict == "holds" and c.here.startswith("delay on the critical path: median trace 9.5 ms of 29 ms (33 %)")
    assert "2 of 2 drawn traces reach the capstone's 8 ms" in c.why
    doc["timelines"][0]["analysis"]["delays"]["on_path_ns"] = 2_000_000
    assert figure6_check(doc).verdict == "partly holds"
    no_pairs = {"timelines": [_timeline_entry("median", 1_000_000, None, pairs=0)]}
    assert (
        figure6_check(no_pairs).verdict == "unavailable"
        and "no drawn trace has an RPC pair" in figure6_check(no_pairs).why
    )
    none = figure6_check({"timelines": [], "timelines_unavailable": "no trace could be analyzed"})
    assert none.verdict == "unavailable" and "no trace could be analyzed" in none.why


def _analyze_store(tmp_path: Path, rows: list[tuple[str, str, str, float, int]]) -> Store:
    """A store holding one analyze document per model with probe_call_* measurements:
    rows of (model, name, call, p99_ns, samples)."""
    docs = []
    for model in sorted({r[0] for r in rows}):
        ms = [
            {
                "name": name,
                "variant": call,
                "latency": {"unit": "ns", "count": n, "mean": p99 / 2, "percentiles": {"50": p99 / 4, "99": p99}},
                "cdf": [[p99 / 4, 50.0], [p99, 99.0]],
            }
            for m, name, call, p99, n in rows
            if m == model
        ]
        doc = {"schema": "tailscope.critpath/1", "measurements": ms, "summary": {"traces_analyzed": 1}}
        docs.append(EngineDocument("analyze", "tailscope-critpath", doc, model))
    now = datetime(2026, 1, 1)
    store = Store(tmp_path / "t.duckdb")
    store.save_run(RunRecord("r", now, now, "quick", ["analyze"], {}, "t", docs))
    return store


def test_figure8_compares_std_async_with_the_capstone_and_the_other_models(tmp_path):
    from tailscope.studies.socialnet.section import figure8_check

    rows = [
        ("std-async", "probe_call_scheduling", "compose-post-service:compose_media_client", 26e6, 500),
        ("std-async", "probe_call_join", "text-service:compose_urls_client", 90e6, 50),  # too few samples to cite
        ("coroutine", "probe_call_join", "compose-post-service:compose_text_client", 3e6, 900),
    ]
    with _analyze_store(tmp_path, rows) as store:
        c = figure8_check(store, "r")
    assert c is not None and c.verdict == "holds"
    assert "26 ms (scheduling delay of compose-post-service:compose_media_client, n=500)" in c.here
    assert "90 ms" not in c.why and "coroutine 3 ms" in c.why and "(std-async the highest)" in c.why


def test_figure8_below_the_capstones_range_but_highest_partly_holds(tmp_path):
    from tailscope.studies.socialnet.section import figure8_check

    rows = [
        ("std-async", "probe_call_scheduling", "a", 5e6, 500),
        ("coroutine", "probe_call_join", "b", 3e6, 500),
    ]
    with _analyze_store(tmp_path, rows) as store:
        c = figure8_check(store, "r")
    assert c is not None and c.verdict == "partly holds" and "below the capstone's 8 ms–23 ms" in c.why


# ---- the article's 40k / 8k / 30k (collapse) ----------------------------------------------------------


def test_article_check_from_the_peaks():
    from tailscope.studies.collapse import article_check

    def point(variant, rate, flags=()):
        return {"variant": variant, "users": 4, "achieved_per_s": rate, "workers": 1, "cores": 1, "flags": list(flags)}

    c = article_check([point("sync-no-io", 4000), point("blocking", 500), point("callback", 2000)])
    assert c.verdict == "holds" and c.here == "blocking 0.125×, callback 0.5× of sync-no-io (peaks)"
    assert "40 000 QPS without IO" in c.reported.replace("\u2009", " ")
    assert article_check([point("blocking", 500)]).verdict == "unavailable"


# ---- the echo thesis's recommendation -------------------------------------------------------------


def _echo_point(model, c, tput, server_limited=True):
    from tailscope.studies.echo.analysis import EchoPoint

    return EchoPoint(model, c, "closed", tput, 1e6, 1e6, 1e6, 1e6, 1e6, 100, cpu_pct=99.0 if server_limited else 50.0)


def test_thesis_check_reads_the_ranges_from_100_connections_up():
    from tailscope.studies.echo.analysis import thesis_reading
    from tailscope.studies.echo.section import thesis_check

    closed = [_echo_point("poll", c, 100_000) for c in (8, 100, 1000)]
    closed += [_echo_point("asio-mt", c, 90_000) for c in (8, 100, 1000)]
    closed += [_echo_point("io-uring", c, 150_000, server_limited=False) for c in (8, 100, 1000)]
    t = thesis_reading(closed, [])
    assert t.verdict == "holds" and t.absent == ("> 2000",)
    assert [(r.name, r.thesis_best, r.recommended, r.server_limited) for r in t.ranges] == [
        ("100–2000", "poll", "io-uring", False)
    ]
    # The wording of the reference row (golden).
    c = thesis_check(t)
    assert c.verdict == "holds"
    assert c.here == (
        "100–2000: best of the thesis's five poll; recommended overall io-uring [flagged: a point was not server-limited]"
    )
    assert (
        c.why == c.here + " (mean closed-loop throughput over the range's counts); range > 2000: no point in this run."
    )
    closed += [_echo_point("asio", c, 120_000) for c in (100, 1000)]
    lost = thesis_reading(closed, [])
    assert lost.verdict == "does not hold"
    assert lost.ranges[0].thesis_best == "asio" and lost.ranges[0].pick_share == pytest.approx(100 / 120)
    unavailable = thesis_reading([_echo_point("poll", 8, 1.0)], [])
    assert unavailable.verdict == "unavailable" and thesis_check(unavailable).verdict == "unavailable"


# ---- the section builders put the checks where the report shows them ----------------------------------


def test_collapse_section_has_the_reference_table_and_a_curve_finding(tmp_path):
    from tailscope.studies.collapse import STUDY

    def point(variant, users, rate):
        return {
            "collapse_point": {
                "variant": variant,
                "users": users,
                "achieved_per_s": rate,
                "workers": 1,
                "cores": 1,
                "flags": [],
                "mean_ns": 1e6,
                "pinning": {"graph_cpus": [1], "load_cpus": [0]},
            }
        }

    docs = [
        EngineDocument("collapse", "tailscope-load", point(v, u, r), f"{v}/{u}")
        for v, u, r in (("sync-no-io", 4, 4000), ("blocking", 4, 500), ("callback", 4, 2000))
    ]
    now = datetime(2026, 1, 1)
    with Store(tmp_path / "t.duckdb") as store:
        store.save_run(RunRecord("r", now, now, "quick", ["collapse"], {}, "t", docs))
        sec = STUDY.section(store, "r")
    fig = next(b for b in sec.blocks if isinstance(b, Figure))
    assert fig.finding.startswith("sync-no-io peaks at 4")
    assert [c.verdict for c in sec.references] == ["holds"]


def test_timelines_come_median_first_whatever_order_the_engine_wrote(tmp_path, monkeypatch):
    """Regression: the engine writes the chosen traces in input order, so the report showed the p99
    trace before the median one."""
    from tailscope.studies import analyze

    art = tmp_path / "analyze"
    art.mkdir()
    per_trace = [{"trace_id": f"t{i}", "analyzed": True, "end_to_end_ns": 1000 + i} for i in range(100)]
    (art / "critical_paths.ndjson").write_text("".join(json.dumps(t) + "\n" for t in per_trace))

    def fake_critpath(files, **kw):
        out = Path(kw["artifacts_dir"])
        out.mkdir(parents=True, exist_ok=True)
        ids = sorted(kw["timeline_traces"], reverse=True)  # t98 (p99) before t49 (median): input order
        lines = [{"analysis": {"trace_id": i, "analyzed": True, "end_to_end_ns": 1}, "spans": []} for i in ids]
        (out / "timelines.ndjson").write_text("".join(json.dumps(x) + "\n" for x in lines))
        return {}

    monkeypatch.setattr(analyze, "run_critpath", fake_critpath)
    ctx = RunContext("analyze", tmp_path, lambda *_: None, {})
    entries = analyze.STUDY._timelines(ctx, ["in.json"], {}, art, {})
    assert [e["label"] for e in entries] == ["median", "p99"]


def test_no_timeline_is_said_with_its_reason_never_silently_absent(tmp_path):
    from tailscope.studies.analyze import _no_timeline_reason, _timeline_note

    doc = {"summary": {"traces_analyzed": 3}, "timelines": []}
    reason = _no_timeline_reason(tmp_path, doc)
    assert "wrote no per-trace results" in reason
    doc["timelines_unavailable"] = reason
    assert _timeline_note(doc) == reason
    missing = {"timelines": [{"missing_trace_id": "abc", "reason": "no trace with this id in the input"}]}
    assert _timeline_note(missing) == "trace abc: no trace with this id in the input"


def test_bottleneck_figures_the_engine_left_out_print_a_dash_never_zero():
    from tailscope.studies.analyze import _bottleneck_table

    doc = {"bottlenecks": {"services_by_mean": [{"rank": 1, "service": "s", "mean_per_trace_ns": 1e6}]}}
    row = _bottleneck_table(doc).rows[0]
    assert row[5:] == ["—", "—", "—"]
    doc["bottlenecks"]["services_by_mean"][0] |= {"cv_per_trace": 0.5, "share_of_end_to_end": 0.25, "frequency": 1.0}
    assert _bottleneck_table(doc).rows[0][5:] == ["0.50", "25.0 %", "100 %"]


def test_paths_table_rows_name_the_services_and_keep_the_operations_under_the_table():
    import pandas as pd

    from tailscope.studies.analyze import _paths_table, service_chain

    path = "nginx:/compose → nginx:post_client → compose:post_server → compose:text_client → text:text_server"
    assert service_chain(path) == "nginx → compose → text"
    paths = pd.DataFrame([{"rank": 1, "path": path, "count": 5, "fraction": 0.5, "p50_ns": 1e6, "p99_ns": 2e6}])
    t = _paths_table(paths, 10)
    assert t.rows[0][1] == "nginx → compose → text" and t.details == [("path 1", path)]
    assert t.details_title == "Operations of each path"


def test_a_wide_log_axis_drops_minor_labels_that_would_overlap():
    from tailscope.report import plots

    fig, ax = plots.new_figure()
    plots.value_cdf(ax, [1.0, 5e7], [0.0, 100.0], label="wide")
    fig.canvas.draw()
    assert not [t.get_text() for t in ax.xaxis.get_minorticklabels() if t.get_text()]
    fig2, ax2 = plots.new_figure()
    plots.value_cdf(ax2, [1e3, 5e4], [0.0, 100.0], label="narrow")
    fig2.canvas.draw()
    assert [t.get_text() for t in ax2.xaxis.get_minorticklabels() if t.get_text()]
