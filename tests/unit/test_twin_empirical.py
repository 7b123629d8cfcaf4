"""The empirical distribution kind (twin/fit.py `empirical`, native/svc/distribution.h): a stage's
observed quantiles, tail included, through inference, scaling, the what-if median and the engine."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import needs_engine
from tailscope.lab.topology import TopologyError, validate
from tailscope.twin import timescale
from tailscope.twin.fit import EMPIRICAL_POINTS, MIN_EMPIRICAL_SAMPLES, fit_durations, scale_dist, table_quantile_us
from tailscope.twin.infer import InferOptions, infer
from tailscope.twin.whatif import dist_median_us

US = 1_000


def _body_and_tail(n: int = 2000, seed: int = 1) -> np.ndarray:
    """A tight body (lognormal, median 100 µs, σ 0.1) with 3 % of draws 1–3 ms: what a log-space fit loses."""
    rng = np.random.default_rng(seed)
    x = rng.lognormal(np.log(100 * US), 0.1, n)
    spikes = rng.random(n) < 0.03
    x[spikes] = rng.uniform(1000 * US, 3000 * US, spikes.sum())
    return x.astype(np.int64)


def test_the_table_keeps_the_tail_a_lognormal_loses():
    x = _body_and_tail()
    observed_p99_us = float(np.percentile(x, 99)) / US
    parametric = fit_durations(x)
    empirical = fit_durations(x, empirical=True)
    assert empirical.kind == "empirical" and empirical.dist["kind"] == "empirical"
    table = empirical.dist["quantiles_us"]
    assert len(table) == EMPIRICAL_POINTS and table == sorted(table)
    assert table[0] == pytest.approx(x.min() / US, rel=1e-3) and table[-1] == pytest.approx(x.max() / US, rel=1e-3)
    assert empirical.fit_p99_us == pytest.approx(observed_p99_us, rel=0.02)
    assert parametric.fit_p99_us is not None and parametric.fit_p99_us < 0.5 * observed_p99_us
    # The parametric kinds' D are still recorded beside the table's (which is close to 0).
    assert {"lognormal", "exponential", "empirical"} <= set(empirical.ks_by_kind)
    assert empirical.ks_by_kind["empirical"] < 0.01 < empirical.ks_by_kind["lognormal"]
    # `scale` (the cpu or wait share of own time) scales every quantile.
    half = fit_durations(x, empirical=True, scale=0.5).dist["quantiles_us"]
    assert half[100] == pytest.approx(table[100] / 2, rel=1e-3)


def test_too_few_samples_keep_the_parametric_choice():
    x = _body_and_tail(MIN_EMPIRICAL_SAMPLES - 1)
    assert fit_durations(x, empirical=True).kind != "empirical"


def test_scaling_speeding_up_and_the_median_of_a_table():
    dist = {"kind": "empirical", "quantiles_us": [10.0, 20.0, 30.0, 1000.0], "shared": 0.4}
    assert scale_dist(dist, 2.0)["quantiles_us"] == [20.0, 40.0, 60.0, 2000.0]
    assert scale_dist(dist, 2.0)["shared"] == 0.4
    fast = timescale.speed_up({"services": [{"stages": [{"cpu": dist}]}]}, 10.0)
    assert fast["services"][0]["stages"][0]["cpu"]["quantiles_us"] == [1.0, 2.0, 3.0, 100.0]
    assert dist_median_us(dist) == pytest.approx(25.0)  # halfway between the 2nd and 3rd of 4 points
    assert table_quantile_us(dist["quantiles_us"], 1.0) == 1000.0


def _traces():
    from test_twin_correlated_inference import two_tier_traces  # the same hand-built graph

    return two_tier_traces(600, 0.0)


def test_inference_writes_tables_when_asked_and_says_so():
    topo, report = infer(_traces(), InferOptions(capacities=False, distributions="empirical"))
    kinds = {
        st["store"]["latency"]["kind"]
        for s in topo["services"]
        for e in s["endpoints"]
        for st in e["stages"]
        if "store" in st
    }
    assert kinds == {"empirical"}
    assert report["assumptions"]["distributions"] == "empirical"
    topo, report = infer(_traces(), InferOptions(capacities=False))
    assert report["assumptions"]["distributions"] == "parametric"
    assert "empirical" not in str(topo)


@needs_engine("tailscope-svc")
def test_the_engine_accepts_an_inferred_table_and_refuses_a_decreasing_one():
    topo, _ = infer(_traces(), InferOptions(capacities=False, distributions="empirical"))
    normalised = validate(topo, "inferred")
    api = next(s for s in normalised["services"] if s["name"] == "api")
    latency = next(st["store"]["latency"] for st in api["endpoints"][0]["stages"] if "store" in st)
    assert latency["kind"] == "empirical" and len(latency["quantiles_us"]) == EMPIRICAL_POINTS
    api_in = next(s for s in topo["services"] if s["name"] == "api")
    table = next(st["store"]["latency"] for st in api_in["endpoints"][0]["stages"] if "store" in st)["quantiles_us"]
    table[5], table[6] = table[6] + 1.0, table[5]
    with pytest.raises(TopologyError, match=r"quantiles_us\[6\] is below the one before it"):
        validate(topo, "inferred")
