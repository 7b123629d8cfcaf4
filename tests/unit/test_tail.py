"""tailscope.measure.tail: the Hill estimator, the mean-excess function, the tail verdict and the hlog samples."""

from __future__ import annotations

import numpy as np
import pytest

from tailscope.measure import hlog, tail

ALPHA = 2.5


def pareto(rng, alpha: float, n: int, scale: float = 1e6) -> np.ndarray:
    # numpy's pareto is Lomax (Pareto II); + 1 makes it the classical Pareto with x_min = 1.
    return scale * (rng.pareto(alpha, n) + 1.0)


def test_k_rule_is_sqrt_n_within_bounds_and_refuses_tiny_samples():
    assert tail.k_rule(10_000) == 100
    assert tail.k_rule(60) == 10  # √60 ≈ 7 is raised to the floor of 10 (and 10 ≤ 60/5)
    assert tail.k_rule(1_000_000) == 1000
    with pytest.raises(tail.TailError, match="at least 50"):
        tail.k_rule(49)


def test_hill_ci_covers_the_true_alpha_in_at_least_90_percent_of_seeded_trials():
    trials, covered = 100, 0
    for seed in range(trials):
        rng = np.random.default_rng(seed)
        est = tail.hill(pareto(rng, ALPHA, 4000), seed=seed)
        assert est.k == 63
        covered += est.contains(ALPHA)
    assert covered >= 90, f"true alpha inside the bootstrap CI in only {covered}/{trials} trials"


def test_hill_estimate_tracks_alpha():
    rng = np.random.default_rng(7)
    light, heavy = tail.hill(pareto(rng, 4.0, 20_000)), tail.hill(pareto(rng, 1.2, 20_000))
    assert heavy.alpha < light.alpha
    assert heavy.contains(1.2) and light.contains(4.0)


def test_pareto_is_heavy_and_exponential_is_not():
    rng = np.random.default_rng(1)
    assert tail.classify(pareto(rng, ALPHA, 20_000)).kind == tail.HEAVY
    for seed in range(5):
        exp = np.random.default_rng(100 + seed).exponential(1e6, 20_000) + 2e5
        verdict = tail.classify(exp)
        assert verdict.kind != tail.HEAVY, verdict.evidence
    bounded = np.random.default_rng(2).uniform(1e6, 2e6, 20_000)
    assert tail.classify(bounded).kind == tail.LIGHT


def test_mean_excess_slope_sign_separates_the_three_tails():
    rng = np.random.default_rng(3)
    assert tail.mean_excess(pareto(rng, ALPHA, 50_000)).slope > 0.2  # e(u) = u / (α − 1)
    assert tail.mean_excess(rng.uniform(1, 2, 50_000)).slope < -0.2  # e(u) = (2 − u) / 2
    flat = tail.mean_excess(rng.exponential(1.0, 50_000)).slope
    assert abs(flat) < 0.15  # memoryless: e(u) = mean for every u


def test_verdict_evidence_names_the_numbers():
    v = tail.classify(pareto(np.random.default_rng(4), ALPHA, 5000))
    assert "ξ" in v.evidence and "Hill α" in v.evidence and "mean-excess slope" in v.evidence
    assert v.to_json()["hill"]["k"] == v.hill.k


def test_too_few_samples_is_an_error_not_a_number():
    with pytest.raises(tail.TailError):
        tail.classify(np.arange(1, 20, dtype=float))
    with pytest.raises(tail.TailError, match="positive"):
        tail.hill(np.concatenate([np.zeros(10), np.ones(100)]))


def test_ccdf_points_are_a_decreasing_survival_function():
    x, s = tail.ccdf_points(np.arange(1, 10_001, dtype=float), max_points=50)
    assert len(x) <= 50 and x == sorted(x)
    assert all(a >= b for a, b in zip(s, s[1:]))
    assert s[-1] == pytest.approx(0.5 / 10_000)


def test_samples_from_an_hlog_reproduce_the_histogram_within_its_resolution(tmp_path):
    pytest.importorskip("hdrh.histogram")
    rng = np.random.default_rng(5)
    values = (pareto(rng, ALPHA, 20_000, scale=1e5)).astype(int)
    h = hlog.new_histogram()
    for v in values:
        h.record_value(int(v))
    other = hlog.new_histogram()
    other.record_value(123)
    log = tmp_path / "x.hlog"
    log.write_text(
        "#[Histogram log format version 1.3]\n"
        f"Tag=latency_intended,0.000,1.000,1.0,{h.encode().decode()}\n"
        f"Tag=latency_actual,0.000,1.000,1.0,{other.encode().decode()}\n"
        f"Tag=latency_intended,1.000,1.000,1.0,{other.encode().decode()}\n"
    )
    got = tail.samples_from_hlog(log)
    assert got.size == values.size + 1  # both intervals of the tag, not the other tag
    ref = np.sort(np.append(values, 123).astype(float))
    assert np.all(np.abs(np.sort(got) - ref) <= ref / 1024 + 1)
    assert tail.hill(got).alpha == pytest.approx(tail.hill(ref).alpha, rel=0.02)
    with pytest.raises(tail.TailError, match="no interval tagged 'send_lag'"):
        tail.samples_from_hlog(log, "send_lag")
