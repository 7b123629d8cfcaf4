"""The echo study's analysis as values (no engines, no sentences): each verdict on both sides of
its threshold, the ratios, the flags, and what is unavailable with its reason — built from small
synthetic points and documents."""

from __future__ import annotations

import pytest

from conftest import echo_point
from tailscope.measure.intervals import NO_INTERVALS_IN_DOCUMENT, QuantileInterval
from tailscope.measure.verdict import MET as INTERVAL_MET
from tailscope.measure.verdict import NOT_MET as INTERVAL_NOT_MET
from tailscope.measure.verdict import UNDECIDED
from tailscope.report.blocks import DOES_NOT_HOLD, HOLDS, NOT_COMPARABLE, PARTLY, UNAVAILABLE
from tailscope.store import EngineDocument
from tailscope.studies.echo import analysis as A
from tailscope.studies.echo.analysis import CLOSED, RATE, EchoPoint
from tailscope.studies.echo.section import repeat_p99_finding


def _load_doc(model: str, c: int, mode: str, tput: float, p99: float, **extra) -> dict:
    return {
        "measurements": [
            {
                "name": "latency_intended",
                "latency": {
                    "count": 500,
                    "mean": p99 / 2,
                    "percentiles": {"50": p99 / 3, "90": p99 / 2, "99": p99, "99.9": p99 * 2},
                    "low_confidence": ["99.9"],
                },
                "cdf": [[p99 / 3, 50.0], [p99, 99.0]],
            },
            {"name": "latency_actual", "latency": {"count": 500, "percentiles": {"50": p99 / 4, "99": p99 / 2}}},
        ],
        "load": {"achieved_per_s": tput, "errors_total": 0, "errors": {"timeout": 0}},
        "config": {"busy_poll": True},
        "echo_point": {
            "model": model,
            "connections": c,
            "mode": mode,
            "rate_per_s": 0 if mode == CLOSED else tput,
            "server_cpu": 1,
            "client_cpu": 0,
            "load_threads": 1,
            "load_cpus": [0],
        },
    } | extra


def _baseline(pingpong_p50: float | None = 20_000.0, syscall_p50: float | None = 250.0) -> EngineDocument:
    meas = []
    if pingpong_p50 is not None:
        meas.append({"name": "tcp_pingpong", "latency": {"count": 100, "percentiles": {"50": pingpong_p50, "99": 3e4}}})
    if syscall_p50 is not None:
        meas.append({"name": "empty_syscall", "latency": {"count": 100, "percentiles": {"50": syscall_p50}}})
    return EngineDocument("echo", A.BASELINE, {"measurements": meas}, "baseline")


# ---- one point: read from its document, and who limited it ------------------------------------------------


def test_a_point_is_read_from_its_document_and_an_unmeasured_lag_stays_none():
    doc = _load_doc("poll", 100, CLOSED, 50_000, 400_000)
    doc["load"] |= {"generator_busy_share": {"max": 0.4}, "io": {"used": "uring"}, "errors_total": 2}
    doc["load"]["errors"] = {"timeout": 2, "reset": 0}
    doc["server_resources"] = {"process": {"cpu_pct_mean": 95.0, "cpu_user_pct_mean": 5.0, "rss_bytes_max": 2**21}}
    docs = [
        EngineDocument("echo", A.LOAD, doc, "closed/poll/100"),
        EngineDocument("echo", A.LOAD, _load_doc("poll", 100, CLOSED, 1, 1), "repeat/poll/100"),  # not a sweep point
        EngineDocument("echo", A.LOAD, {"echo_point": {"model": "poll"}}, "closed/poll/8"),  # no latency: no point
    ]
    points = A.read_points(docs)
    assert len(points) == 1
    p = points[0]
    assert (p.model, p.connections, p.mode, p.throughput_per_s, p.p99_ns) == ("poll", 100, CLOSED, 50_000, 400_000)
    assert p.low_confidence == {"99.9"} and p.cdf == ((400_000 / 3, 50.0), (400_000, 99.0))
    assert (p.cpu_pct, p.cpu_user_pct, p.cpu_sys_pct, p.rss_bytes) == (95.0, 5.0, None, 2**21)
    assert p.errors == 2 and p.error_kinds == {"timeout": 2}  # kinds that did not occur are left out
    assert p.generator_busy_share == 0.4 and p.generator_io == "uring" and p.load_pacing == "busy-poll"
    assert p.send_lag_p99_ns is None  # no self-check in the document: not measured, never 0
    # A document from before the engines wrote intervals: the reading says so, it invents none.
    assert p.intervals["99"].unavailable == NO_INTERVALS_IN_DOCUMENT and p.intervals["99"].lo_ns is None


