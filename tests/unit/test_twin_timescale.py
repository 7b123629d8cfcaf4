"""A sped-up twin (twin/timescale.py): every duration ÷ k and nothing else touched."""

from __future__ import annotations

import pytest

from tailscope.twin.timescale import max_factor, scale_back, speed_up

TOPO = {
    "name": "t",
    "call_timeout_ms": 1000,
    "services": [
        {
            "name": "a",
            "endpoints": [
                {
                    "name": "e",
                    "response_bytes": 1024,
                    "capacity": 2,
                    "stages": [
                        {"cpu": {"kind": "lognormal", "median_us": 20000, "sigma": 0.3, "cap_us": 400000}},
                        {"store": {"span": "q", "latency": {"kind": "uniform", "min_us": 10000, "max_us": 30000}}},
                        {"store": {"span": "r", "latency": {"kind": "exponential", "mean_us": 50000}, "count": 3}},
                        {"cpu": {"kind": "constant", "us": 12000}},
                        {"work": {"kind": "json", "bytes": 4096}},
                    ],
                }
            ],
        }
    ],
}


def test_every_duration_and_only_durations_are_divided():
    fast = speed_up(TOPO, 10)
    stages = fast["services"][0]["endpoints"][0]["stages"]
    assert stages[0]["cpu"] == {"kind": "lognormal", "median_us": 2000, "sigma": 0.3, "cap_us": 40000}
    assert stages[1]["store"]["latency"] == {"kind": "uniform", "min_us": 1000, "max_us": 3000}
    assert stages[2]["store"]["latency"]["mean_us"] == 5000 and stages[2]["store"]["count"] == 3
    assert stages[3]["cpu"]["us"] == 1200
    assert stages[4]["work"] == {"kind": "json", "bytes": 4096}  # real work is not a duration
    assert fast["call_timeout_ms"] == 100
    assert (
        fast["services"][0]["endpoints"][0]["capacity"] == 2
        and fast["services"][0]["endpoints"][0]["response_bytes"] == 1024
    )
    assert TOPO["call_timeout_ms"] == 1000 and TOPO["services"][0]["endpoints"][0]["stages"][3]["cpu"]["us"] == 12000


def test_the_factor_keeps_the_stages_fixed_costs_a_small_share():
    # 7 stages (the store of count 3 counts 3): 7 × 50 µs = 350 µs may be 2 % of the sped-up
    # end-to-end time, so 700 ms end to end allows 700 000 × 0.02 / 350 = 40 → the limit, 10.
    assert max_factor(TOPO, 700_000) == 10
    assert max_factor(TOPO, 700_000, limit=4) == 4
    assert max_factor(TOPO, 87_500) == 5  # 87.5 ms × 0.02 / 350 µs = 5
    assert max_factor(TOPO, 10_000) == 1  # too short to speed up at all
    assert max_factor({"services": []}, 700_000) == 1.0
    assert max_factor(TOPO, float("nan")) == 1.0
    assert scale_back(2e6, 10) == 2e7 and scale_back(None, 10) is None
    for bad in (0.5, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            speed_up(TOPO, bad)
