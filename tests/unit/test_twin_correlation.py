"""The within-request dependence of stage delays (twin/correlation.py) on synthetic traces."""

from __future__ import annotations

import numpy as np
import pytest

from tailscope.twin.correlation import MAX_LOADING, measure, normal_scores, one_factor_loadings

KEYS = [("svc", f"ep{i}") for i in range(6)]


def _delays(loadings: list[float], traces: int, seed: int = 7) -> dict:
    """Per endpoint, per trace: a lognormal delay whose normal draws load `loadings[i]` on one factor."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal(traces)
    out = {}
    for key, lam in zip(KEYS, loadings):
        own = lam * z + np.sqrt(1 - lam * lam) * rng.standard_normal(traces)
        out[key] = {f"t{n}": float(200e3 * np.exp(0.8 * own[n])) for n in range(traces)}
    return out


def test_independent_stages_have_loadings_near_zero() -> None:
    corr, why = measure(_delays([0.0] * 6, 3000))
    assert why is None and corr is not None
    assert corr.pairs == 15
    assert abs(corr.mean_correlation) < 0.03
    # The fit of a rank-one model to pure noise (≈ 1/√3000 per pair) leaves loadings of its order's
    # square root; what matters is the correlation they imply, which is negligible.
    assert all(v < 0.25 for v in corr.loadings.values()), corr.loadings
    assert all(a * b < 0.05 for a in corr.loadings.values() for b in corr.loadings.values() if a != b)


def test_shared_factor_loadings_are_recovered() -> None:
    truth = [0.8, 0.7, 0.6, 0.5, 0.4, 0.3]
    corr, _ = measure(_delays(truth, 4000))
    assert corr is not None
    for key, lam in zip(KEYS, truth):
        assert corr.loadings[key] == pytest.approx(lam, abs=0.06)
    expected_mean = np.mean([a * b for i, a in enumerate(truth) for b in truth[i + 1 :]])
    assert corr.mean_correlation == pytest.approx(expected_mean, abs=0.03)


def test_the_measure_ignores_the_distributions_shape() -> None:
    """A monotone transform of one endpoint's delays (exp of a lognormal) leaves its loading as it was."""
    d = _delays([0.7] * 4, 3000)
    first, _ = measure(d)
    d[KEYS[0]] = {t: float(np.log(v)) ** 3 for t, v in d[KEYS[0]].items()}
    second, _ = measure(d)
    assert first is not None and second is not None
    assert second.loadings[KEYS[0]] == pytest.approx(first.loadings[KEYS[0]], abs=1e-9)


def test_loadings_are_clipped() -> None:
    lam = one_factor_loadings({(0, 1): 0.99, (0, 2): 0.99, (1, 2): 0.99, (2, 3): -0.5}, 4)
    assert max(lam) <= MAX_LOADING
    assert lam[3] == 0.0


def test_a_negative_pair_leaves_both_at_zero() -> None:
    assert list(one_factor_loadings({(0, 1): -0.3}, 2)) == [0.0, 0.0]


def test_too_few_traces_says_why() -> None:
    corr, why = measure(_delays([0.5] * 3, 30), min_pair_traces=50)
    assert corr is None
    assert why is not None and "50 traces" in why


def test_pairs_need_common_traces() -> None:
    d = _delays([0.5] * 2, 200)
    d[KEYS[1]] = {f"other{n}": v for n, v in enumerate(d[KEYS[1]].values())}  # never in the same trace
    corr, why = measure(d)
    assert corr is None and why is not None and "together" in why


def test_normal_scores_average_ties() -> None:
    s = normal_scores(np.array([1.0, 1.0, 2.0, 3.0]))
    assert s[0] == s[1]
    assert s[2] < s[3]
    assert float(np.sum(normal_scores(np.arange(101.0)))) == pytest.approx(0.0, abs=1e-9)