def test_a_points_percentile_intervals_are_read_from_its_document():
    doc = _load_doc("poll", 100, CLOSED, 50_000, 400_000)
    doc["measurements"][0]["latency"] |= {
        "percentile_ci": {"50": [130_000, 136_000], "99": [390_000, 415_000]},
        "percentile_ci_level": 0.95,
        "percentile_ci_unavailable": {"99.9": "fewer than 3688 samples"},
    }
    (p,) = A.read_points([EngineDocument("echo", A.LOAD, doc, "closed/poll/100")])
    assert (p.intervals["99"].lo_ns, p.intervals["99"].estimate_ns, p.intervals["99"].hi_ns) == (
        390_000,
        400_000,
        415_000,
    )
    assert p.intervals["99.9"].unavailable == "fewer than 3688 samples" and p.intervals["99.9"].estimate_ns == 800_000


def test_the_server_is_the_limit_from_90_percent_of_its_core():
    assert echo_point("poll", 100, 1, 1, cpu=90.0).server_limited
    assert not echo_point("poll", 100, 1, 1, cpu=89.9).server_limited
    assert not echo_point("poll", 100, 1, 1, cpu=None).server_limited


def test_each_point_says_whether_the_server_or_the_generator_was_the_limit():
    assert echo_point("epoll", 100, 1, 1, cpu=97.0, gen_busy=0.4).limit == A.LIMIT_SERVER
    assert echo_point("epoll", 100, 1, 1, cpu=70.0, gen_busy=0.9).limit == A.LIMIT_GENERATOR
    assert echo_point("epoll", 100, 1, 1, cpu=70.0, gen_busy=0.89).limit == A.LIMIT_ROUND_TRIP
    assert echo_point("epoll", 100, 1, 1, cpu=95.0, gen_busy=0.95).limit == A.LIMIT_BOTH
    assert echo_point("epoll", 8, 1, 1, cpu=40.0, gen_busy=0.3).limit == A.LIMIT_ROUND_TRIP
    assert echo_point("epoll", 8, 1, 1, cpu=95.0, gen_busy=None).limit == A.LIMIT_SERVER
    # A document without the generator's busy share: said, not guessed.
    unknown = echo_point("epoll", 8, 1, 1, cpu=40.0, gen_busy=None)
    assert (
        unknown.limit == A.LIMIT_UNAVAILABLE and unknown.limit_unavailable == "no generator busy share in the document"
    )
    assert echo_point("epoll", 8, 1, 1).limit_unavailable == ""


def test_server_cpu_per_echo_or_none_when_not_measured():
    assert echo_point("poll", 100, 200_000, 1, cpu=90.0).cpu_per_echo_ns == pytest.approx(4500.0)
    assert echo_point("poll", 100, 200_000, 1, cpu=None).cpu_per_echo_ns is None
    assert echo_point("poll", 100, 0, 1, cpu=90.0).cpu_per_echo_ns is None


# ---- what the run adapts to -------------------------------------------------------------------------------


def test_common_rate_is_a_quarter_of_the_slowest_rounded_down_and_zero_without_points():
    assert A.common_rate_per_s({"poll": 100_000.0, "epoll": 41_234.0}) == 10_000
    assert A.common_rate_per_s({}) == 0
    assert A.fastest_model({"poll": 1.0, "epoll": 3.0, "asio": 2.0}) == "epoll"
    assert A.fastest_model({}) is None


# ---- in-run ratios and the target ----------------------------------------------------------------


def test_no_ratios_without_a_poll_point():
    assert A.ratios([echo_point("epoll", 100, 1, 1)]) is None


def test_ratio_rows_each_model_to_poll_and_io_uring_to_epoll():
    closed = [
        echo_point("poll", 100, 100_000, 200_000),
        echo_point("io-uring", 100, 140_000, 150_000),
        echo_point("epoll", 100, 110_000, 180_000),
        echo_point("epoll", 1000, 100_000, 1_900_000),  # no poll at 1000
        echo_point("poll", 8, 10_000, 10_000),
    ]
    r = A.ratios(closed)
    assert r is not None
    assert [(row.point.connections, row.point.model) for row in r.rows] == [
        (8, "poll"),
        (100, "poll"),
        (100, "epoll"),
        (100, "io-uring"),
        (1000, "epoll"),
    ]
    uring = r.rows[3]
    assert uring.throughput_vs_poll == pytest.approx(1.4) and uring.p99_vs_poll == pytest.approx(0.75)
    assert uring.io_uring_vs_epoll == pytest.approx((140_000 / 110_000, 150_000 / 180_000))
    assert r.rows[2].io_uring_vs_epoll is None  # only io-uring's row compares to epoll
    alone = r.rows[4]
    assert alone.throughput_vs_poll is None and alone.p99_vs_poll is None and alone.per_core_vs_poll is None
    assert r.spread == ()


