"""What-ifs in the user's terms (python/tailscope/twin/whatif.py): found in a hand-built twin, justified
by a hand-built diagnosis document; every apply() is pure and makes exactly its edit; every sentence
names the user's services and operations, never a tailscope model. No engine."""

from __future__ import annotations

import copy

import pytest

from tailscope.lab.graph import svc_models
from tailscope.twin import whatif as w

MODELS = ("std-async", "std-thread", "pool-blocking", "pool-callback", "coroutine")


def twin() -> dict:
    return {
        "name": "t",
        "call_timeout_ms": 1000,
        "front": {"service": "frontend", "path": "/dispatch", "endpoint": "dispatch"},
        "services": [
            {
                "name": "frontend",
                "endpoints": [
                    {
                        "name": "dispatch",
                        "span": "HTTP GET /dispatch",
                        "stages": [
                            {"cpu": {"kind": "constant", "us": 100}},
                            {
                                "call": {
                                    "service": "customer",
                                    "endpoint": "get",
                                    "span": "customer_client",
                                    "capacity": 1,
                                }
                            },
                            {
                                "group": {
                                    "calls": [
                                        {
                                            "name": f"r{n}",
                                            "service": "route",
                                            "endpoint": "find",
                                            "span": "route_client",
                                        }
                                        for n in range(10)
                                    ],
                                    "join": [f"r{n}" for n in range(10)],
                                    "max_in_flight": 3,
                                }
                            },
                            {"call": {"service": "driver", "endpoint": "find", "span": "driver_client"}},
                            {"call": {"service": "driver", "endpoint": "find", "span": "driver_client"}},
                            {"call": {"service": "driver", "endpoint": "find", "span": "driver_client"}},
                        ],
                    }
                ],
            },
            {
                "name": "customer",
                "endpoints": [
                    {
                        "name": "get",
                        "span": "HTTP GET /customer",
                        "capacity": 4,
                        "stages": [
                            {
                                "store": {
                                    "span": "SQL SELECT",
                                    "system": "mysql",
                                    "latency": {"kind": "lognormal", "median_us": 300, "sigma": 0.5},
                                    "capacity": 1,
                                }
                            }
                        ],
                    }
                ],
            },
            {
                "name": "driver",
                "endpoints": [
                    {
                        "name": "find",
                        "span": "/driver.DriverService/FindNearest",
                        "stages": [
                            {
                                "store": {
                                    "span": "FindDriverIDs",
                                    "system": "redis",
                                    "latency": {"kind": "exponential", "mean_us": 20},
                                },
                            },
                            {
                                "store": {
                                    "span": "GetDriver",
                                    "system": "redis",
                                    "latency": {"kind": "constant", "us": 10},
                                    "count": 10,
                                }
                            },
                        ],
                    }
                ],
            },
            {
                "name": "route",
                "endpoints": [
                    {
                        "name": "find",
                        "span": "HTTP GET /route",
                        "stages": [
                            {"cpu": {"kind": "uniform", "min_us": 40, "max_us": 60}},
                            {
                                "store": {
                                    "span": "own_wait",
                                    "system": "own-time",
                                    "latency": {"kind": "constant", "us": 50},
                                }
                            },
                        ],
                    }
                ],
            },
        ],
    }


def population(kind, service, operation, verdict="limit", servers=1, parent=(None, None), spans=800) -> dict:
    return {
        "kind": kind,
        "service": service,
        "operation": operation,
        "parent_service": parent[0],
        "parent_operation": parent[1],
        "concurrency": {},
        "capacity": {
            "verdict": verdict,
            "servers": servers if verdict == "limit" else None,
            "at_least": None,
            "confidence": "high",
            "spans": spans,
            "queued_arrivals": 120,
            "waited": 300,
            "duration_p50_ns": 900_000.0,
            "duration_p99_ns": 5_000_000.0,
            "service_p50_ns": 300_000.0,
            "service_p99_ns": 700_000.0,
            "wait_p99_ns": 4_300_000.0,
            "duration_rank_correlation": 0.6,
        },
    }


