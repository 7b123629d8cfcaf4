"""Order-statistic intervals of percentiles (measure.intervals) against exact binomial values and a
coverage simulation, their read-back from documents and histograms, and the verdicts that use them
(measure.verdict) on each side of a target and straddling it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom

from tailscope.lab import agents
from tailscope.measure import verdict as V
from tailscope.measure.hlog import buckets, new_histogram
from tailscope.measure.intervals import (
    NO_INTERVALS_IN_DOCUMENT,
    QuantileInterval,
    from_latency,
    min_samples_for_interval,
    order_statistic_ranks,
    quantile_ci,
    quantile_ci_from_buckets,
)
from tailscope.measure.measurement import Measurement

# ---- the ranks ---------------------------------------------------------------------------------------


def _exact_ranks(n: int, q: float, level: float = 0.95) -> tuple[int, int, float] | None:
    """The ranks by their definition, from scipy's binomial: the largest l ≥ 1 with P(B < l) ≤ α/2,
    the smallest u ≤ n with P(B ≥ u) ≤ α/2, and P(l ≤ B < u)."""
    tail = (1 - level) / 2
    ks = np.arange(1, n + 1)
    below = binom.cdf(ks - 1, n, q)  # P(B < k)
    at_or_above = binom.sf(ks - 1, n, q)  # P(B ≥ k)
    lower, upper = ks[below <= tail], ks[at_or_above <= tail]
    if lower.size == 0 or upper.size == 0:
        return None
    lo, hi = int(lower.max()), int(upper.min())
    return lo, hi, float(binom.cdf(hi - 1, n, q) - binom.cdf(lo - 1, n, q))


CASES = [(n, q) for q in (0.5, 0.9, 0.99, 0.999) for n in (5, 6, 35, 36, 37, 100, 367, 368, 1000, 3687, 3688, 20_000)]


@pytest.mark.parametrize("n, q", CASES)
def test_ranks_match_the_exact_binomial_definition(n, q):
    expected = _exact_ranks(n, q)
    got = order_statistic_ranks(n, q)
    if expected is None:
        assert got is None
        return
    assert got is not None
    assert (got.lower_rank, got.upper_rank) == expected[:2]
    assert got.coverage == pytest.approx(expected[2], abs=1e-9)
    assert got.coverage >= 0.95 and got.lower_rank < got.upper_rank


def test_the_textbook_median_interval_and_the_p99_of_a_thousand():
    r50, r99 = order_statistic_ranks(100, 0.5), order_statistic_ranks(1000, 0.99)
    assert r50 is not None and (r50.lower_rank, r50.upper_rank) == (40, 61)
    assert r99 is not None and (r99.lower_rank, r99.upper_rank) == (983, 997)


def test_minimum_samples_is_where_an_interval_first_exists():
    assert [min_samples_for_interval(q) for q in (0.5, 0.9, 0.99, 0.999, 0.9999)] == [6, 36, 368, 3688, 36887]
    for q in (0.5, 0.99, 0.999):
        n = min_samples_for_interval(q)
        assert order_statistic_ranks(n, q) is not None and order_statistic_ranks(n - 1, q) is None
    with pytest.raises(ValueError, match="in \\(0, 1\\)"):
        order_statistic_ranks(100, 1.0)


def test_a_large_n_stays_exact_and_near_the_normal_approximation():
    n, q = 10**9, 0.99
    r = order_statistic_ranks(n, q)
    sd = math.sqrt(n * q * (1 - q))
    assert r is not None
    assert abs(r.lower_rank - (n * q - 1.959964 * sd)) < 5
    assert abs(r.upper_rank - (n * q + 1.959964 * sd + 1)) < 5
    assert 0.95 <= r.coverage < 0.9501


# ---- values, histograms, documents ------------------------------------------------------------------


def test_quantile_ci_reads_the_ranks_as_values():
    values = np.arange(1, 1001, dtype=float)
    p50, p99, p999 = (quantile_ci(values, q) for q in (0.5, 0.99, 0.999))
    assert (p50.lo_ns, p50.estimate_ns, p50.hi_ns) == (469, 500, 532)
    assert (p99.lo_ns, p99.estimate_ns, p99.hi_ns) == (983, 990, 997)
    # Too few samples: the estimate stays, the interval is None with the reason.
    assert (p999.estimate_ns, p999.lo_ns, p999.hi_ns, p999.unavailable) == (999, None, None, "fewer than 3688 samples")
    assert quantile_ci([], 0.5).unavailable == "no samples"
    with pytest.raises(ValueError, match="sorted"):
        quantile_ci([3.0, 1.0, 2.0], 0.5)


def test_a_histogram_widens_the_interval_to_its_buckets():
    h = new_histogram()
    values = [k * 1013 for k in range(1, 5001)]  # above 2048 ns a bucket is wider than 1 ns
    for v in values:
        h.record_value(v)
    rows = buckets(h)
    assert sum(c for _, _, c in rows) == 5000
    for q in (0.5, 0.9, 0.99, 0.999):
        exact, bucketed = quantile_ci(values, q), quantile_ci_from_buckets(rows, q)
        assert exact.lo_ns is not None and exact.hi_ns is not None
        assert bucketed.lo_ns == h.get_lowest_equivalent_value(int(exact.lo_ns))
        assert bucketed.hi_ns == h.get_highest_equivalent_value(int(exact.hi_ns))
        assert bucketed.lo_ns <= exact.lo_ns and bucketed.hi_ns >= exact.hi_ns
        assert bucketed.estimate_ns == h.get_highest_equivalent_value(int(exact.estimate_ns or 0))
    assert quantile_ci_from_buckets(rows, 0.9999).unavailable == "fewer than 36887 samples"


def test_merged_agent_summaries_carry_the_engines_intervals():
    # Values 1..1000: the same figures core/latency_summary_test.cc expects from the C++ side.
    h = new_histogram()
    for v in range(1, 1001):
        h.record_value(v)
    s = agents.latency_summary(h)
    assert s["percentile_ci"] == {"50": [469, 532], "90": [881, 919], "99": [983, 997]}
    assert s["percentile_ci_unavailable"] == {"99.9": "fewer than 3688 samples", "99.99": "fewer than 36887 samples"}
    assert s["percentile_ci_level"] == 0.95


def test_a_documents_intervals_read_into_the_typed_measurement():
    latency = {
        "count": 1000,
        "percentiles": {"50": 500, "99": 990, "99.9": 999},
        "percentile_ci": {"50": [469, 532], "99": [983, 997]},
        "percentile_ci_level": 0.95,
        "percentile_ci_unavailable": {"99.9": "fewer than 3688 samples"},
    }
    m = Measurement.from_dict({"name": "latency_intended", "latency": latency})
    assert sorted(m.intervals) == ["50", "99", "99.9"]
    p99 = m.interval("99")
    assert (p99.q, p99.count, p99.estimate_ns, p99.lo_ns, p99.hi_ns) == (0.99, 1000, 990, 983, 997) and p99.available
    p999 = m.interval("99.9")
    assert not p999.available and p999.unavailable == "fewer than 3688 samples" and p999.estimate_ns == 999
    # A document written before the engines added intervals: unavailable, never invented.
    old = Measurement.from_dict({"name": "x", "latency": {"count": 1000, "percentiles": {"99": 990}}})
    assert old.interval("99").unavailable == NO_INTERVALS_IN_DOCUMENT and old.interval("99").lo_ns is None
    assert from_latency({"count": 0, "unavailable": "no samples recorded"}, "99").unavailable == "no samples recorded"
    # Keys that are not percentiles in (0, 100) are left out, never read as one.
    odd = Measurement.from_dict({"name": "x", "latency": {"count": 9, "percentiles": {"max": 5, "100": 7, "50": 3}}})
    assert sorted(odd.intervals) == ["50"] and odd.p_ns("max") == 5
    with pytest.raises(ValueError, match="not a percentile"):
        from_latency({}, "p99")


# ---- coverage, by simulation --------------------------------------------------------------------------

TRIALS = 1000
SAMPLES_PER_TRIAL = 2000


def _coverage(q: float, interval, seed: int) -> float:
    """Share of TRIALS seeded exponential samples whose interval(sorted, q) -> (lo, hi) covers the
    true quantile −ln(1 − q)."""
    rng = np.random.default_rng(seed)
    truth = -math.log(1 - q)
    hits = 0
    for _ in range(TRIALS):
        lo, hi = interval(np.sort(rng.exponential(size=SAMPLES_PER_TRIAL)), q)
        hits += lo <= truth <= hi
    return hits / TRIALS


def _ci(x: np.ndarray, q: float) -> tuple[float, float]:
    i = quantile_ci(x, q)
    assert i.lo_ns is not None and i.hi_ns is not None
    return i.lo_ns, i.hi_ns


@pytest.mark.parametrize("q, seed", [(0.5, 1), (0.99, 2)])
def test_intervals_cover_the_true_quantile_at_their_exact_rate(q, seed):
    """The number of covering trials is Binomial(TRIALS, c), c the ranks' exact coverage (0.953 for
    p50 and 0.958 for p99 at 2000 samples; above 0.95 because B is discrete). A band of 4 standard
    deviations (±0.025 at c ≈ 0.95) fails a correct implementation with probability ~6e-5, and the
    seed makes it deterministic. The control below shows the simulation tells a too-narrow interval apart."""
    r = order_statistic_ranks(SAMPLES_PER_TRIAL, q)
    assert r is not None
    band = 4 * math.sqrt(r.coverage * (1 - r.coverage) / TRIALS)
    covered = _coverage(q, _ci, seed)
    assert abs(covered - r.coverage) <= band
    assert covered >= 0.95 - band


def test_the_simulation_tells_a_too_narrow_interval_apart():
    """The control: the nearest-rank estimate ± 3 ranks covers far less than 95 %."""

    def narrow(x: np.ndarray, q: float) -> tuple[float, float]:
        k = math.ceil(q * x.size) - 1
        return float(x[k - 3]), float(x[k + 3])

    assert _coverage(0.5, narrow, 1) < 0.5


def test_an_interval_narrows_as_one_over_the_square_root_of_n():
    """The assumption behind the verdicts' "how long would decide it": 4× the samples, half the width."""
    rng = np.random.default_rng(3)

    def mean_width(n: int) -> float:
        widths = []
        for _ in range(300):
            lo, hi = _ci(np.sort(rng.exponential(size=n)), 0.99)
            widths.append(hi - lo)
        return float(np.mean(widths))

    assert mean_width(2000) / mean_width(8000) == pytest.approx(2.0, rel=0.15)