def test_target_met_and_not_met_on_each_side_of_the_ratio_and_the_p99():
    closed = [
        echo_point("poll", 100, 100_000, 200_000),
        echo_point("io-uring", 100, 130_000, 150_000),  # exactly 1.3 with a lower p99: met
        echo_point("poll", 1000, 90_000, 2_000_000),
        echo_point("io-uring", 1000, 120_000, 2_500_000),  # 1.33 but p99 higher: not met
    ]
    r = A.ratios(closed)
    assert r is not None
    at_100, at_1000 = r.targets
    assert (at_100.connections, at_100.best, at_100.met, at_100.p99_no_higher) == (100, "io-uring", True, True)
    assert at_100.ratio == pytest.approx(1.3) and at_100.verdict == A.MET and at_100.server_limited
    assert (at_1000.best, at_1000.met, at_1000.p99_no_higher, at_1000.verdict) == ("io-uring", False, False, A.NOT_MET)
    below = A.ratios([echo_point("poll", 100, 100_000, 200_000), echo_point("io-uring", 100, 129_900, 150_000)])
    assert below is not None and below.targets[0].ratio == pytest.approx(1.299) and not below.targets[0].met


def test_a_target_within_polls_own_run_to_run_movement_is_noise_on_either_side():
    closed = [echo_point("poll", 100, 100_000, 200_000), echo_point("io-uring", 100, 131_800, 150_000)]
    noisy = A.ratios(closed, {100: 0.33})
    assert noisy is not None
    t = noisy.targets[0]
    assert t.met and t.within_noise and t.spread == 0.33 and t.verdict == A.MET_WITHIN_NOISE
    assert noisy.spread == ((100, 0.33),)
    # 1.318 ÷ 1.05 = 1.255: a lead over poll the 5 % movement does not hide, but not over the target.
    near = A.ratios(closed, {100: 0.05})
    assert near is not None and near.targets[0].verdict == A.MET_WITHIN_NOISE
    # 1.318 ÷ 1.01 = 1.305 ≥ 1.3: the target is met beyond the run's movement.
    clear = A.ratios(closed, {100: 0.01})
    assert clear is not None
    assert clear.targets[0].met and not clear.targets[0].within_noise and clear.targets[0].verdict == A.MET
    # Below the target by less than the movement: not shown missed either.
    below = [closed[0], echo_point("io-uring", 100, 125_000, 150_000)]
    short = A.ratios(below, {100: 0.05})  # 1.25 × 1.05 = 1.3125 ≥ 1.3
    assert short is not None and short.targets[0].verdict == A.NOT_MET_WITHIN_NOISE and not short.targets[0].met
    far = A.ratios(below, {100: 0.03})  # 1.25 × 1.03 = 1.2875 < 1.3
    assert far is not None and far.targets[0].verdict == A.NOT_MET
    # A p99 shown higher is a miss whatever the throughput's noise.
    worse = A.ratios([closed[0], echo_point("io-uring", 100, 125_000, 250_000)], {100: 0.5})
    assert worse is not None and worse.targets[0].verdict == A.NOT_MET
    # A point that was not server-limited is flagged beside the verdict.
    flagged = A.ratios([closed[0], echo_point("io-uring", 100, 131_800, 150_000, cpu=50.0)])
    assert flagged is not None and not flagged.targets[0].server_limited


def _p99(estimate: float, lo: float, hi: float, count: int = 100_000) -> dict[str, QuantileInterval]:
    return {"99": QuantileInterval(0.99, count, estimate, lo, hi)}