def diagnosis() -> dict:
    return {
        "schema": "tailscope.diagnosis/1",
        "populations": [
            population("operation", "customer", "SQL SELECT", servers=1),
            population("operation", "customer", "HTTP GET /customer", verdict="no_limit_seen"),
            population("operation", "frontend", "customer_client", servers=1),
            population("operation", "route", "HTTP GET /route", verdict="no_limit_seen"),
            population("operation", "driver", "redis lock", servers=1),  # not in the twin
        ],
        "bounded_fan_outs": [
            {
                "parent_service": "frontend",
                "parent_operation": "HTTP GET /dispatch",
                "service": "route",
                "operation": "HTTP GET /route",
                "k": 3,
                "instances": 200,
                "bounded": 198,
                "calls_p50": 10.0,
                "calls_max": 12,
                "span_p50_ns": 4e6,
                "longest_p50_ns": 1e6,
            }
        ],
        "sequential_chains": [
            {
                "parent_service": "driver",
                "parent_operation": "/driver.DriverService/FindNearest",
                "service": "driver",
                "operation": "GetDriver",
                "instances": 200,
                "sequential": 200,
                "calls_p50": 10.0,
                "calls_max": 10,
                "gap_p50_ns": 1000.0,
                "chain_p50_ns": 2e6,
                "longest_p50_ns": 3e5,
            }
        ],
        "slow_vs_typical": [
            {
                "service": "frontend",
                "operation": "HTTP GET /dispatch",
                "traces": 1000,
                "slow_traces": 10,
                "middle_traces": 500,
                "slow_end_to_end_mean_ns": 9e6,
                "middle_end_to_end_mean_ns": 3e6,
                "services": [
                    {
                        "service": "customer",
                        "slow_mean_ns": 5e6,
                        "middle_mean_ns": 1e6,
                        "growth_ns": 4e6,
                        "share_of_growth": 0.67,
                    },
                    {
                        "service": "route",
                        "slow_mean_ns": 2e6,
                        "middle_mean_ns": 1e6,
                        "growth_ns": 1e6,
                        "share_of_growth": 0.17,
                    },
                    {
                        "service": "driver",
                        "slow_mean_ns": 1e6,
                        "middle_mean_ns": 1e6,
                        "growth_ns": 0.0,
                        "share_of_growth": 0.0,
                    },
                ],
            }
        ],
    }


CPUS = (2, [0, 1])


def all_whatifs(**kw) -> dict[str, w.WhatIf]:
    return {x.id: x for x in w.whatifs(twin(), diagnosis(), cpus=CPUS, **kw)}


def by(kind: str, **target) -> list[w.WhatIf]:
    return [
        x
        for x in w.whatifs(twin(), diagnosis(), cpus=CPUS)
        if x.kind == kind and all(x.target.get(k) == v for k, v in target.items())
    ]


def test_apply_is_pure_and_every_available_whatif_changes_the_twin():
    base = twin()
    frozen = copy.deepcopy(base)
    for x in w.whatifs(base, diagnosis(), cpus=CPUS):
        if x.unavailable:
            with pytest.raises(ValueError, match="cannot be applied"):
                x.apply(base)
            continue
        assert x.apply(base) != frozen, x.id
        assert base == frozen, f"{x.id} changed its argument"


def test_store_capacity_doubled_and_removed():
    xs = by(w.CAPACITY, service="customer", span="SQL SELECT", place="store")
    assert [(x.from_value, x.to_value) for x in xs] == [(1, 2), (1, w.REMOVED)]
    doubled, removed = xs
    assert doubled.sentence == "raise the connection pool of customer → mysql 'SQL SELECT' from 1 to 2"
    assert "lock or a single connection" in removed.sentence
    store = doubled.apply(twin())["services"][1]["endpoints"][0]["stages"][0]["store"]
    assert store["capacity"] == 2
    assert "capacity" not in removed.apply(twin())["services"][1]["endpoints"][0]["stages"][0]["store"]
    ev = doubled.evidence
    assert ev["population"] == "customer:SQL SELECT"
    assert (ev["confidence"], ev["samples"], ev["figures"]["servers"]) == ("high", 800, 1)
    assert ev["figures"]["service_p50_ns"] == 300_000.0


