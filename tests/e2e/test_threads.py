"""Study `threads` and what it relies on in tailscope-svc: --workers really gives N processing threads,
bad --workers values fail before anything starts, the workloads' topologies, and the study end to end
in its tiny form with every report figure present."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import assert_refused_before_start, engine_path, needs_engine, report_section, run_study_alone
from tailscope.lab import topology
from tailscope.lab.cpus import cpu_split
from tailscope.studies import threads
from tailscope.studies.threads.analysis import analyze
from tailscope.studies.threads.run import PLANS, WORKLOADS, workload_json

SVC = engine_path("tailscope-svc")


@pytest.fixture(scope="module")
def passthrough_json(tmp_path_factory) -> Path:
    return topology.to_engine_json(WORKLOADS["passthrough"][0], tmp_path_factory.mktemp("t") / "p.json")


def tasks(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def run_front(topo: Path, model: str, workers: int, out: Path) -> tuple[int, dict]:
    """Starts the front alone (its backend is only dialled on the first call), counts its threads
    once it is ready, stops it; returns (threads, result document)."""
    proc = subprocess.Popen(
        [
            str(SVC),
            "--topology",
            str(topo),
            "--service",
            "front",
            "--model",
            model,
            "--workers",
            str(workers),
            "--port",
            "0",
            "--ports",
            "backend=1",
            "--out",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ready = json.loads(proc.stdout.readline())
        count = tasks(ready["pid"])  # every pool thread exists before the ready line is printed
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    return count, json.loads(out.read_text())


@needs_engine("tailscope-svc")
@pytest.mark.parametrize("model", ["pool-blocking", "pool-callback"])
def test_workers_n_yields_n_processing_threads(model, passthrough_json, tmp_path):
    base, doc1 = run_front(passthrough_json, model, 1, tmp_path / "1.json")
    for n in (7, 1000):
        count, doc = run_front(passthrough_json, model, n, tmp_path / f"{n}.json")
        assert count - base == n - 1, f"--workers {n}: {count} tasks vs {base} with --workers 1"
        details = doc["services"]["front"]["model_details"]
        assert details["workers"] == n
        assert details["thread_create_failures"] == 0
        assert details["io_dispatchers"] == doc1["services"]["front"]["model_details"]["io_dispatchers"] == 1
        assert doc["config"]["workers"] == n


@needs_engine("tailscope-svc")
@pytest.mark.parametrize(
    "workers, message",
    [
        ("0", "--workers 0: a pool needs at least one thread"),
        ("100000000", "--workers 100000000: above this process's thread limit"),
    ],
)
@pytest.mark.parametrize("mode", [["--service", "front", "--ports", "backend=1"], ["--all"]])
def test_bad_workers_fail_before_anything_starts(workers, message, mode, passthrough_json, tmp_path):
    out = tmp_path / "r.json"
    r = subprocess.run(
        [
            str(SVC),
            "--topology",
            str(passthrough_json),
            *mode,
            "--model",
            "pool-blocking",
            "--workers",
            workers,
            "--port",
            "0",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert_refused_before_start(r, message, out)


@needs_engine("tailscope-svc")  # topology.load validates with the engine (tailscope-svc --check-topology)
def test_workload_topologies_validate_and_carry_the_work_stage(tmp_path):
    p = topology.load(WORKLOADS["passthrough"][0])
    t = topology.load(WORKLOADS["transform"][0])
    front = lambda doc: next(s for s in doc["services"] if s["name"] == "front")  # noqa: E731
    assert not any("work" in st for st in front(p)["endpoints"][0]["stages"])
    assert any(st.get("work", {}).get("kind") == "json" for st in front(t)["endpoints"][0]["stages"])
    for doc in (p, t):
        assert next(s for s in doc["services"] if s["name"] == "backend")["model"] == "coroutine"
    out = workload_json("transform", tmp_path / "t.json", 200)
    doc = json.loads(out.read_text())
    assert front(doc)["endpoints"][0]["response_bytes"] == 200
    assert front(doc)["endpoints"][0]["stages"][0]["call"]["request_bytes"] == 200


def test_cpu_split_puts_generator_and_graph_on_different_cpus():
    load, graph = cpu_split({"cpus": "0,1"})
    assert (load, graph) == ([0], [1])
    load, graph = cpu_split({})
    assert not set(load) & set(graph)


FIGURES = [
    "Throughput vs users",
    "Mean latency vs users",
    "p99 latency vs users",
    "Load and run-queue length vs N",
    "Context switches per request",
    "p99 vs load (open loop",
    "Latency survival (log-log CCDF)",
    "Tail index per point",
    "Every closed-loop point",
    "Recommended thread count",
]


@needs_engine("tailscope-svc", "tailscope-load")
def test_study_end_to_end_tiny_form_writes_every_figure(tmp_path):
    _, report, stored = run_study_alone(threads.STUDY, tmp_path, {"threads_form": "tiny"})
    docs = [d.document for d in stored]
    plan = PLANS["tiny"]
    closed = [d for d in docs if d["threads_point"]["kind"] == "closed"]
    assert len(closed) == len(plan.threads) * len(plan.users) * len(plan.variants) * len(plan.workloads)
    for d in closed:
        tp = d["threads_point"]
        assert d["load"]["connections"] == tp["users"] and not tp["flags"], tp["flags"]
        assert tp["procstat"]["samples"] >= 1 and "front" in tp["procstat"]["processes"]
        assert "verdict" in tp["tail"] or "unavailable" in tp["tail"]
    graphs = [d for d in docs if d["threads_point"]["kind"] == "graph"]
    assert graphs
    for g in graphs:
        assert g["services"]["front"]["model_details"]["workers"] == g["threads_point"]["threads"]
    section = report_section(report, "threads")
    for title in FIGURES:
        assert title in section, title
    # The verdicts, as values: every (workload, variant) compared (smallest vs largest N at the most
    # users) and given a recommendation that meets the objective; the rule of thumb computed.
    a = analyze(docs)
    assert a.combos == tuple((w, v) for w in plan.workloads for v in plan.variants)
    for c in a.combos:
        cmp_ = a.comparisons[c]
        assert cmp_ is not None
        assert (cmp_.lo, cmp_.hi, cmp_.users) == (min(plan.threads), max(plan.threads), max(plan.users))
        rec = a.recommendations[c]
        assert rec.best is None or (rec.best.p99_ns is not None and rec.best.p99_ns <= a.objective_ns)
        assert (rec.rule_holds is None) == (rec.best is None or rec.analytic is None)
    assert any(r.analytic is not None for r in a.recommendations.values())
