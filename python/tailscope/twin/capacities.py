"""The diagnosis → the twin's capacities (docs/twin.md "Capacities", plan: queue-twin.md).

`tailscope diagnose` (python/tailscope/diagnose) finds, per population of spans, whether they queue
in front of c servers, and per call site whether its fan-outs run in waves of k. The twin carries
what it can express:

| diagnosis                                                  | topology                          |
|------------------------------------------------------------|-----------------------------------|
| operation population of a server span, verdict `limit`     | the endpoint's `capacity: c`      |
| operation population of a store span, verdict `limit`      | the store stage's `capacity: c`   |
| call site (A's calls to B) or a client span's operation    | the call's `capacity: c`          |
| `bounded_fan_outs[].k`                                     | the group's `max_in_flight: k`    |
| `changed`, `not_identifiable`, `no_limit_seen`             | nothing (the report says why)     |

and every span of a population with a limit has its inferred service time (`capacity.waits`: the
queue wait removed), which the stages behind that capacity are fitted to — the twin's own limiter
adds the wait back under load, so fitting the raw durations would count it twice.

`CapacityMap` is looked up by the inference (infer.py) while it builds the stages; it records which
findings a stage took (`carried`) so that the rest can be listed as not carried, with why.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tailscope.diagnose import capacity as cap
from tailscope.diagnose.diagnosis import Diagnosis, Population

OpKey = tuple[str, str]  # (service, operation)
SiteKey = tuple[str, str, str, str]  # (parent service, parent operation, child service, child operation)
SpanRef = tuple[str, str]  # (trace id, span id)

WHY_NOT = {
    cap.CHANGED: "the capacity changed during the recording (the halves disagree): no single c describes it",
    cap.NOT_IDENTIFIABLE: "not identifiable (too few spans or no overlap): the traces never queued here",
    cap.NO_LIMIT_SEEN: "no limit seen up to the most in flight: durations are replayed as traced",
}


@dataclass(frozen=True)
class Finding:
    """One population with verdict `limit`."""

    kind: str  # "operation" | "call_site"
    population: str  # "svc:op" or "svc:op → svc:op"
    servers: int
    confidence: str
    evidence: str  # one line: spans, queued arrivals, ρ before/after, service vs duration p50


@dataclass
class CapacityMap:
    operations: dict[OpKey, Finding] = field(default_factory=dict)
    call_sites: dict[SiteKey, Finding] = field(default_factory=dict)
    fan_outs: dict[SiteKey, tuple[int, str]] = field(default_factory=dict)  # site → (k, evidence)
    service_ns: dict[SpanRef, int] = field(default_factory=dict)
    wait_ns: dict[SpanRef, int] = field(default_factory=dict)
    not_limited: list[dict] = field(default_factory=list)  # populations without a limit, with why
    chains: list[dict] = field(default_factory=list)
    carried: list[dict] = field(default_factory=list)  # filled by the inference, one per stage
    used: set[str] = field(default_factory=set)  # populations some stage took (or rejected)
    rejected: list[dict] = field(default_factory=list)  # findings whose waits are not where the stage queues

    def carry(self, finding: Finding, stage: str, field_name: str, value: int) -> None:
        self.used.add(finding.population)
        self.carried.append(
            {
                "population": finding.population,
                "kind": finding.kind,
                field_name: value,
                "confidence": finding.confidence,
                "evidence": finding.evidence,
                "stage": stage,
            }
        )

    def reject(self, finding: Finding, stage: str, why: str) -> None:
        """A finding a stage could have taken but does not (listed under not_carried with why)."""
        self.used.add(finding.population)
        self.rejected.append(
            {
                "population": finding.population,
                "kind": finding.kind,
                "verdict": cap.LIMIT,
                "servers": finding.servers,
                "confidence": finding.confidence,
                "stage": stage,
                "why": why,
            }
        )

    def service_time(self, ref: SpanRef, duration_ns: int) -> int:
        """The span's inferred service time when its population has a limit, else its duration."""
        return self.service_ns.get(ref, duration_ns)

    def not_carried(self) -> list[dict]:
        """Every finding no stage took (with why), then every population without a limit."""
        out = []
        for f in [*self.operations.values(), *self.call_sites.values()]:
            if f.population not in self.used:
                out.append(
                    {
                        "population": f.population,
                        "kind": f.kind,
                        "verdict": cap.LIMIT,
                        "servers": f.servers,
                        "why": "no stage of the inferred topology stands for these spans (a variant left out, "
                        "an internal span, or a call site of a store whose limiter is the operation's)",
                    }
                )
        for site, (k, _) in self.fan_outs.items():
            name = f"{site[0]}:{site[1]} → {site[2]}:{site[3]}"
            if f"fan-out {name}" not in self.used:
                out.append(
                    {
                        "population": name,
                        "kind": "bounded_fan_out",
                        "k": k,
                        "why": "no group of the inferred topology is made of these calls alone (other calls in "
                        "the group would be bounded too), or the group has no more than k calls",
                    }
                )
        return self.rejected + out + self.not_limited


