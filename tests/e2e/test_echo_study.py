"""The echo study without engines: the run's plan (threads per client CPU, pacing and I/O flags, the
run-time estimate), the section built from stored synthetic documents, and a few golden tests of
the section's wording from synthetic analysis values (the values themselves are asserted in
tests/unit/test_echo_analysis.py)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

import pytest

from conftest import echo_point
from tailscope.lab import load as load_args
from tailscope.measure.intervals import QuantileInterval
from tailscope.report.blocks import Table
from tailscope.store import EngineDocument, RunRecord, Store
from tailscope.studies.echo import STUDY
from tailscope.studies.echo import analysis as A
from tailscope.studies.echo import run as R
from tailscope.studies.echo import section as S
from tailscope.studies.echo.analysis import CLOSED, RATE

# ---- the run's plan -------------------------------------------------------------------------------------


def test_load_threads_one_per_250_connections_at_most_one_per_client_cpu():
    plan = R.LoadPlan(cpus=[0, 1, 2], pacing="busy-poll")
    assert [plan.threads(c) for c in (8, 250, 251, 1000, 10000)] == [1, 1, 2, 3, 3]
    assert R.LoadPlan(cpus=[0], pacing="sleep").threads(10000) == 1


def test_explicit_cpus_pin_the_generator_to_the_client_cpu_only():
    plan = R.load_plan({"cpus": "0,1"}, 0, 1)
    assert plan.cpus == [0] and plan.pacing == "busy-poll"


def test_pacing_flags_and_bad_pacing():
    assert load_args.load_pacing_args(load_args.load_pacing({})) == ["--busy-poll"]
    assert load_args.load_pacing_args(load_args.load_pacing({"load_pacing": "sleep"})) == []
    with pytest.raises(ValueError, match="load_pacing"):
        load_args.load_pacing({"load_pacing": "yolo"})
    args = R._load_args(1, 2, 1000, 0, R.LoadPlan([3, 4], "sleep"), R.Timing(1.0, 0.3))
    assert "--busy-poll" not in args
    assert args[args.index("-t") + 1] == "2" and args[args.index("--cpus") + 1] == "3,4"


def test_generator_io_path_by_connection_count_or_forced():
    by_c = R.load_plan({}, 0, 1)
    assert by_c.io == "by-connections"
    assert by_c.io_args(8) == ["--io", "epoll"] and by_c.io_args(R.URING_GENERATOR_FROM) == ["--io", "auto"]
    assert R.load_plan({"load_io": "epoll"}, 0, 1).io_args(1000) == ["--io", "epoll"]
    assert R.load_plan({"load_io": "uring"}, 0, 1).io_args(1) == ["--io", "auto"]
    with pytest.raises(ValueError, match="load_io"):
        R.load_plan({"load_io": "fast"}, 0, 1)
    args = R._load_args(1, 2, 1000, 0, R.LoadPlan([3], "sleep"), R.Timing(1.0, 0.3))
    assert args[args.index("--io") + 1] == "auto"


def test_estimate_counts_every_point_of_the_sweep():
    t = R.Timing(duration_s=5.0, warmup_s=1.0)
    est = R.estimated_duration_s(R.FULL_CONNECTIONS, A.MODELS, t)
    assert est == pytest.approx(10 * (9 * 2 + 1) * (6.0 + R.POINT_OVERHEAD_S))  # + poll's repeat


# ---- the section from stored documents ------------------------------------------------------------------


def _load_doc(model: str, c: int, mode: str, tput: float, p99: float, cpu: float) -> dict:
    return {
        "measurements": [
            {
                "name": "latency_intended",
                "latency": {
                    "count": 500,
                    "mean": p99 / 2,
                    "percentiles": {"50": p99 / 3, "90": p99 / 2, "99": p99, "99.9": p99 * 2},
                    "percentile_ci": {"99": [p99 * 0.95, p99 * 1.1]},
                    "percentile_ci_level": 0.95,
                    "percentile_ci_unavailable": {"99.9": "fewer than 3688 samples"},
                },
                "cdf": [[p99 / 3, 50.0], [p99, 99.0]],
            }
        ],
        "load": {"achieved_per_s": tput, "generator_busy_share": {"max": 0.5}},
        "server_resources": {"process": {"cpu_pct_mean": cpu, "rss_bytes_max": 2**22, "threads_max": 1}},
        "echo_point": {
            "model": model,
            "connections": c,
            "mode": mode,
            "rate_per_s": 0 if mode == CLOSED else tput,
            "server_cpu": 1,
            "client_cpu": 0,
            "load_threads": 1,
            "load_cpus": [0],
            "load_pacing": "busy-poll",
        },
    }


def _section(tmp_path, docs: list[EngineDocument]):
    now = datetime(2026, 1, 1)
    with Store(tmp_path / "t.duckdb") as store:
        store.save_run(RunRecord("r", now, now, "quick", ["echo"], {}, "t", docs))
        return STUDY.section(store, "r")


def test_section_from_stored_documents_has_every_block_of_a_quick_run(tmp_path):
    docs = []
    for c in R.QUICK_CONNECTIONS:
        for model, tput, cpu in (("poll", 100_000, 99.0), ("epoll", 120_000, 95.0), ("io-uring", 140_000, 60.0)):
            docs.append(
                EngineDocument("echo", A.LOAD, _load_doc(model, c, CLOSED, tput, 2e5, cpu), f"closed/{model}/{c}")
            )
            docs.append(
                EngineDocument("echo", A.LOAD, _load_doc(model, c, RATE, 25_000, 1e5, 30.0), f"rate/{model}/{c}")
            )
    sec = _section(tmp_path, docs)
    assert sec.id == "echo" and sec.title == STUDY.title
    assert [b.title for b in sec.blocks] == [
        "Closed-loop throughput vs connections",
        "Closed-loop latency vs connections (mean, p90, p99, p99.9), log y",
        "Closed-loop latency vs connections (mean, p90, p99, p99.9), linear y",
        "Server CPU and memory vs connections (closed loop)",
        "Latency distribution at a common fixed rate (from the intended send time)",
        "Every sweep point",
        "In-run ratios: each model ÷ poll, io-uring ÷ epoll (closed loop)",
        "Recommendation per connection range (derived from this run)",
        "The thesis's recommendation vs here",
    ]
    tables = [b for b in sec.blocks if isinstance(b, Table)]
    assert tables
    points, ratios, rec = tables[0], tables[1], tables[2]
    assert len(points.rows) == len(docs)
    # p99 with its interval, p99.9 without one (too few samples), as the documents say.
    p99_col, p999_col = points.columns.index("p99"), points.columns.index("p99.9")
    assert all(row[p99_col].endswith("[190–220 µs]") for row in points.rows if row[2] == "closed")
    # (fewer than 10 samples beyond p99.9 in these documents: called unavailable, never an interval)
    assert all(row[p999_col].endswith(("[—]", "[unavailable (n beyond < 10)]")) for row in points.rows)
    assert [(r[0], r[1]) for r in ratios.rows] == [
        (str(c), m) for c in (8, 100, 1000) for m in ("poll", "epoll", "io-uring")
    ]
    assert [r[1] for r in rec.rows[:2]] == ["io-uring", "io-uring"] and rec.rows[2][2:] == [""] * 4 + ["poll"]
    # The reference row carries analysis's verdict.
    reading = A.read(docs)
    assert reading.thesis is not None
    assert [c.verdict for c in sec.references] == [r.verdict for r in reading.thesis.ranges]


def test_a_run_without_points_says_so(tmp_path):
    sec = _section(tmp_path, [EngineDocument("echo", A.BASELINE, {"measurements": []}, "baseline")])
    assert sec.blocks == [] and sec.notes == ["no echo measurements were stored for this run"]


# ---- golden tests of the wording (from synthetic analysis values) ----------------------------------------------


def test_golden_ratio_caption_target_and_cpu_sentences():
    closed = [
        echo_point(
            "poll", 100, 100_000, 200_000, cpu_sys_pct=94.0, cpu_user_pct=5.0, intervals=_p99(200e3, 190e3, 215e3)
        ),
        echo_point(
            "io-uring", 100, 131_800, 150_000, cpu_sys_pct=98.0, cpu_user_pct=1.0, intervals=_p99(150e3, 140e3, 160e3)
        ),
    ]
    reading = A.ratios(closed, {100: 0.33}, 247.5)
    assert reading is not None
    caption = S.ratio_table(reading).caption
    assert (
        "poll ran twice at each count, before and after the other models; its closed-loop throughput moved "
        "by 33 % at 100: a ratio closer to 1 than that is within this run's noise. "
        "Target best ÷ poll ≥ 1.3× with p99 no higher: 100 connections: io-uring 1.318× of poll, p99 no higher "
        "(95 % intervals apart) — met on this run's figures, but within its noise (poll's repeat moved 33 %); "
        "1000 connections: unavailable (no poll point at 1000). "
        "By server CPU per echo: 100 connections: io-uring 7.51 µs per echo vs poll's 9.9 µs = 1.32× the echoes "
        "per core-second (at least 1.3×) (system time of the server's CPU: poll 95 %, io-uring 99 %); an empty "
        "system call costs 248 ns here (baseline p50): poll's two per echo are 5 % of its CPU per echo and its "
        "user time 5 %; without both it would carry 1.11× its echoes per core-second; "
        "1000 connections: unavailable (no server CPU for poll or any model at 1000)."
    ) in caption, caption


def _p99(estimate: float, lo: float, hi: float) -> dict[str, QuantileInterval]:
    return {"99": QuantileInterval(0.99, 100_000, estimate, lo, hi)}


def test_golden_target_undecided_at_this_length():
    closed = [
        echo_point("poll", 100, 100_000, 200_000, intervals=_p99(200e3, 190e3, 215e3)),
        echo_point("io-uring", 100, 140_000, 195_000, intervals=_p99(195e3, 185e3, 205e3)),
    ]
    reading = A.ratios(closed)
    assert reading is not None
    assert (
        "100 connections: io-uring 1.400× of poll, p99 no higher by the estimates, but the 95 % intervals overlap: "
        "a run 16.0× as long (1\u2009600\u2009000 samples, ~16 s) would decide it — undecided at this length"
    ) in S.ratio_table(reading).caption


def test_golden_self_check_note():
    flagged = echo_point(
        "poll-pool", 1000, 14_000, 6_890_000, mode=RATE, generator_bottleneck=True, send_lag_p99_ns=2_700_000.0
    )
    clean = echo_point("epoll", 1000, 14_000, 2_000_000, mode=RATE)
    check = A.self_check([flagged, clean])
    assert check is not None
    assert S.self_check_note(check) == (
        "Generator self-check flagged 1 of 2 fixed-rate points (achieved rate below 99 % of requested, or the "
        "generator's own send lag p99 above 10 % of the measured p99). Worst: poll-pool at 1000 connections, "
        "send-lag p99 2.7 ms = 39 % of its latency p99 6.89 ms: the flagged points' tails include the "
        "generator's own lateness, not only the server's."
    )
    unmeasured = A.self_check([replace(flagged, send_lag_p99_ns=None)])
    assert unmeasured is not None
    assert S.self_check_note(unmeasured).endswith(
        " Send lag: unavailable: no flagged point's document carries a self-check lag."
    )


def test_golden_generator_notes():
    points = [
        echo_point("poll", 8, 1, 1, generator_io="epoll", generator_syscalls_per_request=2.0),
        echo_point("poll", 100, 1, 1, cpu=60.0, generator_io="uring", generator_syscalls_per_request=0.5),
    ]
    assert S.generator_notes(A.generator_reading(points)) == [
        "Load threads per connection count — 8: 1; 100: 1 (at most one per client CPU; client CPUs 0; one thread "
        "per 250 connections).",
        "tailscope-load moved bytes with epoll at 8; uring at 100; its system calls per completed request ranged "
        "0.50–2.00.",
        "1 closed-loop point(s) at 100+ connections left the server below 90 % of its core, so the generator or "
        "the round trip set their throughput, not the server: poll@100 — round trip (server CPU 60 %, generator "
        "busy 50 %).",
    ]
