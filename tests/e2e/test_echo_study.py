"""The echo study's own logic on synthetic points (no engines): the load plan
(threads per client CPU, pacing flags), the run-time estimate, the in-run
ratio table with its stated target, and the thesis's recommendation ranges."""

from __future__ import annotations

import pytest

from tailscope.lab import load as load_args
from tailscope.studies import echo as E
from tailscope.units import fmt_ns


def _point(
    model: str, c: int, tput: float, p99: float, cpu: float = 99.0, mode: str = "closed", gen_busy: float | None = 0.5
) -> dict:
    p = {
        "model": model,
        "c": c,
        "mode": mode,
        "rate": 0,
        "throughput": tput,
        "lat": {"mean": p99 / 2, "percentiles": {"50": p99 / 3, "90": p99 / 2, "99": p99, "99.9": p99 * 2}},
        "cpu": cpu,
        "server_limited": cpu >= 90,
        "load_threads": 1,
        "load_cpus": [0],
        "load_pacing": "busy-poll",
        "features": {},
        "gen_busy": gen_busy,
    }
    p["limit"] = E._limit_of(p)
    return p


def test_load_threads_one_per_250_connections_at_most_one_per_client_cpu():
    plan = E.LoadPlan(cpus=[0, 1, 2], pacing="busy-poll")
    assert [plan.threads(c) for c in (8, 250, 251, 1000, 10000)] == [1, 1, 2, 3, 3]
    assert E.LoadPlan(cpus=[0], pacing="sleep").threads(10000) == 1


def test_explicit_cpus_pin_the_generator_to_the_client_cpu_only():
    plan = E.load_plan({"cpus": "0,1"}, 0, 1)
    assert plan.cpus == [0] and plan.pacing == "busy-poll"


def test_pacing_flags_and_bad_pacing():
    assert load_args.load_pacing_args(load_args.load_pacing({})) == ["--busy-poll"]
    assert load_args.load_pacing_args(load_args.load_pacing({"load_pacing": "sleep"})) == []
    with pytest.raises(ValueError, match="load_pacing"):
        load_args.load_pacing({"load_pacing": "yolo"})
    args = E._load_args(1, 2, 1000, 0, E.LoadPlan([3, 4], "sleep"), E.Timing(1.0, 0.3))
    assert "--busy-poll" not in args
    assert args[args.index("-t") + 1] == "2" and args[args.index("--cpus") + 1] == "3,4"


def test_a_met_target_within_polls_own_run_to_run_movement_is_said_to_be_noise():
    closed = [_point("poll", 100, 100_000, 200_000), _point("io-uring", 100, 131_800, 150_000)]
    table = E._ratio_table(closed, {100: 0.33})
    assert table is not None
    assert "io-uring 1.318× of poll, p99 no higher — met on this run's figures, but within its noise" in table.caption
    table = E._ratio_table(closed, {100: 0.05})
    assert table is not None
    assert "io-uring 1.318× of poll, p99 no higher — met (poll's repeat moved 5 %)" in table.caption


def test_generator_io_path_by_connection_count_or_forced():
    by_c = E.load_plan({}, 0, 1)
    assert by_c.io == "by-connections"
    assert by_c.io_args(8) == ["--io", "epoll"] and by_c.io_args(E.URING_GENERATOR_FROM) == ["--io", "auto"]
    assert E.load_plan({"load_io": "epoll"}, 0, 1).io_args(1000) == ["--io", "epoll"]
    assert E.load_plan({"load_io": "uring"}, 0, 1).io_args(1) == ["--io", "auto"]
    with pytest.raises(ValueError, match="load_io"):
        E.load_plan({"load_io": "fast"}, 0, 1)
    args = E._load_args(1, 2, 1000, 0, E.LoadPlan([3], "sleep"), E.Timing(1.0, 0.3))
    assert args[args.index("--io") + 1] == "auto"


