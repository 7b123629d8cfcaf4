"""Within-request dependence of stage delays, measured from traces (docs/twin.md, "Correlated
stage delays").

In a real graph a slow request tends to be slow in many of its spans at once (CPU contention
shared by the request's handlers, the same request's large payload): its endpoints' local delays
move together. The twin draws each stage on its own unless told otherwise, so its tail is thinner.
This module measures that dependence so the twin can carry it (`shared` in a latency
distribution, docs/microservices.md):

- per endpoint and trace, one figure: the endpoint's local delay in that request (given by the
  caller: infer.py's own time plus store time of the instance, calls excluded, averaged when the
  endpoint runs several times in one trace);
- per pair of endpoints seen together in at least `min_traces` traces: the correlation of their
  *normal scores* over those traces (rank → Φ⁻¹((rank − 0.5) / n), ties averaged): the Gaussian-
  copula correlation, which does not depend on the shapes of the two distributions;
- a one-factor model corr(i, j) ≈ λ_i λ_j: each endpoint's loading λ_i on one per-request common
  factor, the least-squares fit over the measured pairs (MINRES), each λ kept in [0, MAX_LOADING]
  (a negative loading would be a request that is fast here because it is slow elsewhere, which the
  twin's one factor cannot express; 0.95 keeps every stage some draw of its own).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri
from scipy.stats import rankdata

# The largest loading the twin accepts (native/svc/distribution.h kMaxShared).
MAX_LOADING = 0.95
# A pair of endpoints is measured only when both ran in at least this many common traces: with
# n traces a correlation's noise is about 1/√n (0.14 at 50).
DEFAULT_MIN_PAIR_TRACES = 50
# Alternating least squares: the fit changes by less than this → done.
_TOLERANCE = 1e-7
_MAX_ROUNDS = 500


@dataclass(frozen=True)
class Correlation:
    """The measured dependence: per endpoint its loading, and the pairs it was fitted to."""

    loadings: dict[tuple[str, str], float]  # endpoint key → λ in [0, MAX_LOADING]
    mean_correlation: float  # mean over the measured pairs of their normal-score correlation
    pairs: int  # pairs measured (both endpoints in ≥ min_pair_traces common traces)
    min_pair_traces: int

    def to_json(self) -> dict:
        return {
            "mean_correlation": round(self.mean_correlation, 4),
            "pairs": self.pairs,
            "min_pair_traces": self.min_pair_traces,
            "estimator": "normal-score (Gaussian copula) correlation per pair; one-factor loadings by "
            f"least squares over the pairs, clipped to [0, {MAX_LOADING}]",
            "loadings": [
                {"service": k[0], "operation": k[1], "loading": round(v, 4)} for k, v in sorted(self.loadings.items())
            ],
        }


def normal_scores(values: np.ndarray) -> np.ndarray:
    """Φ⁻¹((rank − 0.5) / n), ties given their average rank."""
    n = len(values)
    return ndtri((rankdata(values) - 0.5) / n)


def pair_correlation(a: np.ndarray, b: np.ndarray) -> float | None:
    """The normal-score correlation of two paired samples; None when either does not vary."""
    za, zb = normal_scores(a), normal_scores(b)
    sa, sb = float(np.std(za)), float(np.std(zb))
    if sa == 0 or sb == 0:
        return None
    return float(np.mean((za - za.mean()) * (zb - zb.mean())) / (sa * sb))


def one_factor_loadings(pairs: Mapping[tuple[int, int], float], count: int) -> np.ndarray:
    """λ (length `count`) minimising Σ over the given pairs (c_ij − λ_i λ_j)², each λ in
    [0, MAX_LOADING]: alternating updates λ_i = Σ_j c_ij λ_j / Σ_j λ_j² over i's pairs. An index
    in no pair keeps 0."""
    partners: list[list[tuple[int, float]]] = [[] for _ in range(count)]
    for (i, j), c in pairs.items():
        partners[i].append((j, c))
        partners[j].append((i, c))
    # Started from the mean correlation's square root, the fit cannot start at the all-zero point
    # (a fixed point of the updates) and needs few rounds when the loadings are alike.
    mean_c = float(np.mean(list(pairs.values()))) if pairs else 0.0
    lam = np.array([np.sqrt(max(mean_c, 0.05)) if partners[i] else 0.0 for i in range(count)])
    for _ in range(_MAX_ROUNDS):
        before = lam.copy()
        for i in range(count):
            den = sum(lam[j] ** 2 for j, _ in partners[i])
            # Partners all at 0 leave λ_i free in the fit: 0, the twin's independent draw.
            lam[i] = min(MAX_LOADING, max(0.0, sum(c * lam[j] for j, c in partners[i]) / den)) if den > 0 else 0.0
        if float(np.max(np.abs(lam - before), initial=0.0)) < _TOLERANCE:
            break
    return lam


def measure(
    delays: Mapping[tuple[str, str], Mapping[str, float]], min_pair_traces: int = DEFAULT_MIN_PAIR_TRACES
) -> tuple[Correlation | None, str | None]:
    """(the measured dependence, None) or (None, why not), from each endpoint's local delay per
    trace id (endpoint key → trace id → delay)."""
    keys = sorted(k for k, d in delays.items() if len(d) >= min_pair_traces)
    if len(keys) < 2:
        return None, (
            f"{len(keys)} endpoint(s) ran in at least {min_pair_traces} traces: no pair of endpoints to correlate"
        )
    pairs: dict[tuple[int, int], float] = {}
    for (i, a), (j, b) in itertools.combinations(enumerate(keys), 2):
        common = sorted(delays[a].keys() & delays[b].keys())
        if len(common) < min_pair_traces:
            continue
        c = pair_correlation(
            np.array([delays[a][t] for t in common], dtype=float), np.array([delays[b][t] for t in common], dtype=float)
        )
        if c is not None:
            pairs[(i, j)] = c
    if not pairs:
        return None, (
            f"no pair of endpoints ran together in at least {min_pair_traces} traces with varying delays: "
            "nothing to correlate"
        )
    lam = one_factor_loadings(pairs, len(keys))
    used = {i for p in pairs for i in p}
    return (
        Correlation(
            loadings={keys[i]: float(lam[i]) for i in sorted(used)},
            mean_correlation=float(np.mean(list(pairs.values()))),
            pairs=len(pairs),
            min_pair_traces=min_pair_traces,
        ),
        None,
    )
