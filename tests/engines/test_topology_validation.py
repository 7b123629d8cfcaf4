"""One topology validation, shared: `python -m tailscope.lab.topology`
and `tailscope-svc` reject the same invalid topologies with the same message.

Python's old validator accepted 13 of 18 invalid values the engine rejected
(it wrote `NaN` and `"ten"` for the engine to trip over later). Each row of
the table is a valid topology with one thing broken; the engine
(`--check-topology FILE`, and `--topology FILE` as a run would read it) and
`topology.validate` must both refuse it with the same text, which names the
place and the problem."""

from __future__ import annotations

import copy
import json
import subprocess

import pytest

from conftest import engine_path, needs_engine
from tailscope.lab import topology

SVC = engine_path("tailscope-svc")
pytestmark = needs_engine("tailscope-svc")

BASE = {
    "name": "t",
    "front": {"service": "a", "path": "/x", "endpoint": "run"},
    "services": [
        {
            "name": "a",
            "endpoints": [
                {
                    "name": "run",
                    "stages": [
                        {"cpu": 5},
                        {
                            "group": {
                                "calls": [
                                    {"name": "b1", "service": "b", "endpoint": "get"},
                                    {"name": "b2", "service": "b", "endpoint": "get", "launch": "deferred"},
                                ],
                                "join": ["b2", "b1"],
                            }
                        },
                    ],
                }
            ],
        },
        {
            "name": "b",
            "endpoints": [
                {
                    "name": "get",
                    "stages": [
                        {
                            "store": {
                                "span": "s",
                                "latency": {"kind": "lognormal", "median_us": 60, "sigma": 0.4},
                                "hit_ratio": 0.5,
                                "on_miss": [{"cpu": 1}],
                            }
                        }
                    ],
                }
            ],
        },
    ],
}


def _a_stage(d, i=0):
    return d["services"][0]["endpoints"][0]["stages"][i]


def _store(d):
    return d["services"][1]["endpoints"][0]["stages"][0]["store"]


def _set(path_fn, key, value):
    def mutate(d):
        path_fn(d)[key] = value

    return mutate


