"""Our HdrHistogram encodings against the PyPI `hdrhistogram` package (module `hdrh`).

The C++ side is `tailscope-hlog-fixture` (native/core/hlog_roundtrip_tool.cc):
it writes an .hlog from a seeded data set and prints what our histogram says
about each interval; the package must decode the same histograms and agree on
total count, min, max, mean and value_at_percentile. The other way round, the
fixture decodes what the package encoded and reads logs the package wrote.

Percentile ranks: our value_at_percentile (like Java HdrHistogram) takes the
sample of rank ceil(p/100 * n); the package rounds p/100 * n to the nearest
integer. The two agree whenever p/100 * n is an integer, so every data set here
has a multiple of 100000 samples and the percentiles have at most 3 decimals.
"""

from __future__ import annotations

import io
import json
import random
import subprocess
from pathlib import Path

import pytest

try:
    from hdrh.histogram import HdrHistogram
    from hdrh.log import HistogramLogReader, HistogramLogWriter

    HDRH_IMPORT_ERROR = None
except ImportError as error:
    HDRH_IMPORT_ERROR = error

from conftest import engine_path, needs_engine

LATENCY_LAYOUT = (1, 3_600_000_000_000, 3)
FIXTURE_BINARY = engine_path("tailscope-hlog-fixture")

pytestmark = needs_engine("tailscope-hlog-fixture")


@pytest.fixture(scope="module", autouse=True)
def require_hdrh() -> None:
    # A declared test dependency: when missing these tests fail (not skip), and
    # the rest of the suite still runs.
    if HDRH_IMPORT_ERROR is not None:
        pytest.fail(
            "tests/engines/test_hlog_interop.py needs the PyPI package 'hdrhistogram' "
            f"(import name 'hdrh'): pip install hdrhistogram ({HDRH_IMPORT_ERROR})",
            pytrace=False,
        )


