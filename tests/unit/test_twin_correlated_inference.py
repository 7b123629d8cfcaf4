"""Inference carries the measured within-request dependence of endpoint delays as each stage's
`shared` loading (docs/twin.md "Correlated stage delays"), and the engine's validator accepts the
field and refuses one out of range. Hand-built traces whose truth is known."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import needs_engine
from tailscope.lab.topology import TopologyError, validate
from tailscope.traces.spans import Span, Trace, TraceSet
from tailscope.twin.commands import correlation_line
from tailscope.twin.infer import InferOptions, infer

US = 1_000


def two_tier_traces(n: int, loading: float, seed: int = 5) -> TraceSet:
    """api:/get reads its cache (lognormal, median 100 µs), then calls backend:fetch, which reads
    its store (lognormal, median 150 µs). Both reads' normals load `loading` on one per-request
    factor, so their normal scores correlate loading²."""
    rng = np.random.default_rng(seed)
    traces = []
    for i in range(n):
        z = rng.standard_normal()
        za, zb = (loading * z + np.sqrt(1 - loading**2) * rng.standard_normal() for _ in range(2))
        read_a, read_b = int(100 * US * np.exp(0.5 * za)), int(150 * US * np.exp(0.5 * zb))
        t0 = 100_000 * US * (i + 1)
        get = Span(
            f"{i}-g", f"{i}-r", "api", "user_memcached_get_client", "client", t0 + 20 * US, t0 + 20 * US + read_a
        )
        at = get.end_ns + 10 * US
        server = Span(f"{i}-s", f"{i}-c", "backend", "fetch_server", "server", at + 2 * US, at + 7 * US + read_b)
        find = Span(
            f"{i}-f", server.span_id, "backend", "post_mongo_find_client", "client", at + 4 * US, at + 4 * US + read_b
        )
        server.children.append(find)
        client = Span(f"{i}-c", f"{i}-r", "api", "fetch_client", "client", at, server.end_ns + 2 * US)
        client.children.append(server)
        client.server, server.is_server = server, True
        end = client.end_ns + 10 * US
        root = Span(f"{i}-r", None, "api", "/get", "server", t0, end)
        root.children += [get, client]
        traces.append(Trace(f"{i}", root, t0, end - t0, {"api": 1, "backend": 1}, 4, 1, 0))
    return TraceSet(traces, [], {}, n)


def store_latencies(topo: dict, service: str) -> list[dict]:
    svc = next(s for s in topo["services"] if s["name"] == service)
    return [st["store"]["latency"] for st in svc["endpoints"][0]["stages"] if "store" in st]


def test_correlated_endpoints_carry_their_loading() -> None:
    topo, report = infer(two_tier_traces(800, 0.8), InferOptions(capacities=False))
    doc = report["correlation"]
    assert doc["pairs"] == 1
    assert doc["mean_correlation"] == pytest.approx(0.64, abs=0.08)
    # One pair: the fit splits its correlation evenly, √0.64 each.
    loadings = {e["service"]: e["loading"] for e in doc["loadings"]}
    assert loadings == {"api": pytest.approx(0.8, abs=0.06), "backend": pytest.approx(0.8, abs=0.06)}
    reads = [d for s in ("api", "backend") for d in store_latencies(topo, s) if d.get("kind") != "constant"]
    assert reads and all(d["shared"] == pytest.approx(0.8, abs=0.06) for d in reads)
    assert "mean normal-score correlation 0.6" in correlation_line(doc)


def test_independent_endpoints_carry_next_to_nothing() -> None:
    _, report = infer(two_tier_traces(800, 0.0), InferOptions(capacities=False))
    assert abs(report["correlation"]["mean_correlation"]) < 0.1
    assert all(e["loading"] < 0.35 for e in report["correlation"]["loadings"])


def test_turned_off_every_stage_draws_independently() -> None:
    topo, report = infer(two_tier_traces(800, 0.8), InferOptions(capacities=False, correlation=False))
    assert report["correlation"] == {"mean_correlation": None, "unavailable": "not measured (--no-correlation)"}
    assert report["assumptions"]["correlation"] is False
    assert not any("shared" in d for s in ("api", "backend") for d in store_latencies(topo, s))
    assert "unavailable (not measured (--no-correlation))" in correlation_line(report["correlation"])


def test_too_few_traces_is_null_with_the_reason() -> None:
    topo, report = infer(two_tier_traces(30, 0.8), InferOptions(capacities=False))
    assert report["correlation"]["mean_correlation"] is None
    assert "50 traces" in report["correlation"]["unavailable"]
    assert not any("shared" in d for s in ("api", "backend") for d in store_latencies(topo, s))


@needs_engine("tailscope-svc")
def test_the_engine_accepts_the_inferred_loading_and_refuses_one_out_of_range() -> None:
    topo, _ = infer(two_tier_traces(800, 0.8), InferOptions(capacities=False))
    normalised = validate(topo, "inferred")
    assert any("shared" in d for d in store_latencies(normalised, "api"))
    store_latencies(topo, "api")[0]["shared"] = 0.99
    with pytest.raises(TopologyError, match=r"'shared' is 0.99; it must be a number in 0 … 0.95"):
        validate(topo, "inferred")
