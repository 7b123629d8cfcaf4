"""How much of an endpoint's own time is CPU and how much is waiting (docs/twin.md "CPU or waiting").

A span says when it started and ended, not what its thread did. The twin must still choose: a
`cpu` stage competes for the twin's cores, a wait does not. Defaulting to "all CPU" turns a handler
that sleeps or does I/O into a busy loop — ten parallel 50 ms waits become 500 ms of CPU, and on 2
cores the twin saturates where the real system never did (issue 26).

The split is decided per endpoint from the traces, by the first rule that applies:

1. `given`: `--cpu-fraction F` was typed — F for every endpoint.
2. A CPU-time attribute on the span: neither the OpenTelemetry semantic conventions nor Jaeger's
   clients define one (CPU time is a process metric there, `process.cpu.time`, not a span
   attribute), and tailscope's span reader does not pass attributes on; so no such rule exists yet.
3. `grows_with_concurrency`: the endpoint's own time grows with the number of handlers of its
   service in flight when it started (Spearman ρ ≥ 0.1, p < 0.001, ≥ 30 samples): requests that
   share the service's cores slow each other down — CPU (fraction 1).
4. `flat_under_concurrency`: ≥ 30 samples that met different numbers in flight, and the own time
   does not grow with it — waiting (fraction 0: a `store` wait of system `own-time`).
5. `undecided`: fewer than 30 samples, or every one met the same number in flight (nothing to
   correlate) — all CPU, the pessimistic choice (it competes for cores), and said.

The thresholds are diagnose's for "durations grow with the number in flight" (diagnose/capacity.py
LIMIT_MIN_RHO, LIMIT_P, MIN_SPANS): the same question asked of own time instead of a whole span.
Own time that waits on a lock shared within the service also grows with concurrency and is read as
CPU; a queue that diagnose found in front of the endpoint is removed from the own time first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

from tailscope.diagnose.capacity import LIMIT_MIN_RHO, LIMIT_P, MIN_SPANS

GIVEN = "given"
GROWS = "grows_with_concurrency"
FLAT = "flat_under_concurrency"
UNDECIDED = "undecided"
UNDECIDED_FRACTION = 1.0


@dataclass(frozen=True)
class CpuSplit:
    fraction: float  # share of own time that is a cpu stage (the rest a wait)
    rule: str  # GIVEN | GROWS | FLAT | UNDECIDED
    rho: float | None  # own time vs in flight at start
    p_value: float | None
    samples: int
    why: str

    def to_json(self) -> dict:
        return asdict(self)


def adjusted(fraction: float, adjust: float) -> float:
    """`fraction` moved by `adjust` (−1 … 1) of the way towards 0 (adjust < 0) or 1 (adjust > 0): the
    sensitivity of advise varies an inferred split this way (a share of 0 × 1.5 would not move)."""
    if adjust < 0:
        return fraction * (1 + adjust)
    return fraction + adjust * (1 - fraction)


def decide(
    own_ns: Sequence[int], in_flight: Sequence[int], *, given: float | None = None, adjust: float = 0.0
) -> CpuSplit:
    """The split of one endpoint's own time: per instance its own time (ns, queue wait removed) and
    the number of its service's handlers in flight when it started."""
    n = len(own_ns)
    if given is not None:
        return CpuSplit(given, GIVEN, None, None, n, f"--cpu-fraction {given:g}")
    rho = p = None
    if n >= MIN_SPANS and len(set(in_flight)) > 1 and len(set(own_ns)) > 1:
        r = stats.spearmanr(np.asarray(own_ns, dtype=float), np.asarray(in_flight, dtype=float))
        rho, p = float(r.statistic), float(r.pvalue)
    if rho is None or p is None or not np.isfinite(rho):
        why = (
            f"{n} samples (fewer than {MIN_SPANS})"
            if n < MIN_SPANS
            else "every instance met the same number in flight (or the own time never varied): nothing to correlate"
        )
        return CpuSplit(
            adjusted(UNDECIDED_FRACTION, adjust), UNDECIDED, None, None, n, why + "; all CPU, the pessimistic choice"
        )
    if rho >= LIMIT_MIN_RHO and p < LIMIT_P:
        return CpuSplit(
            adjusted(1.0, adjust), GROWS, rho, p, n, f"own time grows with the handlers in flight (ρ {rho:+.2f}): CPU"
        )
    return CpuSplit(
        adjusted(0.0, adjust),
        FLAT,
        rho,
        p,
        n,
        f"own time does not grow with the handlers in flight (ρ {rho:+.2f}, p {p:.2g}): waiting",
    )


def in_flight_at(starts_ns: Sequence[int], ends_ns: Sequence[int]) -> np.ndarray:
    """For each interval: how many of the others were in flight at its start (started before or at it,
    not yet ended; touching ends do not overlap)."""
    s = np.asarray(starts_ns, dtype=np.int64)
    e = np.asarray(ends_ns, dtype=np.int64)
    started = np.searchsorted(np.sort(s), s, side="right")
    ended = np.searchsorted(np.sort(e), s, side="right")
    return np.maximum(started - ended - 1, 0)
