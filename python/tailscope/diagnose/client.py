"""Client latency joined to traces (issue 26, item 4; docs/diagnose.md "Client latency joined to traces").

`tailscope-load --traceparent --request-log PATH` writes one line per answered request: the trace id it
sent, its intended send time and its latency measured from that time (coordinated omission corrected).
Joined by trace id to the traces the system recorded, each request's latency splits into what the
root span covers and the **gap** no span covers — the accept queue, a front proxy, the client's own
queueing, the network — the gap wrk2 users see between their p99 and Jaeger's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tailscope.traces.spans import Trace

REQUEST_LOG_SCHEMA = "tailscope.request-log/1"
_COLUMNS = "trace_id,intended_unix_ns,latency_ns,ok"
# Below this many joined requests a p99 is the largest sample or close to it: not reported.
MIN_JOINED_FOR_P99 = 100


@dataclass(frozen=True)
class RequestRow:
    trace_id: int  # the 128-bit id as a number: trace formats spell it with or without leading zeros
    intended_unix_ns: int
    latency_ns: int
    ok: bool


def read_request_log(path: Path) -> list[RequestRow]:
    """The rows of a request log; ValueError naming the file and line for anything else."""
    rows: list[RequestRow] = []
    with open(path, encoding="utf-8") as f:
        first = f.readline().strip()
        if first != f"# {REQUEST_LOG_SCHEMA}":
            raise ValueError(
                f"{path}: not a request log (first line {first[:60]!r}, expected '# {REQUEST_LOG_SCHEMA}')"
            )
        header = f.readline().strip()
        if header != _COLUMNS:
            raise ValueError(f"{path}: line 2: columns {header[:80]!r}, expected {_COLUMNS!r}")
        for number, line in enumerate(f, start=3):
            line = line.strip()
            if not line:
                continue
            parts = line.split(",")
            try:
                if len(parts) != 4 or len(parts[0]) != 32 or parts[3] not in ("0", "1"):
                    raise ValueError
                row = RequestRow(int(parts[0], 16), int(parts[1]), int(parts[2]), parts[3] == "1")
            except ValueError:
                raise ValueError(
                    f"{path}: line {number}: {line[:80]!r} is not trace_id (32 hex), intended_unix_ns, latency_ns, ok (0/1)"
                ) from None
            if row.latency_ns < 0:
                raise ValueError(f"{path}: line {number}: negative latency {row.latency_ns}")
            rows.append(row)
    return rows


@dataclass(frozen=True)
class ClientJoin:
    """Client-measured latency against the root span, per request joined by trace id. A figure that
    cannot be computed is None with its reason in `unavailable` (figure → reason)."""

    requests: int  # answered correctly (ok) in the log
    not_ok: int  # answered with another status: left out of every figure
    joined: int  # ok requests whose trace was found
    untraced: int  # ok requests with no trace: not sampled, or lost on the way to the store
    traces_without_request: int  # traces no logged request sent (other clients, other runs): ignored
    # Root span longer than the client latency: the span's end was stamped after the response left (a
    # server thread descheduled between its write and the stamp), or two hosts' clocks; clamped to 0.
    negative_gaps: int
    client_p50_ns: float | None  # every ok request of the log
    client_p99_ns: float | None
    joined_client_p50_ns: float | None  # the joined requests only: what the gap is a part of
    joined_client_p99_ns: float | None
    root_p50_ns: float | None
    root_p99_ns: float | None
    gap_p50_ns: float | None  # client latency − root span duration, per request
    gap_p99_ns: float | None
    gap_p50_share_of_client_p50: float | None
    gap_p99_share_of_client_p99: float | None
    # Of the joined requests at or above the joined client p99: Σ gap ÷ Σ client latency — how much of
    # the tail requests' time no span covers.
    tail_untraced_share: float | None
    unavailable: dict[str, str]


def _pct(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q))


def join(rows: Iterable[RequestRow], traces: Iterable[Trace], *, sampling: float = 1.0) -> ClientJoin:
    rows = list(rows)
    ok = [r for r in rows if r.ok]
    roots: dict[int, int] = {}
    for t in traces:
        try:
            roots[int(t.trace_id, 16)] = t.root.end_ns - t.root.start_ns
        except ValueError:
            continue  # a trace id that is not hex cannot be one the load generator sent
    client_all = np.array([r.latency_ns for r in ok], dtype=np.int64)
    pairs = [(r.latency_ns, roots[r.trace_id]) for r in ok if r.trace_id in roots]
    sent_ids = {r.trace_id for r in rows}
    unavailable: dict[str, str] = {}
    untraced = len(ok) - len(pairs)
    if untraced:
        unavailable["untraced"] = (
            f"{untraced} of {len(ok)} requests have no trace: not sampled"
            + (f" (sampling {sampling:g} leaves ≈ {len(ok) * (1 - sampling):.0f} untraced)" if sampling < 1 else "")
            + ", or their spans were lost or not yet stored"
        )
    fields: dict[str, float | None] = dict.fromkeys(
        (
            "client_p50_ns",
            "client_p99_ns",
            "joined_client_p50_ns",
            "joined_client_p99_ns",
            "root_p50_ns",
            "root_p99_ns",
            "gap_p50_ns",
            "gap_p99_ns",
            "gap_p50_share_of_client_p50",
            "gap_p99_share_of_client_p99",
            "tail_untraced_share",
        )
    )
    negative = 0
    if len(client_all):
        fields["client_p50_ns"] = _pct(client_all, 50)
        if len(client_all) >= MIN_JOINED_FOR_P99:
            fields["client_p99_ns"] = _pct(client_all, 99)
        else:
            unavailable["client_p99_ns"] = f"only {len(client_all)} requests (a p99 needs ≥ {MIN_JOINED_FOR_P99})"
    if not pairs:
        reason = (
            "no request in the log"
            if not ok
            else "no logged request has a trace: were the traceparent ids continued by the system "
            "(its HTTP front must accept W3C traceparent), sampled, and are these the traces of that run?"
        )
        for key in fields:
            if fields[key] is None:
                unavailable[key] = reason
    else:
        client = np.array([p[0] for p in pairs], dtype=np.int64)
        root = np.array([p[1] for p in pairs], dtype=np.int64)
        raw_gap = client - root
        negative = int((raw_gap < 0).sum())
        gap = np.maximum(raw_gap, 0)
        client_p50, gap_p50 = _pct(client, 50), _pct(gap, 50)
        fields["joined_client_p50_ns"] = client_p50
        fields["root_p50_ns"] = _pct(root, 50)
        fields["gap_p50_ns"] = gap_p50
        fields["gap_p50_share_of_client_p50"] = gap_p50 / client_p50 if client_p50 > 0 else None
        if len(pairs) >= MIN_JOINED_FOR_P99:
            client_p99, gap_p99 = _pct(client, 99), _pct(gap, 99)
            fields["joined_client_p99_ns"] = client_p99
            fields["root_p99_ns"] = _pct(root, 99)
            fields["gap_p99_ns"] = gap_p99
            fields["gap_p99_share_of_client_p99"] = gap_p99 / client_p99 if client_p99 > 0 else None
            tail = client >= client_p99
            fields["tail_untraced_share"] = float(gap[tail].sum() / client[tail].sum()) if client_p99 > 0 else None
        for key, value in fields.items():
            if value is None and key not in unavailable:
                base = len(client_all) if key == "client_p99_ns" else len(pairs)
                unavailable[key] = (
                    f"only {base} requests (a p99 needs ≥ {MIN_JOINED_FOR_P99})"
                    if len(pairs) < MIN_JOINED_FOR_P99 and ("p99" in key or key == "tail_untraced_share")
                    else "the joined client latency is 0"
                )
    if negative:
        unavailable.setdefault(
            "negative_gaps",
            f"{negative} root spans longer than their client latency (a server span ended after its response "
            "left, or another host's clock): gaps clamped to 0",
        )
    return ClientJoin(
        requests=len(ok),
        not_ok=len(rows) - len(ok),
        joined=len(pairs),
        untraced=untraced,
        traces_without_request=sum(1 for i in roots if i not in sent_ids),
        negative_gaps=negative,
        unavailable=unavailable,
        **fields,
    )
