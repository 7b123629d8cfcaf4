"""Traces from a live Jaeger: `tailscope analyze --jaeger URL --service S` (docs/deploy.md).

Jaeger's HTTP query API (`GET /api/traces`, what Jaeger UI itself calls) has no
offset: a search returns at most `limit` traces whose spans match the service
(and operation) and start inside [start, end] (Unix microseconds), in an order
the storage chooses. So we page by time windows, halving any window whose answer
is full (fetch). A trace seen on two pages must be the same both times (same
span ids); one that grew between pages was still being written, and analysing
either copy would be wrong, so that is an error.

The traces are written to one Jaeger JSON file ({"data": [...]}, the form Jaeger
UI exports) inside the run's staging folder and analysed by the critical-path
engine like any file. Any failure raises JaegerQueryError before the analysis
starts; the runner then removes the staging folder, so nothing half-fetched or
half-analysed is stored.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tailscope.atomicfile import write_text_atomic
from tailscope.lab.allow_list import check_base_url

DEFAULT_LOOKBACK = "1h"
DEFAULT_LIMIT = 1000
MAX_LIMIT = 1_000_000
PAGE_SIZE = 100
REQUEST_TIMEOUT_S = 30.0  # one read
REQUEST_DEADLINE_S = 120.0  # one whole answer
MAX_RESPONSE_BYTES = 512 * 2**20
_UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class JaegerQueryError(RuntimeError):
    """The query could not give a complete set of traces; nothing is stored."""


@dataclass(frozen=True)
class JaegerQuery:
    base_url: str
    service: str
    operation: str | None = None
    lookback_s: int = 3600
    limit: int = DEFAULT_LIMIT


def parse_lookback(text: str) -> int:
    """'90s', '15m', '1h', '2d' -> seconds, in 1 s … 30 d."""
    m = re.fullmatch(r"([0-9]{1,7})([smhd])", text.strip())
    if not m:
        raise ValueError(f"--lookback '{text}': expected a whole number and a unit s, m, h or d (e.g. 1h)")
    seconds = int(m.group(1)) * _UNITS_S[m.group(2)]
    if not 1 <= seconds <= 30 * 86400:
        raise ValueError(f"--lookback '{text}': must be between 1s and 30d")
    return seconds


class _AllowListRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is followed only to a target the allow-list admits: a loopback "Jaeger" that
    answers 302 to an outside address must not make tailscope connect there."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        try:
            check_base_url(newurl, "a redirect")
        except ValueError as e:
            raise JaegerQueryError(f"Jaeger at {req.full_url} redirected (HTTP {code}) to a refused target: {e}") from e
        return super().redirect_request(req, fp, code, msg, headers, newurl)


_OPENER = urllib.request.build_opener(_AllowListRedirects)


def _read_body(r, url: str, deadline: float) -> bytes:
    """The answer's body, at most MAX_RESPONSE_BYTES + 1, read before `deadline` (monotonic s): the
    socket timeout bounds each read, not a body trickled a byte at a time."""
    chunks: list[bytes] = []
    size = 0
    while size <= MAX_RESPONSE_BYTES:
        if time.monotonic() > deadline:
            raise JaegerQueryError(f"Jaeger's answer to {url} did not arrive within {REQUEST_DEADLINE_S:.0f} s")
        chunk = r.read1(min(1 << 16, MAX_RESPONSE_BYTES + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def get_json(url: str) -> dict:
    """One query-API answer: a JSON object with a `data` list, or JaegerQueryError naming the URL."""
    deadline = time.monotonic() + REQUEST_DEADLINE_S
    try:
        with _OPENER.open(url, timeout=REQUEST_TIMEOUT_S) as r:
            body = _read_body(r, url, deadline)
    except urllib.error.HTTPError as e:
        detail = e.read(2000).decode("utf-8", "replace").strip()
        try:
            errors = json.loads(detail).get("errors") or []
            detail = "; ".join(str(x.get("msg", x)) for x in errors) or detail
        except (ValueError, AttributeError):
            pass
        raise JaegerQueryError(f"Jaeger answered {url} with HTTP {e.code} {e.reason}: {detail[:300]}") from e
    except (TimeoutError, urllib.error.URLError, ConnectionError) as e:
        reason = getattr(e, "reason", e)
        raise JaegerQueryError(f"cannot reach Jaeger at {url}: {reason}") from e
    if len(body) > MAX_RESPONSE_BYTES:
        raise JaegerQueryError(f"Jaeger's answer to {url} exceeds {MAX_RESPONSE_BYTES // 2**20} MiB; lower --limit")
    try:
        doc = json.loads(body)
    except ValueError as e:
        raise JaegerQueryError(f"Jaeger's answer to {url} is not JSON ({e}); is this Jaeger's query port?") from e
    if not isinstance(doc, dict) or not isinstance(doc.get("data"), list):
        raise JaegerQueryError(f"Jaeger's answer to {url} has no 'data' list; is this Jaeger's query port?")
    return doc


def _is_whole(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def span_problem(span: object) -> str | None:
    """Why a fetched span cannot be analysed (the native reader's rules for a Jaeger span: an object
    with a non-empty spanID, whole non-negative startTime and duration in µs), or None."""
    if not isinstance(span, dict):
        return f"a span is a {type(span).__name__}, not an object"
    sid = span.get("spanID")
    if not isinstance(sid, str) or not sid:
        return "a span has no spanID string"
    for key in ("startTime", "duration"):
        if key not in span:
            return f"span {sid} has no {key}"
        if not _is_whole(span[key]) or span[key] < 0:
            return f"span {sid} has {key} {span[key]!r}, not a whole number of microseconds ≥ 0"
    return None


def _trace_start_us(trace: dict) -> int:
    return min(int(s["startTime"]) for s in trace["spans"])


def _span_ids(trace: dict) -> frozenset[str]:
    return frozenset(str(s.get("spanID")) for s in trace["spans"])


def _now_us() -> int:
    return int(time.time() * 1e6)


def fetch(query: JaegerQuery, *, page_size: int = PAGE_SIZE, now_us: int | None = None) -> tuple[list[dict], dict]:
    """Every trace of the query (at most query.limit, newest first), and a summary
    {pages, traces, spans, window_start_us, window_end_us}.

    A search answer is complete only when it holds fewer than `limit` traces: a
    full one may have left traces out, and in no particular order (Jaeger's memory
    store answers in arrival order, not by start time). So a window whose answer is
    full is split in two and each half asked again, newest half first, until every
    answer used is complete."""
    end_us = now_us if now_us is not None else _now_us()
    start_us = end_us - query.lookback_s * 1_000_000
    held: dict[str, dict] = {}
    pages = 0
    windows = [(start_us, end_us)]  # a stack: the newest window on top
    while windows and len(held) < query.limit:
        lo, hi = windows.pop()
        params: dict[str, object] = {"service": query.service, "start": lo, "end": hi, "limit": page_size}
        if query.operation:
            params["operation"] = query.operation
        url = f"{query.base_url}/api/traces?{urllib.parse.urlencode(params)}"
        doc = get_json(url)
        pages += 1
        if doc.get("errors"):
            msgs = "; ".join(str(e.get("msg", e)) if isinstance(e, dict) else str(e) for e in doc["errors"])
            raise JaegerQueryError(f"Jaeger returned a partial page for {url}: {msgs}")
        page = doc["data"]
        for t in page:
            if (
                not isinstance(t, dict)
                or not t.get("traceID")
                or not isinstance(t.get("spans"), list)
                or not t["spans"]
            ):
                raise JaegerQueryError(f"Jaeger returned a malformed trace on page {pages} ({url})")
            for span in t["spans"]:
                why = span_problem(span)
                if why is not None:
                    raise JaegerQueryError(f"Jaeger returned trace {t['traceID']} on page {pages} ({url}): {why}")
        if len(page) >= page_size:
            if hi <= lo:
                raise JaegerQueryError(
                    f"{len(page)} or more traces of {query.service} match within one microsecond ({lo}); "
                    "the query API cannot page past them"
                )
            mid = (lo + hi) // 2
            windows += [(lo, mid), (mid + 1, hi)]
            continue
        for t in page:
            tid = t["traceID"]
            if tid in held:
                # A trace whose spans fall in two windows comes back twice: it must be the same.
                if _span_ids(held[tid]) != _span_ids(t):
                    raise JaegerQueryError(
                        f"trace {tid} changed between pages ({len(held[tid]['spans'])} spans, then "
                        f"{len(t['spans'])}): it was still being written; query again once the services are idle "
                        "or with a lookback that ends earlier"
                    )
                continue
            held[tid] = t
    traces = sorted(held.values(), key=_trace_start_us, reverse=True)[: query.limit]
    summary = {
        "pages": pages,
        "traces": len(traces),
        "spans": sum(len(t["spans"]) for t in traces),
        "window_start_us": start_us,
        "window_end_us": end_us,
    }
    return traces, summary


def write_jaeger_file(traces: list[dict], path: Path) -> Path:
    """{"data": [...]} written atomically (temp file, then rename)."""
    return write_text_atomic(path, json.dumps({"data": traces}))


SETTLE_TIMEOUT_S = 30.0
SETTLE_POLL_S = 0.5


def fetch_settled(query: JaegerQuery, *, timeout_s: float = SETTLE_TIMEOUT_S) -> tuple[list[dict], dict]:
    """fetch, repeated until two answers agree span for span (the senders have stopped, and Jaeger's
    batching has stored what they sent): the traces of a finished run, whole. Raises JaegerQueryError
    when none arrived or they never settled within timeout_s."""
    deadline = time.monotonic() + timeout_s
    previous: dict[str, int] | None = None
    polls = 0
    last_error = ""
    while True:
        polls += 1
        try:
            traces, summary = fetch(query)
            spans = {t["traceID"]: len(t["spans"]) for t in traces}
            if spans and spans == previous:
                return traces, {**summary, "polls": polls}
            previous = spans
        except JaegerQueryError as e:  # a trace grew between two pages: still being written
            last_error = str(e)
        if time.monotonic() > deadline:
            why = last_error or ("no trace arrived" if not previous else "the traces kept changing")
            raise JaegerQueryError(f"traces of {query.service} at {query.base_url} did not settle: {why}")
        time.sleep(SETTLE_POLL_S)


def fetch_into(base_url: str, service: str, folder: Path) -> dict:
    """Every trace of SERVICE from the Jaeger at BASE_URL (allow-listed: loopback or the lab range, as
    a Jaeger container's address is), settled, into FOLDER/traces.jaeger.json; returns the summary
    (with `service`, `jaeger` and `file`)."""
    query = JaegerQuery(check_base_url(base_url), service, lookback_s=3600, limit=MAX_LIMIT)
    traces, summary = fetch_settled(query)
    path = write_jaeger_file(traces, Path(folder) / "traces.jaeger.json")
    services = sorted({str(p.get("serviceName")) for t in traces for p in (t.get("processes") or {}).values()})
    return {**summary, "service": service, "jaeger": query.base_url, "file": str(path), "services": services}
