"""HdrHistogram logs (.hlog, the Java v1.3 log format our engines write): one reader.

Every histogram here uses the engines' range and precision (1 ns … 1 h, 3 significant digits:
docs/hdr-histogram.md), so interval histograms from any engine add up.
"""

from __future__ import annotations

import base64
import binascii
from pathlib import Path

from hdrh.histogram import HdrHistogram

HDR_LOWEST_NS, HDR_HIGHEST_NS, HDR_DIGITS = 1, 3_600_000_000_000, 3


class HlogError(ValueError):
    """A log that cannot give what was asked: unreadable lines, no interval with the tag."""


def new_histogram() -> HdrHistogram:
    """An empty histogram with the engines' range and precision."""
    return HdrHistogram(HDR_LOWEST_NS, HDR_HIGHEST_NS, HDR_DIGITS)


def decode(payload: str | bytes) -> HdrHistogram:
    """One interval's compressed histogram (the last field of an interval line)."""
    raw = payload.encode() if isinstance(payload, str) else payload
    try:
        base64.b64decode(raw, validate=True)  # a clear error for a damaged line before the codec sees it
    except binascii.Error as e:
        raise HlogError(f"an interval histogram is not valid base64: {e}") from e
    return HdrHistogram.decode(raw)


def read_intervals(path: str | Path, tag: str) -> tuple[float | None, list[tuple[float, HdrHistogram]]]:
    """(the log's StartTime in epoch seconds, or None; [(interval start offset in s, histogram)]) of
    every interval tagged `tag`, in file order."""
    start = None
    rows: list[tuple[float, HdrHistogram]] = []
    for line in Path(path).read_text().splitlines():
        if line.startswith("#[StartTime:"):
            start = float(line.split()[1])
        elif line.startswith(f"Tag={tag},"):
            parts = line.split(",")
            rows.append((float(parts[1]), decode(parts[-1])))
    return start, rows


def histogram_from_hlog(path: str | Path, tag: str) -> HdrHistogram:
    """The sum of every interval histogram tagged `tag`."""
    _, rows = read_intervals(path, tag)
    if not rows:
        raise HlogError(f"{path}: no interval tagged '{tag}'")
    total = new_histogram()
    for _, h in rows:
        total.add(h)
    return total


def buckets(h: HdrHistogram) -> list[tuple[int, int, int]]:
    """(lowest value, highest value, count) of every non-empty bucket, in value order: what
    measure.intervals.quantile_ci_from_buckets reads a histogram's ranks from."""
    return [
        (
            int(h.get_lowest_equivalent_value(item.value_iterated_to)),
            int(h.get_highest_equivalent_value(item.value_iterated_to)),
            int(item.count_at_value_iterated_to),
        )
        for item in h.get_recorded_iterator()
    ]