def test_target_p99_is_judged_by_the_intervals_met_not_met_or_undecided():
    poll = echo_point("poll", 100, 100_000, 200_000, intervals=_p99(200_000, 190_000, 215_000))

    def target(best: EchoPoint) -> A.TargetReading:
        r = A.ratios([poll, best])
        assert r is not None
        return r.targets[0]

    apart_below = target(echo_point("io-uring", 100, 140_000, 150_000, intervals=_p99(150_000, 140_000, 160_000)))
    assert apart_below.p99_verdict.verdict == INTERVAL_MET and apart_below.met and apart_below.verdict == A.MET
    # Lower by the estimates, but the intervals overlap: undecided at this length, and how long would decide it.
    overlap = target(echo_point("io-uring", 100, 140_000, 195_000, intervals=_p99(195_000, 185_000, 205_000)))
    assert overlap.p99_no_higher and not overlap.met and overlap.p99_undecided
    assert overlap.verdict == A.TARGET_UNDECIDED == UNDECIDED
    v = overlap.p99_verdict
    # Half-widths facing each other: (205 − 195) + (200 − 190) = 20 over a gap of 5: (20 / 5)² = 16× the run.
    assert v.length_factor == pytest.approx(16.0) and v.samples_to_decide == 1_600_000
    assert v.seconds_to_decide == pytest.approx(16.0)  # poll's run, 100 000 samples at 100 000/s, is the longer
    apart_above = target(echo_point("io-uring", 100, 140_000, 300_000, intervals=_p99(300_000, 280_000, 320_000)))
    assert apart_above.p99_verdict.verdict == INTERVAL_NOT_MET and apart_above.verdict == A.NOT_MET
    # A ratio below the target is not met whatever the p99 intervals say.
    slow = target(echo_point("io-uring", 100, 120_000, 195_000, intervals=_p99(195_000, 185_000, 205_000)))
    assert slow.p99_verdict.verdict == UNDECIDED and not slow.p99_undecided and slow.verdict == A.NOT_MET
    # The same short ratio within poll's repeat band (1.2 × 1.1 ≥ 1.3) with the p99 undecided: not decided.
    slow_noisy = A.ratios(
        [poll, echo_point("io-uring", 100, 120_000, 195_000, intervals=_p99(195_000, 185_000, 205_000))], {100: 0.1}
    )
    assert slow_noisy is not None and slow_noisy.targets[0].verdict == A.NOT_MET_WITHIN_NOISE
    # ... and with the p99 shown higher by the intervals: a miss, noise or not.
    slow_worse = A.ratios(
        [poll, echo_point("io-uring", 100, 120_000, 300_000, intervals=_p99(300_000, 280_000, 320_000))], {100: 0.1}
    )
    assert slow_worse is not None and slow_worse.targets[0].verdict == A.NOT_MET
    # A higher estimate inside poll's interval is undecided too, never "not met".
    higher = target(echo_point("io-uring", 100, 140_000, 205_000, intervals=_p99(205_000, 195_000, 220_000)))
    assert not higher.p99_no_higher and higher.verdict == A.TARGET_UNDECIDED
    # Without intervals (older documents) the estimates decide, and the reason is kept beside them.
    plain = target(echo_point("io-uring", 100, 140_000, 195_000))
    assert plain.p99_verdict.unavailable == "no p99 interval in the documents" and plain.verdict == A.MET
    too_few = target(
        echo_point(
            "io-uring",
            100,
            140_000,
            195_000,
            intervals={"99": QuantileInterval(0.99, 300, 195_000.0, unavailable="fewer than 368 samples")},
        )
    )
    assert too_few.p99_verdict.unavailable == "fewer than 368 samples" and too_few.met


def test_target_without_a_poll_point_is_unavailable_with_the_reason():
    r = A.ratios([echo_point("poll", 8, 1000, 10), echo_point("epoll", 100, 2000, 10)])
    assert r is not None
    assert [(t.connections, t.unavailable) for t in r.targets] == [
        (100, "no poll point at 100"),
        (1000, "no poll point at 1000"),
    ]


def test_poll_repeat_spread_from_the_repeat_documents():
    closed = [echo_point("poll", 100, 200_000, 200_000)]
    again = {"echo_point": {"connections": 100, "model": "poll"}, "load": {"achieved_per_s": 150_000}}
    docs = [EngineDocument("echo", A.LOAD, again, "repeat/poll/100"), EngineDocument("echo", A.LOAD, {}, "closed/x/8")]
    assert A.repeat_spread(docs, closed) == {100: pytest.approx(0.25)}


def test_cpu_per_echo_at_the_target_counts_on_each_side_of_the_target_ratio():
    closed = [
        echo_point("poll", 100, 200_000, 200_000, cpu=90.0),  # 4.5 us of server CPU per echo
        echo_point("io-uring", 100, 180_000, 150_000, cpu=54.0, gen_busy=0.99),  # 3 us: generator-limited
        echo_point("poll", 1000, 100_000, 2_000_000, cpu=50.0),
        echo_point("epoll", 1000, 100_000, 2_000_000, cpu=48.0),
    ]
    r = A.ratios(closed)
    assert r is not None
    at_100, at_1000 = r.cpu
    assert (at_100.best, at_100.at_least_target) == ("io-uring", True)
    assert at_100.best_cpu_per_echo_ns == pytest.approx(3000.0) and at_100.ratio == pytest.approx(1.5)
    assert (at_1000.best, at_1000.at_least_target) == ("epoll", False)
    assert at_1000.ratio == pytest.approx(50 / 48)
    row = next(row for row in r.rows if row.point.connections == 100 and row.point.model == "io-uring")
    assert row.per_core_vs_poll == pytest.approx(1.5)


