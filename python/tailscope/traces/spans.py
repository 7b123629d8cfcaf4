"""The spans of trace files, read by the engine.

There is one Jaeger reader and one OTLP reader in tailscope: the engine's (native/trace). Rather
than parse the formats a second time in Python, `read_traces` runs `tailscope-critpath --span-dump`,
which writes every analyzed trace's repaired span tree (times normalised, one root, orphans and
cycles cut off, see docs/critical-path.md "Dirty data") together with the analyzer's per-trace
result: its RPC pairs (the same pairing rules the critical-path analysis uses), the probe delays of
tailscope's async calls and the per-service critical-path time.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tailscope.lab.engines import run_engine

CRITPATH = "tailscope-critpath"
# Reading a trace file is linear in its size; a limit only catches a hung engine.
READ_TIMEOUT_S = 3600.0


@dataclass
class Span:
    span_id: str
    parent_id: str | None
    service: str
    operation: str
    kind: str
    start_ns: int
    end_ns: int
    children: list[Span] = field(default_factory=list)
    # tailscope's async probe (tags tailscope.scheduling_delay_ns / join_delay_ns), None when absent.
    probe_scheduling_ns: int | None = None
    probe_join_ns: int | None = None
    # The server span this (client) span called, by the analyzer's pairing rules.
    server: Span | None = None
    is_server: bool = False
    # A cache read's answer, tag tailscope.cache ("hit" | "miss"; tailscope-svc writes it on a real
    # store read that has a miss path); None when the span carries none.
    cache: str | None = None


@dataclass
class Trace:
    trace_id: str
    root: Span
    start_ns: int
    end_to_end_ns: int
    # Critical-path time per service (services not on the path are absent).
    service_cp_ns: dict[str, int]
    spans: int
    rpc_pairs: int
    probed: int  # spans carrying probe tags


@dataclass
class TraceSet:
    traces: list[Trace]
    inputs: list[dict]
    warnings: dict[str, int]
    traces_read: int

    @property
    def has_probes(self) -> bool:
        return any(t.probed for t in self.traces)


def parse_dump_line(line: str) -> Trace | None:
    """One line of spans.ndjson → a Trace (None for a trace the analyzer could not analyze)."""
    doc = json.loads(line)
    analysis = doc["analysis"]
    if not analysis.get("analyzed") or not doc["spans"]:
        return None
    by_id: dict[str, Span] = {}
    root: Span | None = None
    for s in doc["spans"]:  # preorder: a parent comes before its children
        span = Span(
            s["span_id"], s["parent_span_id"], s["service"], s["operation"], s["kind"], s["start_ns"], s["end_ns"]
        )
        span.cache = s.get("cache")
        by_id[span.span_id] = span
        if span.parent_id is None:
            root = span
        else:
            by_id[span.parent_id].children.append(span)
    assert root is not None
    delays = analysis.get("delays") or {}
    pairs = 0
    for rpc in delays.get("rpc") or []:
        client, server = by_id.get(rpc["client_span_id"]), by_id.get(rpc["server_span_id"])
        if client is not None and server is not None:
            client.server = server
            server.is_server = True
            pairs += 1
    probed = 0
    for p in delays.get("probe_calls") or []:
        probed_span = by_id.get(p["span_id"])
        if probed_span is not None:
            span = probed_span
            span.probe_scheduling_ns = p.get("scheduling_ns")
            span.probe_join_ns = p.get("join_ns")
            probed += 1
    return Trace(
        trace_id=analysis["trace_id"],
        root=root,
        start_ns=analysis["start_ns"],
        end_to_end_ns=analysis["end_to_end_ns"],
        service_cp_ns={s["service"]: s["exclusive_ns"] for s in analysis.get("services") or []},
        spans=len(by_id),
        rpc_pairs=pairs,
        probed=probed,
    )


def iter_dump(path: Path) -> Iterator[Trace]:
    with path.open() as f:
        for line in f:
            if line.strip():
                t = parse_dump_line(line)
                if t is not None:
                    yield t


def read_traces(files: list[Path], *, max_traces: int = 0) -> TraceSet:
    """Every analyzable trace of `files` (Jaeger JSON, NDJSON, OTLP JSON, gzip or not).
    Raises EngineError (with the engine's message naming the file) on unreadable input."""
    with tempfile.TemporaryDirectory(prefix="tailscope-twin-") as tmp:
        args = ["--span-dump", "--artifacts", tmp, "--doc-traces", "0", "--top", "1"]
        if max_traces:
            args += ["--max-traces", str(max_traces)]
        doc = run_engine(CRITPATH, [*args, *map(str, files)], timeout_s=READ_TIMEOUT_S).document
        traces = list(iter_dump(Path(tmp) / "spans.ndjson"))
    return TraceSet(
        traces=traces,
        inputs=doc.get("inputs", []),
        warnings={k: v for k, v in (doc.get("warnings") or {}).items() if v},
        traces_read=int(doc.get("summary", {}).get("traces", len(traces))),
    )


def split_warmup(traces: list[Trace], warmup_s: float) -> tuple[list[Trace], list[Trace]]:
    """(warm-up, window): the traces whose root starts within `warmup_s` of the first one's, and the
    rest. The load generator leaves its warm-up out of its histogram, but the graph traces those
    requests too; the window is what it measured (its first request is the first trace's root)."""
    if not traces:
        return [], []
    cut_ns = min(t.start_ns for t in traces) + warmup_s * 1e9
    return [t for t in traces if t.start_ns < cut_ns], [t for t in traces if t.start_ns >= cut_ns]


def cache_hit_ratios(traces: list[Trace]) -> dict[str, float]:
    """Per cache read (span name): the share of its spans tagged tailscope.cache = hit among those
    tagged at all (tailscope-svc tags a real store read that has a miss path)."""
    counts: dict[str, list[int]] = {}
    for t in traces:
        stack = [t.root]
        while stack:
            s = stack.pop()
            stack.extend(s.children)
            if s.cache in ("hit", "miss"):
                c = counts.setdefault(s.operation, [0, 0])
                c[0 if s.cache == "hit" else 1] += 1
    return {name: hits / (hits + misses) for name, (hits, misses) in sorted(counts.items())}
