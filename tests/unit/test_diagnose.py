"""`tailscope diagnose` (docs/diagnose.md) on span sets whose truth is known: synthetic FCFS queues with c
servers (c = 1, 2, 8, ∞; Poisson and bursty arrivals; lognormal service; seeded), and hand-built traces
with and without bounded fan-out and sequential chains."""

from __future__ import annotations

import heapq
import json

import numpy as np
import pytest

from tailscope.diagnose import calls, capacity
from tailscope.diagnose.concurrency import sweep
from tailscope.diagnose.diagnosis import SCHEMA, diagnose, document, lines
from tailscope.diagnose.queue import ahead_at_arrival, arrival_order, candidates
from tailscope.traces.spans import Span, Trace, TraceSet

MEDIAN_SERVICE_NS = 1_000_000  # 1 ms
SIGMA = 0.5
# The inferred service-time median is within this of the generating distribution's median.
MEDIAN_BOUND = 0.10


def queue_spans(
    servers: int | None, n: int, utilisation: float, seed: int, *, bursty: bool = False, t0_ns: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Spans [arrival, departure] of a FCFS queue in front of `servers` servers (None: no limit) with
    lognormal service times; the true waits. Bursty: runs of 5–40 arrivals alternating between 3× and
    ⅓ of the mean rate."""
    rng = np.random.default_rng(seed)
    mean_service_ns = MEDIAN_SERVICE_NS * np.exp(SIGMA**2 / 2)
    rate_per_ns = utilisation * (servers or 1) / mean_service_ns
    if bursty:
        gaps: list[float] = []
        while len(gaps) < n:
            factor = 3.0 if rng.random() < 0.5 else 1 / 3
            gaps += list(rng.exponential(1 / (rate_per_ns * factor), int(rng.integers(5, 41))))
        gap_ns = np.array(gaps[:n])
    else:
        gap_ns = rng.exponential(1 / rate_per_ns, n)
    arrivals = t0_ns + np.cumsum(gap_ns).astype(np.int64)
    service = rng.lognormal(np.log(MEDIAN_SERVICE_NS), SIGMA, n).astype(np.int64)
    if servers is None:
        return arrivals, arrivals + service, np.zeros(n, dtype=np.int64)
    free = [0] * servers  # when each server is next free
    departures = np.empty(n, dtype=np.int64)
    waits = np.empty(n, dtype=np.int64)
    for i in range(n):
        begin = max(int(arrivals[i]), heapq.heappop(free))
        waits[i] = begin - arrivals[i]
        departures[i] = begin + service[i]
        heapq.heappush(free, int(departures[i]))
    return arrivals, departures, waits


def infer(starts, ends, **kw) -> capacity.Capacity:
    return capacity.infer_capacity(starts, ends, [("t", str(i)) for i in range(len(starts))], **kw)


# ---- the in-flight sweep -------------------------------------------------------------------------


def test_sweep_counts_in_flight_time_and_finds_a_plateau():
    # 0-10: one; 10-20: two; 20-50: two (a plateau); back-to-back spans do not overlap.
    c = sweep([0, 10, 20, 50], [20, 50, 50, 60])
    assert c.max_in_flight == 2
    assert c.busy_ns == 60
    assert c.share_by_level == pytest.approx((20 / 60, 40 / 60))
    assert c.share_at_max == pytest.approx(40 / 60)
    assert c.plateau and c.plateau_ratio == pytest.approx(2.0)
    touching = sweep([0, 10, 20], [10, 20, 30])
    assert touching.max_in_flight == 1 and touching.plateau_ratio is None and not touching.plateau


def test_sweep_of_an_uncapped_load_has_no_plateau():
    a, d, _ = queue_spans(None, 2000, 0.8, seed=3)
    c = sweep(a, d)
    assert c.max_in_flight >= 3
    assert not c.plateau and c.plateau_ratio is not None and c.plateau_ratio < 1


def test_sweep_of_a_server_pool_piles_up_at_its_size():
    # The pool's own spans (service only, the queue is before them) never exceed c = 4 and sit at it.
    a, d, waits = queue_spans(4, 3000, 0.9, seed=4)
    c = sweep(a + waits, d)
    assert c.max_in_flight == 4 and c.plateau


# ---- queue inference -------------------------------------------------------------------------------


@pytest.mark.parametrize("servers", [1, 2, 8])
@pytest.mark.parametrize("bursty", [False, True], ids=["poisson", "bursty"])
def test_queue_inference_recovers_the_number_of_servers(servers, bursty):
    a, d, waits = queue_spans(servers, 3000, 0.8, seed=10 + servers, bursty=bursty)
    cap = infer(a, d)
    assert cap.verdict == capacity.LIMIT, cap.candidates
    assert cap.servers == servers
    assert cap.service_p50_ns == pytest.approx(MEDIAN_SERVICE_NS, rel=MEDIAN_BOUND)
    assert cap.duration_rank_correlation is not None and cap.duration_rank_correlation > capacity.LIMIT_MIN_RHO
    assert cap.queued_arrivals > 0 and cap.waited > 0
    assert cap.confidence == "high"
    # At the true c the reconstruction is exact: every span's inferred wait is its wait.
    assert len(cap.waits) == len(a)
    by_span = {int(w.span_id): w.wait_ns for w in cap.waits}
    assert [by_span[i] for i in range(len(a))] == [int(w) for w in waits]


@pytest.mark.parametrize("bursty", [False, True], ids=["poisson", "bursty"])
def test_no_limit_is_reported_as_no_limit_seen_with_the_load_it_covered(bursty):
    a, d, _ = queue_spans(None, 3000, 3.0, seed=7, bursty=bursty)  # ~3 in flight on average
    cap = infer(a, d)
    assert cap.verdict == capacity.NO_LIMIT_SEEN, cap.candidates
    assert cap.servers is None and cap.at_least == cap.max_ahead + 1 and cap.at_least >= 4
    assert cap.service_p50_ns == pytest.approx(MEDIAN_SERVICE_NS, rel=MEDIAN_BOUND)
    assert cap.waits == () and cap.waited == 0


def test_too_small_a_c_contradicts_fcfs_and_too_large_a_c_leaves_waits_in_the_service_time():
    a, d, _ = queue_spans(2, 3000, 0.8, seed=5)
    fits = {f.servers: f for f in infer(a, d).candidates}
    assert fits[1].inconsistent > 0 and (fits[1].rank_correlation or 0) < 0
    assert fits[2].inconsistent == 0
    assert (fits[3].rank_correlation or 0) > 0.1 and (fits[None].rank_correlation or 0) > 0.1


def test_spans_that_never_overlap_are_not_identifiable():
    starts = np.arange(100) * 10_000_000
    cap = infer(starts, starts + 1_000_000)
    assert cap.verdict == capacity.NOT_IDENTIFIABLE and cap.reason == "no_overlap"
    assert cap.servers is None and cap.max_ahead == 0 and cap.confidence == "none"


def test_too_few_spans_are_not_identifiable():
    a, d, _ = queue_spans(1, capacity.MIN_SPANS - 1, 0.9, seed=1)
    cap = infer(a, d)
    assert cap.verdict == capacity.NOT_IDENTIFIABLE and cap.reason == "few_spans"


def test_a_capacity_that_changes_during_the_recording_is_reported_not_averaged():
    a1, d1, _ = queue_spans(1, 1500, 0.8, seed=21)
    a2, d2, _ = queue_spans(4, 1500, 0.8, seed=22, t0_ns=int(d1.max()) + 1_000_000)
    cap = infer(np.concatenate([a1, a2]), np.concatenate([d1, d2]))
    assert cap.verdict == capacity.CHANGED and cap.servers is None and cap.reason == "halves"
    assert cap.halves is not None
    first, second = cap.halves
    assert (first.verdict, first.servers) == (capacity.LIMIT, 1)
    assert (second.verdict, second.servers) == (capacity.LIMIT, 4)


def test_a_steady_capacity_agrees_in_both_halves():
    a, d, _ = queue_spans(2, 3000, 0.8, seed=23)
    cap = infer(a, d)
    assert cap.halves is not None and [h.servers for h in cap.halves] == [2, 2]


def test_sampled_traces_are_scaled_and_rated_low():
    a, d, _ = queue_spans(2, 3000, 0.8, seed=24)
    cap = infer(a, d, sampling=0.5)
    assert cap.servers == 2 and cap.servers_scaled == pytest.approx(4.0)
    assert cap.confidence == "low"
    assert infer(a, d).servers_scaled is None


def test_number_ahead_counts_earlier_arrivals_still_in_flight():
    starts, ends = np.array([0, 5, 6, 20]), np.array([10, 8, 30, 25])
    order = arrival_order(starts, ends)
    assert ahead_at_arrival(starts, ends, order).tolist() == [0, 1, 2, 1]


def test_candidates_stop_where_no_one_could_wait():
    assert candidates(0) == [None]
    assert candidates(3) == [1, 2, 3, None]
    ladder = candidates(100)
    assert ladder[:32] == list(range(1, 33)) and ladder[-1] is None and max(c for c in ladder if c) <= 100


# ---- call sites: bounded fan-out and sequential chains ---------------------------------------------


def span(sid: str, parent: str | None, service: str, op: str, start_us: int, end_us: int) -> Span:
    return Span(sid, parent, service, op, "client" if parent else "server", start_us * 1000, end_us * 1000)


def trace(tid: str, root: Span, children: list[Span], cp: dict[str, int] | None = None) -> Trace:
    root.children = children
    return Trace(tid, root, root.start_ns, root.end_ns - root.start_ns, cp or {}, len(children) + 1, 0, 0)


def fan_out_trace(tid: str, t0_us: int, layout: str) -> Trace:
    """7 calls of `get` from front:/api: `waves` at most 3 in flight, each launch when one ends;
    `parallel` all at once; `chain` one after the other."""
    durations = [100, 120, 90, 110, 100, 95, 105]
    if layout == "parallel":
        ivs = [(t0_us + 10, t0_us + 10 + d) for d in durations]
    elif layout == "chain":
        ivs, t = [], t0_us + 10
        for d in durations:
            ivs.append((t, t + d))
            t += d + 5
    else:
        free = [t0_us + 10] * 3
        ivs = []
        for d in durations:
            begin = heapq.heappop(free)
            ivs.append((begin, begin + d))
            heapq.heappush(free, begin + d)
    children = [span(f"{tid}-{i}", f"{tid}-r", "front", "get", s, e) for i, (s, e) in enumerate(ivs)]
    root = span(f"{tid}-r", None, "front", "/api", t0_us, max(e for _, e in ivs) + 10)
    return trace(tid, root, children)


def traceset(traces: list[Trace]) -> TraceSet:
    return TraceSet(traces, [], {}, len(traces))


def test_waves_of_k_are_found_where_they_are():
    d = diagnose(traceset([fan_out_trace(f"w{i}", i * 10_000, "waves") for i in range(5)]))
    assert len(d.bounded_fan_outs) == 1
    f = d.bounded_fan_outs[0]
    assert (f.parent_operation, f.operation, f.k, f.instances, f.bounded, f.calls_max) == ("/api", "get", 3, 5, 5, 7)
    assert f.span_p50_ns > f.longest_p50_ns
    assert d.sequential_chains == ()


@pytest.mark.parametrize("layout", ["parallel", "chain"])
def test_no_waves_where_the_fan_out_is_unbounded_or_sequential(layout):
    d = diagnose(traceset([fan_out_trace(f"{layout}{i}", i * 10_000, layout) for i in range(5)]))
    assert d.bounded_fan_outs == ()


def test_sequential_chains_are_found_where_they_are():
    d = diagnose(traceset([fan_out_trace(f"c{i}", i * 10_000, "chain") for i in range(5)]))
    assert len(d.sequential_chains) == 1
    ch = d.sequential_chains[0]
    assert (ch.operation, ch.instances, ch.sequential, ch.calls_max, ch.gap_p50_ns) == ("get", 5, 5, 7, 5000.0)
    assert ch.chain_p50_ns > ch.longest_p50_ns == 120_000


@pytest.mark.parametrize("layout", ["parallel", "waves"])
def test_no_chain_where_calls_overlap(layout):
    d = diagnose(traceset([fan_out_trace(f"{layout}{i}", i * 10_000, layout) for i in range(5)]))
    assert d.sequential_chains == ()


def mixed_client_trace(tid: str, t0_us: int) -> Trace:
    """front:/api makes one "HTTP GET" to lookup:/find (alone, first), then 7 more "HTTP GET"s to
    calc:/go in waves of 3 — one client operation name for two servers, as OpenTelemetry's HTTP
    clients name them."""
    lookup = span(f"{tid}-l", f"{tid}-r", "front", "HTTP GET", t0_us + 5, t0_us + 400)
    lookup.server = span(f"{tid}-ls", f"{tid}-l", "lookup", "/find", t0_us + 6, t0_us + 399)
    waves = fan_out_trace(tid, t0_us + 400, "waves").root.children
    for c in waves:
        c.operation = "HTTP GET"
        c.server = span(c.span_id + "s", c.span_id, "calc", "/go", c.start_ns // 1000, c.end_ns // 1000)
    root = span(f"{tid}-r", None, "front", "/api", t0_us, max(c.end_ns for c in waves) // 1000 + 10)
    return trace(tid, root, [lookup, *waves])


def test_one_client_name_calling_two_servers_is_split_by_callee():
    d = diagnose(traceset([mixed_client_trace(f"m{i}", i * 10_000) for i in range(5)]))
    (f,) = d.bounded_fan_outs
    assert (f.service, f.operation, f.k, f.calls_max) == ("front", "HTTP GET → calc:/go", 3, 7)
    # Without the split the lone first call (never overlapping the waves) hid them.
    assert d.sequential_chains == ()


def test_a_client_name_calling_one_server_keeps_its_name():
    traces = [fan_out_trace(f"w{i}", i * 10_000, "waves") for i in range(5)]
    for t in traces:
        for c in t.root.children:
            c.server = span(c.span_id + "s", c.span_id, "calc", "/go", c.start_ns // 1000, c.end_ns // 1000)
    (f,) = diagnose(traceset(traces)).bounded_fan_outs
    assert f.operation == "get"


def test_a_launch_that_did_not_wait_for_a_slot_is_not_a_wave():
    # At most 2 in flight, but the third call starts 500 µs after the first two ended: a second phase of
    # the handler, not a slot freed.
    ivs = ((0, 100_000), (0, 100_000), (600_000, 700_000))
    assert calls.max_overlap(ivs) == 2
    assert not calls.gated_launches(ivs, 2, 50_000)
    assert calls.gated_launches(((0, 100_000), (0, 100_000), (120_000, 200_000)), 2, 50_000)


# ---- a whole diagnosis -----------------------------------------------------------------------------


def queued_traces(servers: int | None, n: int, seed: int) -> list[Trace]:
    """One trace per request: front:/api (10 µs either side) around one call of store:query queued at
    `servers` servers."""
    a, d, _ = queue_spans(servers, n, 0.8 if servers else 2.0, seed=seed)
    out = []
    for i in range(n):
        root = Span(f"r{i}", None, "front", "/api", "server", int(a[i]) - 10_000, int(d[i]) + 10_000)
        child = Span(f"q{i}", f"r{i}", "store", "query", "client", int(a[i]), int(d[i]))
        cp = {"front": 20_000, "store": int(d[i] - a[i])}
        out.append(trace(f"{i:x}", root, [child], cp))
    return out


def test_the_diagnosis_finds_the_lock_and_says_so_in_values_and_lines():
    traces = queued_traces(1, 1500, seed=31)
    d = diagnose(traceset(traces + traces[:10]))  # ten traces seen twice (Jaeger, once per service)
    assert d.traces == 1500 and d.duplicate_traces == 10 and not d.never_overlapped
    store = next(p for p in d.populations if (p.service, p.operation) == ("store", "query"))
    assert store.kind == "operation" and store.capacity.verdict == capacity.LIMIT and store.capacity.servers == 1
    # One caller only: the call site is the operation's spans and is not repeated.
    assert [p.kind for p in d.populations].count("call_site") == 0
    assert len(d.slow_vs_typical) == 1 and d.slow_vs_typical[0].services[0].service == "store"
    text = "\n".join(lines(d))
    assert "store:query: capacity 1 — a queue in front of 1 server" in text
    assert "slowest 15 of 1500 traces" in text
    doc = document(d, ["x.json"])
    assert doc["schema"] == SCHEMA
    json.dumps(doc, allow_nan=False)  # a valid JSON document: no NaN or inf
    rows = next(p for p in doc["populations"] if p["service"] == "store")["capacity"]["waits"]["rows"]
    assert len(rows) == 1500 and all(r[2] >= 0 for r in rows)


def test_one_request_at_a_time_says_record_at_a_higher_rate():
    traces = []
    for i in range(50):
        t0 = i * 10_000_000
        root = Span(f"r{i}", None, "front", "/api", "server", t0, t0 + 2_000_000)
        child = Span(f"q{i}", f"r{i}", "store", "query", "client", t0 + 100_000, t0 + 1_900_000)
        traces.append(trace(f"{i:x}", root, [child]))
    d = diagnose(traceset(traces))
    assert d.never_overlapped
    assert all(p.capacity.verdict == capacity.NOT_IDENTIFIABLE for p in d.populations)
    assert any("the traces never queued" in line and "record at a higher rate" in line for line in lines(d))


def test_sampling_is_stated_and_scales_the_capacity():
    d = diagnose(traceset(queued_traces(2, 1500, seed=32)), sampling=0.25)
    store = next(p for p in d.populations if p.service == "store")
    assert store.capacity.servers == 2 and store.capacity.servers_scaled == pytest.approx(8.0)
    text = "\n".join(lines(d))
    assert "sampling 0.25" in text and "≈ 8 scaled by 1/sampling 0.25" in text


def test_a_shared_child_gets_a_call_site_per_caller():
    traces = queued_traces(1, 600, seed=33)
    for t in traces[::2]:  # half the calls come from another handler
        t.root.service, t.root.operation = "admin", "/report"
    d = diagnose(traceset(traces))
    sites = [p for p in d.populations if p.kind == "call_site"]
    assert {(p.parent_service, p.parent_operation) for p in sites} == {("admin", "/report"), ("front", "/api")}
    assert all(p.capacity.spans == 300 for p in sites)


def test_a_child_of_another_service_outside_its_parent_is_clamped_and_counted():
    root = Span("r", None, "front", "/api", "server", 1000, 2000)
    late = Span("s", "r", "store", "query", "server", 1500, 2600)  # ends after its parent: another clock
    d = diagnose(traceset([trace("1", root, [late])]))
    assert d.clamped_children == 1
    assert any(line.startswith("clock skew:") for line in lines(d))