def test_cpu_per_echo_without_the_servers_cpu_is_unavailable_with_the_reason():
    r = A.ratios([echo_point("poll", 100, 1000, 10, cpu=None), echo_point("epoll", 100, 1000, 10, cpu=None)])
    assert r is not None
    assert r.cpu[0].unavailable == "no server CPU for poll or any model at 100"
    assert r.rows[0].point.cpu_per_echo_ns is None and r.rows[0].per_core_vs_poll is None


def test_kernel_share_and_the_system_call_share_of_polls_cpu_per_echo():
    closed = [
        echo_point("poll", 100, 100_000, 200_000, cpu_sys_pct=94.0, cpu_user_pct=5.0),
        echo_point("io-uring", 100, 105_000, 150_000, cpu_sys_pct=98.0, cpu_user_pct=1.0),
    ]
    without = A.ratios(closed)
    assert without is not None
    cpu = without.cpu[0]
    assert [m for m, _ in cpu.kernel_shares] == ["poll", "io-uring"]
    assert [s for _, s in cpu.kernel_shares] == pytest.approx([94 / 99, 98 / 99])
    assert cpu.syscall is None and cpu.syscall_unavailable == "the baseline has no empty_syscall measurement"
    # poll: 99 % of a core ÷ 100 000 echoes/s = 9.9 µs per echo; two 247.5 ns entries = 5 %, user 5 %.
    with_syscall = A.ratios(closed, None, 247.5)
    assert with_syscall is not None
    s = with_syscall.cpu[0].syscall
    assert s is not None and with_syscall.cpu[0].syscall_unavailable == ""
    assert (s.entries_share, s.user_share) == (pytest.approx(0.05), pytest.approx(5 / 99))
    assert s.carry_factor == pytest.approx(1 / (1 - 0.05 - 5 / 99))
    # Entries and user time that add up to all of poll's CPU per echo: no bound to state.
    greedy = A.ratios([echo_point("poll", 100, 100_000, 1, cpu_user_pct=99.0)], None, 247.5)
    assert greedy is not None and greedy.cpu[0].syscall is not None and greedy.cpu[0].syscall.carry_factor is None
    no_user = A.ratios([echo_point("poll", 100, 100_000, 1)], None, 247.5)
    assert no_user is not None and no_user.cpu[0].syscall_unavailable == "no user CPU for poll's server"


def test_the_empty_system_call_comes_from_the_baseline():
    assert A.empty_syscall_ns([_baseline()]) == 250.0
    assert A.empty_syscall_ns([_baseline(syscall_p50=None)]) is None
    assert A.empty_syscall_ns([]) is None


# ---- the generator --------------------------------------------------------------------------------------


def test_self_check_names_the_worst_lag_share_or_why_it_cannot():
    flagged = echo_point(
        "poll-pool", 1000, 14_000, 6_890_000, mode=RATE, generator_bottleneck=True, send_lag_p99_ns=2.7e6
    )
    clean = echo_point("epoll", 1000, 14_000, 2_000_000, mode=RATE, send_lag_p99_ns=1_000.0)
    s = A.self_check([flagged, clean])
    assert s is not None and (s.flagged, s.rate_points) == (1, 2)
    assert s.worst is flagged and s.lag_share == pytest.approx(2.7 / 6.89)
    unmeasured = A.self_check([echo_point("poll", 1000, 1, 1, mode=RATE, generator_bottleneck=True)])
    assert unmeasured is not None and unmeasured.worst is None and unmeasured.lag_share is None
    assert unmeasured.lag_unavailable == "no flagged point's document carries a self-check lag"
    assert A.self_check([clean]) is None


def test_generator_reading_threads_io_path_self_check_and_unsaturated_points():
    points = [
        echo_point("poll", 8, 1, 1, cpu=30.0, generator_io="epoll", generator_syscalls_per_request=2.5),
        echo_point(
            "poll", 100, 1, 1, cpu=60.0, generator_io="uring", generator_syscalls_per_request=0.5, load_threads=2
        ),
        echo_point("epoll", 100, 1, 1, cpu=99.0, generator_io="uring"),
        echo_point("poll", 100, 1, 1, mode=RATE, generator_bottleneck=True),
        echo_point("epoll", 100, 1, 1, mode=RATE, load_pacing="sleep"),
    ]
    g = A.generator_reading(points)
    assert g.threads_by_connections == ((8, (1,)), (100, (1, 2)))
    assert g.io_by_connections == ((8, ("epoll",)), (100, ("uring",)))
    assert g.syscalls_per_request == (0.5, 2.5)
    assert (g.rate_points, g.rate_points_passed, g.rate_pacings) == (2, 1, ("busy-poll", "sleep"))
    # poll at 8 left the server idle too, but below 100 connections the round trip is expected to.
    assert g.not_server_limited == (points[1],)
    bare = A.generator_reading([echo_point("poll", 8, 1, 1)])
    assert bare.io_by_connections == () and bare.syscalls_per_request is None and bare.rate_points == 0