# (id, mutation, a fragment the shared message must contain)
INVALID = [
    ("cpu-text", _set(_a_stage, "cpu", "ten"), "a distribution is a number (µs) or an object with a 'kind'"),
    ("cpu-negative", _set(_a_stage, "cpu", -5), "it must be in 0 … 60000000 (60 s)"),
    ("cpu-1e9", _set(_a_stage, "cpu", 1e9), "it must be in 0 … 60000000 (60 s)"),
    ("cpu-1e18", _set(_a_stage, "cpu", 1e18), "it must be in 0 … 60000000 (60 s)"),
    ("dist-kind", _set(_store, "latency", {"kind": "pareto", "alpha": 2}), "unknown distribution kind 'pareto'"),
    (
        "dist-key",
        _set(_store, "latency", {"kind": "lognormal", "median_ms": 1, "sigma": 0.5}),
        "unknown key 'median_ms' in a lognormal distribution",
    ),
    (
        "sigma",
        _set(_store, "latency", {"kind": "lognormal", "median_us": 60, "sigma": 4}),
        "'sigma' is 4; it must be in 0 … 3",
    ),
    (
        "uniform-order",
        _set(_store, "latency", {"kind": "uniform", "min_us": 9, "max_us": 3}),
        "uniform max_us < min_us",
    ),
    (
        "cap",
        _set(_store, "latency", {"kind": "exponential", "mean_us": 5, "cap_us": 1e12}),
        "'cap_us' is 1000000000000.0; it must be in 0 … 60000000 (60 s)",
    ),
    ("count-zero", _set(_store, "count", 0), "'count' must be an integer in 1 … 1000"),
    ("count-fraction", _set(_store, "count", 2.5), "'count' must be an integer in 1 … 1000"),
    ("count-text", _set(_store, "count", "ten"), "'count' must be an integer in 1 … 1000"),
    ("hit-ratio", _set(_store, "hit_ratio", 1.5), "'hit_ratio' must be in [0, 1]"),
    ("on-miss-alone", lambda d: _store(d).pop("hit_ratio"), "'on_miss' needs 'hit_ratio'"),
    ("cpus-empty", _set(lambda d: d["services"][1], "cpus", ""), "leaves the service with no CPU: refused"),
    ("cpus-reversed", _set(lambda d: d["services"][1], "cpus", "3-1"), "'cpus': bad cpu list '3-1'"),
    ("cpus-number", _set(lambda d: d["services"][1], "cpus", 1), "'cpus' must be a cpu list string"),
    ("port", _set(lambda d: d["services"][1], "port", 70000), "'port' must be in 0 … 65535"),
    ("port-text", _set(lambda d: d["services"][1], "port", "9000"), "'port' must be in 0 … 65535"),
    ("call-timeout", _set(lambda d: d, "call_timeout_ms", 0), "'call_timeout_ms' must be in (0, 600000]"),
    (
        "response-bytes",
        _set(lambda d: d["services"][0]["endpoints"][0], "response_bytes", -1),
        "'response_bytes' must be an integer in 0 … 64 MiB",
    ),
    (
        "launch",
        _set(lambda d: _a_stage(d, 1)["group"]["calls"][0], "launch", "later"),
        "launch must be async, deferred or sync (got 'later')",
    ),
    (
        "lone-async",
        _set(
            lambda d: d["services"][0]["endpoints"][0],
            "stages",
            [{"call": {"service": "b", "endpoint": "get", "launch": "async"}}],
        ),
        "a lone call is sync",
    ),
    ("unknown-key", _set(lambda d: d["services"][0]["endpoints"][0], "stagez", []), "unknown key 'stagez'"),
    (
        "unknown-stage",
        _set(lambda d: d["services"][0]["endpoints"][0], "stages", [{"sleep": 1}]),
        "unknown stage 'sleep'",
    ),
    ("front-path", _set(lambda d: d["front"], "path", "x"), "path must start with '/'"),
    ("empty-name", _set(lambda d: d["services"][1], "name", ""), "needs a non-empty string 'name'"),
    ("duplicate-call", _set(lambda d: _a_stage(d, 1)["group"]["calls"][1], "name", "b1"), "two calls named 'b1'"),
    ("join", _set(lambda d: _a_stage(d, 1)["group"], "join", ["b1"]), "join must name every call of the group once"),
    (
        "unknown-service",
        _set(lambda d: _a_stage(d, 1)["group"]["calls"][0], "service", "nope"),
        "unknown service 'nope'",
    ),
    # Capacities (docs/microservices.md "Capacities"): each place, each rule.
    ("capacity-zero", _set(_store, "capacity", 0), "'capacity' must be an integer in 1 … 100000 (got 0)"),
    ("capacity-huge", _set(_store, "capacity", 100001), "'capacity' must be an integer in 1 … 100000 (got 100001)"),
    (
        "endpoint-capacity",
        _set(lambda d: d["services"][0]["endpoints"][0], "capacity", "4"),
        "endpoint 'run': 'capacity' must be an integer in 1 … 100000 (got \"4\")",
    ),
    (
        "call-capacity",
        _set(lambda d: _a_stage(d, 1)["group"]["calls"][0], "capacity", 0.5),
        "calls[0]: 'capacity' must be an integer in 1 … 100000 (got 0.5)",
    ),
    (
        "max-in-flight-deferred",
        _set(lambda d: _a_stage(d, 1)["group"], "max_in_flight", 1),
        "'max_in_flight' is for groups of async calls (call 'b2' is deferred)",
    ),
    (
        "max-in-flight-zero",
        _set(lambda d: _a_stage(d, 1)["group"], "max_in_flight", 0),
        "'max_in_flight' must be an integer in 1 … 100000 (got 0)",
    ),
    ("parallel-count-1", _set(_store, "parallel", True), "'parallel' needs 'count' of at least 2 (got 1)"),
    (
        "parallel-real-op",
        lambda d: _store(d).update(
            {"parallel": True, "count": 2, "system": "redis", "op": "get", "key": "k:{user}", "hit_ratio": 0.5}
        ),
        "'parallel' is for simulated stores only: a real 'op' runs its count in a row",
    ),
    (
        "capacity-conflict",
        lambda d: d["services"][1]["endpoints"][0]["stages"].extend(
            [
                {"store": {"span": "s", "latency": 1, "capacity": 1}},
                {"store": {"span": "s", "latency": 1, "capacity": 2}},
            ]
        ),
        "'capacity' 2 for store span 's', which has 'capacity' 1 at",
    ),
    (
        "cycle",
        lambda d: d["services"][1]["endpoints"][0]["stages"].append({"call": {"service": "a", "endpoint": "run"}}),
        "call cycle: a.run → b.get → a.run",
    ),
]