# ---- verdicts --------------------------------------------------------------------------------------------


def _iv(estimate: float, lo: float, hi: float, count: int = 1000) -> QuantileInterval:
    return QuantileInterval(0.99, count, estimate, lo, hi)


def test_at_most_on_each_side_of_the_target():
    assert V.at_most(_iv(100, 90, 120), 120).verdict == V.MET  # the whole interval at or below
    assert V.at_most(_iv(100, 90, 120), 89.9).verdict == V.NOT_MET  # the whole interval above
    met = V.at_most(_iv(100, 90, 120), 200)
    assert met.verdict == V.MET and met.length_factor is None and met.unavailable == ""


def test_at_most_straddling_says_how_long_a_run_would_decide_it():
    # Below the target by 10 with 20 of interval above the estimate: the half-width must halve, 4× the run.
    below = V.at_most(_iv(100, 90, 120), 110, rate_per_s=100.0)
    assert below.verdict == V.UNDECIDED
    assert below.length_factor == pytest.approx(4.0) and below.samples_to_decide == 4000
    assert below.seconds_to_decide == pytest.approx(40.0)  # 4000 samples at 100/s
    # Above the target: the lower half-width (10) must fit in the 5 to the target.
    above = V.at_most(_iv(100, 90, 120), 95)
    assert above.verdict == V.UNDECIDED and above.length_factor == pytest.approx(4.0)
    assert above.seconds_to_decide is None and "no observed rate" in above.why_no_length
    on = V.at_most(_iv(100, 90, 120), 100)
    assert on.verdict == V.UNDECIDED and on.length_factor is None and on.why_no_length == V.ON_THE_TARGET