def test_io_uring_features_used_and_not_used_with_the_reason():
    feats = {
        "ring_setup": "single-issuer",
        "multishot_accept": {"used": True},
        "multishot_recv": {"used": False, "reason": "kernel 5.15"},
        "sqpoll": {"used": False},
    }
    f = A.io_uring_features([echo_point("epoll", 8, 1, 1), echo_point("io-uring", 8, 1, 1, server_features=feats)])
    assert f is not None and f.ring_setup == "single-issuer" and f.used == ("multishot_accept",)
    assert f.not_used == (("multishot_recv", "kernel 5.15"), ("sqpoll", "no reason given"))
    assert A.io_uring_features([echo_point("io-uring", 8, 1, 1)]) is None


# ---- figures' findings --------------------------------------------------------------------------------------


def test_the_figures_readings_at_each_count_and_at_the_top_count():
    closed = [
        echo_point("poll", 100, 100_000, 200_000, rss_bytes=4 * 2**20, cpu=50.0),
        echo_point("epoll", 100, 90_000, 100_000, rss_bytes=2 * 2**20, cpu=40.0),
        echo_point("poll", 8, 20_000, 50_000),
    ]
    assert [(t.connections, t.fastest.model, t.slowest.model) for t in A.throughput_leaders(closed)] == [
        (8, "poll", "poll"),
        (100, "poll", "epoll"),
    ]
    lat = A.latency_spread(closed)
    assert (lat.connections, lat.lowest_p99.model, lat.highest_p99.model, lat.p99_ratio) == (100, "epoll", "poll", 2.0)
    assert not lat.p999_low_confidence
    assert A.latency_spread([echo_point("poll", 8, 1, 1, low_confidence=frozenset({"99.9"}))]).p999_low_confidence
    res = A.resource_reading(closed)
    assert res is not None and (res.largest_rss.model, res.smallest_rss.model, res.rss_ratio) == ("poll", "epoll", 2.0)
    assert res.most_efficient is not None and res.most_efficient.model == "epoll"
    assert res.requests_per_cpu_pct == 2250.0
    assert A.resource_reading([echo_point("poll", 8, 1, 1)]) is None  # no RSS sample
    rate = [echo_point("poll", 100, 1, 300, mode=RATE, rate_per_s=5000.0), echo_point("epoll", 100, 1, 200, mode=RATE)]
    (at_100,) = A.common_rate_readings(rate)
    assert (at_100.connections, at_100.rate_per_s, at_100.lowest_p99.model) == (100, 5000.0, "epoll")


# ---- recommendation per range and the thesis ------------------------------------------------------------


def test_recommendation_uses_the_thesis_ranges():
    closed = [echo_point("poll", c, 1000 * c, 100) for c in (8, 100, 5000)]
    closed += [echo_point("epoll", c, 900 * c, 90, cpu=40) for c in (8, 100, 5000)]
    ranges = A.range_readings(closed, [])
    assert [(r.name, r.connections) for r in ranges] == [("< 100", (8,)), ("100–2000", (100,)), ("> 2000", (5000,))]
    assert all(r.pick == "poll" and not r.server_limited for r in ranges)
    assert ranges[0].thesis_best == "poll" and ranges[0].thesis_best_ratio == 1.0


def test_the_pick_is_the_lowest_tail_among_models_within_5_percent_of_the_best():
    closed = [
        echo_point("poll", 100, 100_000, 1),
        echo_point("epoll", 100, 95_000, 1),
        echo_point("asio", 100, 94_000, 1),
    ]
    rate = [
        echo_point("poll", 100, 1, 300, mode=RATE),
        echo_point("epoll", 100, 1, 200, mode=RATE),
        echo_point("asio", 100, 1, 100, mode=RATE),
    ]
    (r,) = [r for r in A.range_readings(closed, rate) if r.connections]
    assert r.pick == "epoll"  # 95 % of poll's throughput, a lower tail; asio (94 %) is out
    assert r.lowest_tail == "asio" and r.thesis_best == "poll"
    assert r.thesis_best_ratio == pytest.approx(100_000 / 95_000)
    assert r.server_limited
    # No common-rate point: the tail is unknown (inf), never 0.
    (bare,) = [r for r in A.range_readings(closed, []) if r.connections]
    assert bare.p99_at_rate == {"poll": float("inf"), "epoll": float("inf"), "asio": float("inf")}


def test_a_range_without_points_has_no_pick():
    ranges = A.range_readings([echo_point("poll", 8, 1, 1)], [])
    assert ranges
    empty = [r for r in ranges if not r.connections]
    assert [r.name for r in empty] == ["100–2000", "> 2000"]
    assert all(r.pick is None and r.lowest_tail is None and r.thesis_best is None for r in empty)