def _broken(mutate) -> dict:
    d = copy.deepcopy(BASE)
    mutate(d)
    return d


def test_the_base_topology_is_valid_on_both_sides(tmp_path):
    assert topology.validate(copy.deepcopy(BASE), "t.json") == BASE
    f = tmp_path / "t.json"
    f.write_text(json.dumps(BASE))
    r = subprocess.run([str(SVC), "--check-topology", str(f)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == BASE


@pytest.mark.parametrize("mutate, fragment", [(m, f) for _, m, f in INVALID], ids=[i for i, _, _ in INVALID])
def test_engine_and_python_reject_with_the_same_message(mutate, fragment, tmp_path):
    doc = _broken(mutate)
    f = tmp_path / "t.json"
    f.write_text(json.dumps(doc))
    # What a run reads (tailscope-svc --topology) and what the check says.
    run = subprocess.run([str(SVC), "--topology", str(f), "--all"], capture_output=True, text=True, timeout=30)
    check = subprocess.run([str(SVC), "--check-topology", str(f)], capture_output=True, text=True, timeout=30)
    assert run.returncode == 1 and check.returncode == 1, (run.stderr, check.stderr)
    engine_message = run.stderr.strip().removeprefix("tailscope-svc: ")
    assert check.stderr.strip().removeprefix("tailscope-svc: ") == engine_message
    assert fragment in engine_message, engine_message
    with pytest.raises(topology.TopologyError) as e:
        topology.validate(doc, str(f))
    assert str(e.value) == engine_message


@pytest.mark.parametrize("value, shown", [(".nan", "nan"), ("-.inf", "-inf")])
def test_yaml_values_json_cannot_carry_are_errors_and_nothing_is_written(value, shown, tmp_path):
    src = tmp_path / "t.yaml"
    doc = copy.deepcopy(BASE)
    _a_stage(doc)["cpu"] = "PLACEHOLDER"
    src.write_text(json.dumps(doc).replace('"PLACEHOLDER"', value))  # JSON is YAML
    out = tmp_path / "out.json"
    r = subprocess.run(
        [topology.sys.executable, "-m", "tailscope.lab.topology", str(src), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 1
    assert f"{src}.services[0].endpoints[0].stages[0].cpu: {shown} is not a finite number" in r.stderr
    assert not out.exists() and list(tmp_path.iterdir()) == [src]


def test_the_shipped_topologies_pass_the_shared_validation():
    paths = sorted(topology.REPO_ROOT.glob("topologies/*.yaml"))
    assert paths, f"no topologies/*.yaml under {topology.REPO_ROOT}"
    for path in paths:
        assert topology.services(topology.load(path)), path


def test_per_service_cpus_pass_through_validation_unchanged(tmp_path):
    d = copy.deepcopy(BASE)
    d["services"][1]["cpus"] = "0-1,3"
    assert topology.validate(d, "t.json")["services"][1]["cpus"] == "0-1,3"
