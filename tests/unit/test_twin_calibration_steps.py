"""Calibration's fixed-point steps (twin/calibrate.py) on a fake runtime whose overhead depends on a
stage's length: one step overcorrects, the second takes most of the rest off; each step is recorded."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tailscope.twin import calibrate as cal

SOURCE_US = {"a.x.own_0": 100.0, "a.x.own_1": 60.0}


def _report(medians: dict[str, float]) -> dict:
    return {
        "recorded_rate": {"rate_per_s": 100.0},
        "endpoints": [{"fits": [{"stage": k, "median_us": v} for k, v in medians.items()]}],
    }


class _Replay:
    """The traces of one twin run: 300 of them, as far as calibrate counts."""

    traces = [None] * 300


def _fake(monkeypatch) -> list[dict[str, float]]:
    """infer(source, corrections) fits SOURCE_US − corrections; the replay of a topology adds a wake-up
    of 30 µs plus 20 % of the stage (a runtime whose overhead grows with the stage)."""
    replays: list[dict[str, float]] = []

    def infer(ts, options, corrections=None, diagnosis=None):
        if isinstance(ts, _Replay):
            return {}, _report({k: 30.0 + 1.2 * v for k, v in replays[-1].items()})
        medians = {k: v - (corrections or {}).get(k, 0.0) / 1000.0 for k, v in SOURCE_US.items()}
        return {"medians": medians}, _report(medians)

    def run_twin(topo, model, rate, **kw):
        replays.append(topo["medians"])
        return SimpleNamespace(traces=_Replay())

    monkeypatch.setattr(cal, "infer", infer)
    monkeypatch.setattr(cal, "run_twin", run_twin)
    monkeypatch.setattr(cal.topology_mod, "validate", lambda topo, where: topo)
    monkeypatch.setattr(cal, "_connections", lambda rate, traces: 4)
    return replays


def _replayed(topo: dict) -> dict[str, float]:
    return {k: 30.0 + 1.2 * v for k, v in topo["medians"].items()}


@pytest.mark.parametrize("steps", [1, 2, 3])
def test_each_step_takes_off_what_the_replay_still_adds(monkeypatch, steps):
    _fake(monkeypatch)
    topo, report = cal.calibrate(SimpleNamespace(traces=[]), None, "std-async", steps=steps)
    c = report["calibration"]
    assert [s["step"] for s in c["steps"]] == list(range(1, steps + 1))
    errors = {k: abs(v - SOURCE_US[k]) for k, v in _replayed(topo).items()}
    # One step: the replay of T1 misses by 20 % of the correction; every further step by 20 % of the last.
    first = {"a.x.own_0": 0.2 * 50.0, "a.x.own_1": 0.2 * 42.0}
    for k, e in errors.items():
        assert e == pytest.approx(first[k] * 0.2 ** (steps - 1), rel=1e-6)
    # The largest remaining difference each step saw shrinks step by step.
    seen = [s["largest_difference_us"] for s in c["steps"]]
    assert seen == sorted(seen, reverse=True) and seen[0] == pytest.approx(50.0)
    assert c["added_us"]["a.x.own_0"] == pytest.approx(SOURCE_US["a.x.own_0"] - topo["medians"]["a.x.own_0"], abs=1e-3)


@pytest.mark.parametrize("steps", [0, 6])
def test_steps_outside_one_to_five_are_refused(steps):
    with pytest.raises(ValueError, match="calibration steps must lie in 1"):
        cal.calibrate(SimpleNamespace(traces=[]), None, "std-async", steps=steps)