def test_thesis_reading_judges_each_range_by_its_own_pick():
    five = ("thread-per-connection", "poll", "poll-pool", "asio", "asio-mt")
    # Unpinned server (server_cpu None): every range can be judged; the picks win where they should.
    tput = {"thread-per-connection": 90_000, "poll": 80_000, "poll-pool": 60_000, "asio": 50_000, "asio-mt": 70_000}
    closed = [echo_point(m, 8, tput[m], 1) for m in five]
    closed += [echo_point(m, 1000, 100_000 if m == "asio-mt" else 90_000, 1) for m in five]
    closed += [echo_point(m, 5000, 100_000 if m == "poll" else 60_000, 1) for m in five]
    t = A.thesis_reading(closed, [])
    assert t.server_cpus is None
    assert [(r.name, r.thesis_pick, r.verdict, r.thesis_best) for r in t.ranges] == [
        ("< 100", "thread-per-connection", HOLDS, "thread-per-connection"),
        ("100–2000", "asio-mt", HOLDS, "asio-mt"),
        ("> 2000", "poll", HOLDS, "poll"),
    ]

    # poll beaten at 5000 by 5 % or less: a tie (partly); by more: does not hold.
    def asio_at_5000(tput: float) -> list:
        return [p for p in closed if (p.model, p.connections) != ("asio", 5000)] + [echo_point("asio", 5000, tput, 1)]

    tie = A.thesis_reading(asio_at_5000(104_000), []).range("> 2000")
    assert tie.verdict == PARTLY and tie.thesis_best == "asio" and tie.pick_share == pytest.approx(100 / 104)
    assert A.thesis_reading(asio_at_5000(120_000), []).range("> 2000").verdict == DOES_NOT_HOLD


def test_thesis_reading_says_not_comparable_where_the_setup_differs():
    five = ("thread-per-connection", "poll", "poll-pool", "asio", "asio-mt")
    pinned = [echo_point(m, c, 100_000, 1, server_cpu=1) for m in five for c in (8, 100, 1000)]
    t = A.thesis_reading(pinned, [])
    assert t.server_cpus == 1
    low, middle, high = t.ranges
    # Multi-threaded picks on a server pinned to one CPU: the thesis's server had 8 logical CPUs.
    assert low.verdict == middle.verdict == NOT_COMPARABLE and "8 logical CPUs" in middle.reason
    # No count above 2000 (the quick form): not comparable, naming the counts measured.
    assert high.verdict == NOT_COMPARABLE and "8, 100, 1000" in high.reason
    # A pick not measured in a range it has counts for: unavailable.
    no_pick = A.thesis_reading([p for p in pinned if p.model != "thread-per-connection"], [])
    assert no_pick.ranges[0].verdict == UNAVAILABLE
    assert A.thesis_reading([], []).ranges[0].verdict == NOT_COMPARABLE


# ---- the floor and the coordinated-omission demo -----------------------------------------------------------


def test_floor_ratios_to_the_ping_pong_or_none_without_it():
    docs = [
        _baseline(pingpong_p50=20_000.0),
        EngineDocument("echo", A.LOAD, _load_doc("epoll", 1, CLOSED, 1, 66_000), "floor/epoll/closed"),
        EngineDocument("echo", A.LOAD, _load_doc("epoll", 1, RATE, 1, 90_000), "floor/epoll/rate"),
    ]
    f = A.floor_reading(docs)
    assert f is not None and (f.pingpong_p50_ns, f.pingpong_p99_ns, f.pingpong_samples) == (20_000.0, 3e4, 100)
    assert [(r.model, r.kind, r.p50_ns) for r in f.rows] == [("epoll", CLOSED, 22_000.0), ("epoll", RATE, 30_000.0)]
    assert (f.closed_ratio, f.rate_ratio) == (pytest.approx(1.1), pytest.approx(1.5))
    assert A.floor_reading(docs[1:]) is None  # no ping-pong
    assert A.floor_reading(docs[:1]) is None  # no floor point
    only_closed = A.floor_reading(docs[:2])
    assert only_closed is not None and only_closed.rate_ratio is None


