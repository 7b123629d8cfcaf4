"""A cache read's miss path from its span's answer (docs/twin.md "Cache misses"): tailscope-svc tags a
real store read that has a miss path with tailscope.cache = hit | miss, and inference reads the
stores right after a read that missed as its `on_miss` even when no trace shows a hit (a cold cache,
or one its miss path never fills). Hand-built traces whose truth is known; no engine."""

from __future__ import annotations

import numpy as np

from tailscope.traces.spans import Span, Trace, TraceSet, cache_hit_ratios, split_warmup
from tailscope.twin.infer import InferOptions, infer

US = 1_000


def cache_traces(n: int, hit_share: float, *, tagged: bool = True, seed: int = 3) -> TraceSet:
    """api:/get reads memcached (a hit: 60 µs; a miss: 60 µs then a 300 µs document-store read),
    then calls backend:fetch. `tagged`: the read carries its answer, as tailscope-svc writes it."""
    rng = np.random.default_rng(seed)
    traces = []
    for i in range(n):
        t0 = 10_000 * US * (i + 1)
        hit = rng.random() < hit_share
        root = Span(f"{i}-r", None, "api", "/get", "server", t0, t0 + 1000 * US)
        get = Span(f"{i}-g", root.span_id, "api", "user_memcached_get_client", "client", t0 + 20 * US, t0 + 80 * US)
        if tagged:
            get.cache = "hit" if hit else "miss"
        root.children.append(get)
        at = get.end_ns
        if not hit:
            find = Span(f"{i}-f", root.span_id, "api", "user_mongo_find_client", "client", at + 5 * US, at + 305 * US)
            root.children.append(find)
            at = find.end_ns
        client = Span(f"{i}-c", root.span_id, "api", "fetch_client", "client", at + 20 * US, at + 220 * US)
        server = Span(f"{i}-s", client.span_id, "backend", "fetch_server", "server", at + 22 * US, at + 218 * US)
        client.children.append(server)
        client.server, server.is_server = server, True
        root.children.append(client)
        traces.append(Trace(f"{i}", root, t0, 1000 * US, {"api": 1}, 5, 1, 0))
    return TraceSet(traces, [], {}, n)


def api_stores(topo: dict) -> list[dict]:
    api = next(s for s in topo["services"] if s["name"] == "api")
    stages = api["endpoints"][0]["stages"]
    return [s["store"] for s in stages if "store" in s and s["store"]["system"] != "own-time"]


def test_a_read_that_missed_every_time_has_its_document_store_read_as_on_miss():
    topo, report = infer(cache_traces(200, 0.0), InferOptions(capacities=False))
    stores = api_stores(topo)
    assert [s["span"] for s in stores] == ["user_memcached_get_client"]  # the find is no sibling stage
    assert stores[0]["hit_ratio"] == 0.0
    assert [m["store"]["span"] for m in stores[0]["on_miss"]] == ["user_mongo_find_client"]
    ep = next(e for e in report["endpoints"] if e["service"] == "api")
    assert ep["hit_ratios"] == [
        {"store": "user_memcached_get_client", "hit_ratio": 0.0, "misses": 200, "instances": 200}
    ]


def test_without_the_answer_an_always_following_read_is_a_sibling_stage():
    """What the tag adds: the same traces untagged cannot tell a miss path that always ran from a stage."""
    stores = api_stores(infer(cache_traces(200, 0.0, tagged=False), InferOptions(capacities=False))[0])
    assert [s["span"] for s in stores] == ["user_memcached_get_client", "user_mongo_find_client"]
    assert "on_miss" not in stores[0]


def test_hits_and_misses_give_the_hit_ratio_of_the_answers():
    ts = cache_traces(400, 0.7)
    hits = sum(1 for t in ts.traces if t.root.children[0].cache == "hit")
    for traces in (ts, cache_traces(400, 0.7, tagged=False)):  # tagged or not: hits show the hit form
        stores = api_stores(infer(traces, InferOptions(capacities=False))[0])
        assert [s["span"] for s in stores] == ["user_memcached_get_client"]
        assert stores[0]["hit_ratio"] == round(hits / 400, 4)
        assert [m["store"]["span"] for m in stores[0]["on_miss"]] == ["user_mongo_find_client"]


def test_the_warm_window_starts_its_warm_up_after_the_first_root_and_reads_the_caches_answers():
    """The twin study's source window (docs/twin.md "The warm source window"): traces are 10 ms apart."""
    ts = cache_traces(300, 0.5)
    warm_up, window = split_warmup(ts.traces, 1.0)
    assert (len(warm_up), len(window)) == (100, 200)  # roots at 10, 20, … ms: 1 s holds the first 100
    assert min(t.start_ns for t in window) - min(t.start_ns for t in ts.traces) == 1000 * 1000 * US
    hits = sum(1 for t in window if t.root.children[0].cache == "hit")
    assert cache_hit_ratios(window) == {"user_memcached_get_client": hits / 200}
    assert cache_hit_ratios(cache_traces(10, 0.5, tagged=False).traces) == {}  # no tag, no figure (not 0)
    assert split_warmup([], 1.0) == ([], [])


def test_a_read_that_never_missed_has_its_miss_path_left_out_of_the_structure_check():
    """Warm caches hit on every read of the window, so the inferred topology has no miss path there;
    the check compares the rest and names the read (docs/twin.md), instead of a difference."""
    from tailscope.studies.twin import structure_text
    from tailscope.twin.structure import differences

    def doc(on_miss: bool) -> dict:
        read = {"span": "rate_memcached_get_client", "system": "memcached", "latency": 60}
        if on_miss:
            read["on_miss"] = [{"store": {"span": "rate_mongo_find_client", "system": "mongodb", "latency": 300}}]
        return {
            "front": {"service": "rate", "endpoint": "get"},
            "services": [{"name": "rate", "endpoints": [{"name": "get", "stages": [{"store": read}]}]}],
        }

    expected, inferred = doc(on_miss=True), doc(on_miss=False)
    assert differences(expected, inferred)  # without the hit ratios, a difference
    assert differences(expected, inferred, never_missed=frozenset({"rate_memcached_get_client"})) == []
    # Another read's name leaves the difference in place.
    assert differences(expected, inferred, never_missed=frozenset({"other_get_client"}))
    text = structure_text({"structure_differences": [], "structure_not_observed": ["rate_memcached_get_client"]})
    assert text.startswith("identical (not compared: the miss path of rate_memcached_get_client")
    assert (
        structure_text({"structure_differences": ["x: expected a, got b"]}) == "1 difference(s): x: expected a, got b"
    )
