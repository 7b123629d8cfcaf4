"""One measured phase of HotROD: Jaeger and HotROD started on loopback (lab/jaeger.py, lab/hotrod.py),
`/dispatch` driven open loop by tailscope-load with a W3C traceparent per request and a request log,
then every trace of the measured window fetched back from Jaeger's query API.

Used by the `diagnose` study (run.py) and by the recording of the committed HotROD fixture
(tests/fixtures/hotrod/README.md). Each phase gets a Jaeger of its own, so its store holds exactly
that phase's traces (warm-up requests included: they are traced, not logged).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from tailscope.diagnose.client import RequestRow, read_request_log
from tailscope.lab.engines import run_engine
from tailscope.lab.hotrod import CUSTOMERS, HotrodFlags, hotrod
from tailscope.lab.jaeger import jaeger
from tailscope.lab.load import load_pacing_args
from tailscope.traces import jaeger as jq

LOAD = "tailscope-load"
# The service whose traces are fetched: every HotROD trace starts in its frontend.
FRONT_SERVICE = "frontend"
# /dispatch takes ~0.7 s unloaded and several seconds when its db lock queues: enough keep-alive
# connections that an open-loop request never waits for a free one at the study's rates.
CONNECTIONS = 32
REQUEST_TIMEOUT = "30s"
# How long the phase waits for its traces to reach Jaeger after the load ended: HotROD's exporters
# batch for 1 s, Jaeger's for 100 ms; the traces are complete when two fetches a second apart agree.
TRACE_SETTLE_TIMEOUT_S = 30.0
TRACE_POLL_S = 1.0


class PhaseError(RuntimeError):
    """The phase could not produce a complete measurement (nothing of it is kept)."""


@dataclass(frozen=True)
class Phase:
    flags: HotrodFlags
    rate_per_s: float
    duration_s: float
    warmup_s: float
    load: dict  # tailscope-load's document
    request_log: Path
    rows: tuple[RequestRow, ...]
    traces_file: Path  # Jaeger JSON ({"data": [...]}) of every trace Jaeger held
    fetch: dict  # jq.fetch's summary, plus the settle figures
    missing_trace_ids: int  # logged requests whose trace never arrived


def mix_args() -> list[str]:
    """Every HotROD customer, equally often (each is one row of its simulated database)."""
    return [a for c in CUSTOMERS for a in ("--mix", f"/dispatch?customer={c}=1")]


def load_args(
    port: int, rate: float, duration_s: float, warmup_s: float, request_log: Path, cpus: list[int], pacing: str
) -> list[str]:
    args = ["-t", "1", "-c", str(CONNECTIONS), "-d", f"{duration_s:.3f}", "--warmup", f"{warmup_s:.3f}"]
    args += ["-R", f"{rate:g}", "--protocol", "http", "--port", str(port), *mix_args()]
    args += ["--timeout", REQUEST_TIMEOUT, "--allow-errors", "--traceparent", "--request-log", str(request_log)]
    if cpus:
        args += ["--cpus", ",".join(map(str, cpus)), *load_pacing_args(pacing)]
    return args


def _fetch_all(query_url: str) -> tuple[list[dict], dict]:
    return jq.fetch(jq.JaegerQuery(query_url, FRONT_SERVICE, lookback_s=3600, limit=jq.MAX_LIMIT))


def settled_traces(query_url: str, wanted: set[int]) -> tuple[list[dict], dict, int]:
    """Jaeger's traces once every wanted trace id is there and two fetches agree on every span
    (or the settle timeout passed: then the traces as they are, and how many wanted ids are missing)."""
    deadline = time.monotonic() + TRACE_SETTLE_TIMEOUT_S
    previous: dict[int, int] | None = None
    polls = 0
    while True:
        polls += 1
        try:
            traces, summary = _fetch_all(query_url)
        except jq.JaegerQueryError:  # a trace grew between two pages: still being written
            traces, summary = [], {}
        spans = {int(t["traceID"], 16): len(t["spans"]) for t in traces}
        missing = len(wanted - set(spans))
        if (missing == 0 and spans == previous) or time.monotonic() > deadline:
            if not traces:
                raise PhaseError(f"Jaeger at {query_url} held no complete set of traces after {polls} fetches")
            return traces, {**summary, "polls": polls}, missing
        previous = spans
        time.sleep(TRACE_POLL_S)


def measure_phase(
    art: Path,
    flags: HotrodFlags,
    rate: float,
    duration_s: float,
    warmup_s: float,
    *,
    load_cpus: list[int],
    server_cpus: list[int],
    pacing: str,
) -> Phase:
    """Jaeger + HotROD (`flags`) on `server_cpus`, tailscope-load on `load_cpus`, the traces fetched
    into art/traces.jaeger.json. Raises ToolUnavailable, ToolStartError, EngineError, PhaseError."""
    art.mkdir(parents=True, exist_ok=True)
    request_log = art / "requests.csv"
    cpus = set(server_cpus) or None
    with jaeger(art, cpus=cpus) as j, hotrod(art, j.otlp_url, flags, cpus=cpus) as h:
        args = load_args(h.frontend, rate, duration_s, warmup_s, request_log, load_cpus, pacing)
        load = run_engine(LOAD, args, timeout_s=duration_s + warmup_s + 120).document
        rows = tuple(read_request_log(request_log))
        traces, summary, missing = settled_traces(j.query_url, {r.trace_id for r in rows})
    traces_file = jq.write_jaeger_file(traces, art / "traces.jaeger.json")
    return Phase(flags, rate, duration_s, warmup_s, load, request_log, rows, traces_file, summary, missing)
