"""`tailscope soak` / `make soak`: the socialnet graph held under load over time.

Each concurrency model in turn: start the graph (tracing at the socialnet
study's sampling), measure its closed-loop ceiling, then drive it open loop at
a fraction (default 80 %) of that ceiling for back-to-back intervals (default
60 s). After each interval every service process is read from /proc: resident
memory, threads, open descriptors. What a soak is for is what a short study
cannot see — leaks and drift — so the verdicts compare each interval with the
first one:

- errors: zero in every interval;
- growth: RSS and fds of every service at the last interval within 5 % of the
  first interval's (the first interval is the warm state: pools, caches and
  connection tables are filled by then);
- drift: the last interval's p99 within 10 % of the first interval's.

The wall-clock budget is the whole soak (`--minutes`, split evenly over the
models, at least one interval each). Every figure printed is read from the
load generator's documents and /proc in this run; the JSON written beside it
holds the same numbers.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import topology
from .engines import EngineError
from .studies import socialnet

GROWTH_LIMIT = 0.05
DRIFT_LIMIT = 0.10
CEILING_DURATION_S = 5.0


@dataclass
class ProcessSample:
    service: str
    rss_bytes: int | None
    threads: int | None
    fds: int | None


@dataclass
class Interval:
    index: int
    requested_per_s: float
    achieved_per_s: float
    p50_ns: float | None
    p99_ns: float | None
    errors: int
    processes: list[ProcessSample]


@dataclass
class ModelSoak:
    model: str
    ceiling_per_s: float
    rate_per_s: float
    intervals: list[Interval] = field(default_factory=list)
    verdicts: list[str] = field(default_factory=list)


def sample_process(service: str, pid: int) -> ProcessSample:
    """RSS, threads and open descriptors of one live process; None where /proc cannot tell."""
    rss = threads = fds = None
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except (OSError, ValueError):
        pass
    return ProcessSample(service, rss, threads, fds)


def settled_samples(pids: dict[str, int], timeout_s: float = 3.0, step_s: float = 0.1) -> list[ProcessSample]:
    """Samples every process once its descriptor count has stopped changing.

    An interval's load generator has just closed its connections when the sample is taken, and a
    server closes its side only when it reads the FIN; sampling at once counted those sockets in
    some intervals and not in others (the first 30-minute soak saw the front's fds alternate
    70/102, 32 being the load's connections). Waiting until two samples agree (or timeout_s) makes
    intervals comparable; a count that is still moving at the timeout is reported as read.
    """
    deadline = time.monotonic() + timeout_s
    previous = [sample_process(s, p) for s, p in sorted(pids.items())]
    while time.monotonic() < deadline:
        time.sleep(step_s)
        current = [sample_process(s, p) for s, p in sorted(pids.items())]
        if [c.fds for c in current] == [p.fds for p in previous]:
            return current
        previous = current
    return previous


def _growth(first: int | None, last: int | None) -> float | None:
    if first is None or last is None or first <= 0:
        return None
    return last / first - 1.0


def verdicts(soak: ModelSoak) -> list[str]:
    """One line per target, each computed from the intervals (nothing assumed)."""
    iv = soak.intervals
    if not iv:
        return ["no interval completed: nothing to judge"]
    out = []
    errors = sum(i.errors for i in iv)
    out.append(f"errors: {errors} in {len(iv)} interval(s) — {'met' if errors == 0 else 'NOT met'} (target 0)")
    if len(iv) < 2:
        out.append("growth and drift: unavailable — one interval only (raise --minutes)")
        return out
    first, last = iv[0], iv[-1]
    worst: tuple[float, str] | None = None
    unknown = []
    for a, b in zip(first.processes, last.processes):
        for what, x, y in (("RSS", a.rss_bytes, b.rss_bytes), ("fds", a.fds, b.fds)):
            g = _growth(x, y)
            if g is None:
                unknown.append(f"{a.service} {what}")
            elif worst is None or g > worst[0]:
                worst = (g, f"{a.service} {what}")
    if worst is not None:
        ok = worst[0] <= GROWTH_LIMIT
        out.append(
            f"growth: largest {worst[0] * 100:+.1f} % ({worst[1]}, interval {last.index} vs 1) — "
            f"{'met' if ok else 'NOT met'} (target ≤ {GROWTH_LIMIT * 100:.0f} %)"
        )
    if unknown:
        out.append(f"growth unavailable for {', '.join(unknown)}: /proc could not be read (process gone?)")
    if first.p99_ns and last.p99_ns:
        drift = last.p99_ns / first.p99_ns - 1.0
        ok = abs(drift) <= DRIFT_LIMIT
        out.append(
            f"p99 drift: {drift * 100:+.1f} % (interval {last.index} vs 1) — "
            f"{'met' if ok else 'NOT met'} (target within ±{DRIFT_LIMIT * 100:.0f} %)"
        )
    else:
        out.append("p99 drift: unavailable — an interval recorded no latency")
    return out


def _summary(doc: dict) -> tuple[float, float | None, float | None, int]:
    load = doc.get("load", {})
    achieved = float(load.get("achieved_per_s") or 0.0)
    p50 = p99 = None
    for m in doc.get("measurements", []):
        if m.get("name") == "latency_intended":
            pct = m["latency"].get("percentiles", {})
            p50 = float(pct["50"]) if pct.get("50") is not None else None
            p99 = float(pct["99"]) if pct.get("99") is not None else None
    errors = int(load.get("errors_total") or 0)
    return achieved, p50, p99, errors


def soak_model(
    model: str,
    topo_json: Path,
    workdir: Path,
    *,
    intervals: int,
    interval_s: float,
    fraction: float,
    on_interval: Callable[[ModelSoak, Interval], None],
) -> ModelSoak:
    out = workdir / f"graph-{model}.json"
    traces = workdir / "traces" / model
    with socialnet.graph(topo_json, model, out, socialnet.TRACE_SAMPLE, traces) as (port, ready):
        ceiling_doc = socialnet._load(
            port, 0, socialnet.CEILING_CONNECTIONS, CEILING_DURATION_S, 1.0, CEILING_DURATION_S + 60
        )
        ceiling = _summary(ceiling_doc)[0]
        if ceiling <= 0:
            raise EngineError(f"soak: {model} served nothing in its closed-loop ceiling run")
        rate = max(1.0, fraction * ceiling)
        soak = ModelSoak(model, ceiling, rate)
        pids = {str(k): int(v) for k, v in ready.get("pids", {}).items()}
        for i in range(1, intervals + 1):
            doc = socialnet._load(
                port, rate, socialnet.CONNECTIONS, interval_s, 1.0 if i == 1 else 0.0, interval_s + 60
            )
            achieved, p50, p99, errors = _summary(doc)
            iv = Interval(i, rate, achieved, p50, p99, errors, settled_samples(pids))
            soak.intervals.append(iv)
            on_interval(soak, iv)
    soak.verdicts = verdicts(soak)
    return soak


def run_soak(
    minutes: float,
    models: list[str],
    *,
    interval_s: float = 60.0,
    fraction: float = 0.8,
    on_interval: Callable[[ModelSoak, Interval], None] = lambda s, i: None,
    on_model: Callable[[ModelSoak], None] = lambda s: None,
) -> list[ModelSoak]:
    if not models:
        raise ValueError("soak: no models given")
    per_model_s = minutes * 60.0 / len(models)
    intervals = max(1, int(per_model_s // interval_s))
    results = []
    with tempfile.TemporaryDirectory(prefix="tailscope-soak-") as tmp:
        work = Path(tmp)
        topo_json = topology.to_engine_json(topology.SOCIALNET, work / "socialnet.json")
        for model in models:
            s = soak_model(
                model,
                topo_json,
                work,
                intervals=intervals,
                interval_s=interval_s,
                fraction=fraction,
                on_interval=on_interval,
            )
            on_model(s)
            results.append(s)
    return results


def to_json(results: list[ModelSoak]) -> str:
    return json.dumps([asdict(r) for r in results], indent=2)
