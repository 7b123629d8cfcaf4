"""Slow against typical requests: which services' critical-path time grows in the tail.

Per front operation (the root span's service and operation), traces are ranked by end-to-end time;
the slowest 1 % (at least one trace) are compared with the middle 50 % (ranks from the 25th to the
75th percentile), service by service, on the analyzer's per-trace critical-path time
(`Trace.service_cp_ns`: the service's own time on the request's critical path).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tailscope.traces.spans import Trace

SLOW_SHARE = 0.01
MIDDLE = (0.25, 0.75)
# Fewer traces than this per front operation: no comparison (the middle half would be one trace).
MIN_TRACES = 8


@dataclass(frozen=True)
class ServiceGrowth:
    service: str
    slow_mean_ns: float  # mean critical-path time in the slowest 1 %
    middle_mean_ns: float  # … in the middle 50 %
    growth_ns: float  # slow − middle
    share_of_growth: float | None  # of the end-to-end growth (None when the end-to-end did not grow)


@dataclass(frozen=True)
class SlowVsTypical:
    service: str  # the front: the root span's
    operation: str
    traces: int
    slow_traces: int
    middle_traces: int
    slow_end_to_end_mean_ns: float
    middle_end_to_end_mean_ns: float
    services: tuple[ServiceGrowth, ...]  # by growth, largest first


def slow_vs_typical(traces: Sequence[Trace]) -> list[SlowVsTypical]:
    by_front: dict[tuple[str, str], list[Trace]] = defaultdict(list)
    for t in traces:
        by_front[(t.root.service, t.root.operation)].append(t)
    out = []
    for (service, operation), group in sorted(by_front.items()):
        if len(group) < MIN_TRACES:
            continue
        ranked = sorted(group, key=lambda t: t.end_to_end_ns)
        n = len(ranked)
        slow = ranked[n - max(1, math.ceil(SLOW_SHARE * n)) :]
        middle = ranked[int(MIDDLE[0] * n) : int(math.ceil(MIDDLE[1] * n))]
        slow_e2e = float(np.mean([t.end_to_end_ns for t in slow]))
        middle_e2e = float(np.mean([t.end_to_end_ns for t in middle]))
        e2e_growth = slow_e2e - middle_e2e
        names = sorted({s for t in group for s in t.service_cp_ns})
        growths = []
        for name in names:
            s_mean = float(np.mean([t.service_cp_ns.get(name, 0) for t in slow]))
            m_mean = float(np.mean([t.service_cp_ns.get(name, 0) for t in middle]))
            g = s_mean - m_mean
            growths.append(ServiceGrowth(name, s_mean, m_mean, g, g / e2e_growth if e2e_growth > 0 else None))
        growths.sort(key=lambda g: -g.growth_ns)
        out.append(SlowVsTypical(service, operation, n, len(slow), len(middle), slow_e2e, middle_e2e, tuple(growths)))
    return out
