"""The echo section's wording of the target's p99 comparison, and the latency cells with their
intervals: the sentences format the analysis values they are given."""

from __future__ import annotations

from tailscope.measure.intervals import QuantileInterval
from tailscope.measure.verdict import IntervalVerdict
from tailscope.studies.common import latency_cells
from tailscope.studies.echo.analysis import MET, TARGET_UNDECIDED, TargetReading
from tailscope.studies.echo.section import p99_text, target_finding


def _reading(verdict: IntervalVerdict, p99_no_higher: bool = True) -> TargetReading:
    return TargetReading(
        100,
        best="io-uring",
        ratio=1.4,
        p99_no_higher=p99_no_higher,
        p99_verdict=verdict,
        met=False,
        server_limited=True,
    )


def test_the_p99_comparison_says_met_not_met_or_how_long_would_decide_it():
    assert p99_text(_reading(IntervalVerdict("met"))) == "p99 no higher (95 % intervals apart)"
    assert p99_text(_reading(IntervalVerdict("not met"))) == "p99 higher (95 % intervals apart)"
    undecided = IntervalVerdict(
        "undecided at this length", length_factor=16.0, samples_to_decide=1_600_000, seconds_to_decide=16.0
    )
    assert p99_text(_reading(undecided)) == (
        "p99 no higher by the estimates, but the 95 % intervals overlap: "
        "a run 16.0× as long (1\u2009600\u2009000 samples, ~16 s) would decide it"
    )
    on = IntervalVerdict("undecided at this length", why_no_length="the two estimates are equal")
    assert p99_text(_reading(on)).endswith("overlap: the two estimates are equal")
    old = IntervalVerdict("", unavailable="no p99 interval in the documents")
    assert (
        p99_text(_reading(old, False))
        == "p99 higher (estimates only; intervals unavailable: no p99 interval in the documents)"
    )
    sentence = target_finding([_reading(undecided)])
    assert f"— {TARGET_UNDECIDED}" in sentence and TARGET_UNDECIDED != MET


def test_latency_cells_add_the_tail_intervals_only_when_given():
    plain = latency_cells(1e5, 1e5, 2e5, 3e5, 4e5, 1000, {"99.9"})
    assert plain == ["100 µs", "100 µs", "200 µs", "300 µs", "400 µs *", "1\u2009000"]
    intervals = {
        "99": QuantileInterval(0.99, 1000, 3e5, 2.9e5, 3.15e5),
        "99.9": QuantileInterval(0.999, 1000, 4e5, unavailable="fewer than 3688 samples"),
    }
    cells = latency_cells(1e5, 1e5, 2e5, 3e5, 4e5, 1000, {"99.9"}, intervals)
    # Fewer than 10 samples beyond p99.9: called unavailable, not given the interval those few would set.
    assert cells[3] == "300 µs [290–315 µs]" and cells[4] == "400 µs [unavailable (n beyond < 10)]"
    # With enough beyond it but no interval (too few samples for one, an old document): [—].
    assert latency_cells(1e5, 1e5, 2e5, 3e5, 4e5, 1000, (), intervals)[4] == "400 µs [—]"
    few = latency_cells(1e5, 1e5, 2e5, 3e5, 4e5, 500, {"99"}, {"99": QuantileInterval(0.99, 500, 3e5, 2.9e5, 3.4e5)})
    assert few[3] == "300 µs [unavailable (n beyond < 10)]"  # an interval exists at 500, but 5 samples set it
    assert cells[:3] == plain[:3] and cells[5] == plain[5]
    crossing = latency_cells(
        1e5, 1e5, 2e5, 9.9e5, None, 1000, (), {"99": QuantileInterval(0.99, 1000, 9.9e5, 9.83e5, 1.2e6)}
    )
    assert crossing[3] == "990 µs [0.983–1.2 ms]" and crossing[4] == "—"
