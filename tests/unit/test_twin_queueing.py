"""A twin that queues (docs/twin.md "Capacities", "CPU or waiting"): diagnose's findings → the topology's
capacities, stages fitted to inferred service times, and the CPU/wait split of own time, on hand-built
traces whose truth is known (no engine: the spans are built in Python)."""

from __future__ import annotations

import heapq
import json
from collections.abc import Callable

import numpy as np
import pytest

from tailscope.traces.spans import Span, Trace, TraceSet
from tailscope.twin import cpusplit
from tailscope.twin.infer import InferOptions, infer

MS = 1_000_000
US = 1_000


class Builder:
    """One trace's spans: a root server span and children added under it."""

    def __init__(self, trace_id: str) -> None:
        self.trace_id = trace_id
        self.n = 0

    def span(self, service: str, op: str, start: int, end: int, kind: str, parent: Span | None = None) -> Span:
        self.n += 1
        s = Span(f"{self.trace_id}-{self.n}", parent.span_id if parent else None, service, op, kind, start, end)
        if parent is not None:
            parent.children.append(s)
        return s

    def rpc(self, parent: Span, caller: str, callee: str, op: str, start: int, end: int) -> Span:
        client = self.span(caller, f"{op}_client", start, end, "client", parent)
        server = self.span(callee, f"{op}_server", start + 2 * US, end - 2 * US, "server", client)
        client.server, server.is_server = server, True
        return server


def traceset(roots: list[tuple[str, Span]]) -> TraceSet:
    traces = [
        Trace(tid, root, root.start_ns, root.end_ns - root.start_ns, {root.service: 1}, 3, 1, 0) for tid, root in roots
    ]
    return TraceSet(traces, [], {}, len(traces))


def fcfs(arrivals: np.ndarray, service: np.ndarray, servers: int) -> np.ndarray:
    """Departures of a FCFS queue in front of `servers` servers."""
    free = [0] * servers
    out = np.empty(len(arrivals), dtype=np.int64)
    for i, a in enumerate(arrivals):
        begin = max(int(a), heapq.heappop(free))
        out[i] = begin + int(service[i])
        heapq.heappush(free, int(out[i]))
    return out


def lock_traces(n: int = 1500, utilisation: float = 0.8, seed: int = 7, *, untagged_store: bool = True) -> TraceSet:
    """api:/get takes a c = 1 lock around a "mysql" store span (its own tracer service, under the handler,
    starting before the wait), then calls backend. Service times lognormal, median 1 ms."""
    rng = np.random.default_rng(seed)
    mean = MS * np.exp(0.5**2 / 2)
    arrivals = np.cumsum(rng.exponential(mean / utilisation, n)).astype(np.int64) + 10 * MS
    service = rng.lognormal(np.log(MS), 0.5, n).astype(np.int64)
    store_start = arrivals + 20 * US
    store_end = fcfs(store_start, service, 1)
    roots = []
    for i in range(n):
        b = Builder(f"t{i}")
        root = b.span("api", "/get", int(arrivals[i]), int(store_end[i]) + 400 * US, "server")
        db = b.span("mysql", "SQL SELECT", int(store_start[i]), int(store_end[i]), "client", root)
        if untagged_store:  # no span.kind: the analyzer pairs a child of another service as a server
            db.kind, db.is_server = "unspecified", True
        b.rpc(root, "api", "backend", "fetch", int(store_end[i]) + 50 * US, int(store_end[i]) + 350 * US)
        roots.append((b.trace_id, root))
    return traceset(roots)


def endpoint(topo: dict, service: str, name: str) -> dict:
    svc = next(s for s in topo["services"] if s["name"] == service)
    return next(e for e in svc["endpoints"] if e["name"] == name)


def stores(ep: dict) -> list[dict]:
    return [s["store"] for s in ep["stages"] if "store" in s and s["store"]["system"] != "own-time"]


