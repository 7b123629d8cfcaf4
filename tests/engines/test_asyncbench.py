"""tailscope-asyncbench end to end (small, quick settings). The `async` study's values and its
report section are tested without the engine: tests/unit/test_asyncmodels_*.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import engine_path, needs_engine
from tailscope.lab.engines import validate_document

ENGINE = "tailscope-asyncbench"
pytestmark = needs_engine(ENGINE)
SMALL = [
    "--quick",
    "--scale",
    "0.3",
    "--models",
    "deferred,std-thread,fixed-pool,coroutine",
    "--payloads",
    "long_long,void",
    "--sweep",
    "50,100",
    "--max-rate",
    "200000",
]


def run_asyncbench(exe: Path, args: list[str], out: Path, timeout_s: float) -> tuple[dict, str]:
    """One tailscope-asyncbench run that must succeed: (its document, written to `out`; its stderr)."""
    r = subprocess.run([str(exe), *args, "--out", str(out)], capture_output=True, text=True, timeout=timeout_s)
    assert r.returncode == 0, r.stderr
    return json.loads(out.read_text()), r.stderr


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    art = tmp_path_factory.mktemp("asyncbench")
    doc, stderr = run_asyncbench(engine_path(ENGINE), [*SMALL, "--artifacts", str(art)], art / "result.json", 300)
    return doc, art, stderr


def test_document_is_valid_and_names_follow_the_contract(small_run):
    doc, _, _ = small_run
    validate_document(doc, ENGINE)
    names = {m["name"] for m in doc["measurements"]}
    assert {"scheduling_delay", "join_delay", "total", "deferral_wait", "same_thread_resume"} <= names
    for m in doc["measurements"]:
        assert m["latency"]["count"] > 0
        assert m["cdf"][-1][1] == 100.0
        assert m["hlog_tag"]
        if m["name"] == "same_thread_resume":
            continue
        model, mechanism, payload, *series = m["variant"].split("/")
        assert (model, mechanism, payload) == (m["model"], m["mechanism"], m["payload"])
        if m.get("series") == "payload_common_rate":
            # the payload comparison: one rate for every payload, at most the measure-at share of its own max
            assert series == ["common-rate"] and 0 < m["load_pct"] <= 75.0 + 1e-6
        else:
            assert series == [] and m["load_pct"] in (50.0, 75.0, 100.0)
        assert m["offered_per_s"] > 0 and m["achieved_per_s"] > 0  # count > 0 calls were received
        assert m["observed"]["load_pct"] == m["load_pct"]  # kept in the store's observed column too
        assert "pinning" in m and m["pinning"]["policy"] == "pinned"
        if m["name"] == "deferral_wait":
            assert model == "deferred", "deferral_wait is for deferred calls only"
    tags = [m["hlog_tag"] for m in doc["measurements"]]
    assert len(tags) == len(set(tags)), "hlog tags must be unique"


def test_every_model_mechanism_and_payload_is_measured(small_run):
    doc, _, _ = small_run
    totals = [m for m in doc["measurements"] if m["name"] == "total"]
    main = {m["variant"] for m in totals if m["load_pct"] == 75.0 and m.get("series") is None}
    common = {m["variant"].removesuffix("/common-rate") for m in totals if m.get("series") == "payload_common_rate"}
    # The sweep payload at 75 % of the model's max; every payload at the model's common rate.
    assert main == {v for v in common if v.endswith("/long_long")}
    expected = {
        f"{model}/{mech}/{p}"
        for model, mechs in (
            ("deferred", ("future", "continuation")),
            ("std-thread", ("future", "join")),
            ("fixed-pool", ("future", "continuation")),
            ("coroutine", ("future", "resume")),
        )
        for mech in mechs
        for p in ("long_long", "void")
    }
    assert common == expected
    for model, rate in doc["payload_common_rate_per_s"].items():
        lowest = min(r["max_rate_per_s"] for r in doc["payload_ramps"][model].values())
        assert rate == pytest.approx(0.75 * min(lowest, doc["max_rate_per_s"][model]))
        at = {m["offered_per_s"] for m in totals if m["model"] == model and m.get("series") == "payload_common_rate"}
        assert at == {rate}
    assert set(doc["max_rate_per_s"]) == {"deferred", "std-thread", "fixed-pool", "coroutine"}
    for model, rate in doc["max_rate_per_s"].items():
        assert rate > 0, model
        steps = doc["ramps"][model]["steps"]
        assert steps and all(s["offered_per_s"] <= 200000 * 1.0001 for s in steps)


def test_probe_invariants_hold_in_the_document(small_run):
    doc, _, _ = small_run
    by = {(m["name"], m["variant"], m["load_pct"]): m for m in doc["measurements"] if m["name"] != "same_thread_resume"}
    for (name, variant, load), m in by.items():
        assert m["observed"]["negative_intervals"] == 0, variant
        if name == "total":
            sched = by[("scheduling_delay", variant, load)]
            assert sched["latency"]["count"] == m["latency"]["count"]
            assert m["latency"]["min"] >= 0
            # The total of a call is at least its join delay.
            join = by[("join_delay", variant, load)]
            assert m["latency"]["max"] >= join["latency"]["min"]


def test_every_point_and_ramp_step_records_its_backlog(small_run):
    doc, _, _ = small_run
    for m in doc["measurements"]:
        if m["name"] == "same_thread_resume":
            continue
        b = m["observed"]["backlog"]
        assert b["calls"] > 0 and isinstance(b["grew"], bool), m["variant"]
        assert 0 <= b["in_flight_mean"] <= b["in_flight_max"]
        assert b["lateness_growth_limit_ns"] > 0
        assert "sched" in b and b["sched"]["window_ns"] > 0
        if m["model"] == "deferred":
            assert "queue_p50" not in b  # no queue: the body runs inside the request
        else:
            assert 0 <= b["queue_p50"] <= b["queue_max"] and 0 <= b["queue_empty_fraction"] <= 1
        if m["model"] in ("fixed-pool", "coroutine"):
            assert "worker_parks_per_call" in b
            assert b["sched"]["workers"]["threads"] >= 1
        if m["saturated"] and m["observed"]["in_flight_limited"] == 0 and not m["observed"]["launch_failures"]:
            assert b["grew"] or m["observed"]["why_saturated"]
    for model, ramp in doc["ramps"].items():
        for s in ramp["steps"]:
            assert "backlog" in s and s["attempt"] in (1, 2), model
            if s["saturated"]:
                assert s["why_saturated"]


def test_hlog_artifact_has_one_interval_per_measurement(small_run):
    doc, art, _ = small_run
    text = (art / "asyncbench.hlog").read_text()
    tags = {line.split(",", 1)[0][len("Tag=") :] for line in text.splitlines() if line.startswith("Tag=")}
    assert tags == {m["hlog_tag"] for m in doc["measurements"]}
    assert doc["artifacts"] == {"hlog": "asyncbench.hlog"}


def test_progress_lines_are_json(small_run):
    _, _, stderr = small_run
    phases = [json.loads(ln)["phase"] for ln in stderr.splitlines() if ln.strip()]
    assert phases and phases[-1] == "done"


def test_an_unreachable_rate_ends_saturated_not_hung(tmp_path):
    doc, _ = run_asyncbench(
        engine_path(ENGINE),
        [
            "--quick",
            "--scale",
            "0.2",
            "--models",
            "std-thread",
            "--payloads",
            "void",
            "--mechanisms",
            "join",
            "--sweep",
            "none",
            "--start-rate",
            "3000000",
            "--max-in-flight",
            "64",
        ],
        tmp_path / "r.json",
        120,
    )
    steps = doc["ramps"]["std-thread"]["steps"]
    assert steps[0]["saturated"] and doc["ramps"]["std-thread"]["saturation_found"]


def test_payload_bytes_sweep_payload_and_unpinned_placement(tmp_path):
    doc, _ = run_asyncbench(
        engine_path(ENGINE),
        [
            "--quick",
            "--scale",
            "0.05",
            "--models",
            "deferred",
            "--payloads",
            "void",
            "--payload-bytes",
            "64",
            "--sweep-payload",
            "bytes64",
            "--sweep",
            "none",
            "--max-rate",
            "20000",
            "--placement",
            "unpinned",
        ],
        tmp_path / "r.json",
        120,
    )
    # The sweep payload comes first: the ramp runs with it.
    assert doc["config"]["payloads"] == ["bytes64", "void"] and doc["config"]["sweep_payload"] == "bytes64"
    assert doc["config"]["placement"] == "unpinned" and doc["config"]["sweep_pcts"] == []
    assert doc["ramps"]["deferred"]["payload"] == "bytes64"
    payloads = {m["payload"]: m["payload_bytes"] for m in doc["measurements"]}
    assert payloads == {"bytes64": 64, "void": 0}
    assert all(m["pinning"] == {"policy": "unpinned"} for m in doc["measurements"])
    assert {m["load_pct"] for m in doc["measurements"] if m.get("series") is None} == {75.0}
    assert doc["payload_ramps"]["deferred"]["void"]["max_rate_per_s"] > 0


@pytest.mark.parametrize(
    "args, message",
    [
        (["--models", "green-threads"], "unknown model"),
        (["--payloads", "float"], "unknown payload"),
        (["--mechanisms", "telepathy"], "unknown result mechanism"),
        (["--cpus", "0,99999"], "--cpus"),
        (["--cpus", "0"], "--cpus"),
        (["--placement", "sideways"], "placement"),
        (["--sweep", "50,abc"], "--sweep"),
        (["--scale", "-1"], "scale"),
        (["--payload-bytes", "0"], "payload-bytes"),
    ],
)
def test_bad_flags_are_clear_errors(args, message):
    r = subprocess.run([str(engine_path(ENGINE)), *args], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert message in (r.stderr + r.stdout)
