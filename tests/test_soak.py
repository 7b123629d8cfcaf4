"""The soak's verdicts are computed from its intervals (tailscope.soak)."""

from tailscope.soak import Interval, ModelSoak, ProcessSample, verdicts


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

    from tailscope.soak import sample_process, settled_samples

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
    from tailscope.soak import IntervalCost

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
    from tailscope.soak import theil_sen_slope

    assert theil_sen_slope([(1, 10.0), (2, 10.0), (3, 40.0), (4, 10.0), (5, 10.0)]) == 0.0
    assert theil_sen_slope([(1, 1.0), (2, 2.0), (3, 3.0)]) == 1.0
    assert theil_sen_slope([(1, 5.0)]) is None


def test_interval_cost_splits_the_machines_cpu():
    from tailscope.procstat import CLK_TCK, SystemSnapshot
    from tailscope.soak import CpuMark, interval_cost

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