def test_at_most_without_an_interval_is_unavailable_with_the_reason():
    v = V.at_most(QuantileInterval(0.999, 500, 120.0, unavailable="fewer than 3688 samples"), 100)
    assert (v.verdict, v.unavailable) == ("", "fewer than 3688 samples")


def test_at_most_other_on_each_side_and_overlapping():
    poll = _iv(200, 190, 215)
    assert V.at_most_other(_iv(150, 140, 160), poll).verdict == V.MET
    assert V.at_most_other(_iv(250, 230, 270), poll).verdict == V.NOT_MET
    assert V.at_most_other(_iv(150, 140, 190), poll).verdict == V.MET  # touching at 190 is still at most
    # Overlapping: a at 180 (+15 above), poll at 200 (−10 below): (15 + 10)² / 20² = 1.5625× the run.
    v = V.at_most_other(_iv(180, 170, 195, count=2000), poll, rate_a_per_s=200.0, rate_b_per_s=100.0)
    assert v.verdict == V.UNDECIDED and v.length_factor == pytest.approx(1.5625)
    assert v.samples_to_decide == math.ceil(1.5625 * 2000)
    assert v.seconds_to_decide == pytest.approx(1.5625 * 10.0)  # both runs last 10 s now
    # a above b's estimate but overlapping: a's lower half (20) and b's upper half (15) over the gap 10.
    up = V.at_most_other(_iv(210, 190, 240), poll)
    assert up.verdict == V.UNDECIDED and up.length_factor == pytest.approx((20 + 15) ** 2 / 10**2)
    same = V.at_most_other(_iv(200, 180, 220), poll)
    assert same.verdict == V.UNDECIDED and same.length_factor is None and "equal" in same.why_no_length
    gone = V.at_most_other(_iv(150, 140, 160), QuantileInterval(0.99, 100, 200.0, unavailable="fewer than 368 samples"))
    assert (gone.verdict, gone.unavailable) == ("", "fewer than 368 samples")