def test_coordinated_omission_beside_the_analytic_expectation():
    doc = _load_doc("epoll", 8, RATE, 2000, 45_000_000)  # p50 = 15 ms
    doc["measurements"][1]["latency"]["percentiles"]["99"] = 1_000_000.0
    doc["co_demo"] = {"stall_every_ms": 500, "stall_ms": 50, "rate_per_s": 2000, "connections": 8, "wrk_p99_ns": 2e6}
    co = A.coordinated_omission([EngineDocument("echo", A.LOAD, doc, "co/epoll/8")])
    assert co is not None
    # stall − 1 % × period + p50 = 50 ms − 5 ms + 15 ms
    assert co.expected_p99_ns == pytest.approx(60e6)
    assert co.corrected_ratio == pytest.approx(0.75) and co.corrected_off == pytest.approx(0.25)
    assert co.uncorrected_ratio == pytest.approx(1 / 60) and co.under_report == pytest.approx(60.0)
    assert co.wrk_p99_ns == 2e6 and co.wrk_ratio == pytest.approx(2 / 60) and co.wrk_unavailable == ""
    doc["co_demo"] |= {"wrk_p99_ns": None, "wrk_unavailable": "wrk is not installed"}
    no_wrk = A.coordinated_omission([EngineDocument("echo", A.LOAD, doc, "co/epoll/8")])
    assert no_wrk is not None and no_wrk.wrk_p99_ns is None and no_wrk.wrk_ratio is None
    assert no_wrk.wrk_unavailable == "wrk is not installed"
    del doc["co_demo"]
    assert A.coordinated_omission([EngineDocument("echo", A.LOAD, doc, "co/epoll/8")]) is None


# ---- the whole reading -------------------------------------------------------------------------------------


def test_reading_of_a_small_run_and_of_an_empty_one():
    docs = [_baseline()]
    for c in (8, 100):
        for model, tput in (("poll", 100_000), ("io-uring", 140_000)):
            docs.append(EngineDocument("echo", A.LOAD, _load_doc(model, c, CLOSED, tput, 2e5), f"closed/{model}/{c}"))
            docs.append(EngineDocument("echo", A.LOAD, _load_doc(model, c, RATE, 25_000, 1e5), f"rate/{model}/{c}"))
    r = A.read(docs)
    assert (len(r.points), len(r.closed), len(r.rate)) == (8, 4, 4)
    assert r.pinning == A.Pinning(server_cpu=1, load_threads=(1,), load_cpus=(0,), load_pacing="busy-poll")
    assert r.ratios is not None and [t.connections for t in r.ratios.targets] == [100, 1000]
    at_100 = r.ratios.targets[0]
    assert at_100.verdict == A.MET and at_100.p99_no_higher  # 1.4×, an equal p99 is no higher
    assert not at_100.server_limited  # the documents carry no server CPU
    assert r.ratios.targets[1].unavailable == "no poll point at 1000"
    # Neither thesis pick of the measured ranges ran, and no count above 2000: nothing judged.
    assert r.thesis is not None and [t.verdict for t in r.thesis.ranges] == [UNAVAILABLE, UNAVAILABLE, NOT_COMPARABLE]
    assert r.floor is None and r.coordinated_omission is None  # neither was stored
    empty = A.read([])
    assert empty.points == () and empty.pinning is None and empty.generator is None
    assert empty.ratios is None and empty.thesis is None and empty.ranges == ()


def _repeat_doc(p99: float, lo: float, hi: float) -> EngineDocument:
    doc = _load_doc("poll", 100, CLOSED, 150_000, p99)
    lat = doc["measurements"][0]["latency"]
    lat.update(count=20_000, percentile_ci={"99": [lo, hi]})
    return EngineDocument("echo", A.LOAD, doc, "repeat/poll/100")


@pytest.mark.parametrize(
    "again, verdict, apart",
    [
        ((150e3, 140e3, 160e3), "met", True),  # wholly below the first run's [190–215 µs]
        ((260e3, 240e3, 280e3), "not met", True),  # wholly above
        ((205e3, 195e3, 220e3), "undecided at this length", False),  # overlapping: within sampling
    ],
)
def test_polls_repeat_p99_by_the_two_runs_intervals(again, verdict, apart):
    first = echo_point(
        "poll",
        100,
        200_000,
        200e3,
        samples=20_000,
        intervals={"99": QuantileInterval(0.99, 20_000, 200e3, 190e3, 215e3)},
    )
    (r,) = A.repeat_p99([_repeat_doc(*again)], [first])
    assert (r.connections, r.verdict.verdict, r.apart) == (100, verdict, apart)
    reading = A.ratios([first], {100: 0.25}, None, [r])
    assert reading is not None and reading.repeat_p99 == (r,)
    text = repeat_p99_finding(reading.repeat_p99)
    assert text.startswith("Its p99 in the two runs, by their 95 % intervals: at 100 200 µs [190–215 µs] then ")
    assert ("apart: the run moved more than its sampling explains" in text) is apart
    # No interval in the first run (a document from before intervals): no reading.
    assert A.repeat_p99([_repeat_doc(*again)], [echo_point("poll", 100, 200_000, 200e3)]) == []