def fit(report: dict, label: str) -> dict:
    return next(f for e in report["endpoints"] for f in e["fits"] if f["stage"] == label)


# ---- capacities: the mapping and the service-time fit ---------------------------------------------


@pytest.fixture(scope="module")
def lock_twin() -> tuple[dict, dict]:
    return infer(lock_traces(), InferOptions())


def test_a_lock_found_by_diagnose_becomes_the_store_stages_capacity(lock_twin):
    topo, report = lock_twin
    ep = endpoint(topo, "api", "get")
    (store,) = stores(ep)
    assert store["span"] == "SQL SELECT" and store["capacity"] == 1
    assert store["system"] == "sql"  # from the span name ("mysql" the tracer's service would say it too)
    # a store in its own tracer service is the handler's store, not a call to a service "mysql"
    assert "mysql" not in {s["name"] for s in topo["services"]}
    (carried,) = [c for c in report["capacities"] if c["stage"] == "api.get.SQL SELECT"]
    assert carried["population"] == "mysql:SQL SELECT" and carried["capacity"] == 1
    assert carried["confidence"] == "high" and "ρ" in carried["evidence"]
    json.dumps(report, allow_nan=False)  # the inference report is written as plain JSON


def test_a_handler_around_the_lock_is_its_shadow_not_a_second_queue(lock_twin):
    """api:/get's spans queue too (they contain the lock's queue), but its waits lie inside the store
    stage, not before its first stage: carried, the twin would queue twice and a bigger lock would buy
    nothing. Listed as not carried, with why."""
    topo, report = lock_twin
    assert "capacity" not in endpoint(topo, "api", "get")
    shadow = next(n for n in report["not_carried"] if n["population"] == "api:/get")
    assert shadow["verdict"] == "limit" and "further down" in shadow["why"]


