"""The twin that queues, inferred from a real application's traces: HotROD at its defaults
(tests/fixtures/hotrod/README.md — a db query of ~300 ms behind a mutex, a route worker pool of 3, the
driver's sequential redis calls). The inference knows nothing of HotROD: every name asserted here comes
from the traces."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import REPO, needs_engine
from tailscope.twin import cpusplit
from tailscope.twin.commands import infer_twin
from tailscope.twin.infer import InferOptions

FIXTURE = REPO / "tests" / "fixtures" / "hotrod" / "traces-2rps.jaeger.json.gz"
pytestmark = needs_engine("tailscope-critpath")


@pytest.fixture(scope="module")
def twin():
    return infer_twin([Path(FIXTURE)], InferOptions())


def endpoint(topo: dict, service: str) -> dict:
    (ep,) = next(s for s in topo["services"] if s["name"] == service)["endpoints"]
    return ep


def test_the_mysql_lock_is_a_store_of_capacity_1_fitted_to_its_service_time(twin):
    customer = endpoint(twin.topology, "customer")
    (sql,) = [s["store"] for s in customer["stages"] if "store" in s and s["store"]["span"] == "SQL SELECT"]
    assert sql["capacity"] == 1 and sql["system"] == "sql"
    # "mysql" is the tracer's service of the store span, not a service of the twin
    assert "mysql" not in {s["name"] for s in twin.topology["services"]}
    fit = next(f for e in twin.report["endpoints"] for f in e["fits"] if f["stage"] == "customer.customer.SQL SELECT")
    assert 250_000 < fit["median_us"] < 350_000  # the ~300 ms query, not the span's queue-inflated median
    carried = next(c for c in twin.report["capacities"] if c["population"] == "mysql:SQL SELECT")
    assert carried["capacity"] == 1 and carried["confidence"] in ("medium", "high")


def test_the_route_worker_pool_is_the_fan_outs_max_in_flight(twin):
    dispatch = endpoint(twin.topology, "frontend")
    (group,) = [s["group"] for s in dispatch["stages"] if "group" in s]
    assert group["max_in_flight"] == 3 and len(group["calls"]) == 10
    assert {c["service"] for c in group["calls"]} == {"route"}


def test_the_drivers_redis_calls_stay_sequential_and_the_lock_is_not_copied_upstream(twin):
    driver = endpoint(twin.topology, "driver")
    get = next(s["store"] for s in driver["stages"] if "store" in s and s["store"]["span"] == "GetDriver")
    assert get["count"] >= 10 and "capacity" not in get
    assert any("GetDriver" in c["population"] for c in twin.report["sequential_chains_kept"])
    # the handler around the lock and the front waiting on it look like queues themselves: their waits
    # are inside their stages, so they are listed as not carried, and the twin queues once, at the lock
    assert "capacity" not in endpoint(twin.topology, "customer")
    assert "capacity" not in endpoint(twin.topology, "frontend")
    shadows = {n["population"] for n in twin.report["not_carried"] if "further down" in n["why"]}
    assert {"customer:/customer", "frontend:/dispatch"} <= shadows


def test_the_waiting_handlers_own_time_is_waiting_not_cpu(twin):
    splits = {c["service"]: c for c in twin.report["cpu_split"]}
    assert splits["route"]["rule"] == cpusplit.FLAT and splits["route"]["fraction"] == 0.0
    route = endpoint(twin.topology, "route")
    assert not [s for s in route["stages"] if "cpu" in s]
    # the driver's requests never overlapped (the lock before it spaces them): undecided, said
    assert splits["driver"]["rule"] == cpusplit.UNDECIDED and "same number in flight" in splits["driver"]["why"]
