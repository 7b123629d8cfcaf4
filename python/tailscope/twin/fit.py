"""Durations fitted to the topology's distribution kinds (docs/microservices.md, DIST).

Each kind is fitted by maximum likelihood (lognormal: mean and standard deviation of log x;
exponential: the mean; uniform: min and max; constant: the median) and judged by the
Kolmogorov–Smirnov statistic D between the samples and the fitted CDF (scipy.stats.kstest): the
kind with the smallest D is chosen, every kind's D is recorded. D is the largest gap between the
two CDFs, 0…1: it says how far the twin's draws can be from what the traces showed, in
probability. With few samples D is large for every kind; `samples` is recorded beside it.

`empirical=True` keeps the samples' own shape instead: the engine's `empirical` kind, a table of
EMPIRICAL_POINTS quantiles at equally spaced probabilities (a quantile every 0.5 %), drawn by linear
interpolation between them. A parametric kind fitted in log space keeps a stage's body and loses its
tail — on socialnet's twin every service's p99 came out at 0.43–0.86× the traces' with the p50s
matched (2026-11-27) — while the table keeps the observed p99 and maximum. The parametric kinds' D
are still recorded beside it. Below MIN_EMPIRICAL_SAMPLES the table would be a few points joined by
lines: the parametric choice stands.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

# The engine's bounds (native/svc/distribution.cc): every duration parameter 0 … 60 s, sigma 0 … 3.
MAX_US = 60_000_000.0
MAX_SIGMA = 3.0
DEFAULT_CAP_FACTOR = 20.0  # the engine's default cap: 20 × the median / mean
# Positive floor for log x: a 0 µs gap (clock resolution) must not make log x = -inf.
LOG_FLOOR_US = 0.001
# kstest on more samples than this costs time and says nothing more about the shape.
MAX_FIT_SAMPLES = 20_000
PARAMETRIC = "parametric"
EMPIRICAL = "empirical"
DISTRIBUTION_CHOICES = (PARAMETRIC, EMPIRICAL)
# The empirical table: quantiles at probabilities 0, 1/200, …, 1 (the engine takes 2 … 1001).
EMPIRICAL_POINTS = 201
MIN_EMPIRICAL_SAMPLES = 20


@dataclass
class Fit:
    dist: dict  # the topology's DIST mapping (µs)
    kind: str
    samples: int
    ks_statistic: float | None  # of the chosen kind; None with one sample (no shape to test)
    ks_pvalue: float | None
    ks_by_kind: dict[str, float]
    median_us: float
    p99_us: float
    clamped: bool  # a parameter was clamped into the engine's range
    # The chosen distribution's own p99 (the engine's cap applied): beside p99_us it shows how much
    # of the observed tail the fitted kind keeps (a lognormal fitted in log space keeps the body).
    fit_p99_us: float | None = None

    def to_json(self) -> dict:
        return {
            "dist": self.dist,
            "kind": self.kind,
            "samples": self.samples,
            "ks_statistic": self.ks_statistic,
            "ks_pvalue": self.ks_pvalue,
            "ks_by_kind": self.ks_by_kind,
            "median_us": self.median_us,
            "p99_us": self.p99_us,
            "clamped": self.clamped,
            "fit_p99_us": self.fit_p99_us,
        }


def _round(x: float) -> float:
    """4 significant digits: the YAML stays readable, the value well within measurement noise."""
    if x == 0 or not math.isfinite(x):
        return 0.0
    return float(f"{x:.4g}")


def _clamp_us(x: float) -> tuple[float, bool]:
    y = min(max(x, 0.0), MAX_US)
    return y, y != x


def _candidates(us: np.ndarray) -> dict[str, tuple[dict, object]]:
    """kind → (DIST mapping, scipy frozen distribution or callable CDF)."""
    out: dict[str, tuple[dict, object]] = {}
    median = float(np.median(us))
    out["constant"] = ({"kind": "constant", "us": median}, lambda x, c=median: np.where(np.asarray(x) >= c, 1.0, 0.0))
    lo, hi = float(us.min()), float(us.max())
    if hi > lo:
        out["uniform"] = ({"kind": "uniform", "min_us": lo, "max_us": hi}, stats.uniform(loc=lo, scale=hi - lo))
    mean = float(us.mean())
    if mean > 0:
        out["exponential"] = ({"kind": "exponential", "mean_us": mean}, stats.expon(scale=mean))
    logs = np.log(np.maximum(us, LOG_FLOOR_US))
    sigma = float(logs.std())
    if sigma > 0:
        med = math.exp(float(logs.mean()))
        out["lognormal"] = (
            {"kind": "lognormal", "median_us": med, "sigma": min(sigma, MAX_SIGMA)},
            stats.lognorm(s=min(sigma, MAX_SIGMA), scale=med),
        )
    return out


def _empirical(us: np.ndarray) -> tuple[dict, object]:
    """The samples' quantile table as a DIST, and its CDF (the inverse of the piecewise-linear quantile
    function the engine draws from) for the KS statistic."""
    probs = np.linspace(0.0, 1.0, EMPIRICAL_POINTS)
    table = np.quantile(us, probs)

    def cdf(x: np.ndarray, t: np.ndarray = table, p: np.ndarray = probs) -> np.ndarray:
        return np.interp(x, t, p, left=0.0, right=1.0)

    return {"kind": EMPIRICAL, "quantiles_us": [float(v) for v in table]}, cdf


def fit_durations(samples_ns: list[int] | np.ndarray, *, scale: float = 1.0, empirical: bool = False) -> Fit:
    """Fits durations (ns) and returns the best kind as a DIST in µs, times `scale` (the share of
    the time the stage stands for, e.g. the CPU share of a span's own time); with `empirical`, the
    samples' quantile table (module docstring) once there are MIN_EMPIRICAL_SAMPLES."""
    us = np.asarray(samples_ns, dtype=float) / 1000.0
    if us.size == 0:
        raise ValueError("no samples to fit")
    us = np.maximum(us, 0.0)
    if us.size > MAX_FIT_SAMPLES:  # evenly spaced order statistics: the same shape, bounded cost
        us = np.sort(us)[np.linspace(0, us.size - 1, MAX_FIT_SAMPLES).astype(int)]
    cands = _candidates(us)
    if empirical and us.size >= MIN_EMPIRICAL_SAMPLES:
        cands[EMPIRICAL] = _empirical(us)
    ks: dict[str, float] = {}
    pvalues: dict[str, float] = {}
    if us.size >= 2:
        for kind, (_, cdf) in cands.items():
            r = stats.kstest(us, cdf.cdf if hasattr(cdf, "cdf") else cdf)
            ks[kind], pvalues[kind] = float(r.statistic), float(r.pvalue)
        kind = min(ks, key=lambda k: (ks[k], k != "constant"))
        if EMPIRICAL in cands:
            kind = EMPIRICAL
    else:
        kind = "constant"
    dist = dict(cands[kind][0])
    clamped = False
    if "quantiles_us" in dist:
        clipped = [_clamp_us(float(v) * scale) for v in dist["quantiles_us"]]
        dist["quantiles_us"] = [_round(v) for v, _ in clipped]
        clamped = any(c for _, c in clipped)
    for key in ("us", "min_us", "max_us", "mean_us", "median_us"):
        if key in dist:
            dist[key], c = _clamp_us(float(dist[key]) * scale)
            dist[key] = _round(dist[key])
            clamped = clamped or c
    if "sigma" in dist:
        clamped = clamped or dist["sigma"] >= MAX_SIGMA
        dist["sigma"] = _round(dist["sigma"])
    # Keep the observed tail: the engine caps draws at 20 × the median by default.
    center = dist.get("median_us", dist.get("mean_us"))
    observed_max = float(us.max()) * scale
    if center is not None and observed_max > DEFAULT_CAP_FACTOR * center:
        dist["cap_us"] = _round(min(observed_max, MAX_US))
    return Fit(
        fit_p99_us=_dist_p99_us(dist),
        dist=dist,
        kind=kind,
        samples=int(np.asarray(samples_ns).size),
        ks_statistic=ks.get(kind),
        ks_pvalue=pvalues.get(kind),
        ks_by_kind={k: round(v, 4) for k, v in ks.items()},
        median_us=float(np.median(us)) * scale,
        p99_us=float(np.percentile(us, 99)) * scale,
        clamped=clamped,
    )


def table_quantile_us(quantiles_us: list[float], q: float) -> float:
    """The q-quantile of an empirical DIST's table, as the engine interpolates it."""
    return float(np.interp(q, np.linspace(0.0, 1.0, len(quantiles_us)), quantiles_us))


def _dist_p99_us(dist: dict) -> float:
    """p99 of a DIST as the engine draws it (clipped at cap_us, else 20 × the median / mean)."""
    kind = dist["kind"]
    if kind == EMPIRICAL:
        p99 = table_quantile_us(dist["quantiles_us"], 0.99)
        return _round(min(p99, float(dist.get("cap_us", MAX_US))))
    if kind == "constant":
        return float(dist["us"])
    if kind == "uniform":
        return float(dist["min_us"] + 0.99 * (dist["max_us"] - dist["min_us"]))
    if kind == "exponential":
        center = float(dist["mean_us"])
        p99 = float(stats.expon(scale=center).ppf(0.99))
    else:
        center = float(dist["median_us"])
        p99 = float(stats.lognorm(s=dist["sigma"], scale=center).ppf(0.99)) if dist["sigma"] > 0 else center
    return _round(min(p99, float(dist.get("cap_us", DEFAULT_CAP_FACTOR * center))))


def scale_dist(dist: dict, factor: float) -> dict:
    """DIST with every duration multiplied by `factor` (the shape kept: lognormal sigma unchanged)."""
    out = dict(dist)
    for key in ("us", "min_us", "max_us", "mean_us", "median_us", "cap_us"):
        if key in out:
            out[key] = _round(min(float(out[key]) * factor, MAX_US))
    if "quantiles_us" in out:
        out["quantiles_us"] = [_round(min(float(v) * factor, MAX_US)) for v in out["quantiles_us"]]
    return out