def test_a_queue_before_the_first_stage_is_the_endpoints_capacity():
    """A worker pool of 1 in front of the handler: the wait is at the server span's start, before its
    stages — the endpoint's capacity, and its first own-time gap is fitted without the wait."""
    rng = np.random.default_rng(4)
    n = 800
    arrivals = np.cumsum(rng.exponential(MS * 1.25, n)).astype(np.int64) + 10 * MS
    work = rng.lognormal(np.log(MS), 0.3, n).astype(np.int64)
    ends = fcfs(arrivals, work, 1)
    roots = []
    for i in range(n):
        b = Builder(f"p{i}")
        root = b.span("api", "/get", int(arrivals[i]), int(ends[i]), "server")
        begin = int(ends[i] - work[i])
        b.rpc(root, "api", "backend", "fetch", begin + int(work[i] // 2), int(ends[i]) - 50 * US)
        roots.append((b.trace_id, root))
    topo, report = infer(traceset(roots), InferOptions())
    assert endpoint(topo, "api", "get")["capacity"] == 1
    assert fit(report, "api.get.own_0")["median_us"] == pytest.approx(500, rel=0.2)  # work/2, not wait + work/2


def test_the_store_behind_a_capacity_is_fitted_to_service_times_not_durations(lock_twin):
    """At utilisation 0.8 a c = 1 queue's spans last several times their service time: the stage must
    replay the service time (median 1 ms), the twin's limiter adds the wait back."""
    _, report = lock_twin
    f = fit(report, "api.get.SQL SELECT")
    assert f["median_us"] == pytest.approx(1000, rel=0.12)
    raw = fit(infer(lock_traces(), InferOptions(capacities=False))[1], "api.get.SQL SELECT")
    assert raw["median_us"] > 1.8 * f["median_us"]


def test_no_capacities_reproduces_the_twin_without_queues():
    topo, report = infer(lock_traces(), InferOptions(capacities=False))
    (store,) = stores(endpoint(topo, "api", "get"))
    assert "capacity" not in store
    assert report["capacities"] == [] and report["not_carried"] == []
    assert report["assumptions"]["capacities"] is False


def test_populations_without_a_limit_are_listed_as_not_carried_with_why(lock_twin):
    topo, report = lock_twin
    by_pop = {n["population"]: n for n in report["not_carried"]}
    # backend's handler never queues: its server spans are "no limit seen" (or too short to tell)
    assert by_pop["backend:fetch_server"]["verdict"] in ("no_limit_seen", "not_identifiable")
    assert by_pop["backend:fetch_server"]["why"]
    assert "capacity" not in endpoint(topo, "backend", "fetch")
    assert all("capacity" not in c.get("call", {}) for c in endpoint(topo, "api", "get")["stages"])


def test_a_population_that_never_overlapped_gets_no_capacity():
    """One request at a time: nothing queued, so nothing is carried — and the report says why."""
    ts = lock_traces(n=200, utilisation=0.02)
    topo, report = infer(ts, InferOptions())
    assert "capacity" not in stores(endpoint(topo, "api", "get"))[0]
    pop = next(n for n in report["not_carried"] if n["population"] == "mysql:SQL SELECT")
    assert pop["verdict"] in ("not_identifiable", "no_limit_seen")


def fan_out_traces(k: int, calls: int, n: int = 40, *, mixed: bool = False) -> TraceSet:
    """api:/route calls route `calls` times in waves of k (a worker pool of k per request); `mixed`
    adds a call to geo overlapping the first wave (a group of two call sites)."""
    roots = []
    for i in range(n):
        b = Builder(f"f{i}")
        t0 = i * 100 * MS
        root = b.span("api", "/route", t0, t0 + 60 * MS, "server")
        ends = [t0 + 100 * US] * k
        for j in range(calls):
            start = sorted(ends)[0] + 10 * US
            ends.remove(sorted(ends)[0])
            end = start + (2 + (j * 7 + i) % 3) * MS
            ends.append(end)
            b.rpc(root, "api", "route", "find", start, end)
        if mixed:
            b.rpc(root, "api", "geo", "near", t0 + 150 * US, t0 + 1 * MS)
        roots.append((b.trace_id, root))
    return traceset(roots)


def group_of(topo: dict) -> dict:
    return next(s["group"] for s in endpoint(topo, "api", "route")["stages"] if "group" in s)


def test_waves_of_k_become_the_groups_max_in_flight():
    topo, report = infer(fan_out_traces(3, 8), InferOptions())
    g = group_of(topo)
    assert g["max_in_flight"] == 3 and len(g["calls"]) == 8
    (carried,) = [c for c in report["capacities"] if c["kind"] == "bounded_fan_out"]
    assert carried["max_in_flight"] == 3 and carried["population"] == "api:/route → api:find_client"


def test_a_fan_out_bound_is_not_carried_into_a_group_with_other_calls():
    topo, report = infer(fan_out_traces(3, 8, mixed=True), InferOptions())
    assert "max_in_flight" not in group_of(topo)
    (left,) = [n for n in report["not_carried"] if n["kind"] == "bounded_fan_out"]
    assert left["k"] == 3 and "other calls" in left["why"]


def test_an_unbounded_fan_out_gets_no_max_in_flight():
    topo, report = infer(fan_out_traces(8, 8), InferOptions())
    assert "max_in_flight" not in group_of(topo)
    assert not [c for c in report["capacities"] if c["kind"] == "bounded_fan_out"]


# ---- the CPU/wait split of own time ---------------------------------------------------------------


def test_own_time_that_grows_with_concurrency_is_cpu_and_flat_own_time_is_waiting():
    rng = np.random.default_rng(3)
    in_flight = rng.integers(0, 10, 200)
    grows = cpusplit.decide(list(MS + in_flight * 300 * US + rng.integers(0, 200 * US, 200)), list(in_flight))
    assert (grows.rule, grows.fraction) == (cpusplit.GROWS, 1.0) and grows.rho > 0.5 and grows.samples == 200
    flat = cpusplit.decide(list(rng.lognormal(np.log(50 * MS), 0.2, 200).astype(int)), list(in_flight))
    assert (flat.rule, flat.fraction) == (cpusplit.FLAT, 0.0) and abs(flat.rho) < 0.2
    few = cpusplit.decide([MS] * 10, list(range(10)))
    assert few.rule == cpusplit.UNDECIDED and few.fraction == 1.0 and "fewer than 30" in few.why
    alone = cpusplit.decide(list(range(MS, MS + 100)), [0] * 100)
    assert alone.rule == cpusplit.UNDECIDED and "same number in flight" in alone.why
    given = cpusplit.decide([MS] * 100, [0] * 100, given=0.25)
    assert (given.rule, given.fraction) == (cpusplit.GIVEN, 0.25)


def test_the_sensitivity_adjustment_moves_an_inferred_split_towards_either_end():
    assert cpusplit.adjusted(1.0, -0.5) == 0.5 and cpusplit.adjusted(0.0, -0.5) == 0.0
    assert cpusplit.adjusted(0.0, 0.5) == 0.5 and cpusplit.adjusted(1.0, 0.5) == 1.0


def test_in_flight_at_start_counts_the_others_running():
    assert list(cpusplit.in_flight_at([0, 5, 10, 30], [20, 8, 25, 40])) == [0, 1, 1, 0]


def parallel_sleepers(own: Callable[[int, int], int], n: int = 300) -> TraceSet:
    """api:/wait calls backend, then has own time own(i, in flight); requests overlap ~5 at a time."""
    rng = np.random.default_rng(11)
    starts = np.cumsum(rng.exponential(10 * MS, n)).astype(np.int64)
    roots = []
    ends: list[int] = []
    for i in range(n):
        s = int(starts[i])
        running = sum(1 for e in ends if e > s)
        b = Builder(f"w{i}")
        dur = 1 * MS + own(i, running)
        root = b.span("api", "/wait", s, s + dur, "server")
        b.rpc(root, "api", "backend", "get", s + 10 * US, s + 1 * MS)
        ends.append(s + dur)
        roots.append((b.trace_id, root))
    return traceset(roots)


def own_stage_kinds(topo: dict) -> list[str]:
    ep = endpoint(topo, "api", "wait")
    return [next(iter(s)) if "store" not in s else s["store"]["system"] for s in ep["stages"]]


def test_handlers_that_wait_in_parallel_get_waits_not_cpu():
    """The issue's case: 50 ms waits overlapping (several in flight) stay waits in the twin."""
    rng = np.random.default_rng(5)
    topo, report = infer(parallel_sleepers(lambda i, r: int(rng.lognormal(np.log(50 * MS), 0.1))), InferOptions())
    assert "own-time" in own_stage_kinds(topo) and "cpu" not in own_stage_kinds(topo)
    split = next(c for c in report["cpu_split"] if c["endpoint"] == "wait")
    assert split["rule"] == cpusplit.FLAT and split["fraction"] == 0.0 and split["samples"] == 300


def test_own_time_that_grows_with_the_handlers_in_flight_stays_cpu():
    topo, report = infer(parallel_sleepers(lambda i, r: 2 * MS * (1 + r) + (i % 7) * 10 * US), InferOptions())
    assert "cpu" in own_stage_kinds(topo) and "own-time" not in own_stage_kinds(topo)
    split = next(c for c in report["cpu_split"] if c["endpoint"] == "wait")
    assert split["rule"] == cpusplit.GROWS and split["fraction"] == 1.0


def test_a_typed_cpu_fraction_overrides_the_rule():
    topo, report = infer(parallel_sleepers(lambda i, r: 50 * MS), InferOptions(cpu_fraction=1.0))
    assert "cpu" in own_stage_kinds(topo) and "own-time" not in own_stage_kinds(topo)
    assert {c["rule"] for c in report["cpu_split"]} == {cpusplit.GIVEN}


def test_a_low_confidence_limit_is_carried_only_when_asked():
    """60 spans: diagnose rates a limit `low` (fewer than 100 spans) — left out by default, with its
    confidence and evidence; --capacity-confidence low carries it."""
    ts = lock_traces(n=60, seed=1)
    topo, report = infer(ts, InferOptions())
    assert "capacity" not in stores(endpoint(topo, "api", "get"))[0]
    left = next(n for n in report["not_carried"] if n["population"] == "mysql:SQL SELECT")
    assert left["verdict"] == "limit" and left["confidence"] == "low" and "below --capacity-confidence" in left["why"]
    topo, _ = infer(ts, InferOptions(capacity_confidence="low"))
    assert stores(endpoint(topo, "api", "get"))[0]["capacity"] == 1


# ---- validation at a second measured rate ---------------------------------------------------------


def test_validate_runs_the_twin_at_the_second_recordings_own_rate(monkeypatch, tmp_path):
    """The twin fitted on the first recording runs again at the second's rate (its own timestamps) and
    is compared with the second recording; without one, `second_rate` is null with the reason."""
    from tailscope.twin import validate as v

    first, second = lock_traces(n=300, utilisation=0.3), lock_traces(n=300, utilisation=0.6, seed=8)
    files = {"first.json": first, "second.json": second}
    rates: list[float] = []

    def fake_run(topo, model, rate, **kw):
        rates.append(rate)
        return v.TwinRun(second if len(rates) == 2 else first, {}, {}, rate, 1.0)

    monkeypatch.setattr(v, "run_twin", fake_run)
    monkeypatch.setattr(v, "read_traces", lambda paths: files[paths[0].name])
    monkeypatch.setattr(v.topology_mod, "load", lambda p: {"services": [{"name": "api"}, {"name": "backend"}]})
    monkeypatch.setattr(v.topology_mod, "services", lambda doc: [s["name"] for s in doc["services"]])
    doc = v.validate(
        tmp_path / "t.yaml", [tmp_path / "first.json"], "std-async", second_traces=[tmp_path / "second.json"]
    )
    r1 = v.recorded_rate(first.traces, 1.0)["rate_per_s"]
    r2 = v.recorded_rate(second.traces, 1.0)["rate_per_s"]
    assert rates == [pytest.approx(r1), pytest.approx(r2)] and r2 > 1.5 * r1
    s = doc["second_rate"]
    assert s["rate_per_s"] == pytest.approx(r2) and s["rate_ratio_to_first"] == pytest.approx(r2 / r1)
    assert s["end_to_end"]["ratios"]["p50"] == pytest.approx(1.0)  # the fake twin replays the second recording
    assert s["contract"]["verdict"] and s["original"]["traces"] == 300 and doc["second_rate_unavailable"] is None
    rates.clear()
    alone = v.validate(tmp_path / "t.yaml", [tmp_path / "first.json"], "std-async")
    assert alone["second_rate"] is None and "--second-traces" in alone["second_rate_unavailable"]
    assert len(rates) == 1


def test_a_store_tracers_service_is_compared_as_part_of_its_caller():
    """HotROD's "mysql" spans sit under customer's handler; the twin runs them as customer's store. The
    original's mysql critical-path time is customer's in the per-service comparison."""
    from tailscope.twin.validate import _folded

    b = Builder("x")
    root = b.span("front", "/", 0, 10 * MS, "server")
    handler = b.rpc(root, "front", "customer", "get", 1 * MS, 9 * MS)
    b.span("mysql", "SQL SELECT", 2 * MS, 8 * MS, "client", handler)
    t = Trace("x", root, 0, 10 * MS, {"front": 2 * MS, "customer": 2 * MS, "mysql": 6 * MS}, 4, 1, 0)
    assert _folded(t, {"front", "customer"}) == {"front": 2 * MS, "customer": 8 * MS}
    assert _folded(t, {"front", "customer", "mysql"}) == t.service_cp_ns
