"""tailscope-baseline end to end: the document, the .hlog, and bad flags."""

from __future__ import annotations

import json
import subprocess

import pytest

from conftest import engine_path, needs_engine
from tailscope.lab.engines import validate_document

BASELINE = engine_path("tailscope-baseline")
REFERENCES = {"clock_read", "empty_syscall", "thread_create", "condvar_handoff", "spin_handoff", "tcp_pingpong"}

pytestmark = needs_engine("tailscope-baseline")


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    art = tmp_path_factory.mktemp("baseline")
    out = art / "result.json"
    r = subprocess.run(
        [str(BASELINE), "--scale", "0.05", "--artifacts", str(art), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(out.read_text()), art, r.stderr


def test_document_has_every_reference_pinned_and_unpinned(smoke_run):
    doc, _, _ = smoke_run
    validate_document(doc, "tailscope-baseline")
    seen = {(m["name"], m["variant"]) for m in doc["measurements"]}
    assert seen == {(n, v) for n in REFERENCES for v in ("pinned", "unpinned")}
    for m in doc["measurements"]:
        assert m["latency"]["count"] == m["iterations"], m["name"]
        assert m["warmup_iterations"] == round(m["iterations"] * 0.1)
        assert m["latency"]["min"] > 0
        p = m["latency"]["percentiles"]
        assert p["50"] <= p["90"] <= p["99"] <= p["99.9"] <= m["latency"]["max"]
        assert m["cdf"][-1][1] == 100.0
        if m["variant"] == "pinned":
            assert m["pinning"]["client_cpu"] != m["pinning"]["server_cpu"] or doc["config"]["cpus_shared"]


def test_progress_lines_are_json(smoke_run):
    _, _, stderr = smoke_run
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert lines, "no progress on stderr"
    phases = [json.loads(ln)["phase"] for ln in lines]
    assert phases[-1] == "done"


def test_hlog_is_read_by_the_hdrhistogram_package(smoke_run):
    try:
        from hdrh.histogram import HdrHistogram
        from hdrh.log import HistogramLogReader
    except ImportError as e:  # a test dependency: its absence is a set-up error
        pytest.fail(f"the PyPI hdrhistogram package is required for this test: {e}")
    doc, art, _ = smoke_run
    hlog = art / "baseline.hlog"
    assert hlog.exists()
    reader = HistogramLogReader(str(hlog), HdrHistogram(1, 3_600_000_000_000, 3))
    by_tag = {}
    while True:
        h = reader.get_next_interval_histogram()
        if h is None:
            break
        by_tag[h.get_tag()] = h
    assert doc["measurements"], "no measurements"
    for m in doc["measurements"]:
        h = by_tag[m["hlog_tag"]]
        assert h.get_total_count() == m["latency"]["count"]
        assert h.get_value_at_percentile(50) == m["latency"]["percentiles"]["50"]
        assert h.get_max_value() == h.get_highest_equivalent_value(m["latency"]["max"])


@pytest.mark.parametrize(
    "args, message",
    [
        (["--cpus", "0,99999"], "cpu"),
        (["--cpus", "zero"], "--cpus"),
        (["--placement", "sideways"], "placement"),
        (["--only", "warp_drive"], "unknown reference"),
        (["--scale", "-1"], "scale"),
    ],
)
def test_bad_flags_are_clear_errors(args, message):
    r = subprocess.run(
        [str(BASELINE), *args, "--scale", "0.01"] if "--scale" not in args else [str(BASELINE), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode != 0
    assert message in (r.stderr + r.stdout)


def test_unwritable_output_fails_without_partial_file(tmp_path):
    target = tmp_path / "file-not-dir"
    target.write_text("keep")
    r = subprocess.run(
        [str(BASELINE), "--only", "clock_read", "--scale", "0.01", "--out", str(target / "r.json")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode != 0 and "r.json" in r.stderr
    assert target.read_text() == "keep"
