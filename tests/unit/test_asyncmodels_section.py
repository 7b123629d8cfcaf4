"""The `async` study's report section (studies/asyncmodels/section.py): what it holds, built from a
temporary store, and a few golden sentences rendered from synthetic analysis values. The values
themselves are tested in test_asyncmodels_analysis.py."""

from __future__ import annotations

from datetime import datetime

from test_asyncmodels_analysis import synthetic_docs

from tailscope.report.blocks import HOLDS, Figure, Table
from tailscope.store import EngineDocument, RunRecord, Store
from tailscope.studies.asyncmodels import STUDY
from tailscope.studies.asyncmodels.analysis import (
    ENGINE,
    QUEUEING,
    DelayExtremes,
    EmptyQueueHandoff,
    Figure12,
    LaunchPolicyDelay,
    PayloadChange,
    SchedulingCause,
    analyze,
    references,
)
from tailscope.studies.asyncmodels.section import explain, extremes_finding, figure12_check, payload_finding
from tailscope.units import fmt_count


def test_section_renders_every_value_of_the_analysis(tmp_path):
    base, bench = synthetic_docs()
    now = datetime(2026, 1, 1, 12, 0, 0)
    docs = [EngineDocument("async", "tailscope-baseline", base), EngineDocument("async", ENGINE, bench)]
    with Store(tmp_path / "t.duckdb") as store:
        store.save_run(RunRecord("r1", now, now, "quick", ["async"], {}, "test", docs))
        sec = STUDY.section(store, "r1")
    a = analyze(bench, references([base]))
    assert sec.id == "async"
    titles = [b.title for b in sec.blocks]
    for want in (
        "Scheduling delay per model",
        "Join delay per model",
        "Total per model",
        "Scheduling delay per payload",
        "Join delay per payload",
        "Load sweep",
        "Maximum sustained rate",
        "Performance targets",
        "Delays at 75 %",
    ):
        assert any(t.startswith(want) for t in titles), (want, titles)
    figures = [b for b in sec.blocks if isinstance(b, Figure)]
    assert len(figures) == len(a.panels) + len(a.payloads) + 1  # CDFs, payloads, the load sweep
    assert all(f.svg.startswith("<svg") and f.finding for f in figures)
    tables = {b.title.split(":")[0].split(" (")[0]: b for b in sec.blocks if isinstance(b, Table)}
    delays = tables["Delays at 75 % of each model's max rate"]
    assert delays.columns[2] == "samples" and len(delays.rows) == len(a.delay_rows)
    assert delays.rows and all(r[2] == fmt_count(1000) for r in delays.rows)
    rates = tables["Maximum sustained rate per model"]
    assert [r[0] for r in rates.rows] == [r.model for r in a.max_rates.rows]
    # One row per target value (and the coroutine resume), its verdict cell from the value.
    targets = tables["Performance targets, as measured"]
    assert a.targets.rows and a.targets.resume is not None
    assert len(targets.rows) == len(a.targets.rows) + 1 and len(targets.details) == len(targets.rows)
    assert [r[5] for r in targets.rows] == [("met" if t.met else "not met") for t in a.targets.rows] + ["met"]
    # The reading of each point is prose: under the table (details), one per row, not a table cell.
    backlog = tables["What the calls met"]
    assert a.backlog and len(backlog.rows) == len(backlog.details) == len(a.backlog)
    assert all(len(r) == len(backlog.columns) for r in backlog.rows)
    assert [c.verdict for c in sec.references] == [a.figure12.verdict, a.figures13_14.verdict]
    assert sec.notes == []  # every reference present, nothing saturated at 75 %, no warnings


def test_section_without_engine_documents_says_so(tmp_path):
    now = datetime(2026, 1, 1, 12, 0, 0)
    with Store(tmp_path / "t.duckdb") as store:
        store.save_run(RunRecord("r2", now, now, "quick", ["async"], {}, "test", [], [("async", "engine missing")]))
        sec = STUDY.section(store, "r2")
    assert sec.blocks == []
    assert any("engine missing" in n for n in sec.notes)
    assert any("no tailscope-asyncbench" in n for n in sec.notes)


# ---- golden sentences: the wording, from synthetic values -------------------------------------------


def test_golden_reading_of_a_queueing_point():
    cause = SchedulingCause(
        QUEUEING,
        500.0,
        queue_p50=87,
        queue_mean=143.0,
        queue_max=767,
        stall_fraction=0.6,
        stall_max_ns=12_000_000,
        stalled=True,
        runqueue_share=0.625,
        waited_for_cpu=True,
        empty_queue=EmptyQueueHandoff(600, 370, "spin_handoff", 3.0),
    )
    assert explain(cause) == (
        "p50 500 ns: queueing — the median call found 87 earlier call(s) not yet started (mean 143, max 767), "
        "though the backlog did not grow; for 60 % of the point calls waited while no body started (gaps up to "
        "12 ms); the worker(s) sat runnable on a run queue, waiting for a CPU, 62 % of the point; calls launched "
        "into an empty queue (370) had p50 600 ns (3× the spin hand-off)"
    )


def test_golden_payload_finding():
    change = PayloadChange("scheduling_delay", "void", "vector10000", 1, "std-thread/future", 20_000, 60_000, 3.0)
    assert payload_finding(change) == (
        "Scheduling delay: payload changes it most for std-thread/future — p50 20 µs with void vs 60 µs with "
        "vector10000 (3×), at a rate both sustain. 1 pair(s) with a saturated point were not compared."
    )


def test_golden_extremes_finding():
    ex = DelayExtremes(1, "fixed-pool/future", 1_000, 0.05, "std-thread/future", 20_000, 20.0)
    assert extremes_finding(ex, "Total") == (
        "Lowest p50 total: fixed-pool/future at 1 µs (0.05× the condvar hand-off); highest: std-thread/future at "
        "20 µs (20× the lowest) (1 flagged point(s) left out: saturated)."
    )


def test_golden_figure12_line():
    f = Figure12(
        HOLDS,
        75.0,
        delays=(
            LaunchPolicyDelay("scheduling_delay", 170_000, 300_000, True, 170 / 300),
            LaunchPolicyDelay("join_delay", 60_000, 70_000, True, 6 / 7),
        ),
        async_offered_per_s=1000.0,
        thread_offered_per_s=1000.0,
        deferred_p50_ns=70.0,
    )
    assert figure12_check(f).line() == (
        "capstone Figure 12: the shape holds here — scheduling delay p99 std::thread 170 µs vs std::async 300 µs "
        "(0.567×); join delay p99 std::thread 60 µs vs std::async 70 µs (0.857×), each at 75 % of its own max rate "
        "(std::async 1\u2009000/s, std::thread 1\u2009000/s offered); deferred starts its body 70 ns after the "
        "request (p50): no hand-off."
    )
