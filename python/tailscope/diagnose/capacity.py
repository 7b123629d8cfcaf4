"""The capacity of one population of spans: which c (queue.py), how sure, and whether it held still.

The verdict is a value (`Capacity.verdict`):

- `limit`: the spans' durations grow with the number in flight at arrival, and for one c the
  inferred service times stop doing so;
- `no_limit_seen`: durations do not grow with the number in flight, up to the most ever in flight
  (`at_least`: the capacity, if any, is at least that);
- `not_identifiable`: no span ever found another in flight (or too few spans): no queue could form,
  so nothing can be said about a capacity; a recording at a higher rate is needed;
- `changed`: the two halves of the recording give different capacities; neither is reported as
  the capacity (an average of two would describe neither).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tailscope.diagnose import queue

LIMIT = "limit"
NO_LIMIT_SEEN = "no_limit_seen"
NOT_IDENTIFIABLE = "not_identifiable"
CHANGED = "changed"

# Fewer spans than this: no verdict (a rank correlation of 20 points has a standard error of ~0.23).
MIN_SPANS = 30
# A limit shows when durations grow with the number in flight at arrival: Spearman's ρ of duration vs
# number ahead at least this, and significant at LIMIT_P. Small enough for a queue that formed in a
# few % of arrivals, large enough that a slight load dependence (shared caches, a busier CPU) is not
# read as a pool.
LIMIT_MIN_RHO = 0.1
LIMIT_P = 0.001
# Candidates whose |ρ| is within this many standard errors (1/√(n−1)) of the smallest are equally
# good by the correlation; among them the one FCFS contradicts least (fewest spans that ended before a
# server was free for them) is taken.
TIE_STANDARD_ERRORS = 2.0
# The two halves disagree when both find a limit and the larger is at least this multiple of the
# smaller, or one finds c and the other saw at least HALF_QUEUED_MIN arrivals with ≥ c ahead and no
# limit.
CHANGE_RATIO = 1.5
HALF_QUEUED_MIN = 20
# Confidence "high" needs this many spans and arrivals that found ≥ c ahead; "medium" the lower pair.
HIGH_SPANS, HIGH_QUEUED = 500, 50
MEDIUM_SPANS, MEDIUM_QUEUED = 100, 10
# Levels of the evidence table (duration vs number ahead at arrival); more levels are binned.
EVIDENCE_ROWS = 16


@dataclass(frozen=True)
class LoadPoint:
    """Spans that found `ahead_lo` … `ahead_hi` others in flight at arrival."""

    ahead_lo: int
    ahead_hi: int
    spans: int
    duration_p50_ns: float
    service_p50_ns: float  # inferred, at the chosen c (the durations when there is no limit)


@dataclass(frozen=True)
class SpanWait:
    trace_id: str
    span_id: str
    wait_ns: int
    service_ns: int


@dataclass(frozen=True)
class Half:
    verdict: str
    servers: int | None
    spans: int
    max_ahead: int


@dataclass(frozen=True)
class Capacity:
    verdict: str  # LIMIT | NO_LIMIT_SEEN | NOT_IDENTIFIABLE | CHANGED
    servers: int | None  # the c found (LIMIT only)
    at_least: int | None  # NO_LIMIT_SEEN: the most ever in flight (a capacity is at least this)
    # Scaled by 1 ÷ sampling when the traces are sampled (None when not sampled): an estimate.
    servers_scaled: float | None
    at_least_scaled: float | None
    reason: str | None  # NOT_IDENTIFIABLE and CHANGED: why, as a short code (`no_overlap`, `few_spans`, `halves`)
    spans: int
    max_ahead: int  # the most spans found in flight by an arrival
    duration_p50_ns: float
    duration_p99_ns: float
    service_p50_ns: float  # inferred without queueing (= durations when no limit)
    service_p99_ns: float
    wait_p50_ns: float
    wait_p99_ns: float
    waited: int  # spans with an inferred wait > 0
    queued_arrivals: int  # arrivals that found ≥ c ahead (LIMIT; 0 otherwise)
    duration_rank_correlation: float | None  # durations vs number ahead (the no-limit candidate)
    duration_p_value: float | None
    candidates: tuple[queue.CandidateFit, ...]
    evidence: tuple[LoadPoint, ...]
    halves: tuple[Half, Half] | None  # None when a half has fewer than MIN_SPANS spans
    confidence: str  # "high" | "medium" | "low" | "none"
    waits: tuple[SpanWait, ...]  # every span's inferred wait (LIMIT and CHANGED: at the whole recording's c)


def _choose(fits: Sequence[queue.CandidateFit], spans: int) -> tuple[str, int | None]:
    """(verdict, c) from the candidates' fits (the last candidate is no limit)."""
    unlimited = fits[-1]
    rho = unlimited.rank_correlation
    if rho is None or rho < LIMIT_MIN_RHO or unlimited.p_value is None or unlimited.p_value >= LIMIT_P:
        return NO_LIMIT_SEEN, None
    finite = [f for f in fits[:-1] if f.rank_correlation is not None]
    if not finite:
        return NO_LIMIT_SEEN, None
    best = min(abs(f.rank_correlation or 0.0) for f in finite)
    tolerance = TIE_STANDARD_ERRORS / math.sqrt(max(spans - 1, 1))
    close = [f for f in finite if abs(f.rank_correlation or 0.0) <= best + tolerance]
    chosen = min(close, key=lambda f: (f.inconsistent, abs(f.rank_correlation or 0.0)))
    return LIMIT, chosen.servers