def test_the_length_to_decide_is_the_squared_ratio_of_half_width_to_gap():
    # By hand: a half-width of 30 ms facing a target 10 ms away must shrink 3×, i.e. 9× the samples.
    assert V.length_factor_to_decide(30e6, 10e6) == pytest.approx(9.0)
    assert V.length_factor_to_decide(5.0, 10.0) == pytest.approx(0.25)  # a shorter run would have decided
    assert V.length_factor_to_decide(5.0, 0.0) is None
    with pytest.raises(ValueError):
        V.length_factor_to_decide(-1.0, 1.0)
    # The same figure through a verdict: p99 45 ms [40–75 ms] of 2 000 samples at 500/s against 50 ms:
    # (75 − 45)² / (50 − 45)² = 36× → 72 000 samples, 144 s.
    v = V.at_most(QuantileInterval(0.99, 2000, 45e6, 40e6, 75e6), 50e6, rate_per_s=500.0)
    assert (v.verdict, v.length_factor, v.samples_to_decide) == (V.UNDECIDED, pytest.approx(36.0), 72_000)
    assert v.seconds_to_decide == pytest.approx(144.0)


def test_within_a_band_inside_outside_and_straddling():
    band = (0.85, 1.15)
    assert V.judge_within(1.0, 0.9, 1.1, band, 500).verdict == V.MET
    assert V.judge_within(1.0, 0.85, 1.15, band, 500).verdict == V.MET  # on the edges is inside
    assert V.judge_within(1.3, 1.2, 1.4, band, 500).verdict == V.NOT_MET
    assert V.judge_within(0.7, 0.6, 0.84, band, 500).verdict == V.NOT_MET
    # Inside, crossing the high edge: upper half 0.2 over the gap 0.1 → 4×; lower edge not crossed.
    up = V.judge_within(1.05, 0.95, 1.25, band, 500, rate_per_s=50.0)
    assert up.verdict == V.UNDECIDED and up.length_factor == pytest.approx(4.0)
    assert up.samples_to_decide == 2000 and up.seconds_to_decide == pytest.approx(40.0)
    # Inside, crossing both: the larger of (0.2/0.1)² and (0.3/0.1)² = 9×.
    both = V.judge_within(1.05, 0.75, 1.35, band, 500)
    assert both.length_factor == pytest.approx(9.0)
    # Outside above, its lower half crossing 1.15: (1.25 − 1.10)² / (1.25 − 1.15)² = 2.25×.
    out = V.judge_within(1.25, 1.10, 1.30, band, 500)
    assert out.verdict == V.UNDECIDED and out.length_factor == pytest.approx(2.25)
    edge = V.judge_within(1.15, 1.10, 1.20, band, 500)
    assert edge.verdict == V.UNDECIDED and edge.length_factor is None and "edge" in edge.why_no_length
    with pytest.raises(ValueError):
        V.judge_within(1.0, 0.9, 1.1, (1.2, 0.8), 500)


