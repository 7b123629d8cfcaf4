"""tailscope-asyncbench end to end (small, quick settings) and the `async`
study's report section rendered from a temporary store."""

from __future__ import annotations

import json
import subprocess
from datetime import datetime
from pathlib import Path

import pytest

from tailscope.lab.engines import validate_document
from tailscope.store import EngineDocument, RunRecord, Store
from tailscope.units import fmt_count, fmt_ratio

ENGINE = "tailscope-asyncbench"
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
    from conftest import engine_path

    exe = engine_path(ENGINE)
    if not exe.exists():
        pytest.skip(f"{exe} not built (run `make build`, or set TAILSCOPE_BUILD_DIR)")
    art = tmp_path_factory.mktemp("asyncbench")
    doc, stderr = run_asyncbench(exe, [*SMALL, "--artifacts", str(art)], art / "result.json", 300)
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


def test_an_unreachable_rate_ends_saturated_not_hung(engine, tmp_path):
    doc, _ = run_asyncbench(
        engine(ENGINE),
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


def test_payload_bytes_sweep_payload_and_unpinned_placement(engine, tmp_path):
    doc, _ = run_asyncbench(
        engine(ENGINE),
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
def test_bad_flags_are_clear_errors(engine, args, message):
    r = subprocess.run([str(engine(ENGINE)), *args], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert message in (r.stderr + r.stdout)


# ---- the study's section, from a temporary store ----------------------------


def _latency(p50, count=1000):
    return {
        "unit": "ns",
        "count": count,
        "min": p50 // 2,
        "mean": p50 * 1.1,
        "stddev": 1.0,
        "max": p50 * 20,
        "percentiles": {"50": p50, "90": p50 * 2, "99": p50 * 5, "99.9": p50 * 10, "99.99": p50 * 20},
        "low_confidence": ["99.99"],
    }


def _m(name, model, mech, payload, load, p50):
    return {
        "name": name,
        "variant": f"{model}/{mech}/{payload}",
        "model": model,
        "mechanism": mech,
        "payload": payload,
        "load_pct": load,
        "offered_per_s": 1000.0,
        "achieved_per_s": 990.0,
        "saturated": load >= 100,
        "pinning": {"policy": "pinned"},
        "observed": {"load_pct": load},
        "latency": _latency(p50),
        "cdf": [[p50 // 2, 0.0], [p50, 50.0], [p50 * 20, 100.0]],
        "hlog_tag": f"{name}.{model}/{mech}/{payload}.load{load}",
    }


def _synthetic_docs():
    base = {
        "schema": "tailscope.result/1",
        "engine": "tailscope-baseline",
        "machine": {},
        "unavailable": [],
        "warnings": [],
        "measurements": [
            {
                "name": n,
                "variant": "pinned",
                "latency": _latency(p),
                "cdf": [[p, 0.0], [p, 100.0]],
                "pinning": {"policy": "pinned", "client_cpu": 0, "server_cpu": 1},
            }
            for n, p in (("condvar_handoff", 20000), ("spin_handoff", 200), ("thread_create", 40000))
        ],
    }
    ms = []
    for model, mechs, p50 in (
        ("deferred", ("future", "continuation"), 300),
        ("std-async", ("future",), 60000),
        ("fixed-pool", ("future", "continuation"), 25000),
        ("spin-pool", ("future",), 500),
        ("coroutine", ("future", "resume"), 26000),
    ):
        for mech in mechs:
            for payload, k in (("long_long", 1), ("vector10000", 3)):
                for load in (25.0, 75.0, 100.0):
                    if payload != "long_long" and load != 75.0:
                        continue
                    f = load / 25.0
                    point = [
                        _m("scheduling_delay", model, mech, payload, load, int(p50 * f)),
                        _m("join_delay", model, mech, payload, load, int(p50 / 10 * k)),
                        _m("total", model, mech, payload, load, int(p50 * 2 * k * f)),
                    ]
                    if model == "deferred":
                        point.append(_m("deferral_wait", model, mech, payload, load, 5000))
                    if load == 75.0:  # the payload comparison: every payload at the common rate
                        ms += [
                            m | {"series": "payload_common_rate", "variant": m["variant"] + "/common-rate"}
                            for m in point
                        ]
                    if payload == "long_long":
                        ms += point
    # The spin pool's 25 % point: queueing behind a worker that waited for a CPU; its 100 % point: overloaded.
    for m in ms:
        if m["model"] == "spin-pool" and m["load_pct"] == 25.0:
            m["observed"]["backlog"] = {
                "calls": 1000,
                "queue_p50": 87,
                "queue_mean": 143.0,
                "queue_max": 767,
                "queue_empty_fraction": 0.37,
                "in_flight_mean": 150.0,
                "in_flight_max": 800,
                "grew": False,
                "stall_fraction": 0.6,
                "stall_max_ns": 12_000_000,
                "empty_queue_scheduling_p50_ns": 600,
                "empty_queue_calls": 370,
                "lateness_first_quarter_p50_ns": 1_500_000,
                "lateness_last_quarter_p50_ns": 1_400_000,
                "worker_parks_per_call": 0.0,
                "sched": {
                    "window_ns": 360_000_000,
                    "workers": {"threads": 1, "run_ns": 130_000_000, "runqueue_wait_ns": 225_000_000, "timeslices": 40},
                },
            }
        if m["model"] == "spin-pool" and m["load_pct"] == 100.0:
            m["observed"]["backlog"] = {
                "calls": 1000,
                "grew": True,
                "queue_p50": 2000,
                "lateness_first_quarter_p50_ns": 2_000_000,
                "lateness_last_quarter_p50_ns": 40_000_000,
            }
    ms.append(
        {
            "name": "same_thread_resume",
            "variant": "coroutine/resume/void",
            "latency": _latency(12),
            "cdf": [[12, 0.0], [12, 100.0]],
            "hlog_tag": "same_thread_resume.coroutine/resume/void",
        }
    )
    bench = {
        "schema": "tailscope.result/1",
        "engine": ENGINE,
        "machine": {},
        "unavailable": [],
        "warnings": [],
        "config": {
            "measure_at_pct": 75.0,
            "sweep_payload": "long_long",
            "placement": "pinned",
            "producer_cpu": 0,
            "consumer_cpu": 1,
            "workers": 1,
            "worker_cpus": "any",
        },
        "max_rate_per_s": {
            "deferred": 900000.0,
            "std-async": 20000.0,
            "fixed-pool": 400000.0,
            "spin-pool": 500000.0,
            "coroutine": 380000.0,
        },
        "ramps": {m: {"steps": [{}], "saturation_found": True} for m in ("deferred", "std-async")},
        "measurements": ms,
    }
    return base, bench


def test_section_renders_figures_tables_targets_and_ratios(tmp_path):
    from tailscope.studies.asyncmodels import STUDY

    base, bench = _synthetic_docs()
    now = datetime(2026, 1, 1, 12, 0, 0)
    run = RunRecord(
        "r1",
        now,
        now,
        "quick",
        ["async"],
        {},
        "test",
        [EngineDocument("async", "tailscope-baseline", base), EngineDocument("async", ENGINE, bench)],
    )
    with Store(tmp_path / "t.duckdb") as store:
        store.save_run(run)
        sec = STUDY.section(store, "r1")
    assert sec.id == "async"
    titles = [b.title for b in sec.blocks]
    for want in (
        "Scheduling delay per model",
        "Join delay per model",
        "Total per model",
        "Scheduling delay per payload",
        "Join delay per payload",
        "Load sweep",
        "Maximum sustained rate",
        "Performance targets",
        "Delays at 75 %",
    ):
        assert any(t.startswith(want) for t in titles), (want, titles)
    figures = [b for b in sec.blocks if hasattr(b, "svg")]
    assert all(f.svg.startswith("<svg") and f.finding for f in figures)
    sched = next(f for f in figures if f.title.startswith("Scheduling delay"))
    # Computed from the data: at 75 % deferred has the lowest p50 (3 × 300 ns) = 0.045× the 20 µs condvar hand-off.
    assert "deferred/" in sched.finding and f"900 ns ({fmt_ratio(0.045)}" in sched.finding
    targets = next(b for b in sec.blocks if b.title.startswith("Performance targets"))
    fixed = [r for r in targets.rows if r[0].startswith("fixed-pool") and "future, 25 % load" in r[0]][0]
    assert fixed[3] == fmt_ratio(1.25) and fixed[5] == "met"  # 25 µs / 20 µs
    spin = [r for r in targets.rows if r[0].startswith("spin-pool") and "25 % load" in r[0]][0]
    assert spin[3] == fmt_ratio(2.5) and spin[5] == "met"
    resume = [r for r in targets.rows if r[0].startswith("coroutine")][0]
    assert resume[5] == "met"
    table = next(b for b in sec.blocks if b.title.startswith("Delays at 75 %"))
    assert table.columns[2] == "samples" and all(r[2] == fmt_count(1000) for r in table.rows)
    rates = next(b for b in sec.blocks if b.title.startswith("Maximum sustained rate"))
    assert [r[0] for r in rates.rows] == ["deferred", "std-async", "fixed-pool", "spin-pool", "coroutine"]
    assert any("saturated" in n for n in sec.notes) is False  # nothing saturated at 75 %
    backlog = next(b for b in sec.blocks if b.title.startswith("What the calls met"))
    spin25 = next(r for r in backlog.rows if r[0] == "spin-pool/future @ 25 %")
    assert spin25[3] == fmt_count(87) and spin25[5] == "steady" and spin25[6] == "62 %"
    # The reading is prose: under the table (details), one per row, not a table cell.
    assert len(backlog.columns) == len(spin25) and len(backlog.details) == len(backlog.rows)
    reading = dict(backlog.details)["spin-pool/future @ 25 %"]
    assert "queueing" in reading and "run queue" in reading and "600 ns (3× the spin hand-off)" in reading
    # The empty-queue hand-off is a target row of its own: 600 ns / 200 ns.
    hand = [r for r in targets.rows if "empty queue" in r[0]]
    assert any(r[1] == "600 ns" and r[3] == fmt_ratio(3.0) for r in hand)
    from tailscope.studies.asyncmodels import explain

    over = next(
        m
        for m in bench["measurements"]
        if m["model"] == "spin-pool" and m["load_pct"] == 100.0 and m["name"] == "scheduling_delay"
    )
    assert "overloaded" in explain(over, {}) and "backlog grew" in explain(over, {})


def test_section_without_engine_documents_says_so(tmp_path):
    from tailscope.studies.asyncmodels import STUDY

    now = datetime(2026, 1, 1, 12, 0, 0)
    with Store(tmp_path / "t.duckdb") as store:
        store.save_run(RunRecord("r2", now, now, "quick", ["async"], {}, "test", [], [("async", "engine missing")]))
        sec = STUDY.section(store, "r2")
    assert sec.blocks == []
    assert any("engine missing" in n for n in sec.notes)
    assert any("no tailscope-asyncbench" in n for n in sec.notes)


def _payload_point(model: str, payload: str, p50_ns: float, saturated: bool = False, name: str = "total") -> dict:
    return {
        "name": name,
        "model": model,
        "mechanism": "future",
        "payload": payload,
        "saturated": saturated,
        "observed": {"why_saturated": ["backlog grew"] if saturated else []},
        "latency": {"percentiles": {"50": p50_ns}},
    }


def test_findings_never_cite_a_flagged_point():
    from tailscope.studies import asyncmodels

    # fixed-pool/vector10000 saturated: its 4 837× would be the biggest change, and must not be cited.
    rows = [
        _payload_point("fixed-pool", "void", 1_000),
        _payload_point("fixed-pool", "vector10000", 4_837_000, saturated=True),
        _payload_point("std-thread", "void", 20_000),
        _payload_point("std-thread", "vector10000", 60_000),
    ]
    line = asyncmodels.payload_finding(rows, "scheduling_delay")
    assert "fixed-pool" not in line and "4 837" not in line and "4837" not in line
    assert "std-thread/future" in line and "1 pair(s) with a saturated point were not compared" in line
    # Every pair flagged: nothing is compared, and the line says why.
    only_flagged = asyncmodels.payload_finding(rows[:2], "join_delay")
    assert "No unflagged pair" in only_flagged
    # Lowest/highest of a CDF figure: the saturated extreme is left out and counted.
    ext = asyncmodels._extremes_finding(rows[:3], "Total", {})
    assert "4.84 ms" not in ext and "1 flagged point(s) left out" in ext
