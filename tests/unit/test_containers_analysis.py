"""The containers study's analysis (studies/containers.py) on hand-built documents: ratios per model,
CPU per request over the load window, the p99 ratio's bounds only where both intervals exist, the
ping difference either way, and every missing figure with its reason."""

from __future__ import annotations

import pytest

from tailscope.studies.containers import analyze


def _load(p50_ms: float, p99_ms: float, count: int = 2000, errors: int = 0) -> dict:
    return {
        "measurements": [
            {
                "name": "latency_intended",
                "latency": {"count": count, "percentiles": {"50": p50_ms * 1e6, "99": p99_ms * 1e6}},
            }
        ],
        "load": {"requests_completed": count, "errors_total": errors},
        "containers_point": {"front": "front"},
    }


def _graph(cpu_s: float | None, front_requests: int | None = 1000) -> dict:
    services = {"back": {"counters": {"requests": 5000}}}
    if front_requests is not None:
        services["front"] = {"counters": {"requests": front_requests}}
    window = {"cpu_s": cpu_s} if cpu_s is not None else {"cpu_s": None, "unavailable": "/proc unreadable for back"}
    return {"services": services, "window_cpu": window}


def _ping(p50_us: float) -> dict:
    return {"ping": {"rtt": {"percentiles": {"50": p50_us * 1e3}}}}


def test_ratios_per_model_and_the_ping():
    docs = {
        "coroutine/native": _load(2.0, 8.0),
        "coroutine/native-graph": _graph(1.0),
        "coroutine/containers": _load(2.2, 10.0),
        "coroutine/containers-graph": _graph(1.5),
        "ping/native": _ping(20.0),
        "ping/containers": _ping(26.0),
    }
    a = analyze(docs)
    assert a.unavailable is None
    [m] = a.models  # the ping points are not a model
    assert m.model == "coroutine"
    assert m.p50_ratio == pytest.approx(1.1) and m.p99_ratio == pytest.approx(1.25)
    assert m.native.cpu_per_request_ns == pytest.approx(1e6) and m.cpu_ratio == pytest.approx(1.5)
    assert m.p99_ratio_bounds is None  # hand-built latencies have no buckets: no interval
    assert a.ping is not None and a.ping.added_p50_ns == pytest.approx(6000.0)
    # A container network measured faster than loopback is reported as such (a negative difference).
    a = analyze(docs | {"ping/containers": _ping(15.0)})
    assert a.ping is not None and a.ping.added_p50_ns == pytest.approx(-5000.0)


def test_missing_figures_carry_their_reason():
    docs = {
        "std-async/native": _load(2.0, 8.0),
        "std-async/native-graph": _graph(None),
        "std-async/containers": _load(2.0, 8.0),
        "std-async/containers-graph": _graph(1.0, front_requests=None),
    }
    [m] = analyze(docs).models
    assert m.native.cpu_per_request_ns is None and m.native.cpu_unavailable == "/proc unreadable for back"
    assert m.containers.cpu_per_request_ns is None and "front front wrote no document" in str(
        m.containers.cpu_unavailable
    )
    assert m.cpu_ratio is None
    assert analyze(docs).ping is not None and "did not run" in str(analyze(docs).ping.unavailable)


def test_not_run_here_says_why_and_a_stopped_run_keeps_what_it_measured():
    a = analyze({"unavailable": {"containers_unavailable": "dockerd not installed"}})
    assert a.unavailable == "dockerd not installed" and a.models == []
    stopped = analyze(
        {
            "coroutine/native": _load(2.0, 8.0),
            "coroutine/native-graph": _graph(1.0),
            "coroutine/containers": _load(2.0, 8.0),
            "coroutine/containers-graph": _graph(1.0),
            "unavailable": {"containers_unavailable": "stopped: dockerd exited"},
        }
    )
    assert stopped.unavailable == "stopped: dockerd exited" and len(stopped.models) == 1