def test_generator_notes_say_which_io_path_each_connection_count_used():
    points = [dict(_point("poll", 8, 1, 1), gen_io="epoll"), dict(_point("poll", 100, 1, 1), gen_io="uring")]
    assert any("tailscope-load moved bytes with epoll at 8; uring at 100" in n for n in E._generator_notes(points))


def test_cpu_finding_gives_the_kernel_share_of_the_server_cpu():
    closed = [
        dict(_point("poll", 100, 100_000, 200_000, cpu=99.0), cpu_sys=94.0, cpu_user=5.0),
        dict(_point("io-uring", 100, 105_000, 150_000, cpu=99.0), cpu_sys=98.0, cpu_user=1.0),
    ]
    table = E._ratio_table(closed)
    assert table is not None
    assert "(system time of the server's CPU: poll 95 %, io-uring 99 %)" in table.caption, table.caption
    assert "the system-call share is unavailable: the baseline has no empty_syscall" in table.caption
    # poll: 99 % of a core ÷ 100 000 echoes/s = 9.9 µs per echo; two 247.5 ns entries = 5 %, user 5 %.
    table = E._ratio_table(closed, None, 247.5)
    assert table is not None
    assert (
        "poll's two per echo are 5 % of its CPU per echo and its user time 5 %; without both it would carry "
        "1.11× its echoes per core-second" in table.caption
    ), table.caption


def test_estimate_counts_every_point_of_the_sweep():
    t = E.Timing(duration_s=5.0, warmup_s=1.0)
    est = E.estimated_duration_s(E.FULL_CONNECTIONS, E.MODELS, t)
    assert est == pytest.approx(10 * (9 * 2 + 1) * (6.0 + E.POINT_OVERHEAD_S))  # + poll's repeat


def test_ratio_table_states_the_target_from_the_points():
    closed = [
        _point("poll", 100, 100_000, 200_000),
        _point("io-uring", 100, 140_000, 150_000),
        _point("epoll", 100, 110_000, 180_000),
        _point("poll", 1000, 90_000, 2_000_000),
        _point("io-uring", 1000, 120_000, 2_500_000),
        _point("epoll", 1000, 100_000, 1_900_000, cpu=50.0),
    ]
    table = E._ratio_table(closed)
    assert table is not None
    row = next(r for r in table.rows if r[0] == "100" and r[1] == "io-uring")
    assert row[3] == "1.4×" and row[6] == "server (server CPU 99 %, generator busy 50 %)"
    assert row[5].startswith("1.27×")  # io-uring ÷ epoll throughput
    # 100: 1.4× with a lower p99 → met; 1000: 1.33× but p99 higher → not met.
    assert "100 connections: io-uring 1.400× of poll, p99 no higher — met" in table.caption
    assert "1000 connections: io-uring 1.333× of poll, p99 higher — not met" in table.caption
    assert "poll was not repeated in this run" in table.caption


def test_poll_repeat_spread_is_stated_beside_the_target():
    from tailscope.store import EngineDocument

    closed = [_point("poll", 100, 200_000, 200_000), _point("io-uring", 100, 259_800, 150_000)]
    again = {"echo_point": {"connections": 100, "model": "poll"}, "load": {"achieved_per_s": 150_000}}
    docs = [EngineDocument("echo", E.LOAD, again, "repeat/poll/100"), EngineDocument("echo", E.LOAD, {}, "closed/x/8")]
    spread = E._repeat_spread(docs, closed)
    assert spread == {100: pytest.approx(0.25)}
    table = E._ratio_table(closed, spread)
    assert table is not None
    assert "its closed-loop throughput moved by 25 % at 100: a ratio closer to 1 than that" in table.caption
    # 1.299 is shown as such, not rounded up to the 1.3 it missed.
    assert "100 connections: io-uring 1.299× of poll, p99 no higher — not met (poll's repeat moved 25 %)" in (
        table.caption
    ), table.caption


