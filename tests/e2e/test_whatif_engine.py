"""`diagnose --advise` on a twin that queues, with the engine (docs/diagnose.md "Advice in the user's
terms"): a 2-service graph whose store has capacity 1 (a lock or a single connection) is run traced;
`diagnose --advise` on its traces, with that topology as the twin, ranks a capacity what-if first.

The store waits 4 ms without CPU and the graph runs at 150/s (the lock busy ~60 % of the time), so
at 2× the recorded rate one connection cannot keep up (ρ ≈ 1.2) while two can (ρ ≈ 0.6): the ranking
rests on a factor of two in capacity, not on a timing margin. Skips with the reason when the engine
does not know `capacity` yet."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from conftest import front_and_locked_store, needs_engine
from tailscope.cli import main
from tailscope.lab import topology as topology_mod
from tailscope.lab.topology import TopologyError
from tailscope.twin.validate import run_twin

pytestmark = needs_engine("tailscope-critpath", "tailscope-svc", "tailscope-load")

RATE_PER_S = 150.0


def locked_store() -> dict:
    return front_and_locked_store(
        store_service="db",
        front_span="get",
        latency={"kind": "lognormal", "median_us": 4000, "sigma": 0.3},
        call_timeout_ms=2000,
    )


@pytest.fixture
def engine_topology() -> dict:
    try:
        return topology_mod.validate(locked_store(), "the locked-store test topology")
    except TopologyError as e:
        pytest.skip(f"the engine does not run capacities yet: {e}")


@pytest.mark.parametrize("twin", ["given", "inferred"])
def test_diagnose_advise_predicts_a_second_slot_beats_a_faster_stage_at_twice_the_rate(tmp_path, engine_topology, twin):
    """With the graph itself as the twin (--topology), and with the twin `topology from-traces`'s rules
    infer from the traces (the capacity carried from the diagnosis)."""
    run = run_twin(
        engine_topology,
        "coroutine",
        RATE_PER_S,
        duration_s=2.0,
        warmup_s=0.5,
        connections=16,
        workdir=tmp_path / "recorded",
    )
    traces = tmp_path / "recorded" / "traces" / "traces.otlp.json"
    assert run.traces.traces, "the traced run recorded no trace"
    topo_path = tmp_path / "twin.json"
    topo_path.write_text(json.dumps(locked_store()))
    out = tmp_path / "advice.json"
    r = CliRunner().invoke(
        main,
        [
            "diagnose",
            str(traces),
            "--advise",
            "--model",
            "coroutine",
            "--duration-s",
            "1",
            "--faster-percent",
            "20",
            *(["--topology", str(topo_path)] if twin == "given" else []),
            "--json",
            str(out),
        ],
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    ids = [x["id"] for x in doc["ranked"]]
    # The lock at ρ ≈ 0.63 (4 ms, capacity 1, 150/s): at 2× the rate the baseline's queue grows without
    # bound (ρ ≈ 1.25), a second slot holds it at ρ ≈ 0.63 and 20 % faster at ≈ 1.0. The 2× p99 says so
    # on any machine; the rank order at 1× rests on short runs whose flags a loaded machine can change.
    caps = [x for x in doc["ranked"] if x["kind"] == "capacity" and x["target"]["service"] == "db"]
    faster = [x for x in doc["ranked"] if x["kind"] == "faster"]
    assert caps and faster, ids
    first = caps[0]
    assert first["evidence"]["population"].startswith("db:")
    at2 = {x["id"]: x["predictions"][1]["p99_ratio_to_baseline"] for x in [*caps, *faster]}
    assert at2[first["id"]] is not None and at2[first["id"]] < 0.5, at2
    assert all(r is None or at2[first["id"]] < r for i, r in at2.items() if i.startswith("faster")), at2
    if twin == "given":
        assert first["target"]["span"] == "SELECT" and first["evidence"]["population"] == "db:SELECT"
        assert "raise the connection pool of db → mysql 'SELECT' from 1 to 2" in r.output