def test_ratio_within_judges_the_quotient_of_the_far_corners():
    band = (0.8, 1.2)
    # 100 [95–105] ÷ 100 [96–104]: [0.913–1.094] lies inside ±20 %.
    assert V.ratio_within(_iv(100, 95, 105), _iv(100, 96, 104), band).verdict == V.MET
    # 150 [140–160] ÷ 100 [95–105]: [1.333–1.684], wholly above.
    assert V.ratio_within(_iv(150, 140, 160), _iv(100, 95, 105), band).verdict == V.NOT_MET
    # 80 [60–100] ÷ 100 [90–110]: estimate 0.8 on the low edge: no length decides it there.
    edge = V.ratio_within(_iv(80, 60, 100), _iv(100, 90, 110), band)
    assert edge.verdict == V.UNDECIDED and edge.length_factor is None
    # 90 [70–110] ÷ 100 [90–110]: [0.636–1.222] crosses both edges; estimate 0.9: the lower half
    # (0.9 − 0.636) over the gap 0.1 → 6.98×, the upper (1.222 − 0.9) over 0.3 → 1.15×: 6.98×. The
    # slower side sets the seconds: the measured 1 000 samples at 2/s (500 s) vs the twin's at 20/s.
    v = V.ratio_within(_iv(90, 70, 110, count=300), _iv(100, 90, 110), band, 20.0, 2.0)
    lower = (0.9 - 70 / 110) ** 2 / 0.1**2
    assert v.verdict == V.UNDECIDED and v.length_factor == pytest.approx(lower)
    assert v.samples_to_decide == math.ceil(lower * 1000) and v.seconds_to_decide == pytest.approx(lower * 500)


def test_ratio_within_without_an_interval_names_the_side_and_why():
    few = QuantileInterval(0.99, 40, 1.2e9, unavailable="fewer than 368 samples")
    v = V.ratio_within(_iv(1.0e9, 0.9e9, 1.1e9), few, (0.8, 1.2))
    assert (
        v.verdict == ""
        and v.unavailable == "the second side's p99 has no interval (fewer than 368 samples; 40 samples)"
    )
    assert V.ratio_within(few, _iv(1.0e9, 0.9e9, 1.1e9), (0.8, 1.2)).unavailable.startswith("the first side's p99")
    zero = V.ratio_within(_iv(1.0, 0.9, 1.1), _iv(1.0, 0.0, 1.1), (0.8, 1.2))
    assert zero.verdict == "" and "reaches 0" in zero.unavailable


