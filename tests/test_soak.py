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
