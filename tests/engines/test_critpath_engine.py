"""End-to-end tests of the tailscope-critpath engine binary.

Runs the engine from the release build tree (TAILSCOPE_BUILD_DIR overrides
build/release) on the shared conformance fixtures and on inputs built here:
gzip, NDJSON, OTLP, invalid JSON, a truncated file, a cyclic trace.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import engine_path, fixture_files, needs_engine, require_fixture

ENGINE = engine_path("tailscope-critpath")

pytestmark = needs_engine("tailscope-critpath")


def run(*args: str, stdin: bytes | None = None, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(ENGINE), *map(str, args)], input=stdin, capture_output=True, timeout=120)
    if check:
        assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return proc


def analyze(*args: str, stdin: bytes | None = None) -> dict:
    doc = json.loads(run(*args, stdin=stdin).stdout)
    assert doc["schema"] == "tailscope.critpath/1"
    assert doc["engine"] == "tailscope-critpath"
    return doc


def jaeger_span(span_id, parent, start, duration, process="p1", op=None, kind=None):
    span = {
        "traceID": "t",
        "spanID": span_id,
        "operationName": op or span_id,
        "references": [{"refType": "CHILD_OF", "traceID": "t", "spanID": parent}] if parent else [],
        "startTime": start,
        "duration": duration,
        "tags": [{"key": "span.kind", "type": "string", "value": kind}] if kind else [],
        "processID": process,
    }
    return span


def jaeger_trace(trace_id, spans, services=("frontend", "backend")):
    return {
        "traceID": trace_id,
        "spans": spans,
        "processes": {f"p{i + 1}": {"serviceName": s} for i, s in enumerate(services)},
    }


SIMPLE = jaeger_trace(
    "simple",
    [
        jaeger_span("root", None, 1000, 100, "p1", "GET /", "server"),
        jaeger_span("call", "root", 1010, 60, "p1", "rpc", "client"),
        jaeger_span("serve", "call", 1015, 50, "p2", "rpc", "server"),
    ],
)


def fixture_id(p) -> str:
    return p.stem if isinstance(p, Path) else str(p)


@pytest.mark.parametrize("fixture", fixture_files("crisp"), ids=fixture_id)
def test_crisp_mode_matches_crisp_exclusive_times(fixture):
    fixture = require_fixture(fixture)
    expected = json.loads(fixture.read_text())["testing"]
    expected = expected[0] if isinstance(expected, list) else expected["opTimeExclusive"]
    doc = analyze("--algorithm", "crisp", fixture)
    (trace,) = doc["traces"]
    got: dict[str, int] = {}
    for op in trace["operations"]:
        key = f"[{op['service']}] {op['operation']}"
        got[key] = got.get(key, 0) + op["exclusive_ns"] // 1000
    assert got == expected


@pytest.mark.parametrize("fixture", fixture_files("jaeger-ui"), ids=fixture_id)
def test_jaeger_mode_matches_jaeger_ui_sections(fixture, tmp_path: Path):
    fixture = require_fixture(fixture)
    data = json.loads(fixture.read_text())
    trace_file = tmp_path / "trace.json"
    trace_file.write_text(json.dumps(data["trace"]))
    doc = analyze("--algorithm", "jaeger", trace_file)
    (trace,) = doc["traces"]
    got = [
        {"spanID": s["span_id"], "sectionStart": s["start_ns"] // 1000, "sectionEnd": s["end_ns"] // 1000}
        for s in reversed(trace["sections"])
    ]
    assert got == data["expected_critical_path_sections"]


def test_document_schema_and_sections(tmp_path: Path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"data": [SIMPLE]}))
    doc = analyze("--what-if", "backend", "--what-if-no-delays", path)
    for key in (
        "algorithm",
        "inputs",
        "summary",
        "traces",
        "end_to_end_ns",
        "critical_paths",
        "operations",
        "services",
        "bottlenecks",
        "delays",
        "what_if",
        "warnings",
    ):
        assert key in doc, key
    assert doc["algorithm"] == "capstone"
    assert doc["summary"]["traces"] == 1
    (trace,) = doc["traces"]
    assert trace["end_to_end_ns"] == 100_000
    assert trace["path"] == ["frontend:GET /", "frontend:rpc", "backend:rpc"]
    sections = trace["sections"]
    assert sections[0]["start_ns"] == 1_000_000 and sections[-1]["end_ns"] == 1_100_000
    assert all(a["end_ns"] == b["start_ns"] for a, b in zip(sections, sections[1:]))
    (rpc,) = trace["delays"]["rpc"]
    assert (rpc["scheduling_ns"], rpc["join_ns"]) == (5_000, 5_000)
    scenarios = {w["scenario"]: w for w in doc["what_if"]}
    assert scenarios["remove:backend"]["end_to_end_ns"]["max"] == 50_000
    assert scenarios["no_delays"]["end_to_end_ns"]["max"] == 90_000
    assert doc["bottlenecks"]["by_mean"][0]["key"] == "backend:rpc"


def test_gzip_input_gives_the_same_result(tmp_path: Path):
    text = json.dumps({"data": [SIMPLE]})
    plain = tmp_path / "t.json"
    plain.write_text(text)
    packed = tmp_path / "t.json.gz"
    packed.write_bytes(gzip.compress(text.encode()))
    a, b = analyze(plain), analyze(packed)
    assert b["inputs"][0]["compressed"] is True
    assert a["traces"][0]["sections"] == b["traces"][0]["sections"]


def test_ndjson_one_trace_per_line(tmp_path: Path):
    path = tmp_path / "traces.ndjson"
    lines = []
    for i in range(5):
        t = json.loads(json.dumps(SIMPLE))
        t["traceID"] = f"t{i}"
        lines.append(json.dumps(t))
    path.write_text("\n".join(lines) + "\n")
    doc = analyze("--doc-traces", "2", path)
    assert doc["summary"]["traces"] == 5
    assert doc["traces_in_document"] == 2 and doc["traces_omitted"] == 3
    assert doc["critical_paths"]["top"][0]["count"] == 5


def test_jobs_give_the_same_document_and_more_than_the_cpus_are_capped(tmp_path: Path):
    """The engine binary end to end; the in-process test (native/analyze/critpath_run_test.cc)
    covers fixtures, synthetic sets, a fuzzed corpus and invalid input for 1, 2, 3 and 8 jobs."""
    path = tmp_path / "traces.ndjson"
    lines = []
    for i in range(3000):  # ~3 MB: more than one 1 MiB chunk
        t = json.loads(json.dumps(SIMPLE))
        t["traceID"] = f"t{i}"
        lines.append(json.dumps(t))
    path.write_text("\n".join(lines) + "\n")
    allowed = len(os.sched_getaffinity(0))
    outputs = {}
    for jobs in (1, 2, allowed + 1):
        art = tmp_path / f"art{jobs}"
        proc = run("--jobs", jobs, "--artifacts", art, path)
        doc = json.loads(proc.stdout)
        assert doc["config"]["jobs"] == min(jobs, allowed)
        capped = f"--jobs {jobs} capped at {allowed}" in proc.stderr.decode()
        assert capped == (jobs > allowed)
        for key in ("started_at", "command_line", "machine", "artifacts", "config"):
            doc.pop(key)
        for key in ("elapsed_s", "spans_per_s"):
            doc["summary"].pop(key)
        outputs[jobs] = (doc, (art / "critical_paths.ndjson").read_bytes())
    assert outputs[1][0]["summary"]["traces"] == 3000
    assert outputs[2] == outputs[1]
    assert outputs[allowed + 1] == outputs[1]


def chain_trace(trace_id: str, length: int) -> dict:
    """One root and a chain of `length - 1` nested spans: every span is on the path."""
    spans = [jaeger_span("s0", None, 0, 10 * length, "p1", "GET /", "server")]
    for i in range(1, length):
        spans.append(jaeger_span(f"s{i}", f"s{i - 1}", i, 10 * (length - i) - 1, "p1", "step"))
    return jaeger_trace(trace_id, spans)


def test_document_stays_summary_sized_for_a_huge_trace(tmp_path: Path):
    # Regression: the document embedded every per-trace result up to
    # --doc-traces, so one trace of 1 M spans made a ~500 MB document. With
    # the default flags a result past --doc-bytes (1 MiB) is left to the
    # artifacts, which get it whole, streamed.
    path = tmp_path / "big.ndjson"
    big = chain_trace("big", 20_000)
    path.write_text(json.dumps(SIMPLE) + "\n" + json.dumps(big) + "\n" + json.dumps(SIMPLE) + "\n")
    out = tmp_path / "result.json"
    artifacts = tmp_path / "artifacts"
    run("--out", out, "--artifacts", artifacts, path)
    assert out.stat().st_size < 512 * 1024
    doc = json.loads(out.read_text())
    assert doc["config"]["doc_bytes"] == 1 << 20
    assert [t["trace_id"] for t in doc["traces"]] == ["simple", "simple"]
    assert doc["traces_in_document"] == 2 and doc["traces_omitted"] == 1
    assert doc["traces_omitted_over_doc_bytes"] == 1
    lines = (artifacts / "critical_paths.ndjson").read_text().splitlines()
    assert [json.loads(ln)["trace_id"] for ln in lines] == ["simple", "big", "simple"]
    streamed = json.loads(lines[1])
    assert len(streamed["spans_on_path"]) == 20_000
    assert streamed["end_to_end_ns"] == 10 * 20_000 * 1000


def test_doc_bytes_budget_keeps_results_in_order(tmp_path: Path):
    path = tmp_path / "t.ndjson"
    path.write_text("\n".join(json.dumps(chain_trace(f"c{i}", 30)) for i in range(4)) + "\n")
    whole = analyze("--doc-bytes", str(1 << 20), path)
    one_size = len(json.dumps(whole["traces"][0], separators=(",", ":")))
    doc = analyze("--doc-bytes", str(2 * one_size + one_size // 2), path)
    assert [t["trace_id"] for t in doc["traces"]] == ["c0", "c1"]
    assert doc["traces"] == whole["traces"][:2]
    assert doc["traces_omitted_over_doc_bytes"] == 2
    assert analyze("--doc-bytes", "0", path)["traces"] == []
    for bad in ("-1", str((1 << 30) + 1), "lots"):
        proc = run("--doc-bytes", bad, path, check=False)
        assert proc.returncode == 2 and b"--doc-bytes" in proc.stderr


def test_otlp_input(tmp_path: Path):
    def span(span_id, parent, name, start, end, kind):
        s = {
            "traceId": "abc",
            "spanId": span_id,
            "name": name,
            "kind": kind,
            "startTimeUnixNano": str(start),
            "endTimeUnixNano": str(end),
        }
        if parent:
            s["parentSpanId"] = parent
        return s

    def resource(service, spans):
        return {
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
            "scopeSpans": [{"scope": {"name": "x"}, "spans": spans}],
        }

    doc = {
        "resourceSpans": [
            resource("api", [span("a", None, "GET", 0, 1000, 2), span("b", "a", "call", 100, 900, 3)]),
            resource("db", [span("c", "b", "query", 200, 800, 2)]),
        ]
    }
    path = tmp_path / "otlp.json"
    path.write_text(json.dumps(doc))
    out = analyze("--algorithm", "jaeger", path)
    assert out["inputs"][0]["format"] == "otlp"
    (trace,) = out["traces"]
    assert trace["path"] == ["api:GET", "api:call", "db:query"]
    assert {s["service"]: s["exclusive_ns"] for s in trace["services"]} == {"api": 400, "db": 600}


def test_stdin_input():
    doc = analyze("-", stdin=json.dumps(SIMPLE).encode())
    assert doc["summary"]["traces"] == 1


def test_invalid_json_names_file_and_offset(tmp_path: Path):
    path = tmp_path / "bad.json"
    text = '{"data": [{"traceID": "x", "spans": [}]}'
    path.write_text(text)
    proc = run(path, check=False)
    assert proc.returncode != 0
    stderr = proc.stderr.decode()
    assert str(path) in stderr
    assert f"byte offset {text.index('[}') + 1}" in stderr
    assert proc.stdout == b""


def test_truncated_file_is_an_error(tmp_path: Path):
    path = tmp_path / "cut.json"
    text = json.dumps({"data": [SIMPLE, SIMPLE]})
    path.write_text(text[: len(text) // 2])
    out = tmp_path / "out.json"
    artifacts = tmp_path / "artifacts"
    proc = run("--out", out, "--artifacts", artifacts, path, check=False)
    assert proc.returncode == 1
    assert f"byte offset {len(text) // 2}" in proc.stderr.decode()
    assert not out.exists(), "nothing half-written"
    # The per-trace NDJSON was being streamed when the input failed: its
    # temporary file is gone too (it once stayed behind, 170 MB of it).
    assert list(artifacts.iterdir()) == []
    assert not list(tmp_path.rglob("*.tmp*"))


def test_interrupted_run_leaves_no_temporary_artifact(tmp_path: Path):
    # A FIFO nobody writes to: the engine has created its NDJSON temp files
    # and blocks reading, deterministically, until we send SIGTERM.
    fifo = tmp_path / "traces.fifo"
    os.mkfifo(fifo)
    artifacts = tmp_path / "artifacts"
    proc = subprocess.Popen(
        [str(ENGINE), "--artifacts", str(artifacts), "--timeline-trace", "x", "--span-dump", str(fifo)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        first = json.loads(proc.stderr.readline())  # the start event: the temp files exist by now
        assert first["phase"] == "start"
        # Every artifact being streamed: the results, the index, the timelines, the span dump.
        temps = sorted(p.name.split(".tmp")[0] for p in artifacts.glob("*.tmp*"))
        assert temps == [".critical_paths.ndjson", ".spans.ndjson", ".timelines.ndjson", ".trace_index.ndjson"]
        proc.terminate()
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0
    assert list(artifacts.iterdir()) == []


def test_truncated_gzip_is_an_error(tmp_path: Path):
    packed = gzip.compress(json.dumps({"data": [SIMPLE] * 200}).encode())
    path = tmp_path / "cut.json.gz"
    path.write_bytes(packed[: len(packed) // 2])
    proc = run(path, check=False)
    assert proc.returncode != 0
    assert "gzip" in proc.stderr.decode()


def test_cyclic_trace_is_counted_not_fatal(tmp_path: Path):
    trace = jaeger_trace(
        "cyc",
        [
            jaeger_span("root", None, 0, 100),
            jaeger_span("a", "b", 10, 10),
            jaeger_span("b", "a", 20, 10),
            jaeger_span("ok", "root", 40, 20),
            jaeger_span("orphan", "missing", 50, 5),
            jaeger_span("ok", "root", 45, 5),
        ],
    )
    path = tmp_path / "cyclic.json"
    path.write_text(json.dumps(trace))
    doc = analyze("--algorithm", "crisp", path)
    warnings = doc["warnings"]
    assert warnings["cycle"] == 2
    assert warnings["orphan_span"] == 1
    assert warnings["duplicate_span_id"] == 1
    assert doc["traces"][0]["warnings"]["cycle"] == 2
    assert doc["traces"][0]["end_to_end_ns"] == 100_000


def test_artifacts_out_file_and_progress(tmp_path: Path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"data": [SIMPLE, SIMPLE, SIMPLE]}))
    out = tmp_path / "result.json"
    artifacts = tmp_path / "artifacts"
    proc = run("--out", out, "--artifacts", artifacts, "--doc-traces", "1", "--max-traces", "2", path)
    assert proc.stdout == b""
    doc = json.loads(out.read_text())
    assert doc["summary"]["traces"] == 2 and doc["summary"]["stopped_at_max_traces"] is True
    lines = (artifacts / "critical_paths.ndjson").read_text().splitlines()
    assert len(lines) == 2 and all(json.loads(ln)["trace_id"] == "simple" for ln in lines)
    assert doc["warnings"]["duplicate_trace_id"] == 1
    events = [json.loads(ln) for ln in proc.stderr.decode().splitlines()]
    assert all(e["engine"] == "tailscope-critpath" for e in events)
    assert events[0]["phase"] == "start" and events[-1]["phase"] == "done"
    assert events[-1]["fraction_done"] == 1.0
    assert not list(tmp_path.rglob("*.tmp.*"))


@pytest.mark.parametrize(
    "args, complaint",
    [
        (["--algorithm", "fastest", "t.json"], "--algorithm"),
        (["--top", "-1", "t.json"], "--top"),
        (["--max-spans-per-trace", "0", "t.json"], "--max-spans-per-trace"),
        (["--jobs", "0", "t.json"], "--jobs: expects a number of worker threads >= 1, got 0"),
        (["--jobs", "-3", "t.json"], "--jobs: expects a number of worker threads >= 1, got -3"),
        (["--bogus", "t.json"], "--bogus"),
        ([], "inputs is required"),
    ],
)
def test_usage_errors(args, complaint, tmp_path: Path):
    proc = run(*args, check=False)
    assert proc.returncode == 2
    assert complaint in proc.stderr.decode()
    assert proc.stdout == b""


def test_times_beyond_int64_are_clamped_not_zero(tmp_path: Path):
    # docs/critical-path.md: time_out_of_range, clamped to ±2^61 ns. They used
    # to be read as 0 and counted as bad_timestamp.
    trace = jaeger_trace(
        "huge",
        [
            jaeger_span("root", None, 99999999999999999999, 100),
            jaeger_span("child", "root", 99999999999999999999, 50),
        ],
    )
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(trace))
    doc = analyze(path)
    assert doc["warnings"]["bad_timestamp"] == 0
    assert doc["warnings"]["time_out_of_range"] == 2
    (t,) = doc["traces"]
    assert t["start_ns"] == 2**61


def test_derived_distributions_are_result_measurements(tmp_path: Path):
    # Two requests: end-to-end 100 µs and 200 µs; backend 50 / 150 µs on the path.
    slow = jaeger_trace(
        "slow",
        [
            jaeger_span("root", None, 1000, 200, "p1", "GET /", "server"),
            jaeger_span("call", "root", 1010, 160, "p1", "rpc", "client"),
            jaeger_span("serve", "call", 1015, 150, "p2", "rpc", "server"),
        ],
    )
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"data": [SIMPLE, slow]}))
    doc = analyze("--what-if", "backend", path)
    by_key = {(m["name"], m["variant"]): m for m in doc["measurements"]}
    e2e = by_key[("end_to_end", "capstone")]["latency"]
    assert (e2e["count"], e2e["min"], e2e["max"]) == (2, 100_000, 200_000)
    assert e2e["percentiles"]["50"] == 100_000 and e2e["percentiles"]["99"] == 200_000  # nearest rank, exact
    assert e2e["low_confidence"] == ["50", "90", "99", "99.9", "99.99"]
    backend = by_key[("cp_time", "backend")]
    assert backend["latency"]["percentiles"]["50"] == 50_000
    assert backend["cdf"][0] == [50_000, 0] and backend["cdf"][-1] == [150_000, 100]
    assert ("rpc_scheduling", "capstone") in by_key and ("what_if", "remove:backend") in by_key
    # No probe tags in these traces: unavailable with a reason, not a 0.
    unavailable = {(u["name"], u["variant"]): u["reason"] for u in doc["unavailable"]}
    assert "tailscope.scheduling_delay_ns" in unavailable[("probe_scheduling", "capstone")]
    assert ("probe_scheduling", "capstone") not in by_key
    probe = doc["delays"]["probe_scheduling_ns"]
    assert probe["count"] is None and probe["p99"] is None and probe["mean"] is None and probe["unavailable"]


def test_empty_distributions_are_unavailable_not_zero(tmp_path: Path):
    path = tmp_path / "empty.json"
    path.write_text(json.dumps({"data": []}))
    doc = analyze("--what-if", "backend", path)
    assert doc["measurements"] == []
    names = {u["name"] for u in doc["unavailable"]}
    assert {"end_to_end", "rpc_scheduling", "rpc_join", "delay_on_path", "what_if"} <= names
    e2e = doc["end_to_end_ns"]
    assert e2e["count"] is None and e2e["p50"] is None and e2e["unavailable"] == "no traces in the input"
    (w,) = doc["what_if"]
    assert w["mean_ratio"] is None and w["p99_ratio"] is None
    assert doc["delays"]["on_path_share_of_end_to_end"] is None


def test_missing_file_is_named(tmp_path: Path):
    proc = run(tmp_path / "nope.json", check=False)
    assert proc.returncode == 1
    assert "nope.json" in proc.stderr.decode() and "No such file" in proc.stderr.decode()