def test_endpoint_and_call_capacities():
    ep = by(w.CAPACITY, place="endpoint")
    assert [(x.from_value, x.to_value) for x in ep] == [(4, 8), (4, w.REMOVED)]
    assert ep[0].sentence == "raise the worker pool of customer 'HTTP GET /customer' from 4 to 8 requests at once"
    assert ep[0].apply(twin())["services"][1]["endpoints"][0]["capacity"] == 8
    assert "one at a time" not in ep[1].sentence  # c = 4
    assert ep[0].evidence["finding"] == "no_limit_seen"  # the twin's capacity, the diagnosis's words on it
    call = by(w.CAPACITY, place="call")
    assert call[0].sentence == "raise the connection pool of frontend → customer 'customer_client' from 1 to 2"
    assert call[0].apply(twin())["services"][0]["endpoints"][0]["stages"][1]["call"]["capacity"] == 2


def test_a_capacity_shared_by_every_stage_of_its_span_is_edited_everywhere():
    t = twin()
    eps = t["services"][1]["endpoints"]
    eps.append(copy.deepcopy(eps[0]) | {"name": "get2", "span": "HTTP GET /customer2"})
    x = next(x for x in w.whatifs(t, diagnosis(), cpus=CPUS) if x.target.get("span") == "SQL SELECT")
    out = x.apply(t)
    assert [e["stages"][0]["store"]["capacity"] for e in out["services"][1]["endpoints"]] == [2, 2]


def test_fan_out_limit_raised_to_the_most_calls_seen():
    (x,) = by(w.FAN_OUT)
    assert (x.from_value, x.to_value) == (3, 12)  # calls_max 12 of the diagnosis > the 10 of the twin
    assert (
        x.sentence
        == "launch the 10 route calls of frontend 'HTTP GET /dispatch' with at most 12 in flight instead of 3"
    )
    assert x.apply(twin())["services"][0]["endpoints"][0]["stages"][2]["group"]["max_in_flight"] == 12
    assert x.evidence["figures"]["k"] == 3 and x.evidence["samples"] == 198


def test_sequential_store_made_parallel():
    (x,) = [p for p in by(w.PARALLEL) if p.target["service"] == "driver"]
    assert x.sentence.startswith(
        "run the 10 redis 'GetDriver' operations of driver '/driver.DriverService/FindNearest' in parallel"
    )
    st = x.apply(twin())["services"][2]["endpoints"][0]["stages"][1]["store"]
    assert st["parallel"] is True and st["count"] == 10
    assert x.evidence["population"].endswith("driver:GetDriver")


def test_sequential_sync_calls_become_one_async_group():
    (x,) = [p for p in by(w.PARALLEL) if p.target["service"] == "frontend"]
    assert x.target["count"] == 3
    assert x.sentence.startswith("run the 3 driver 'driver_client' calls of frontend 'HTTP GET /dispatch' in parallel")
    assert x.evidence["unavailable"]  # no chain in the diagnosis for it: said
    stages = x.apply(twin())["services"][0]["endpoints"][0]["stages"]
    assert len(stages) == 4
    g = stages[3]["group"]
    assert [c["launch"] for c in g["calls"]] == ["async"] * 3
    assert g["join"] == [c["name"] for c in g["calls"]] and len(set(g["join"])) == 3
    assert all(c["service"] == "driver" and c["span"] == "driver_client" for c in g["calls"])