def test_server_cpu_per_echo_bounds_what_one_core_carries_whatever_limited_the_point():
    closed = [
        _point("poll", 100, 200_000, 200_000, cpu=90.0),  # 4.5 us of server CPU per echo
        _point("io-uring", 100, 180_000, 150_000, cpu=54.0, gen_busy=0.99),  # 3 us: generator-limited
        _point("poll", 1000, 100_000, 2_000_000, cpu=50.0),
        _point("epoll", 1000, 100_000, 2_000_000, cpu=48.0),
    ]
    table = E._ratio_table(closed)
    assert table is not None
    row = next(r for r in table.rows if r[0] == "100" and r[1] == "io-uring")
    assert row[7] == fmt_ns(3000.0) and row[8] == "1.5×"
    assert (
        "100 connections: io-uring 3 µs per echo vs poll's 4.5 µs = 1.5× the echoes per core-second (at least 1.3×)"
        in (table.caption)
    )
    assert "1000 connections: epoll" in table.caption and "(below 1.3×)" in table.caption
    # A point without the server's CPU: unavailable, never 0.
    no_cpu = _point("epoll", 100, 1000, 10) | {"cpu": None}
    assert E.cpu_per_echo_ns(no_cpu) is None
    t2 = E._ratio_table([_point("poll", 100, 1000, 10) | {"cpu": None}, no_cpu])
    assert t2 is not None and t2.rows[0][7] == "unavailable"
    assert "100 connections: unavailable (no server CPU for poll or any model at 100)" in t2.caption


def test_target_without_a_poll_point_is_unavailable_not_zero():
    table = E._ratio_table([_point("poll", 8, 1000, 10), _point("epoll", 100, 2000, 10)])
    assert table is not None
    assert "100 connections: unavailable (no poll point at 100)" in table.caption


def test_recommendation_uses_the_thesis_ranges():
    closed = [_point("poll", c, 1000 * c, 100) for c in (8, 100, 5000)]
    closed += [_point("epoll", c, 900 * c, 90, cpu=40) for c in (8, 100, 5000)]
    table = E._recommendation_table(closed, [])
    assert [r[0] for r in table.rows] == ["< 100 (8) †", "100–2000 (100) †", "> 2000 (5000) †"]
    assert all(r[1] == "poll" for r in table.rows)


def test_self_check_note_states_the_lag_share_from_data_not_a_canned_cause():
    flagged = _point("poll-pool", 1000, 14_000, 6_890_000, mode="rate") | {"bottleneck": True, "lag_p99": 2_700_000.0}
    clean = _point("epoll", 1000, 14_000, 2_000_000, mode="rate") | {"bottleneck": False, "lag_p99": 1_000.0}
    note = E.self_check_note([flagged, clean])
    assert note is not None and "flagged 1 of 2 fixed-rate points" in note
    assert "send-lag p99 2.7 ms = 39 % of its latency p99 6.89 ms" in note
    assert "2-core" not in note and "the scheduler" not in note
    # A flagged point whose document has no self-check lag: unavailable, never a 0 ns lag.
    unmeasured = E.self_check_note([flagged | {"lag_p99": None}])
    assert unmeasured is not None and "Send lag: unavailable" in unmeasured and "0 ns" not in unmeasured
    assert E.self_check_note([clean]) is None


def test_each_point_says_whether_the_server_or_the_generator_was_the_limit():
    assert E._limit_of(_point("epoll", 100, 1, 1, cpu=97.0, gen_busy=0.4)) == "server"
    assert E._limit_of(_point("epoll", 100, 1, 1, cpu=70.0, gen_busy=0.97)) == "generator"
    assert E._limit_of(_point("epoll", 100, 1, 1, cpu=95.0, gen_busy=0.95)) == "both"
    assert E._limit_of(_point("epoll", 8, 1, 1, cpu=40.0, gen_busy=0.3)) == "round trip"
    # A document without the generator's busy share: said, not guessed.
    assert E._limit_of(_point("epoll", 8, 1, 1, cpu=40.0, gen_busy=None)).startswith("unavailable: ")
    table = E._ratio_table([_point("poll", 1000, 1000, 10, cpu=60.0, gen_busy=0.99)])
    assert table is not None
    assert table.rows[0][6] == "generator (server CPU 60 %, generator busy 99 %)"
