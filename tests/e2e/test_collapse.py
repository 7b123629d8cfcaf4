"""The blocking-pool collapse study (docs/collapse-study.md): the tiny form end to end, and the
reading of its points (the shape verdict, the N = cores × (1 + wait/compute) sizing)."""

from __future__ import annotations

import pytest

from conftest import needs_engine, report_section, run_study_alone
from tailscope.measure.measurement import point_flags
from tailscope.studies import collapse
from tailscope.studies.common import cite


def _point(variant: str, users: int, rate: float, workers: int = 1, flags=(), qw_mean=None, mean_ns=1e6, **kw):
    p = {"variant": variant, "users": users, "achieved_per_s": rate, "workers": workers, "cores": 1}
    p |= {"flags": list(flags), "mean_ns": mean_ns, "pinning": {"graph_cpus": [1], "load_cpus": [0]}}
    if qw_mean is not None:
        p["queue_wait"] = {"mean": qw_mean, "percentiles": {"50": qw_mean, "99": 2 * qw_mean}}
    return p | kw


@needs_engine("tailscope-svc", "tailscope-load")
@pytest.mark.serial  # compares two measured rates: run alone (docs/testing.md)
def test_tiny_form_callback_serves_at_least_blocking_with_equal_pools(tmp_path):
    _, report, docs = run_study_alone(collapse.STUDY, tmp_path, {"collapse_form": "tiny"})
    points = [d.document["collapse_point"] for d in docs]
    measured = [p for p in points if "achieved_per_s" in p]
    top = max(collapse.PLANS["tiny"].users)
    blocking = next(p for p in measured if p["variant"] == "blocking" and p["users"] == top)
    callback = next(p for p in measured if p["variant"] == "callback" and p["users"] == top)
    # Equal pools, read back from the graph's own document, not from what the study asked for.
    assert blocking["model_details"]["workers"] == callback["model_details"]["workers"] == blocking["cores"]
    assert callback["achieved_per_s"] >= blocking["achieved_per_s"]
    # The limbo is measured in the pool models: a count for every request that reached a thread.
    assert blocking["queue_wait"]["count"] > 0 and callback["queue_wait"]["count"] > 0
    section = report_section(report, "collapse")
    assert any(w in section for w in ("shape holds here", "shape does not hold here", "not comparable here"))
    assert "Limbo" in section


def test_shape_verdict_reads_the_ratios_and_cites_flags():
    points = [
        _point("sync-no-io", 4, 4000),
        _point("blocking", 4, 500, qw_mean=3e6),
        _point("callback", 4, 2000, qw_mean=1e5),
    ]
    s = collapse.shape(points)
    assert s["holds"] is True and s["ours"]["blocking"] == pytest.approx(0.125)
    assert "3 ms" in s["verdict"] and "100 µs" in s["verdict"]
    # Only a flagged callback point: the verdict may use it, but must say it is flagged.
    points[2]["flags"] = ["12 errors"]
    s = collapse.shape(points)
    assert "flagged: 12 errors" in s["verdict"]
    # Blocking as fast as callbacks: the shape does not hold, and the line says so.
    s = collapse.shape([_point("sync-no-io", 4, 4000), _point("blocking", 4, 2000), _point("callback", 4, 2000)])
    assert s["holds"] is False and s["verdict"].startswith("The article's shape does not hold")


def test_sizing_uses_measured_wait_and_compute_without_queueing():
    sync = _point("sync-no-io", 1, 10_000, mean_ns=150e3, qw_mean=50e3)
    sync["procstat"] = {"window_s": 1.0, "processes": {"front": {"run_ns": 1e9}}}  # 100 µs per request
    block = _point("blocking", 1, 800, mean_ns=1_300e3, qw_mean=200e3)
    size = collapse.sizing([sync, block], cores=2)
    assert size["compute_ns"] == pytest.approx(100e3)
    assert size["wait_ns"] == pytest.approx((1_300e3 - 200e3) - (150e3 - 50e3))
    assert size["workers"] == round(2 * (1 + 1_000e3 / 100e3))
    # A flagged point is not a measurement of wait or compute.
    sync["flags"] = ["generator-limited"]
    assert "unavailable" in collapse.sizing([sync, block], cores=2)


def test_cite_always_carries_the_flags():
    assert cite("x", []) == "x"
    assert "saturated (backlog grew)" in cite("x", point_flags({"saturated": True, "why_saturated": ["backlog grew"]}))