# The engine queues an endpoint before its first stage, and a client pool between the client span's
# start and the server span's. A limit whose inferred waits mostly lie elsewhere — inside a stage — is
# the shadow of a queue further down (a handler around a lock looks like a queue of 1 itself; a
# front whose requests wait on that lock looks like a queue of its own): carried, it would queue the
# twin twice, and raising the real limit in a what-if would change nothing.
MIN_WAIT_SHARE_IN_PLACE = 0.5


def wait_share_in_place(waits_ns: list[int], room_ns: list[int]) -> float | None:
    """The share of the inferred waits that fits where the engine would queue them (per span: the
    wait, at most the room there was for it); None when nothing waited."""
    total = sum(waits_ns)
    if total <= 0:
        return None
    return sum(min(w, max(r, 0)) for w, r in zip(waits_ns, room_ns)) / total


def _name(p: Population) -> str:
    if p.kind == "call_site":
        return f"{p.parent_service}:{p.parent_operation} → {p.service}:{p.operation}"
    return f"{p.service}:{p.operation}"


def _evidence(c: cap.Capacity) -> str:
    chosen = next((f.rank_correlation for f in c.candidates if f.servers == c.servers), None)
    rho = "n/a" if c.duration_rank_correlation is None else f"{c.duration_rank_correlation:+.2f}"
    after = "n/a" if chosen is None else f"{chosen:+.2f}"
    return (
        f"{c.spans} spans, {c.queued_arrivals} arrivals found ≥ {c.servers} in flight (up to {c.max_ahead}); "
        f"duration vs in flight at arrival ρ {rho}, inferred service time ρ {after}; "
        f"span p50 {c.duration_p50_ns / 1e6:.3g} ms → service p50 {c.service_p50_ns / 1e6:.3g} ms"
    )


# A limit is carried at this confidence or above by default (diagnose/capacity.py: `high` ≥ 500 spans and
# ≥ 50 arrivals that queued, `medium` ≥ 100 and ≥ 10, `low` otherwise and for sampled traces). A `low`
# limit rests on a handful of queued arrivals: on a loaded machine, spans that share cores also grow
# with load (processor sharing, not FCFS: docs/diagnose.md), and a spurious capacity in the twin
# would invent a queue at the higher rates it is run at.
CONFIDENCE_ORDER = ("low", "medium", "high")
DEFAULT_MIN_CONFIDENCE = "medium"


def capacity_map(d: Diagnosis, min_confidence: str = DEFAULT_MIN_CONFIDENCE) -> CapacityMap:
    """What of the diagnosis the twin can carry, keyed the way the inference looks it up: limits at
    `min_confidence` or above (the rest listed as not carried, with why)."""
    m = CapacityMap()
    floor = CONFIDENCE_ORDER.index(min_confidence)
    for p in d.populations:
        c = p.capacity
        name = _name(p)
        if c.verdict == cap.LIMIT and c.servers is not None and CONFIDENCE_ORDER.index(c.confidence) < floor:
            m.not_limited.append(
                {
                    "population": name,
                    "kind": p.kind,
                    "verdict": c.verdict,
                    "servers": c.servers,
                    "confidence": c.confidence,
                    "why": f"confidence {c.confidence}, below --capacity-confidence {min_confidence}: " + _evidence(c),
                }
            )
            continue
        if c.verdict != cap.LIMIT or c.servers is None:
            m.not_limited.append(
                {
                    "population": name,
                    "kind": p.kind,
                    "verdict": c.verdict,
                    "why": WHY_NOT.get(c.verdict, c.verdict)
                    + (f" (at least {c.at_least})" if c.verdict == cap.NO_LIMIT_SEEN else ""),
                }
            )
            continue
        f = Finding(p.kind, name, c.servers, c.confidence, _evidence(c))
        if p.kind == "operation":
            m.operations[(p.service, p.operation)] = f
        else:
            assert p.parent_service is not None and p.parent_operation is not None
            m.call_sites[(p.parent_service, p.parent_operation, p.service, p.operation)] = f
        for w in c.waits:
            m.service_ns[(w.trace_id, w.span_id)] = w.service_ns
            m.wait_ns[(w.trace_id, w.span_id)] = w.wait_ns
    for b in d.bounded_fan_outs:
        m.fan_outs[(b.parent_service, b.parent_operation, b.service, b.operation)] = (
            b.k,
            f"{b.bounded} of {b.instances} parents with more than {b.k} calls never had more than {b.k} in flight "
            f"(calls per parent: median {b.calls_p50:g}, max {b.calls_max})",
        )
    for ch in d.sequential_chains:
        m.chains.append(
            {
                "population": f"{ch.parent_service}:{ch.parent_operation} → {ch.service}:{ch.operation}",
                "calls_p50": ch.calls_p50,
                "kept": "sequential (consecutive calls or a store count)",
            }
        )
    return m