def test_faster_follows_the_tail_and_scales_the_stage():
    xs = by(w.FASTER)
    # customer grows most in the slowest requests, then route; driver did not grow: not offered.
    assert [x.target["service"] for x in xs] == ["customer", "route"]
    cust, route = xs
    assert cust.sentence == "make customer → mysql 'SQL SELECT' 50 % faster (median 300 µs → 150 µs)"
    st = cust.apply(twin())["services"][1]["endpoints"][0]["stages"][0]["store"]
    assert st["latency"]["median_us"] == 150 and st["latency"]["sigma"] == 0.5
    assert cust.evidence["tail"]["growth_ns"] == 4e6
    # route's largest stage is its own work: the cpu share and the wait share both scaled.
    assert route.target.get("own_time") and "own work of route" in route.sentence
    stages = route.apply(twin())["services"][3]["endpoints"][0]["stages"]
    assert stages[0]["cpu"] == {"kind": "uniform", "min_us": 20, "max_us": 30}
    assert stages[1]["store"]["latency"]["us"] == 25


def test_faster_percent_is_used_and_checked():
    assert any("20 % faster" in y.sentence for y in w.whatifs(twin(), diagnosis(), faster_percent=20, cpus=CPUS))
    for bad in (0, 100, -5):
        with pytest.raises(ValueError, match="faster_percent"):
            w.whatifs(twin(), diagnosis(), faster_percent=bad, cpus=CPUS)


def test_faster_without_a_tail_comparison_says_why():
    d = diagnosis()
    d["slow_vs_typical"] = []
    xs = [x for x in w.whatifs(twin(), d, cpus=CPUS) if x.kind == w.FASTER]
    assert xs and all("no slow-against-typical" in x.evidence["tail"]["unavailable"] for x in xs)


def test_cores_unavailable_when_the_twin_has_every_cpu():
    (x,) = by(w.CORES)
    assert x.unavailable and "every CPU" in x.unavailable and "2 of 2" in x.unavailable
    t = twin()
    t["services"][1]["cpus"] = "1"
    (y,) = [c for c in w.whatifs(t, diagnosis(), cpus=CPUS) if c.kind == w.CORES]
    assert y.unavailable is None and y.sentence == "run customer on all 2 CPUs instead of customer: 1"
    assert "cpus" not in y.apply(t)["services"][1]


def test_a_limit_the_twin_does_not_model_is_listed_not_run():
    x = next(x for x in w.whatifs(twin(), diagnosis(), cpus=CPUS) if x.target.get("span") == "redis lock")
    assert x.unavailable and "no capacity there" in x.unavailable
    assert x.evidence["population"] == "driver:redis lock"


def test_sentences_name_no_tailscope_model_and_ids_are_unique():
    xs = w.whatifs(twin(), diagnosis(), cpus=CPUS)
    assert len({x.id for x in xs}) == len(xs)
    for x in xs:
        for m in (*MODELS, *svc_models()):
            assert m not in x.sentence, (m, x.sentence)
        doc = x.to_json()
        assert set(doc) == {"id", "kind", "target", "from", "to", "sentence", "evidence", "unavailable"}


def test_a_twin_without_capacities_still_has_its_structural_whatifs():
    t = twin()
    for svc in t["services"]:
        for ep in svc["endpoints"]:
            ep.pop("capacity", None)
            for s in ep["stages"]:
                for key in ("store", "call"):
                    if key in s:
                        s[key].pop("capacity", None)
    xs = w.whatifs(t, diagnosis(), cpus=CPUS)
    assert not [x for x in xs if x.kind == w.CAPACITY and not x.unavailable]
    # the diagnosis's limits are listed as not modelled
    assert {x.target["span"] for x in xs if x.kind == w.CAPACITY} == {"SQL SELECT", "customer_client", "redis lock"}


