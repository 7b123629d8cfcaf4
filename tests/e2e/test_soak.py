"""The soak's verdicts are computed from its intervals (tailscope.studies.soak)."""

import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import needs_engine
from tailscope.studies.soak import Interval, ModelSoak, ProcessSample, verdicts


def _iv(i: int, p99: float | None, errors: int = 0, rss: int | None = 100 << 20, fds: int | None = 40) -> Interval:
    return Interval(i, 1000.0, 1000.0, 1e6, p99, errors, [ProcessSample("text-service", rss, 8, fds)])


def _soak(*intervals: Interval) -> ModelSoak:
    return ModelSoak("coroutine", 2000.0, 1600.0, list(intervals))


def test_steady_soak_meets_every_target():
    lines = verdicts(_soak(_iv(1, 10e6), _iv(2, 10.5e6), _iv(3, 10.2e6, rss=102 << 20)))
    assert lines[0].startswith("errors: 0") and "— met" in lines[0]
    assert any(
        ln.startswith("growth: largest +2.0 %") and ln.endswith("(target ≤ 5 %)") and "— met" in ln for ln in lines
    )
    assert any(ln.startswith("p99 drift: +2.0 %") and "— met" in ln for ln in lines)


def test_leak_errors_and_drift_are_not_met():
    lines = verdicts(_soak(_iv(1, 10e6), _iv(2, 14e6, errors=3, fds=60)))
    assert "NOT met" in lines[0] and "errors: 3" in lines[0]
    growth = next(ln for ln in lines if ln.startswith("growth:"))
    assert "+50.0 %" in growth and "text-service fds" in growth and "NOT met" in growth
    drift = next(ln for ln in lines if ln.startswith("p99 drift:"))
    assert "+40.0 %" in drift and "NOT met" in drift


def test_what_cannot_be_judged_says_unavailable():
    assert any("unavailable" in ln for ln in verdicts(_soak(_iv(1, 10e6))))
    lines = verdicts(_soak(_iv(1, None, rss=None), _iv(2, 10e6, rss=None)))
    assert any(ln.startswith("p99 drift: unavailable") for ln in lines)
    assert any(ln.startswith("growth unavailable for text-service RSS") for ln in lines)
    assert verdicts(_soak()) == ["no interval completed: nothing to judge"]