def _half(starts: np.ndarray, ends: np.ndarray) -> Half | None:
    if len(starts) < MIN_SPANS:
        return None
    _, ahead, fits = queue.fit_candidates(starts, ends)
    max_ahead = int(ahead.max())
    if max_ahead == 0:
        return Half(NOT_IDENTIFIABLE, None, len(starts), 0)
    verdict, c = _choose(fits, len(starts))
    return Half(verdict, c, len(starts), max_ahead)


def _halves_disagree(first: Half, second: Half, ahead_by_half: tuple[np.ndarray, np.ndarray]) -> bool:
    if first.verdict == LIMIT and second.verdict == LIMIT:
        lo, hi = sorted((first.servers or 0, second.servers or 0))
        return lo > 0 and hi / lo >= CHANGE_RATIO
    for h, other, other_ahead in ((first, second, ahead_by_half[1]), (second, first, ahead_by_half[0])):
        if h.verdict == LIMIT and other.verdict == NO_LIMIT_SEEN and h.servers is not None:
            # The other half had queues under this c and its durations did not grow: the limit went away.
            if int(np.count_nonzero(other_ahead >= h.servers)) >= HALF_QUEUED_MIN:
                return True
    return False


def _evidence(ahead: np.ndarray, durations: np.ndarray, service: np.ndarray) -> tuple[LoadPoint, ...]:
    top = int(ahead.max()) if len(ahead) else 0
    if top + 1 <= EVIDENCE_ROWS:
        edges = list(range(top + 2))
    else:
        edges = sorted({int(round(x)) for x in np.linspace(0, top + 1, EVIDENCE_ROWS + 1)})
    rows = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        sel = (ahead >= lo) & (ahead < hi)
        if np.any(sel):
            rows.append(
                LoadPoint(
                    lo,
                    hi - 1,
                    int(np.count_nonzero(sel)),
                    float(np.median(durations[sel])),
                    float(np.median(service[sel])),
                )
            )
    return tuple(rows)


def _confidence(verdict: str, spans: int, queued: int, sampling: float) -> str:
    if verdict in (NOT_IDENTIFIABLE, CHANGED):
        return "none"
    if verdict == NO_LIMIT_SEEN:
        # Only as strong as the load the spans saw: rated on the spans alone.
        queued = HIGH_QUEUED
    if sampling < 1.0:
        return "low"  # the unsampled requests queued too, unseen: the estimate is scaled, not measured
    if spans >= HIGH_SPANS and queued >= HIGH_QUEUED:
        return "high"
    if spans >= MEDIUM_SPANS and queued >= MEDIUM_QUEUED:
        return "medium"
    return "low"