def test_a_store_traced_as_a_service_of_its_own_is_matched_by_its_operation():
    d = diagnosis()
    d["populations"][0] = population("operation", "mysql", "SQL SELECT", servers=1)
    d["slow_vs_typical"][0]["services"][0]["service"] = "mysql"  # the tail grows in the database's own name
    d["sequential_chains"][0]["service"] = "redis-manual"
    xs = w.whatifs(twin(), d, cpus=CPUS)
    cap = next(x for x in xs if x.kind == w.CAPACITY and x.target["span"] == "SQL SELECT")
    assert cap.evidence["population"] == "mysql:SQL SELECT" and cap.unavailable is None
    faster = [x for x in xs if x.kind == w.FASTER]
    assert faster[0].target == {"service": "customer", "endpoint": "get", "stage": 0}
    assert faster[0].evidence["tail"]["growth_ns"] == 4e6
    chain = next(x for x in xs if x.kind == w.PARALLEL and x.target["service"] == "driver")
    assert chain.evidence["population"] == "driver:/driver.DriverService/FindNearest → redis-manual:GetDriver"


def test_a_fan_out_limit_the_twin_does_not_model_is_listed_not_run():
    t = twin()
    del t["services"][0]["endpoints"][0]["stages"][2]["group"]["max_in_flight"]
    xs = [x for x in w.whatifs(t, diagnosis(), cpus=CPUS) if x.kind == w.FAN_OUT]
    assert len(xs) == 1 and xs[0].unavailable and "no fan-out limit there" in xs[0].unavailable
    assert (xs[0].from_value, xs[0].to_value) == (3, 12)
    assert xs[0].sentence == (
        "launch the route 'HTTP GET /route' calls of frontend 'HTTP GET /dispatch' with at most 12 in flight instead of 3"
    )
    # with the limit in the twin, the runnable one only
    assert [x.unavailable for x in w.whatifs(twin(), diagnosis(), cpus=CPUS) if x.kind == w.FAN_OUT] == [None]


def test_the_machine_cpus_are_read_as_every_run_records_them():
    online, allowed = w.online_cpus()
    assert online >= len(allowed) >= 1
    (x,) = [c for c in w.whatifs(twin(), diagnosis()) if c.kind == w.CORES]
    assert f"{len(allowed)} of {online} online" in (x.unavailable or "")


def test_a_limit_seen_on_spans_enclosing_a_modelled_capacity_is_not_listed():
    d = diagnosis()
    # the lock at customer's store shows on its callers too: the endpoint around it, the client span
    d["populations"] += [
        population("operation", "customer", "HTTP GET /customer", servers=1),
        population("operation", "frontend", "HTTP GET /dispatch", servers=1),
        population("operation", "mysql", "SQL SELECT", servers=1),  # the store in its own tracer name
    ]
    d["populations"][1] = population("operation", "customer", "HTTP GET /customer", verdict="no_limit_seen")
    t = twin()
    del t["services"][1]["endpoints"][0]["capacity"]
    unmodelled = {x.target["span"] for x in w.whatifs(t, d, cpus=CPUS) if x.unavailable and x.kind == w.CAPACITY}
    assert unmodelled == {"redis lock"}


def test_a_client_span_named_by_its_callee_is_matched():
    """One client name calling several servers (OpenTelemetry's "HTTP GET") is named "span → callee" by
    diagnose; the twin's call keeps the span name."""
    d = diagnosis()
    f = d["bounded_fan_outs"][0]
    f["service"], f["operation"] = "frontend", "route_client → route:HTTP GET /route"
    d["populations"][2] = population(
        "operation", "frontend", "customer_client → customer:HTTP GET /customer", servers=1
    )
    xs = w.whatifs(twin(), d, cpus=CPUS)
    (fan,) = [x for x in xs if x.kind == w.FAN_OUT]
    assert fan.evidence["population"] == "frontend:HTTP GET /dispatch → frontend:route_client → route:HTTP GET /route"
    call = next(x for x in xs if x.kind == w.CAPACITY and x.target["place"] == "call")
    assert call.evidence["population"] == "frontend:customer_client → customer:HTTP GET /customer"
    # the same limit is not listed again as one the twin does not model
    assert not [x for x in xs if x.unavailable and "customer_client" in x.target.get("span", "")]
