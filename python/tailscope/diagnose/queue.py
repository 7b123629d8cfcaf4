"""Queue inference: is a population of spans a FCFS queue in front of `c` servers, and which `c`?

Each span is one customer: it arrives at its start and departs at its end. Under FCFS with `c`
servers, customers start service in arrival order, and customer i can start only when at most c − 1
earlier customers are still in the system, so its service starts at

    max(arrival_i, the c-th latest departure among the customers that arrived before it)

(for c = 1: the previous departure): the FCFS multi-server recursion (Kiefer and Wolfowitz, 1955)
solved for the service start, given arrival and departure. Larson's queue inference engine (R. C.
Larson, Management Science 36(5), 1990) deduces queue statistics from transaction records the other
way round (service start and end known, arrivals Poisson, the number of servers given). Here `c` is
unknown and chosen: for every candidate c the spans' waits and service times are inferred, and the
right c is the one whose inferred service times do not depend on how many customers were ahead at
arrival — in a FCFS queue a customer's own service time is independent of the queue it found. Too small a c invents waits for customers that arrived at a busy
moment (their service shrinks with the load: a negative rank correlation); too large a c leaves
real waits inside the service time (it grows with the load: a positive one).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

INFINITE = None  # the candidate "no limit": every customer is served at arrival


@dataclass(frozen=True)
class Reconstruction:
    """Spans in arrival order and, for one candidate c, their inferred waits and service times."""

    servers: int | None  # None: no limit
    order: np.ndarray  # indexes into the population, in FCFS (arrival) order
    wait_ns: np.ndarray  # in arrival order
    service_ns: np.ndarray  # in arrival order, clamped at 0
    # Customers that departed before a server was free for them: impossible under this c.
    inconsistent: int


def arrival_order(starts_ns: np.ndarray, ends_ns: np.ndarray) -> np.ndarray:
    return np.lexsort((ends_ns, starts_ns))


def ahead_at_arrival(starts_ns: np.ndarray, ends_ns: np.ndarray, order: np.ndarray) -> np.ndarray:
    """For each customer in arrival order: how many earlier arrivals were still in the system (the
    number in flight it found; observed, independent of any candidate c)."""
    a = starts_ns[order]
    d_sorted = np.sort(ends_ns)
    departed = np.searchsorted(d_sorted, a, side="right")  # customers gone by each arrival
    # Only earlier arrivals can have departed by arrival i (a zero-length span at the same instant
    # is the one exception; clamp it).
    return np.maximum(np.arange(len(a)) - departed, 0)


def reconstruct(starts_ns: np.ndarray, ends_ns: np.ndarray, servers: int | None, order: np.ndarray) -> Reconstruction:
    a = starts_ns[order]
    d = ends_ns[order]
    n = len(a)
    if servers is None:
        return Reconstruction(None, order, np.zeros(n, dtype=np.int64), d - a, 0)
    begin = a.copy()
    latest: list[int] = []  # min-heap of the `servers` latest departures so far: its top is the c-th latest
    for i in range(n):
        if len(latest) == servers and latest[0] > a[i]:
            begin[i] = latest[0]
        if len(latest) < servers:
            heapq.heappush(latest, int(d[i]))
        elif d[i] > latest[0]:
            heapq.heapreplace(latest, int(d[i]))
    service = d - begin
    inconsistent = int(np.count_nonzero(service < 0))
    return Reconstruction(servers, order, begin - a, np.maximum(service, 0), inconsistent)


@dataclass(frozen=True)
class CandidateFit:
    servers: int | None  # None: no limit
    # Spearman's rank correlation of inferred service time with the number ahead at arrival
    # (None when either is constant).
    rank_correlation: float | None
    p_value: float | None
    inconsistent: int
    waited: int  # customers with an inferred wait > 0
    service_p50_ns: float
    service_p99_ns: float


def fit(reconstruction: Reconstruction, ahead: np.ndarray) -> CandidateFit:
    service = reconstruction.service_ns
    rho: float | None = None
    p: float | None = None
    if len(service) >= 3 and np.ptp(service) > 0 and np.ptp(ahead) > 0:
        r = stats.spearmanr(service, ahead)
        rho, p = float(r.statistic), float(r.pvalue)
    return CandidateFit(
        servers=reconstruction.servers,
        rank_correlation=rho,
        p_value=p,
        inconsistent=reconstruction.inconsistent,
        waited=int(np.count_nonzero(reconstruction.wait_ns > 0)),
        service_p50_ns=float(np.percentile(service, 50)),
        service_p99_ns=float(np.percentile(service, 99)),
    )


# Candidates: every c up to this, then a geometric ladder (the rank correlation changes slowly there,
# and each candidate is a pass over the spans).
EVERY_C_UP_TO = 32
LADDER_STEP = 1.25


def candidates(max_ahead: int) -> list[int | None]:
    """c = 1 … max_ahead, and no limit. A c above the most customers ever found ahead makes no one
    wait: it is the same reconstruction as no limit, so it is not a candidate of its own."""
    out: list[int | None] = list(range(1, min(max_ahead, EVERY_C_UP_TO) + 1))
    c = float(EVERY_C_UP_TO)
    while True:
        c = max(c * LADDER_STEP, c + 1)
        if int(c) > max_ahead:
            break
        out.append(int(c))
    out.append(INFINITE)
    return out


def fit_candidates(
    starts_ns: Sequence[int] | np.ndarray, ends_ns: Sequence[int] | np.ndarray
) -> tuple[np.ndarray, np.ndarray, list[CandidateFit]]:
    """(arrival order, number ahead at arrival in that order, one fit per candidate c)."""
    starts = np.asarray(starts_ns, dtype=np.int64)
    ends = np.asarray(ends_ns, dtype=np.int64)
    order = arrival_order(starts, ends)
    ahead = ahead_at_arrival(starts, ends, order)
    max_ahead = int(ahead.max()) if len(ahead) else 0
    fits = [fit(reconstruct(starts, ends, c, order), ahead) for c in candidates(max_ahead)]
    return order, ahead, fits