def run_fixture(*args: str, stdin: str | None = None) -> dict:
    result = subprocess.run(
        [str(FIXTURE_BINARY), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, f"tailscope-hlog-fixture {args} failed: {result.stderr}"
    return json.loads(result.stdout)


def python_stats(histogram: HdrHistogram, percentiles: list[str]) -> dict:
    return {
        "total_count": histogram.get_total_count(),
        "min": histogram.get_min_value(),
        "max": histogram.get_max_value(),
        "values": {p: histogram.get_value_at_percentile(float(p)) for p in percentiles},
    }


def assert_same_stats(ours: dict, theirs: dict, where: str) -> None:
    assert ours["values"], f"{where}: no value_at_percentile to compare"
    for key in ("total_count", "min", "max"):
        assert ours[key] == theirs[key], f"{where}: {key} ours={ours[key]} package={theirs[key]}"
    mismatched = {
        p: (ours["values"][p], theirs["values"][p]) for p in ours["values"] if ours["values"][p] != theirs["values"][p]
    }
    assert not mismatched, f"{where}: value_at_percentile differs (ours, package): {mismatched}"


@pytest.fixture(scope="module")
def written_log(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    path = tmp_path_factory.mktemp("hlog") / "fixture.hlog"
    expected = run_fixture(
        "write",
        "--out",
        str(path),
        "--seed",
        "7",
        "--intervals",
        "4",
        "--samples-per-interval",
        "100000",
    )
    return path, expected


def test_package_decodes_our_base64_histograms(written_log):
    _, expected = written_log
    assert len(expected["intervals"]) == 4
    for i, interval in enumerate(expected["intervals"]):
        assert interval["base64"].startswith("HISTFAA")
        decoded = HdrHistogram.decode(interval["base64"])
        assert (
            decoded.lowest_trackable_value,
            decoded.highest_trackable_value,
            decoded.significant_figures,
        ) == LATENCY_LAYOUT
        assert_same_stats(interval, python_stats(decoded, expected["percentiles"]), f"interval {i}")
        assert decoded.get_mean_value() == pytest.approx(interval["mean"], rel=1e-12)


def test_package_reads_our_hlog(written_log):
    path, expected = written_log
    text = path.read_text()
    assert text.splitlines()[1] == "#[Histogram log format version 1.3]"

    reader = HistogramLogReader(str(path), HdrHistogram(*LATENCY_LAYOUT))
    seen = []
    while (histogram := reader.get_next_interval_histogram()) is not None:
        seen.append(histogram)
    reader.close()
    assert reader.get_start_time_sec() == pytest.approx(1_700_000_000.0)
    assert seen, "the package read no interval"
    assert len(seen) == len(expected["intervals"])
    for i, (histogram, interval) in enumerate(zip(seen, expected["intervals"])):
        assert_same_stats(interval, python_stats(histogram, expected["percentiles"]), f"hlog interval {i}")
        assert (histogram.get_tag() or "") == interval["tag"]
        # BaseTime is written, so the package places intervals at StartTime + start.
        assert histogram.get_start_time_stamp() == pytest.approx((1_700_000_000.0 + interval["start_s"]) * 1000.0)

    # All intervals added up in the package == our merge of them.
    total = HdrHistogram(*LATENCY_LAYOUT)
    reader = HistogramLogReader(str(path), HdrHistogram(*LATENCY_LAYOUT))
    while reader.add_next_interval_histogram(total) is not None:
        pass
    reader.close()
    assert_same_stats(expected["total"], python_stats(total, expected["percentiles"]), "total")

    # Interval_Max is max / 1e6 (ns -> ms) with 3 decimals.
    lines = [line for line in text.splitlines() if line and not line.startswith(("#", '"'))]
    assert lines, "no interval line in the .hlog"
    for line, interval in zip(lines, expected["intervals"]):
        fields = line.split(",")
        if fields[0].startswith("Tag="):
            fields = fields[1:]
        assert fields[2] == f"{interval['max'] / 1e6:.3f}"


def make_python_histograms() -> list[HdrHistogram]:
    rng = random.Random(2024)
    histograms = []
    for lowest, highest, digits in [LATENCY_LAYOUT, (1000, 10**10, 2), (1, 10**6, 1), (5, 10**6, 5), (1, 2**62, 2)]:
        histogram = HdrHistogram(lowest, highest, digits)
        limit = min(highest, 10**9)
        for _ in range(100_000):
            value = int(min(limit, rng.paretovariate(1.2) * 1000)) if rng.random() < 0.7 else rng.randrange(0, limit)
            histogram.record_value(value)
        histograms.append(histogram)
    histograms.append(HdrHistogram(*LATENCY_LAYOUT))  # empty
    return histograms


def test_we_decode_what_the_package_encodes():
    histograms = make_python_histograms()
    encoded = [h.encode().decode("ascii") for h in histograms]
    ours = run_fixture("decode", stdin="\n".join(encoded) + "\n")
    assert len(ours["histograms"]) == len(histograms)
    for i, (histogram, decoded) in enumerate(zip(histograms, ours["histograms"])):
        where = f"package histogram {i}"
        assert (decoded["lowest"], decoded["highest"], decoded["significant_figures"]) == (
            histogram.lowest_trackable_value,
            histogram.highest_trackable_value,
            histogram.significant_figures,
        )
        assert_same_stats(decoded, python_stats(histogram, ours["percentiles"]), where)
        # And our re-encoding decodes in the package to the very same counts.
        back = HdrHistogram.decode(decoded["reencoded"])
        assert back.counts_len == histogram.counts_len
        assert all(
            back.get_count_at_index(j) == histogram.get_count_at_index(j) for j in range(histogram.counts_len)
        ), where


def test_we_read_a_log_the_package_wrote(tmp_path):
    histograms = make_python_histograms()[:3]
    buffer = io.StringIO()
    writer = HistogramLogWriter(buffer)
    writer.output_log_format_version()
    writer.output_base_time(1_700_000_000_000)
    writer.output_legend()
    for i, histogram in enumerate(histograms):
        writer.output_interval_histogram(histogram, start_time_stamp_sec=1.0 + i, end_time_stamp_sec=2.0 + i)
    path = tmp_path / "package.hlog"
    path.write_text(buffer.getvalue())

    ours = run_fixture("read", str(path))
    assert len(ours["intervals"]) == len(histograms)
    for i, (histogram, interval) in enumerate(zip(histograms, ours["intervals"])):
        assert_same_stats(interval, python_stats(histogram, ours["percentiles"]), f"log line {i}")
        assert interval["start_s"] == pytest.approx(1.0 + i)
        assert interval["duration_s"] == pytest.approx(1.0)


def test_fixture_rejects_a_malformed_log_with_the_line_number(tmp_path):
    path = tmp_path / "bad.hlog"
    path.write_text("#[Histogram log format version 1.3]\n0.000,1.000,0.000,HISTFAA!!!\n")
    result = subprocess.run(
        [str(FIXTURE_BINARY), "read", str(path)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 1
    assert "hlog line 2:" in result.stderr