def test_settled_samples_waits_until_descriptors_stop_changing(tmp_path):
    import subprocess
    import sys
    import time

    from tailscope.studies.soak import sample_process, settled_samples

    # A child that opens 30 files, one every 20 ms, then idles: sampled at once it is mid-way.
    code = (
        "import time, sys\n"
        "fs = []\n"
        "for i in range(30):\n"
        f"    fs.append(open(r'{tmp_path}/f%d' % i, 'w')); time.sleep(0.02)\n"
        "time.sleep(30)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code])
    try:
        while not (tmp_path / "f0").exists():  # the child is opening files now, not starting up
            time.sleep(0.005)
        early = sample_process("child", child.pid)
        settled = settled_samples({"child": child.pid}, timeout_s=10.0, step_s=0.1)
        assert early.fds is not None and settled[0].fds is not None
        assert settled[0].fds >= early.fds
        assert sample_process("child", child.pid).fds == settled[0].fds  # nothing moved after it
        assert sum(1 for _ in tmp_path.iterdir()) == 30
    finally:
        child.kill()
        child.wait()


def _costed(i: int, p99: float, cpu_ns: float, other: float, steal: float = 0.0, idle: float = 0.2) -> Interval:
    from tailscope.studies.soak import IntervalCost

    iv = _iv(i, p99)
    iv.cost = IntervalCost(60_000, cpu_ns, 0.5, 0.2, steal, other, idle)
    return iv


def test_drift_readings_separate_the_graphs_cost_from_the_machine():
    # p99 rises with other processes' CPU while the graph's own cost per request is flat.
    s = _soak(
        _costed(1, 10e6, 400e3, 0.02),
        _costed(2, 12e6, 404e3, 0.05),
        _costed(3, 11e6, 398e3, 0.04),
        _costed(4, 15e6, 402e3, 0.10, steal=0.03),
    )
    lines = verdicts(s)
    drift = next(ln for ln in lines if ln.startswith("p99 drift:"))
    assert "+50.0 %" in drift and "NOT met" in drift
    cost = next(ln for ln in lines if ln.startswith("graph CPU per request:"))
    assert "+0.5 %" in cost and "steady" in cost
    machine = next(ln for ln in lines if ln.startswith("machine"))
    assert "stolen by the hypervisor 0.0 % → 3.0 %" in machine and "other processes 2.0 % → 10.0 %" in machine
    rho = next(ln for ln in lines if ln.startswith("p99 vs other processes' CPU over 4 intervals"))
    assert "ρ +1.00" in rho  # same ranks: 10 < 11 < 12 < 15 and 2 < 4 < 5 < 10 %
    trend = next(ln for ln in lines if ln.startswith("p99 by interval:"))
    assert "Theil–Sen trend" in trend


def test_a_graph_that_gets_costlier_is_a_cost_drift():
    lines = verdicts(_soak(_costed(1, 10e6, 400e3, 0.0), _costed(2, 10.5e6, 480e3, 0.0)))
    assert "DRIFTED" in next(ln for ln in lines if ln.startswith("graph CPU per request:"))
    assert not any(ln.startswith("p99 vs other") for ln in lines)  # two intervals cannot be ranked


def test_theil_sen_ignores_one_burst():
    from tailscope.studies.soak import theil_sen_slope

    assert theil_sen_slope([(1, 10.0), (2, 10.0), (3, 40.0), (4, 10.0), (5, 10.0)]) == 0.0
    assert theil_sen_slope([(1, 1.0), (2, 2.0), (3, 3.0)]) == 1.0
    assert theil_sen_slope([(1, 5.0)]) is None


def test_interval_cost_splits_the_machines_cpu():
    from tailscope.lab.procstat import CLK_TCK, SystemSnapshot
    from tailscope.studies.soak import CpuMark, interval_cost

    before = CpuMark(SystemSnapshot(1, 0, 1000, 4000, 0.0, 10), 200, 1.0)
    # 2000 ticks of machine time: 1200 busy, of which 40 stolen, 600 the graph's, the load 2 s of CPU.
    after = CpuMark(SystemSnapshot(1, 0, 2200, 6000, 0.0, 50), 800, 1.0 + 200 / CLK_TCK)
    c = interval_cost(before, after, requests=1000)
    assert c.graph_cpu_per_request_ns == 600 / CLK_TCK * 1e9 / 1000
    assert c.graph_cpu_share == 0.3 and c.steal_share == 0.02
    assert abs(c.load_cpu_share - 0.1) < 1e-9
    assert abs(c.other_cpu_share - (1200 - 40 - 600 - 200) / 2000) < 1e-9
    gone = interval_cost(before, CpuMark(after.system, None, after.children_cpu_s), requests=1000)
    assert gone.graph_cpu_per_request_ns is None and gone.other_cpu_share is None
    assert interval_cost(before, before, 10).steal_share is None  # no time passed: nothing to share
    # A store server's process group is split out of "other"; an unreadable one stays in it.
    sb = CpuMark(before.system, 200, 1.0, {"store:redis": 100, "store:mongodb": 50})
    sa = CpuMark(after.system, 800, after.children_cpu_s, {"store:redis": 300, "store:mongodb": None})
    s = interval_cost(sb, sa, requests=1000)
    assert s.store_cpu_shares == {"store:redis": 0.1, "store:mongodb": None}
    assert abs(s.other_cpu_share - (1200 - 40 - 600 - 200 - 200) / 2000) < 1e-9


def test_group_cpu_counts_the_children_of_a_store_server():
    from tailscope.lab.procstat import group_cpu_ticks

    # A process-group leader whose child burns CPU: the child's ticks count for the leader.
    code = "import subprocess,sys,time; subprocess.Popen([sys.executable,'-c','while True: pass']); time.sleep(60)"
    leader = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        first = group_cpu_ticks(leader.pid)
        assert first is not None
        deadline = time.monotonic() + 30
        while (group_cpu_ticks(leader.pid) or 0) <= first + 5 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (group_cpu_ticks(leader.pid) or 0) > first + 5
    finally:
        os.killpg(leader.pid, signal.SIGKILL)
        leader.wait()
    assert group_cpu_ticks(leader.pid) is None


def test_group_cpu_counts_a_child_that_left_the_group():
    """PostgreSQL's backends call setsid(): a live one is in a group of its own, found by its parent.
    The soak of 2026-11-27 put the event-loop models' long-lived backends under 'other processes'."""
    from tailscope.lab.procstat import group_cpu_ticks

    code = (
        "import subprocess,sys,time; c=subprocess.Popen([sys.executable,'-c','while True: pass'],"
        " start_new_session=True); print(c.pid, flush=True); time.sleep(60)"
    )
    leader = subprocess.Popen([sys.executable, "-c", code], start_new_session=True, stdout=subprocess.PIPE, text=True)
    child = None
    try:
        child = int(leader.stdout.readline())
        assert os.getpgid(child) == child != leader.pid  # its own group, as a backend's
        first = group_cpu_ticks(leader.pid)
        assert first is not None
        deadline = time.monotonic() + 30
        while (group_cpu_ticks(leader.pid) or 0) <= first + 5 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (group_cpu_ticks(leader.pid) or 0) > first + 5
    finally:
        if child is not None:
            os.kill(child, signal.SIGKILL)
        os.killpg(leader.pid, signal.SIGKILL)
        leader.wait()
        leader.stdout.close()


def test_a_saturated_interval_is_named_wherever_its_p99_is_cited():
    lines = verdicts(_soak(_costed(1, 10e6, 400e3, 0.02), _costed(2, 900e6, 400e3, 0.3, idle=0.01)))
    drift = next(ln for ln in lines if ln.startswith("p99 drift:"))
    assert "NOT met" in drift and "interval(s) 2 saturated the machine" in drift
    sat = next(ln for ln in lines if ln.startswith("saturated:"))
    assert "interval(s) 2 left the machine < 5 % idle" in sat and "20.0 %, 1.0 %" in sat
    calm = verdicts(_soak(_costed(1, 10e6, 400e3, 0.02), _costed(2, 10.2e6, 400e3, 0.02)))
    assert not any(ln.startswith("saturated:") or "(see 'saturated')" in ln for ln in calm)
    assert any(ln.startswith("idle CPU by interval: 20.0 %, 20.0 %") for ln in calm)


def test_a_quiet_machine_has_no_rank_correlation_to_report():
    lines = verdicts(_soak(*[_costed(i, (10 + i) * 1e6, 400e3, 0.0) for i in range(1, 5)]))
    assert any(ln.endswith("Spearman ρ unavailable (a constant series)") for ln in lines)


def _write_hlog(path, start_s: float, per_second_ms: list[float], count: int = 100) -> None:
    """A load generator's .hlog: one latency_intended histogram per second, `count` requests each at
    that second's latency."""
    from tailscope.measure.hlog import new_histogram

    lines = [f"#[StartTime: {start_s:.3f} (seconds since epoch), test]", f"#[BaseTime: {start_s:.3f}]"]
    for k, ms in enumerate(per_second_ms):
        h = new_histogram()
        h.record_value(int(ms * 1e6), count)
        lines.append(f"Tag=latency_intended,{k:.3f},1.000,{ms / 1e3:.6f},{h.encode().decode()}")
    path.write_text("\n".join(lines) + "\n")


def _machine(
    start_s: float, seconds: int, saturated: set[int], stolen: set[int] = frozenset(), steal_ticks: int = 6
) -> list:
    """Machine samples every 100 ms: 2 CPUs (20 ticks per sample), 30 % idle, none in `saturated`;
    in `stolen` `steal_ticks` of the 20 are the hypervisor's (steal counts as busy in /proc/stat's sum)."""
    from tailscope.studies.soak import MachinePoint

    points, busy, total, steal = [], 0, 0, 0
    for j in range(seconds * 10 + 1):
        sec = j // 10
        points.append(MachinePoint(start_s + j * 0.1, busy, total, 60 if sec in saturated else 8, steal))
        busy += 20 if sec in saturated else 14
        steal += steal_ticks if sec in stolen else 0
        total += 20
    return points


def test_an_episode_is_found_and_left_out_of_the_outside_p99(tmp_path):
    from tailscope.studies.soak import find_episodes

    start = 1_700_000_000.0
    latency = [10.0] * 12
    latency[5] = latency[6] = 200.0
    hlog = tmp_path / "i.hlog"
    _write_hlog(hlog, start, latency)
    e = find_episodes(_machine(start, 12, {5, 6}), hlog)
    assert e is not None
    assert e.saturated_s == [5, 6] and e.windows == 12
    assert e.runnable_max == 60 and e.runnable_median == 8
    assert e.worst_second_s == 5 and e.worst_second_p99_ns == pytest.approx(200e6, rel=0.01)
    # Seconds 4–7 are the episode with its 1 s margin: 8 seconds of 100 requests are left.
    assert e.samples_total == 1200 and e.samples_outside == 800
    assert e.p99_outside_ns == pytest.approx(10e6, rel=0.01)


def test_the_drift_verdict_says_what_it_is_outside_the_episodes(tmp_path):
    from tailscope.studies.soak import find_episodes

    start = 1_700_000_000.0
    calm, spiky = tmp_path / "a.hlog", tmp_path / "b.hlog"
    _write_hlog(calm, start, [10.0] * 10)
    _write_hlog(spiky, start, [10.5] * 4 + [300.0, 300.0] + [10.5] * 4)
    first, last = _iv(1, 10e6), _iv(2, 150e6)
    first.episodes = find_episodes(_machine(start, 10, set()), calm)
    last.episodes = find_episodes(_machine(start, 10, {4, 5}), spiky)
    lines = verdicts(_soak(first, last))
    drift = next(ln for ln in lines if ln.startswith("p99 drift:"))
    assert "NOT met" in drift and "outside the episodes +5.0 % (within the target)" in drift
    episodes = next(ln for ln in lines if ln.startswith("Episodes"))
    assert "#1: none saturated of 10 s" in episodes
    assert "#2: 2 s saturated (4–6 s) of 10 s, runnable tasks up to 60 (median 8)" in episodes
    assert "p99 outside the episodes 10.5 ms (600 of 1,000 requests)" in episodes


def test_a_second_the_hypervisor_took_is_an_episode_too(tmp_path):
    from tailscope.studies.soak import STOLEN_SHARE, find_episodes

    start = 1_700_000_000.0
    calm, stalled = tmp_path / "a.hlog", tmp_path / "b.hlog"
    _write_hlog(calm, start, [10.0] * 10)
    _write_hlog(stalled, start, [10.2] * 6 + [5000.0] + [10.2] * 3)
    # 6 of 20 ticks stolen (30 %) in second 6, 30 % idle left: stolen, not saturated.
    e = find_episodes(_machine(start, 10, set(), stolen={6}), stalled)
    assert e is not None and 6 / 20 >= STOLEN_SHARE
    assert (e.saturated_s, e.stolen_s, e.any) == ([], [6], True)
    assert e.samples_outside == 700 and e.p99_outside_ns == pytest.approx(10.2e6, rel=0.01)
    first, last = _iv(1, 10e6), _iv(2, 5000e6)
    first.episodes = find_episodes(_machine(start, 10, set()), calm)
    last.episodes = e
    lines = verdicts(_soak(first, last))
    drift = next(ln for ln in lines if ln.startswith("p99 drift:"))
    assert "NOT met" in drift and "outside the episodes +2.0 % (within the target)" in drift
    episodes = next(ln for ln in lines if ln.startswith("Episodes"))
    assert "#2: none saturated, 1 s stolen (6–7 s) of 10 s" in episodes
    # Below the threshold stolen ticks are only a reading: 2 of 20 (10 %) make no episode.
    light = find_episodes(_machine(start, 10, set(), stolen={6}, steal_ticks=2), stalled)
    assert light is not None and light.stolen_s == [] and not light.any


def test_episodes_without_samples_say_unavailable(tmp_path):
    from tailscope.studies.soak import find_episodes

    assert find_episodes([], tmp_path / "missing.hlog") is None
    lines = verdicts(_soak(_iv(1, 10e6), _iv(2, 10e6)))
    assert any(ln.startswith("Episodes: unavailable") for ln in lines)
    drift = next(ln for ln in lines if ln.startswith("p99 drift:"))
    assert "outside" not in drift


def test_spans_text_joins_consecutive_seconds():
    from tailscope.studies.soak import spans_text

    assert spans_text([3, 4, 5, 9]) == "3–6 s, 9–10 s"
    assert spans_text([]) == ""


def test_the_machine_sampler_reads_proc_until_stopped():
    from tailscope.studies.soak import MachineSampler

    with MachineSampler(period_s=0.01) as m:
        while len(m.points) < 3:
            time.sleep(0.005)
    assert len(m.points) >= 4  # the last sample is taken on exit
    assert all(a.t <= b.t and a.total_ticks <= b.total_ticks for a, b in zip(m.points, m.points[1:]))
    assert all(p.runnable >= 0 for p in m.points)


@needs_engine("tailscope-svc", "tailscope-load")
def test_a_short_soak_reads_episodes_from_its_own_run(tmp_path, monkeypatch):
    """End to end on the real graph, with every phase cut to seconds: each interval carries its
    machine samples and per-second histograms (the .hlog is removed once read)."""
    from tailscope.lab import topology
    from tailscope.studies import soak

    monkeypatch.setattr(soak, "CEILING_DURATION_S", 1.0)
    monkeypatch.setattr(soak, "SETTLE_S", 0.5)
    monkeypatch.setattr(soak, "OBJECTIVE_POINT_S", 0.5)
    monkeypatch.setattr(soak, "OBJECTIVE_WARMUP_S", 0.1)
    topo = topology.to_engine_json(topology.SOCIALNET, tmp_path / "socialnet.json")
    seen = []
    s = soak.soak_model(
        "coroutine",
        topo,
        tmp_path,
        intervals=2,
        interval_s=2.0,
        fraction=0.2,
        on_interval=lambda _s, iv: seen.append(iv.index),
        stores="simulated",
    )
    assert seen == [1, 2]
    assert s.stores.startswith("simulated"), s.stores  # what the graph ran on, from its ready line
    assert len(s.intervals) == 2, s.intervals
    # The rate held is 20 % of the highest open-loop rate that met the objective (or of the lowest
    # tried, when none did), never of the closed-loop ceiling.
    assert len(s.objective_points) >= len(soak.OBJECTIVE_FRACTIONS)
    base = s.objective_rate_per_s if s.objective_rate_per_s is not None else min(r for r, _ in s.objective_points)
    assert s.rate_per_s == pytest.approx(max(1.0, 0.2 * base))
    if s.objective_rate_per_s is not None:
        assert (s.objective_rate_per_s, True) in s.objective_points
    for iv in s.intervals:
        e = iv.episodes
        assert e is not None, "the interval's episodes were not read"
        assert e.windows >= 1 and e.samples_total > 0
        assert e.runnable_max is not None and e.worst_second_p99_ns is not None
    assert not list(tmp_path.glob("*.hlog"))
    assert any(ln.startswith("Episodes (1 s windows saturated") for ln in s.verdicts)


def test_a_growth_that_fell_between_intervals_is_not_called_a_climb():
    follows_load = verdicts(_soak(_iv(1, 10e6, fds=12), _iv(2, 10e6, fds=11), _iv(3, 10e6, fds=16)))
    growth = next(ln for ln in follows_load if ln.startswith("growth:"))
    assert "NOT met" in growth and "not a steady climb: it fell between intervals (12, 11, 16)" in growth
    leak = verdicts(_soak(_iv(1, 10e6, fds=12), _iv(2, 10e6, fds=14), _iv(3, 10e6, fds=16)))
    growth = next(ln for ln in leak if ln.startswith("growth:"))
    assert "it never fell between intervals (12, 14, 16)" in growth
    # Within the limit, nothing is added; with two intervals there is no series to read.
    assert "climb" not in next(ln for ln in verdicts(_soak(_iv(1, 10e6), _iv(2, 10e6))) if ln.startswith("growth:"))
    assert "fell" not in next(
        ln for ln in verdicts(_soak(_iv(1, 10e6, fds=12), _iv(2, 10e6, fds=16))) if ln.startswith("growth:")
    )


def test_the_objective_line_says_how_the_rate_was_chosen():
    from tailscope.studies.soak import ModelSoak, objective_line

    met = ModelSoak(
        "coroutine",
        4000.0,
        2400.0,
        objective_rate_per_s=3000.0,
        objective_points=[(1600.0, True), (3000.0, True), (3200.0, False)],
        objective_idle_shares=[0.5, 0.25, None],
    )
    assert objective_line(met) == (
        "highest rate meeting the p99 objective with 20 % idle CPU left 3000/s (1600/s met, 50.0 % idle, "
        "3000/s met, 25.0 % idle, 3200/s missed, unavailable idle); held at 2400/s"
    )
    none = ModelSoak("std-thread", 1000.0, 320.0, objective_points=[(400.0, False), (600.0, False)])
    assert objective_line(none).startswith(
        "no tried rate met the p99 objective with 20 % idle CPU left (400/s missed, unavailable idle, 600/s missed"
    )
    assert objective_line(none).endswith("; the drift verdicts describe an overloaded graph")
    # Missed with headroom left: the graph's own tail, not an overloaded machine.
    roomy = ModelSoak(
        "std-thread",
        1000.0,
        320.0,
        objective_points=[(400.0, False), (600.0, False)],
        objective_idle_shares=[0.44, 0.1],
    )
    assert objective_line(roomy).endswith(
        "held at 320/s, a fraction of the lowest tried rate; 1 of 2 tried rates missed the p99 objective itself "
        "with the headroom left: the graph's tail at these rates, not a lack of CPU — the drift verdicts describe "
        "a graph held below every rate tried"
    )


def _search_point(rate: float, p99_ms: float, idle: float | None) -> dict:
    return {
        "measurements": [
            {
                "name": "latency_intended",
                "latency": {"count": 1000, "percentiles": {"50": 1e6, "99": p99_ms * 1e6}},
            }
        ],
        "load": {"achieved_per_s": rate, "errors_total": 0, "requests_completed": 1000},
        "config": {"rate_per_s": rate},
        "socialnet_point": {"rate_per_s": rate, "idle_share": idle},
    }


def test_a_search_point_is_carried_only_with_idle_cpu_left():
    from tailscope.studies import soak
    from tailscope.studies.socialnet import analysis as socialnet

    fast = _search_point(1000.0, 5.0, 0.5)
    assert socialnet.meets_objective(fast), "the fabricated point must meet the objective for this test"
    assert soak.carried(fast)
    assert not soak.carried(_search_point(1000.0, 5.0, soak.HEADROOM_IDLE_SHARE - 0.01))  # met, no headroom
    assert soak.carried(_search_point(1000.0, 5.0, soak.HEADROOM_IDLE_SHARE))
    assert soak.carried(_search_point(1000.0, 5.0, None))  # unreadable idle does not veto
    assert not soak.carried(_search_point(1000.0, 500.0, 0.9))  # the objective missed
    # The bracket the bisection narrows is bounded by headroom too.
    sweep = [_search_point(400.0, 5.0, 0.6), _search_point(800.0, 5.0, 0.1), _search_point(1200.0, 900.0, 0.0)]
    assert socialnet.objective_bracket(sweep) == (800.0, 1200.0)
    assert socialnet.objective_bracket(sweep, judge=soak.carried) == (400.0, 800.0)


def test_idle_share_between_the_first_and_last_sample():
    from tailscope.studies.soak import MachinePoint, idle_share_of

    assert idle_share_of([]) is None
    assert idle_share_of([MachinePoint(0.0, 10, 100, 0)]) is None
    assert idle_share_of([MachinePoint(0.0, 10, 100, 0), MachinePoint(1.0, 70, 200, 0)]) == pytest.approx(0.4)


def test_document_store_maintenance_is_set_beside_the_worst_second():
    from tailscope.lab.docstore_stats import DocstoreActivity, MaintenanceEvent
    from tailscope.studies.soak import Episodes, docstore_lines, maintenance_near_worst

    def ep(worst_s: int) -> Episodes:
        return Episodes(60, [], 3, 1.0, worst_s, 30e6, 10e6, start_epoch_s=1000.0)

    a = _iv(1, 10e6)
    a.episodes = ep(38)  # worst second 38–39 s; an autoanalyze ended at 39.2 s, a checkpoint at 10 s
    a.docstore = DocstoreActivity(
        1,
        2,
        1,
        5000,
        40,
        [MaintenanceEvent("checkpoint", None, 1010.0), MaintenanceEvent("autoanalyze", "posts", 1039.2)],
    )
    b = _iv(2, 11e6)
    b.episodes = ep(5)
    b.docstore = DocstoreActivity(0, 1, 0, 9000, 10, [MaintenanceEvent("autoanalyze", "posts", 1050.0)])
    assert maintenance_near_worst(a) == ["autoanalyze of posts at 39 s"]
    assert maintenance_near_worst(b) == []  # 45 s away from its worst second
    line = docstore_lines([a, b])[0]
    assert "1 autovacuum and 3 autoanalyze pass(es), 1 checkpoint(s)" in line
    assert "live rows at each interval's end: 5,000, 9,000" in line
    assert "in 1 of 2 (#1: autoanalyze of posts at 39 s)" in line
    # not read: the reason, never zeros
    c = _iv(1, 10e6)
    c.docstore_reason = "no real document store"
    assert docstore_lines([c]) == ["document store maintenance: unavailable — no real document store"]
    assert docstore_lines([_iv(1, 10e6)]) == []  # a soak from before this reading says nothing


def test_docstore_activity_counts_and_places_events():
    from tailscope.lab.docstore_stats import DocstoreMark, TableMark, activity

    before = DocstoreMark({"posts": TableMark(1, 2, 100, 5, 900.0, 950.0)}, 3, 800.0)
    after = DocstoreMark(
        {"posts": TableMark(2, 4, 300, 7, 1020.0, 1090.0), "urls": TableMark(0, 1, 50, 0, None, 1030.0)}, 4, 1040.0
    )
    act = activity(before, after, 1000.0, 1060.0)
    assert (act.autovacuums, act.autoanalyzes, act.checkpoints) == (1, 3, 1)
    assert (act.live_rows, act.dead_rows) == (350, 7)
    # posts' analyze at 1090 lies after the window: its time is not the interval's
    assert [(e.kind, e.table, e.at_epoch_s) for e in act.events] == [
        ("autovacuum", "posts", 1020.0),
        ("autoanalyze", "urls", 1030.0),
        ("checkpoint", None, 1040.0),
    ]


def test_redis_info_is_parsed_and_a_missing_field_is_named():
    from tailscope.lab.redis_stats import activity, parse_info

    info = (
        "# Memory\r\nused_memory:67108864\r\nmaxmemory:67108864\r\n# Stats\r\nevicted_keys:120\r\n"
        "expired_keys:0\r\nkeyspace_hits:900\r\nkeyspace_misses:100\r\n# Keyspace\r\n"
        "db0:keys=5000,expires=0,avg_ttl=0\r\n"
    )
    after = parse_info(info)
    assert (after.used_memory_bytes, after.maxmemory_bytes, after.keys) == (64 << 20, 64 << 20, 5000)
    before = parse_info(
        info.replace("evicted_keys:120", "evicted_keys:20").replace("keyspace_misses:100", "keyspace_misses:40")
    )
    act = activity(before, after)
    assert (act.evicted_keys, act.keyspace_misses, act.keyspace_hits) == (100, 60, 0)
    with pytest.raises(ValueError, match="evicted_keys"):
        parse_info(info.replace("evicted_keys:120\r\n", ""))


def test_redis_line_shows_the_cap_being_reached():
    from tailscope.lab.redis_stats import RedisActivity
    from tailscope.studies.soak import redis_lines

    a, b = _iv(1, 10e6), _iv(2, 12e6)
    a.redis = RedisActivity(40 << 20, 64 << 20, 0, 900, 100, 4000)
    b.redis = RedisActivity(64 << 20, 64 << 20, 2500, 800, 200, 6000)
    line = redis_lines([a, b])[0]
    assert "40.0, 64.0 MiB of its 64 MiB cap" in line
    assert "evicted keys by interval 0, 2,500" in line
    assert "misses by interval 100 (10.0 %), 200 (20.0 %)" in line
    assert (
        redis_lines([a, b])[1]
        == "p99 before Redis first evicted (intervals 1–1) 10 ms, from interval 2 on 12 ms (+20.0 %, medians)"
    )
    b.index = 1
    assert redis_lines([b])[1] == "Redis evicted from interval 1 on: no interval before it to compare the p99 with"
    c = _iv(1, 10e6)
    c.redis_reason = "no real Redis"
    assert redis_lines([c]) == ["redis: unavailable — no real Redis"]


def _episodes_at(worst_s: int, **kw) -> "Episodes":  # noqa: F821 (imported in the tests)
    from tailscope.studies.soak import Episodes

    return Episodes(60, [], 3, 1.0, worst_s, 80e6, 10e6, start_epoch_s=1000.0, **kw)


def test_the_worst_second_is_set_apart_by_what_was_read_in_it():
    from tailscope.studies.soak import worst_second_causes, worst_second_summary

    quiet = {"cpu": 0.05, "io": 0.01, "memory": 0.0}
    # A CPU queue without saturation (PSI cpu 40 % of the second against 5 %), one process far above its
    # median second, and a stolen second next to it: each named, strongest first.
    e = _episodes_at(
        30,
        stolen_s=[31],
        worst_second_pressure={"cpu": 0.40, "io": 0.02, "memory": 0.0},
        median_pressure=quiet,
        worst_second_processes=[("store:mongodb", 0.62, 0.10)],
        worst_second_processes_read=True,
    )
    causes = worst_second_causes(e)
    assert causes[0] == "stolen time"
    assert causes[1] == "a CPU queue (40 % of the second against 5 %)"
    assert causes[2] == "mongodb at 0.62 CPU against 0.10"
    # I/O is below its threshold (2 % of the second) and not named; nor is a resource that is as
    # stalled in the median second as in the worst one.
    flat = _episodes_at(
        30,
        worst_second_pressure={"cpu": 0.30, "io": 0.0, "memory": 0.0},
        median_pressure={"cpu": 0.25, "io": 0, "memory": 0},
    )
    assert worst_second_causes(flat) == []
    a, b = _iv(1, 10e6), _iv(2, 11e6)
    a.episodes, b.episodes = e, flat
    lines = verdicts(_soak(a, b))
    summary = next(ln for ln in lines if ln.startswith("worst seconds set apart"))
    assert summary.startswith("worst seconds set apart by a reading in 1 of 2 interval(s)")
    assert "stolen time 1" in summary and "a CPU queue 1" in summary and summary.endswith("by none in #2")
    episodes = next(ln for ln in lines if ln.startswith("Episodes"))
    assert "stalled: cpu 40 %, io 2 %, memory 0 %; median second cpu 5 %, io 1 %, memory 0 %" in episodes
    assert "#2: none saturated" in episodes and "nothing read set it apart; processes' CPU not read" in episodes
    assert worst_second_summary([_iv(1, 10e6)]) == []


def test_the_worst_second_names_the_process_above_its_median(tmp_path):
    from tailscope.studies.soak import MachinePoint, find_episodes

    start = 1_700_000_000.0
    hlog = tmp_path / "i.hlog"
    latency = [10.0] * 10
    latency[6] = 90.0
    _write_hlog(hlog, start, latency)
    points = _machine(start, 10, set())
    # Process readings once a second: compose-post steady at 0.3 CPU, postgres 0.1 except 1.0 in
    # the second around 6 s; PSI io stalled 50 % of second 6.
    compose = postgres = io = 0
    out = []
    for j, p in enumerate(points):
        sec = j // 10
        io += 50_000 if sec == 6 else 1_000
        ticks = None
        if j % 10 == 0:
            ticks = {"compose-post": compose, "store:mongodb": postgres}
            compose += 30
            postgres += 100 if sec == 6 else 10
        out.append(
            MachinePoint(
                p.t, p.busy_ticks, p.total_ticks, p.runnable, p.steal_ticks, {"cpu": 0, "io": io, "memory": 0}, ticks
            )
        )
    e = find_episodes(out, hlog)
    assert e is not None and e.worst_second_s == 6 and e.worst_second_processes_read
    assert e.worst_second_processes == [("store:mongodb", pytest.approx(1.0, rel=0.02), pytest.approx(0.1, rel=0.02))]
    assert e.worst_second_pressure is not None and e.worst_second_pressure["io"] == pytest.approx(0.5, rel=0.05)
    assert e.median_pressure is not None and e.median_pressure["io"] == pytest.approx(0.01, rel=0.05)


def test_the_machine_sampler_reads_pressure_and_the_named_processes():
    from tailscope.lab import procstat
    from tailscope.studies.soak import MachineSampler

    with MachineSampler(period_s=0.01, pids={"me": os.getpid()}) as m:
        while len(m.points) < 12:
            time.sleep(0.005)
    read = [p for p in m.points if p.cpu_ticks is not None]
    # the first sample, every tenth, and the last one on exit
    assert len(read) >= 3 and m.points[0].cpu_ticks is not None and m.points[-1].cpu_ticks is not None
    assert all(isinstance(p.cpu_ticks["me"], int) for p in read if p.cpu_ticks)
    if procstat.read_pressure() is not None:  # a kernel without PSI leaves it None, never zeros
        assert all(p.pressure_us and set(p.pressure_us) == {"cpu", "io", "memory"} for p in m.points)


def test_descriptors_are_counted_by_kind_and_a_growth_names_the_kind():
    import socket

    from tailscope.lab import procstat

    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    try:
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = server.accept()
        r, w = os.pipe()
        kinds = procstat.fd_kinds(os.getpid(), {port: "redis"})
        assert kinds is not None
        assert kinds[f"listen :{port}"] == 1
        assert kinds["tcp to redis"] == 1  # the client's side, named by the port's owner
        assert kinds["tcp from a client"] >= 1  # the accepted side
        assert kinds["pipe"] >= 2
        assert port in procstat.listen_ports(os.getpid())
        for fd in (r, w):
            os.close(fd)
        client.close()
        accepted.close()
    finally:
        server.close()
    a = _iv(1, 10e6, fds=10)
    b = _iv(2, 10e6, fds=11)
    a.processes[0].fd_kinds = {"listen :40001": 1, "tcp to redis": 4, "pipe": 5}
    b.processes[0].fd_kinds = {"listen :40001": 1, "tcp to redis": 5, "pipe": 5}
    growth = next(ln for ln in verdicts(_soak(a, b)) if ln.startswith("growth:"))
    assert "NOT met" in growth and growth.endswith("; by kind: +1 tcp to redis")
    assert procstat.fd_kinds(2**22 + 12345) is None  # no such process


def test_maintenance_between_intervals_is_reported_with_its_passes():
    from tailscope.lab.docstore_stats import MaintenancePass
    from tailscope.studies.soak import MAINTENANCE_TEXT, maintenance_lines

    s = _soak(_iv(1, 10e6), _iv(2, 10e6))
    assert maintenance_lines(s) == []  # no real document store: nothing to say
    s.docstore_maintenance = MAINTENANCE_TEXT["between"]
    s.intervals[0].maintenance = MaintenancePass(0.21, 1200)
    s.intervals[1].maintenance = MaintenancePass(0.35, 4100)
    line = maintenance_lines(s)[0]
    assert line.startswith("document store maintenance: held between intervals")
    assert "before 2 of 2 interval(s) took 0.21–0.35 s and found 1,200–4,100 dead rows" in line
    assert line in verdicts(s)
    failed = _soak(_iv(1, 10e6), _iv(2, 10e6))
    failed.docstore_maintenance = MAINTENANCE_TEXT["between"]
    failed.intervals[0].maintenance_reason = "psql exited 2: boom"
    assert maintenance_lines(failed) == [
        f"document store maintenance: {MAINTENANCE_TEXT['between']} (psql exited 2: boom)"
    ]


def test_the_drift_is_also_judged_by_the_p99s_intervals():
    from tailscope.studies.soak import drift_by_intervals

    def iv(i: int, p99: float, lo: float, hi: float, n: int = 20_000) -> Interval:
        x = _iv(i, p99)
        x.p99_ci_ns, x.samples = (lo, hi), n
        return x

    # Tight intervals 40 % apart: not met, by the point estimates and by the intervals.
    a, b = iv(1, 20e6, 19.5e6, 20.5e6), iv(2, 28e6, 27.5e6, 28.5e6)
    assert drift_by_intervals(a, b).verdict == "not met"
    drift = next(ln for ln in verdicts(_soak(a, b)) if ln.startswith("p99 drift:"))
    assert (
        "NOT met" in drift
        and "by the p99s' 95 % intervals (#1 [19.5 ms–20.5 ms], #2 [27.5 ms–28.5 ms]): not met" in drift
    )
    # +20 % by the estimates, but intervals this wide leave the ratio anywhere in 0.6–2.3×: undecided,
    # with the length that would decide it.
    wide = drift_by_intervals(iv(1, 20e6, 15e6, 35e6), iv(2, 24e6, 21e6, 34e6))
    assert wide.verdict == "undecided at this length" and wide.length_factor is not None and wide.length_factor > 1
    drift = next(
        ln for ln in verdicts(_soak(iv(1, 20e6, 15e6, 35e6), iv(2, 24e6, 21e6, 34e6))) if ln.startswith("p99 drift:")
    )
    assert (
        "NOT met" in drift and "undecided at this length (intervals" in drift and "× as long would decide it)" in drift
    )
    # Within ±10 % with both intervals inside the band: met.
    assert drift_by_intervals(iv(1, 20e6, 19.8e6, 20.2e6), iv(2, 20.4e6, 20.2e6, 20.6e6)).verdict == "met"
    # No interval recorded (a soak from before it, too few samples): unavailable with the reason.
    none = drift_by_intervals(_iv(1, 20e6), _iv(2, 20e6))
    assert none.verdict == "" and "interval 2's p99 has no interval" in none.unavailable


def test_a_load_documents_p99_interval_is_read():
    from tailscope.studies.soak import p99_interval

    doc = {
        "measurements": [
            {
                "name": "latency_intended",
                "latency": {"count": 5000, "percentiles": {"99": 9e6}, "percentile_ci": {"99": [8e6, 11e6]}},
            }
        ]
    }
    ci = p99_interval(doc)
    assert (ci.estimate_ns, ci.lo_ns, ci.hi_ns, ci.count) == (9e6, 8e6, 11e6, 5000)
    assert p99_interval({}).unavailable == "no latency_intended measurement"


def test_a_cost_drift_names_the_services_whose_cpu_per_request_moved():
    from tailscope.lab.procstat import CLK_TCK, SystemSnapshot
    from tailscope.studies.soak import CpuMark, interval_cost

    sys0, sys1 = SystemSnapshot(1, 0, 1000, 4000, 0.0, 0), SystemSnapshot(1, 0, 2000, 6000, 0.0, 0)
    before = CpuMark(sys0, 300, 1.0, {}, {"compose-post-service": 100, "text-service": 200})
    after = CpuMark(sys1, 800, 1.0, {}, {"compose-post-service": 450, "text-service": 350})
    c = interval_cost(before, after, requests=1000)
    tick_ns = 1e9 / CLK_TCK
    assert c.service_cpu_per_request_ns == {
        "compose-post-service": pytest.approx(350 * tick_ns / 1000),
        "text-service": pytest.approx(150 * tick_ns / 1000),
    }
    gone = interval_cost(before, CpuMark(sys1, 800, 1.0, {}, {"compose-post-service": None}), requests=1000)
    assert gone.service_cpu_per_request_ns == {"compose-post-service": None, "text-service": None}
    # Interval 2's compose-post costs 50 % more per request, text-service 2 % less: the DRIFTED line names
    # compose-post first.
    a, b = _costed(1, 10e6, 400e3, 0.0), _costed(2, 10e6, 480e3, 0.0)
    assert a.cost is not None and b.cost is not None
    a.cost.service_cpu_per_request_ns = {"compose-post-service": 100e3, "text-service": 50e3}
    b.cost.service_cpu_per_request_ns = {"compose-post-service": 150e3, "text-service": 49e3}
    cost = next(ln for ln in verdicts(_soak(a, b)) if ln.startswith("graph CPU per request:"))
    assert "DRIFTED" in cost
    assert cost.endswith(
        "by service, largest change first: compose-post 100 µs → 150 µs (+50 %), text 50 µs → 49 µs (-2 %)"
    )
    # A steady cost says nothing more.
    steady = next(
        ln
        for ln in verdicts(_soak(_costed(1, 10e6, 400e3, 0.0), _costed(2, 10e6, 404e3, 0.0)))
        if ln.startswith("graph")
    )
    assert "by service" not in steady


def _services(iv: Interval, probe_ns: float | None, **cpu_ns: float) -> Interval:
    assert iv.cost is not None
    iv.cost.service_cpu_per_request_ns = {f"{k}-service": v for k, v in cpu_ns.items()}
    iv.probe_cpu_ns, iv.probes = probe_ns, 60 if probe_ns else 0
    return iv


def test_a_shared_cost_rise_the_probe_also_shows_is_called_the_machines():
    from tailscope.studies.soak import cost_attribution

    def line(probe_b: float | None, text_b: float) -> str:
        a = _services(_costed(1, 10e6, 400e3, 0.0), 1e6, compose=100e3, text=50e3, user=20e3)
        b = _services(_costed(2, 10e6, 440e3, 0.0), probe_b, compose=110e3, text=text_b, user=22e3)
        assert a.cost is not None and b.cost is not None
        return cost_attribution(a.cost, b.cost, a, b)[0]

    # Every service +10 % and the fixed work +10 %: the machine's speed, not the graph.
    slower = line(1.1e6, 55e3)
    assert "1 ms → 1.1 ms (+10.0 %, medians of 60 and 60)" in slower
    assert "moved +10.0 % together (median), range +10…+10 %" in slower
    assert "none off it by more than 5 %" in slower
    assert slower.endswith("divided by the probe's change, +0.0 % — steady: the machine's speed accounts for the rest")
    # The same services' rise with the probe flat: the graph's own work.
    own = line(1.0e6, 55e3)
    assert own.endswith(
        "divided by the probe's change, +10.0 % — DRIFTED: beyond the machine's speed, the graph's own work "
        "per request changed"
    )
    # Half of it the machine's: +10 % ÷ +4 % leaves +5.8 %, beyond the limit.
    assert "divided by the probe's change, +5.8 % — DRIFTED" in line(1.04e6, 55e3)
    # One service off the shared change is named with its own part.
    text_off = line(1.1e6, 65e3)
    assert "off the shared change by more than 5 %: text +20 %" in text_off
    # No probe: said, and no verdict on the machine.
    gone = line(None, 55e3)
    assert "probe (the same loop's CPU time, once a second): unavailable (no probe reading in interval 2)" in gone
    assert "divided by the probe" not in gone


def test_p99_is_ranked_against_the_probe_only_where_both_were_read():
    from tailscope.studies.soak import rank_line

    assert rank_line("p99 vs x", [(1.0, 2.0), (2.0, 3.0), (3.0, 5.0), (4.0, 4.0)]) == [
        "p99 vs x over 4 intervals: Spearman ρ +0.80"
    ]
    assert rank_line("p99 vs x", [(1.0, 2.0), (2.0, None), (3.0, 5.0), (None, 4.0), (5.0, 1.0)]) == []  # 3 pairs
    assert rank_line("p99 vs x", [(1.0, 2.0), (2.0, 2.0), (3.0, 2.0), (4.0, 2.0)]) == [
        "p99 vs x over 4 intervals: Spearman ρ unavailable (a constant series)"
    ]


def test_the_document_stores_io_per_request_and_size_against_its_buffers():
    from tailscope.lab.docstore_stats import DocstoreActivity, IoActivity
    from tailscope.studies.soak import docstore_io_lines

    mib = 1 << 20
    ivs = []
    for k, (read, writes, size) in enumerate([(600, 0, 50 * mib), (60_000, 1200, 70 * mib)], start=1):
        iv = _costed(k, 10e6, 400e3, 0.0)  # 60 000 requests
        iv.docstore = DocstoreActivity(
            0, 0, 0, 1000 * k, 0, [], IoActivity(read, 9000, 120_000, writes, 7000, 61_440_000, size, 64 * mib)
        )
        ivs.append(iv)
    line = docstore_io_lines(ivs)[0]
    assert "blocks read from outside its shared buffers 0.01, 1.00" in line
    assert "buffers a backend wrote to free one 0.00, 0.02" in line
    assert "WAL KiB 1.0, 1.0" in line  # 61 440 000 B over 60 000 requests
    assert line.endswith(
        "database MiB at each interval's end 50, 70 (shared_buffers 64 MiB; larger than them from interval 2)"
    )
    # Not read: the reason, never zeros.
    iv = _costed(1, 10e6, 400e3, 0.0)
    iv.docstore = DocstoreActivity(0, 0, 0, 10, 0, [], None, "psql exited 2: no such view")
    assert docstore_io_lines([iv]) == ["document store I/O: unavailable — psql exited 2: no such view"]


def test_the_fixed_work_probe_counts_cpu_time_for_its_work():
    from tailscope.lab.procstat import fixed_work_cpu_ns

    small, large = fixed_work_cpu_ns(1_000), fixed_work_cpu_ns(100_000)
    assert 0 < small < large
    # Sleeping is not work: thread CPU time does not count it.
    t0 = time.thread_time_ns()
    time.sleep(0.05)
    assert time.thread_time_ns() - t0 < 50_000_000


def test_the_drift_line_says_when_the_machine_changed_speed_between_its_intervals():
    a, b = _iv(1, 10e6), _iv(2, 13e6)
    a.probe_cpu_ns, b.probe_cpu_ns = 1.0e6, 1.2e6
    drift = next(ln for ln in verdicts(_soak(a, b)) if ln.startswith("p99 drift:"))
    assert drift.endswith(
        "the machine ran the same fixed work 20.0 % slower in interval 2 than in 1 (fixed-work probe): the drift "
        "compares the graph on a machine of another speed"
    )
    b.probe_cpu_ns = 1.03e6  # within the cost limit: nothing said
    assert "fixed work" not in next(ln for ln in verdicts(_soak(a, b)) if ln.startswith("p99 drift:"))
    b.probe_cpu_ns = None  # not read: nothing claimed
    assert "fixed work" not in next(ln for ln in verdicts(_soak(a, b)) if ln.startswith("p99 drift:"))
