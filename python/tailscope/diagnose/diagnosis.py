"""Traces → a diagnosis: concurrency and capacity per operation and per call site, bounded fan-outs,
sequential chains, slow against typical requests, and what the traces could not show (docs/diagnose.md).

`diagnose(traceset)` returns frozen values; `document()` makes the `tailscope.diagnosis/1` JSON of
them and `lines()` the sentences `tailscope diagnose` prints, each formatted from those values.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from tailscope.diagnose import calls, capacity
from tailscope.diagnose.client import ClientJoin, RequestRow, join
from tailscope.diagnose.concurrency import Concurrency, sweep
from tailscope.diagnose.tail import SlowVsTypical, slow_vs_typical
from tailscope.traces.spans import Span, Trace, TraceSet
from tailscope.units import fmt_ns

SCHEMA = "tailscope.diagnosis/1"
# `launched together` / `launched when a slot freed`: the analyzer's default stagger window
# (tailscope analyze --stagger-window-us).
DEFAULT_LAUNCH_GAP_NS = 1_000_000


@dataclass(frozen=True)
class Population:
    """The spans of one operation (kind "operation": every span of a service's operation) or of one
    call site (kind "call_site": the child spans of one parent operation)."""

    kind: str
    service: str
    operation: str
    parent_service: str | None
    parent_operation: str | None
    concurrency: Concurrency
    capacity: capacity.Capacity


@dataclass(frozen=True)
class Diagnosis:
    traces: int
    duplicate_traces: int  # a trace id seen again (e.g. fetched once per service from Jaeger): dropped
    spans: int
    sampling: float
    # The analyzer's repairs (clock_skew, child_outlives_parent, …: docs/critical-path.md "Dirty data").
    analyzer_warnings: dict[str, int]
    # Children in another service than their parent that reached outside the parent (another clock):
    # clamped into the parent for the call-site figures.
    clamped_children: int
    # True when no span of any population ever found another of its population in flight.
    never_overlapped: bool
    populations: tuple[Population, ...]
    bounded_fan_outs: tuple[calls.BoundedFanOut, ...]
    sequential_chains: tuple[calls.SequentialChain, ...]
    slow_vs_typical: tuple[SlowVsTypical, ...]
    # --requests: client latency joined to the traces by trace id (None when no request log was given).
    client: ClientJoin | None = None


def _walk(span: Span) -> Iterator[Span]:
    stack = [span]
    while stack:
        s = stack.pop()
        yield s
        stack.extend(reversed(s.children))


def _unique(traces: list[Trace]) -> tuple[list[Trace], int]:
    seen: set[str] = set()
    out = []
    for t in traces:
        if t.trace_id not in seen:
            seen.add(t.trace_id)
            out.append(t)
    return out, len(traces) - len(out)


def _callee(ch: Span) -> str | None:
    """The server a client span called (the analyzer's pairing), when it is in another service."""
    s = ch.server
    return f"{s.service}:{s.operation}" if s is not None and s.service != ch.service else None


def _call_labels(traces: list[Trace]) -> Callable[[Span, Span], str]:
    """How a child is named in its call site. Normally its operation; but one client operation
    name may call several servers (OpenTelemetry's HTTP clients name every span "HTTP GET"), and a
    call site mixing them is no population: its fan-outs and chains would be judged over calls to
    different servers. Where a (parent operation, child operation) pair calls more than one server
    in the traces, each child is named "operation → callee service:operation"."""
    callees: dict[tuple[str, str, str, str], set[str | None]] = defaultdict(set)
    for t in traces:
        for p in _walk(t.root):
            for ch in p.children:
                callees[(p.service, p.operation, ch.service, ch.operation)].add(_callee(ch))

    def label(p: Span, ch: Span) -> str:
        if len(callees[(p.service, p.operation, ch.service, ch.operation)]) <= 1:
            return ch.operation
        callee = _callee(ch)
        return f"{ch.operation} → {callee}" if callee is not None else ch.operation

    return label


def diagnose(
    traceset: TraceSet,
    *,
    sampling: float = 1.0,
    launch_gap_ns: int = DEFAULT_LAUNCH_GAP_NS,
    requests: list[RequestRow] | None = None,
) -> Diagnosis:
    traces, duplicates = _unique(traceset.traces)
    # (service, operation) → spans as (start, end, trace id, span id)
    ops: dict[tuple[str, str], list[tuple[int, int, str, str]]] = defaultdict(list)
    sites: dict[tuple[str, str, str, str], list[tuple[int, int, str, str]]] = defaultdict(list)
    instances: dict[tuple[str, str, str, str], list[calls.Children]] = defaultdict(list)
    clamped = 0
    label = _call_labels(traces)
    for t in traces:
        for p in _walk(t.root):
            ops[(p.service, p.operation)].append((p.start_ns, p.end_ns, t.trace_id, p.span_id))
            by_op: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
            for ch in p.children:
                start, end = ch.start_ns, ch.end_ns
                if ch.service != p.service and (start < p.start_ns or end > p.end_ns):
                    start, end = max(start, p.start_ns), max(min(end, p.end_ns), max(start, p.start_ns))
                    clamped += 1
                site = (p.service, p.operation, ch.service, label(p, ch))
                sites[site].append((start, end, t.trace_id, ch.span_id))
                by_op[(ch.service, label(p, ch))].append((start, end))
            for (svc, op), ivs in by_op.items():
                site = (p.service, p.operation, svc, op)
                instances[site].append(calls.Children(t.trace_id, p.span_id, tuple(sorted(ivs))))

    def population(kind: str, key: tuple[str, ...], members: list[tuple[int, int, str, str]]) -> Population:
        starts = [m[0] for m in members]
        ends = [m[1] for m in members]
        cap = capacity.infer_capacity(starts, ends, [(m[2], m[3]) for m in members], sampling=sampling)
        parent = key[:2] if kind == "call_site" else (None, None)
        return Population(kind, key[-2], key[-1], parent[0], parent[1], sweep(starts, ends), cap)

    pops = [population("operation", key, members) for key, members in sorted(ops.items())]
    for key, members in sorted(sites.items()):
        # A child operation called from this one site only is the same spans as its operation.
        if len(members) != len(ops.get(key[2:], ())):
            pops.append(population("call_site", key, members))
    fan_outs = [
        f
        for site, inst in sorted(instances.items())
        if (f := calls.bounded_fan_out(site, inst, launch_gap_ns=launch_gap_ns))
    ]
    chains = [c for site, inst in sorted(instances.items()) if (c := calls.sequential_chain(site, inst))]
    return Diagnosis(
        traces=len(traces),
        duplicate_traces=duplicates,
        spans=sum(len(m) for m in ops.values()),
        sampling=sampling,
        analyzer_warnings=dict(traceset.warnings),
        clamped_children=clamped,
        never_overlapped=bool(pops) and all(p.capacity.max_ahead == 0 for p in pops),
        populations=tuple(pops),
        bounded_fan_outs=tuple(fan_outs),
        sequential_chains=tuple(chains),
        slow_vs_typical=tuple(slow_vs_typical(traces)),
        client=join(requests, traces, sampling=sampling) if requests is not None else None,
    )


# ---- the document ------------------------------------------------------------------------------


def _capacity_doc(c: capacity.Capacity) -> dict:
    doc = asdict(c)
    doc["waits"] = {
        "columns": ["trace_id", "span_id", "wait_ns", "service_ns"],
        "rows": [[w.trace_id, w.span_id, w.wait_ns, w.service_ns] for w in c.waits],
    }
    return doc


def document(d: Diagnosis, inputs: list[str]) -> dict:
    return {
        "schema": SCHEMA,
        "inputs": inputs,
        "traces": d.traces,
        "duplicate_traces": d.duplicate_traces,
        "spans": d.spans,
        "sampling": d.sampling,
        "analyzer_warnings": d.analyzer_warnings,
        "clamped_children": d.clamped_children,
        "never_overlapped": d.never_overlapped,
        "populations": [
            {
                "kind": p.kind,
                "service": p.service,
                "operation": p.operation,
                "parent_service": p.parent_service,
                "parent_operation": p.parent_operation,
                "concurrency": asdict(p.concurrency),
                "capacity": _capacity_doc(p.capacity),
            }
            for p in d.populations
        ],
        "bounded_fan_outs": [asdict(f) for f in d.bounded_fan_outs],
        "sequential_chains": [asdict(c) for c in d.sequential_chains],
        "slow_vs_typical": [asdict(s) for s in d.slow_vs_typical],
        "client": asdict(d.client) if d.client is not None else None,
    }


# ---- the sentences -------------------------------------------------------------------------------


def _name(p: Population) -> str:
    if p.kind == "call_site":
        return f"{p.parent_service}:{p.parent_operation} → {p.service}:{p.operation}"
    return f"{p.service}:{p.operation}"


def population_name(p: Mapping[str, Any]) -> str:
    """A population of a diagnosis document (`populations[]`), named as the printed lines name it:
    "service:operation", or "parent service:operation → service:operation" for a call site."""
    if p.get("kind") == "call_site":
        return f"{p['parent_service']}:{p['parent_operation']} → {p['service']}:{p['operation']}"
    return f"{p['service']}:{p['operation']}"


def _scaled(value: float | None, sampling: float) -> str:
    return f" (≈ {value:.3g} scaled by 1/sampling {sampling:g}: an estimate)" if value is not None else ""


def _rho(value: float | None) -> str:
    return "unavailable: constant" if value is None else f"{value:+.2f}"


def capacity_lines(p: Population, sampling: float) -> list[str]:
    c, cc = p.capacity, p.concurrency
    name = _name(p)
    flight = (
        f"in flight: max {cc.max_in_flight}, mean {cc.mean_in_flight:.2f} while busy, "
        f"{cc.share_at_max:.0%} of the busy time at the max" + (" (a plateau)" if cc.plateau else "")
    )
    if c.verdict == capacity.LIMIT:
        lines = [
            f"{name}: capacity {c.servers}{_scaled(c.servers_scaled, sampling)} — a queue in front of "
            f"{c.servers} server{'s' if c.servers != 1 else ''} (confidence {c.confidence}: {c.spans} spans, "
            f"{c.queued_arrivals} arrivals found ≥ {c.servers} in flight, up to {c.max_ahead})",
            f"  service time without queueing p50 {fmt_ns(c.service_p50_ns)}, p99 {fmt_ns(c.service_p99_ns)}; "
            f"span p50 {fmt_ns(c.duration_p50_ns)}, p99 {fmt_ns(c.duration_p99_ns)}; "
            f"{c.waited} spans waited (p99 wait {fmt_ns(c.wait_p99_ns)})",
            f"  evidence: duration vs number in flight at arrival ρ {_rho(c.duration_rank_correlation)}, "
            f"inferred service time vs it ρ {_rho(_chosen_rho(c))}; {flight}",
        ]
        lines.append("  " + _load_table(c))
        return lines
    if c.verdict == capacity.CHANGED and c.halves is not None:
        first, second = c.halves
        return [
            f"{name}: the capacity changed during the recording: first half {_half_text(first)}, second half "
            f"{_half_text(second)} — not averaged; record each setting separately",
            f"  {flight}",
        ]
    if c.verdict == capacity.NO_LIMIT_SEEN:
        line = (
            f"{name}: no limit seen up to {c.at_least} in flight{_scaled(c.at_least_scaled, sampling)} "
            f"(duration vs number in flight at arrival ρ {_rho(c.duration_rank_correlation)}, {c.spans} spans); {flight}"
        )
        if cc.plateau:
            line += (
                f"; the in-flight count piles up at {cc.max_in_flight}: a cap whose queue is before these spans "
                "(see the call sites into it)"
            )
        return [line]
    why = (
        f"only {c.spans} spans (fewer than {capacity.MIN_SPANS})"
        if c.reason == "few_spans"
        else "the traces never queued here (no span found another in flight) — record at a higher rate"
    )
    return [f"{name}: capacity not identifiable: {why}"]


def _chosen_rho(c: capacity.Capacity) -> float | None:
    return next((f.rank_correlation for f in c.candidates if f.servers == c.servers), None)


def _half_text(h: capacity.Half) -> str:
    if h.verdict == capacity.LIMIT:
        return f"capacity {h.servers} ({h.spans} spans)"
    if h.verdict == capacity.NO_LIMIT_SEEN:
        return f"no limit seen up to {h.max_ahead + 1} in flight ({h.spans} spans)"
    return f"not identifiable ({h.spans} spans)"


def _load_table(c: capacity.Capacity) -> str:
    cells = []
    for r in c.evidence:
        level = str(r.ahead_lo) if r.ahead_lo == r.ahead_hi else f"{r.ahead_lo}-{r.ahead_hi}"
        cells.append(f"{level}: {fmt_ns(r.duration_p50_ns)}→{fmt_ns(r.service_p50_ns)} ({r.spans})")
    return "in flight at arrival: span p50→service p50 (spans): " + "; ".join(cells)


def lines(d: Diagnosis) -> list[str]:
    out = [f"{d.traces} traces, {d.spans} spans, {len(d.populations)} operations and call sites"]
    if d.duplicate_traces:
        out.append(f"{d.duplicate_traces} traces seen twice (e.g. fetched once per service): counted once")
    if d.sampling < 1.0:
        out.append(
            f"sampled traces (sampling {d.sampling:g}): the requests not traced were in flight too, unseen; "
            "concurrency and capacities are scaled by 1/sampling and are estimates (confidence low)"
        )
    skew = {
        k: v
        for k, v in d.analyzer_warnings.items()
        if k in ("clock_skew", "child_outlives_parent", "child_outside_parent")
    }
    if skew or d.clamped_children:
        parts = [f"{k} {v}" for k, v in sorted(skew.items())]
        if d.clamped_children:
            parts.append(f"{d.clamped_children} children of another service clamped into their parent")
        out.append("clock skew: " + ", ".join(parts))
    if d.never_overlapped:
        out.append(
            "capacity not identifiable: the traces never queued (no span ever overlapped another of its "
            "operation) — record at a higher rate"
        )
    ranked = sorted(d.populations, key=_rank)
    shown = [p for p in ranked if p.capacity.verdict in (capacity.LIMIT, capacity.CHANGED) or p.concurrency.plateau]
    for p in shown:
        out += capacity_lines(p, d.sampling)
    quiet = [p for p in ranked if p not in shown]
    counts: dict[str, int] = defaultdict(int)
    for p in quiet:
        counts[p.capacity.verdict] += 1
    if quiet:
        out.append(
            "elsewhere: "
            + ", ".join(
                f"{counts[v]} {label}"
                for v, label in (
                    (capacity.NO_LIMIT_SEEN, "with no limit seen"),
                    (capacity.NOT_IDENTIFIABLE, "not identifiable"),
                )
                if counts[v]
            )
            + " (every one in the JSON document)"
        )
    for f in d.bounded_fan_outs:
        out.append(
            f"{f.parent_service}:{f.parent_operation} → {f.service}:{f.operation}: bounded fan-out, waves of {f.k} "
            f"({f.bounded} of {f.instances} parents with more than {f.k} calls, median {f.calls_p50:g}, max {f.calls_max}); "
            f"the calls took {fmt_ns(f.span_p50_ns)} (median), the longest one {fmt_ns(f.longest_p50_ns)}"
        )
    for ch in d.sequential_chains:
        out.append(
            f"{ch.parent_service}:{ch.parent_operation} → {ch.service}:{ch.operation}: sequential chain of "
            f"{ch.calls_p50:g} calls (median, max {ch.calls_max}; {ch.sequential} of {ch.instances} parents), never "
            f"overlapping, {fmt_ns(ch.gap_p50_ns)} apart; the chain took {fmt_ns(ch.chain_p50_ns)} (median), its "
            f"longest call {fmt_ns(ch.longest_p50_ns)}: in parallel, if the calls are independent"
        )
    for s in d.slow_vs_typical:
        grown = [g for g in s.services if g.growth_ns > 0][:3]
        parts = [
            f"{g.service} +{fmt_ns(g.growth_ns)}"
            + (f" ({g.share_of_growth:.0%})" if g.share_of_growth is not None else "")
            for g in grown
        ]
        out.append(
            f"{s.service}:{s.operation}: slowest {s.slow_traces} of {s.traces} traces {fmt_ns(s.slow_end_to_end_mean_ns)} "
            f"vs middle half {fmt_ns(s.middle_end_to_end_mean_ns)}; critical path grows in "
            + (", ".join(parts) if parts else "no service")
        )
    if d.client is not None:
        out += client_lines(d.client)
    return out


def _ns_or(value: float | None, key: str, c: ClientJoin) -> str:
    return fmt_ns(value) if value is not None else f"unavailable ({c.unavailable.get(key, 'not computed')})"


def _share_or(value: float | None) -> str:
    return f"{value:.0%}" if value is not None else "unavailable"


def client_lines(c: ClientJoin) -> list[str]:
    out = [
        f"client latency joined to traces: {c.joined} of {c.requests} answered requests have a trace"
        + (f"; {c.untraced} have none (not sampled, or lost)" if c.untraced else "")
        + (f"; {c.not_ok} answered with another status, left out" if c.not_ok else "")
        + (f"; {c.traces_without_request} traces no logged request sent, ignored" if c.traces_without_request else "")
    ]
    if c.joined == 0:
        out.append(f"  no span covers: unavailable ({c.unavailable.get('gap_p50_ns', '')})")
        return out
    out.append(
        f"  client p50 {_ns_or(c.joined_client_p50_ns, 'joined_client_p50_ns', c)}, root span p50 "
        f"{_ns_or(c.root_p50_ns, 'root_p50_ns', c)}: no span covers p50 {_ns_or(c.gap_p50_ns, 'gap_p50_ns', c)} "
        f"({_share_or(c.gap_p50_share_of_client_p50)} of the client p50)"
    )
    out.append(
        f"  client p99 {_ns_or(c.joined_client_p99_ns, 'joined_client_p99_ns', c)}, root span p99 "
        f"{_ns_or(c.root_p99_ns, 'root_p99_ns', c)}: no span covers p99 {_ns_or(c.gap_p99_ns, 'gap_p99_ns', c)} "
        f"({_share_or(c.gap_p99_share_of_client_p99)} of the client p99); in the slowest 1 % of requests "
        f"{_share_or(c.tail_untraced_share)} of the time is outside every span"
    )
    if c.negative_gaps:
        out.append(f"  {c.unavailable['negative_gaps']}")
    return out


def _rank(p: Population) -> tuple:
    order = {capacity.LIMIT: 0, capacity.CHANGED: 1, capacity.NO_LIMIT_SEEN: 2, capacity.NOT_IDENTIFIABLE: 3}
    return (order[p.capacity.verdict], -p.capacity.wait_p99_ns, _name(p))