def test_decided_together_takes_the_longest_length():
    a = V.at_most(_iv(100, 90, 120), 110, rate_per_s=100.0)  # 4×, 4 000 samples, 40 s
    b = V.at_most(_iv(100, 90, 130, count=3000), 105, rate_per_s=100.0)  # (30/5)² = 36×, 108 000, 1 080 s
    v = V.decided_together([a, V.IntervalVerdict(V.MET), b])
    assert v.verdict == V.UNDECIDED and v.length_factor == pytest.approx(36.0)
    assert v.samples_to_decide == 108_000 and v.seconds_to_decide == pytest.approx(1080.0)
    stuck = V.decided_together([a, V.at_most(_iv(100, 90, 120), 100)])
    assert stuck.length_factor is None and stuck.why_no_length == V.ON_THE_TARGET
    with pytest.raises(ValueError):
        V.decided_together([V.IntervalVerdict(V.MET)])


# ---- the twin's contract: the same verdict on the ratios' intervals -------------------------------------


def _twin_row(p50: tuple[float, float, float], p99: tuple[float, float, float], count: int = 400) -> dict:
    """A validation row: (ratio, lo, hi) at p50 and p99, `count` requests on each side."""
    return {
        "ratios": {"p50": p50[0], "p90": 1.0, "p99": p99[0]},
        "ratio_ci95": {"p50": list(p50[1:]), "p99": list(p99[1:])},
        "original": {"count": count},
        "twin": {"count": count},
    }


def test_the_twins_contract_met_not_met_and_undecided_by_the_ratio_intervals():
    from tailscope.twin.commands import confidence_clause
    from tailscope.twin.validate import contract_verdict

    assert contract_verdict(_twin_row((1.0, 0.95, 1.05), (1.05, 0.9, 1.14))).verdict == V.MET
    # One interval wholly outside the band is not met, whatever the other.
    assert contract_verdict(_twin_row((1.0, 0.95, 1.05), (1.4, 1.2, 1.7))).verdict == V.NOT_MET
    # p99 1.05 [0.9–1.35]: its upper half (0.30) must fit in the 0.10 to 1.15 → 9×; p50 inside (met).
    v = contract_verdict(_twin_row((1.0, 0.95, 1.05), (1.05, 0.9, 1.35)))
    assert v.verdict == V.UNDECIDED and v.length_factor == pytest.approx(9.0) and v.samples_to_decide == 3600
    doc = {"contract": v.__dict__, "target_ratio_error": 0.15}
    assert confidence_clause(doc) == (
        " (undecided at this length: an interval straddles the ±15% band; traces and twin 9.0× as long "
        "(3\u2009600 requests on the larger side) would decide it)"
    )
    assert confidence_clause({"contract": {"verdict": "met"}, "target_ratio_error": 0.15}) == (
        " (met by the 95 % intervals)"
    )
    gone = contract_verdict({"ratios": {"p50": 1.0, "p99": 1.0}, "ratio_ci95": {"p50": [0.9, 1.1], "p99": None}})
    assert gone.verdict == "" and "no p99 interval" in gone.unavailable
    assert confidence_clause({}) == ""  # a document from before the contract verdict


def test_at_most_a_share_of_the_other_scales_its_interval():
    b = _iv(200, 190, 215)  # × 0.9: 180 [171–193.5]
    assert V.at_most_other(_iv(160, 150, 170), b, share_of_b=0.9).verdict == V.MET
    assert V.at_most_other(_iv(160, 150, 175), b).verdict == V.MET  # without the share, met
    # With it, 175 > 171: overlapping; (15 + 9)² / 20² = 1.44×.
    v = V.at_most_other(_iv(160, 150, 175), b, share_of_b=0.9)
    assert v.verdict == V.UNDECIDED and v.length_factor == pytest.approx(1.44)
    assert V.at_most_other(_iv(200, 195, 205), b, share_of_b=0.9).verdict == V.NOT_MET
    with pytest.raises(ValueError):
        V.at_most_other(_iv(160, 150, 170), b, share_of_b=0)
