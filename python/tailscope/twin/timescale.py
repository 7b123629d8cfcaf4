"""A twin run faster than real time: every duration of the topology ÷ k, offered k times the rate.

A queueing network whose arrival rates and service rates are all multiplied by k is the same network
on a clock running k times faster: utilisations, queue lengths and the number of requests a window
holds are unchanged, and every latency is divided by k exactly (time enters only through the ratios
of rates). So a twin of an application whose requests take hundreds of milliseconds at 2 requests/s
(HotROD) can run at k × 2/s with every stage ÷ k, and its latencies × k are the prediction — k times
as many requests per second of wall time, which is what lets a p99 rest on hundreds of requests in a
quick form.

What does not scale: the runtime's own costs per hop (an RPC, a timer's overshoot, a wake-up: tens
of µs here) stay the same while the stages shrink, so k is bounded by keeping the shortest stage long
beside them (`max_factor`). The caller multiplies the rate by k and the measured latencies back by k
(`scale_back`), and says the factor beside every figure.
"""

from __future__ import annotations

import copy
import math

# The latency distributions' kinds and their duration parameters (native/svc/distribution.h).
DISTRIBUTION_KINDS = frozenset({"constant", "uniform", "exponential", "lognormal", "empirical"})
DURATION_KEYS = ("us", "min_us", "max_us", "mean_us", "median_us", "cap_us")
# The runtime's own cost per stage on this machine (a timer's overshoot, a wake-up, an RPC hop: tens
# of µs), which a sped-up twin does not shrink; and the share of the sped-up end-to-end time the
# stages' costs may take together.
STAGE_OVERHEAD_US = 50.0
OVERHEAD_SHARE = 0.02


def _distributions(node: object):
    if isinstance(node, dict):
        if node.get("kind") in DISTRIBUTION_KINDS:
            yield node
        for v in node.values():
            yield from _distributions(v)
    elif isinstance(node, list):
        for v in node:
            yield from _distributions(v)


def _stage_count(node: object) -> int:
    """Stages in every endpoint, a store's `count` times: an upper bound on the stages one request
    runs (every endpoint on its path)."""
    n = 0
    if isinstance(node, dict):
        if "stages" in node and isinstance(node["stages"], list):
            for s in node["stages"]:
                store = s.get("store") if isinstance(s, dict) else None
                n += int(store.get("count") or 1) if isinstance(store, dict) else 1
        for k, v in node.items():
            if k != "stages":
                n += _stage_count(v)
        for s in node.get("stages") or []:
            n += _stage_count(s) if isinstance(s, dict) else 0
    elif isinstance(node, list):
        n += sum(_stage_count(v) for v in node)
    return n


def max_factor(topology: dict, end_to_end_us: float, limit: float = 10.0) -> float:
    """The largest whole speed-up ≤ limit at which the stages' fixed costs (STAGE_OVERHEAD_US each,
    over an upper bound of the stages a request runs) stay within OVERHEAD_SHARE of the sped-up
    end-to-end time END_TO_END_US ÷ k. 1.0: no speed-up is safe."""
    stages = _stage_count(topology)
    if stages == 0 or not math.isfinite(end_to_end_us) or end_to_end_us <= 0:
        return 1.0
    k = OVERHEAD_SHARE * end_to_end_us / (stages * STAGE_OVERHEAD_US)
    return float(max(1, min(int(limit), math.floor(k))))


def speed_up(topology: dict, factor: float) -> dict:
    """A copy of TOPOLOGY with every duration ÷ factor (distributions, the call timeout)."""
    if not math.isfinite(factor) or factor < 1.0:
        raise ValueError(f"speed-up factor {factor} must be a finite number ≥ 1")
    out = copy.deepcopy(topology)
    for d in _distributions(out):
        for key in DURATION_KEYS:
            v = d.get(key)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                d[key] = v / factor
        if isinstance(d.get("quantiles_us"), list):  # an empirical table: every quantile is a duration
            d["quantiles_us"] = [v / factor for v in d["quantiles_us"]]
    if isinstance(out.get("call_timeout_ms"), (int, float)):
        out["call_timeout_ms"] = max(1, math.ceil(out["call_timeout_ms"] / factor))
    return out


def scale_back(value_ns: float | None, factor: float) -> float | None:
    """A latency measured on a sped-up twin, on the application's clock."""
    return None if value_ns is None else value_ns * factor