def infer_capacity(
    starts_ns: Sequence[int],
    ends_ns: Sequence[int],
    ids: Sequence[tuple[str, str]],
    *,
    sampling: float = 1.0,
) -> Capacity:
    """The capacity of spans [starts_ns[i], ends_ns[i]] (ids[i] = (trace id, span id))."""
    starts = np.asarray(starts_ns, dtype=np.int64)
    ends = np.asarray(ends_ns, dtype=np.int64)
    n = len(starts)
    durations = ends - starts
    order, ahead, fits = queue.fit_candidates(starts, ends) if n else (np.array([], dtype=np.int64), np.array([]), [])
    max_ahead = int(ahead.max()) if n else 0
    unlimited = fits[-1] if fits else None
    if n < MIN_SPANS or max_ahead == 0:
        verdict, c, reason = NOT_IDENTIFIABLE, None, "few_spans" if n < MIN_SPANS else "no_overlap"
    else:
        verdict, c = _choose(fits, n)
        reason = None
    halves = None
    if n >= 2 * MIN_SPANS and verdict != NOT_IDENTIFIABLE:
        mid_ns = (int(starts.min()) + int(ends.max())) // 2  # halves of the recorded time, not of the spans
        first_sel, second_sel = starts < mid_ns, starts >= mid_ns
        first, second = _half(starts[first_sel], ends[first_sel]), _half(starts[second_sel], ends[second_sel])
        if first is not None and second is not None:
            halves = (first, second)
            a1 = queue.ahead_at_arrival(
                starts[first_sel], ends[first_sel], queue.arrival_order(starts[first_sel], ends[first_sel])
            )
            a2 = queue.ahead_at_arrival(
                starts[second_sel], ends[second_sel], queue.arrival_order(starts[second_sel], ends[second_sel])
            )
            if _halves_disagree(first, second, (a1, a2)):
                verdict, reason = CHANGED, "halves"
    # The waits and service times at the whole recording's c (for CHANGED too: the per-span figures
    # of the c that fits the whole best, labelled as such; the capacity itself is not reported).
    if verdict == CHANGED:
        _, c_whole = _choose(fits, n)
    else:
        c_whole = c
    rec = queue.reconstruct(starts, ends, c_whole, order) if n else None
    wait = rec.wait_ns if rec is not None else np.array([], dtype=np.int64)
    service = rec.service_ns if rec is not None else np.array([], dtype=np.int64)
    in_order = durations[order] if n else durations
    queued = int(np.count_nonzero(ahead >= c)) if verdict == LIMIT and c is not None else 0
    waits = (
        tuple(SpanWait(ids[int(i)][0], ids[int(i)][1], int(w), int(s)) for i, w, s in zip(order, wait, service))
        if verdict in (LIMIT, CHANGED)
        else ()
    )
    pct = lambda x, q: float(np.percentile(x, q)) if len(x) else 0.0
    scale = 1.0 / sampling if sampling < 1.0 else None
    servers = c if verdict == LIMIT else None
    at_least = max_ahead + 1 if verdict == NO_LIMIT_SEEN else None
    return Capacity(
        verdict=verdict,
        servers=servers,
        at_least=at_least,
        servers_scaled=servers * scale if servers is not None and scale is not None else None,
        at_least_scaled=at_least * scale if at_least is not None and scale is not None else None,
        reason=reason,
        spans=n,
        max_ahead=max_ahead,
        duration_p50_ns=pct(durations, 50),
        duration_p99_ns=pct(durations, 99),
        service_p50_ns=pct(service, 50),
        service_p99_ns=pct(service, 99),
        wait_p50_ns=pct(wait, 50),
        wait_p99_ns=pct(wait, 99),
        waited=int(np.count_nonzero(wait > 0)),
        queued_arrivals=queued,
        duration_rank_correlation=unlimited.rank_correlation if unlimited else None,
        duration_p_value=unlimited.p_value if unlimited else None,
        candidates=tuple(fits),
        evidence=_evidence(ahead, in_order, service) if n else (),
        halves=halves,
        confidence=_confidence(verdict, n, queued, sampling),
        waits=waits,
    )
