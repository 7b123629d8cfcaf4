"""The twin's contract (docs/twin.md): run the inferred topology under the model the traces came
from, at the rate they were recorded at, traced; analyze the twin's traces with the same analyzer;
compare end-to-end and per-service critical-path distributions with the original traces.

Per distribution: p50, p90, p99 of each side and their ratio twin ÷ original, and the two-sample
Kolmogorov–Smirnov distance D (scipy.stats.ks_2samp: the largest gap between the two empirical
CDFs, 0 = identical, 1 = disjoint) with its p-value. A figure one side has no sample for is
unavailable with the reason, never 0.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from scipy import stats

from tailscope.lab import topology as topology_mod
from tailscope.lab.engines import run_engine
from tailscope.lab.graph import graph
from tailscope.lab.load import http_load_args
from tailscope.measure.measurement import achieved_per_s
from tailscope.measure.verdict import MET, NOT_MET, IntervalVerdict, decided_together, judge_within
from tailscope.traces.spans import Span, Trace, TraceSet, read_traces, split_warmup
from tailscope.twin.infer import recorded_rate

LOAD = "tailscope-load"
# The twin's trace volume: enough for a p99 with ≥ 10 samples beyond it on every service, small
# enough to analyze in seconds.
MAX_TWIN_TRACES = 5000
LOW_CONFIDENCE_SAMPLES = 1000  # below this a p99 has < 10 samples beyond it
ACCEPT_RATIO_ERROR = 0.15  # the closed loop of trust: p50 and p99 within 15 %
MIN_RATE_PER_S = 0.1
MAX_RATE_PER_S = 1_000_000.0


@dataclass
class TwinRun:
    traces: TraceSet
    load: dict
    graph: dict
    rate_per_s: float
    trace_sample: float


def _folded(t: Trace, modelled: set[str]) -> dict[str, int]:
    """The trace's critical-path time per service, a service the twin does not model (a "mysql" or
    "redis" tracer's store spans, which the twin runs as stores of the handler) added to the nearest
    modelled service above its spans."""
    owner: dict[str, str] = {}
    stack: list[tuple[Span, str | None]] = [(t.root, None)]
    while stack:
        span, above = stack.pop()
        if span.service not in modelled and above is not None:
            owner.setdefault(span.service, above)
        here = span.service if span.service in modelled else above
        stack.extend((c, here) for c in span.children)
    out: dict[str, int] = {}
    for svc, ns in t.service_cp_ns.items():
        key = owner.get(svc, svc)
        out[key] = out.get(key, 0) + ns
    return out


def _services(ts: TraceSet) -> set[str]:
    """Every service with a span in the traces."""
    out: set[str] = set()
    for t in ts.traces:
        stack = [t.root]
        while stack:
            span = stack.pop()
            out.add(span.service)
            stack.extend(span.children)
    return out


def samples(ts: TraceSet, modelled: set[str] | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """End-to-end durations and per-service critical-path times (ns) of a trace set; with `modelled`
    (the twin's services), the time of every other service is its caller's (_folded)."""
    e2e = np.array([t.end_to_end_ns for t in ts.traces], dtype=float)
    per: dict[str, list[int]] = {}
    for t in ts.traces:
        cp = _folded(t, modelled) if modelled else t.service_cp_ns
        for svc, ns in cp.items():
            per.setdefault(svc, []).append(ns)
    return e2e, {k: np.array(v, dtype=float) for k, v in per.items()}


def _pcts(x: np.ndarray) -> dict:
    # Nearest rank, as the engine computes its percentiles.
    s = np.sort(x)
    return {
        "count": int(s.size),
        **{f"p{p}_ns": float(s[max(0, math.ceil(p / 100 * s.size) - 1)]) for p in (50, 90, 99)},
        "low_confidence_p99": bool(s.size < LOW_CONFIDENCE_SAMPLES),
    }


BOOTSTRAP_RESAMPLES = 400
BOOTSTRAP_SEED = 20261125  # fixed: the same traces give the same interval


def _resampled_percentiles(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """(resamples, 3) nearest-rank p50/p90/p99 of `x` resampled with replacement."""
    ranks = [max(0, math.ceil(p / 100 * x.size) - 1) for p in (50, 90, 99)]
    out = np.empty((BOOTSTRAP_RESAMPLES, 3))
    chunk = max(1, 2_000_000 // x.size)  # bounds memory at ~16 MB a chunk
    for lo in range(0, BOOTSTRAP_RESAMPLES, chunk):
        n = min(chunk, BOOTSTRAP_RESAMPLES - lo)
        draws = np.partition(rng.choice(x, size=(n, x.size), replace=True), ranks, axis=1)
        out[lo : lo + n] = draws[:, ranks]
    return out


def ratio_ci95(original: np.ndarray, twin: np.ndarray) -> dict[str, list[float] | None]:
    """95 % percentile-bootstrap intervals of twin ÷ original at p50, p90, p99: both samples are
    resampled, so the interval holds both sides' sampling error. A p99 from a few hundred traces
    rests on a handful of them; this is how far it could move on another sample of the same runs."""
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    o, t = _resampled_percentiles(original, rng), _resampled_percentiles(twin, rng)
    out: dict[str, list[float] | None] = {}
    for i, k in enumerate(("p50", "p90", "p99")):
        ok = o[:, i] > 0
        if ok.sum() < BOOTSTRAP_RESAMPLES // 2:
            out[k] = None
            continue
        r = t[ok, i] / o[ok, i]
        out[k] = [float(np.percentile(r, 2.5)), float(np.percentile(r, 97.5))]
    return out


def compare(name: str, original: np.ndarray | None, twin: np.ndarray | None) -> dict:
    row: dict = {"name": name}
    if original is None or original.size == 0 or twin is None or twin.size == 0:
        side = "the original traces" if original is None or original.size == 0 else "the twin's traces"
        row["unavailable"] = f"{name} is not on the critical path of any of {side}"
        row.update({"original": None, "twin": None, "ratios": None, "ks": None})
        return row
    o, t = _pcts(original), _pcts(twin)
    row["original"], row["twin"] = o, t
    row["ratios"] = {k: (t[f"{k}_ns"] / o[f"{k}_ns"]) if o[f"{k}_ns"] > 0 else None for k in ("p50", "p90", "p99")}
    row["ratio_ci95"] = ratio_ci95(original, twin)
    r = stats.ks_2samp(original, twin)
    row["ks"] = {"statistic": float(r.statistic), "pvalue": float(r.pvalue)}
    return row


def contract_verdict(row: dict) -> IntervalVerdict:
    """The ±15 % contract at p50 and p99 judged by the ratios' 95 % intervals (measure.verdict, the
    verdict every study gives): MET when both intervals lie inside [0.85, 1.15], NOT_MET when one lies
    wholly outside, else UNDECIDED at this length with how much longer both runs would decide it (the
    traces and the twin lengthened alike; `samples_to_decide` counts the larger side's requests).

    The intervals are the percentile bootstrap of twin ÷ original (ratio_ci95), not the quotient of the
    two sides' order-statistic intervals (measure.intervals): for a ratio the bootstrap resamples both
    sides at once, while the quotient of two intervals needs each at √95 % and takes their far corners
    — on lognormal samples (σ 0.5) at p99 it covered 100 % at twice the bootstrap's width, while the
    bootstrap covered 95–97 % at 300 to 2 000 samples a side (docs/twin.md). Its width narrows as
    1/√n like an order-statistic interval's, which is what "how long would decide it" assumes."""
    cis, ratios = row.get("ratio_ci95") or {}, row.get("ratios") or {}
    o, t = row.get("original") or {}, row.get("twin") or {}
    count = max(int(o.get("count") or 0), int(t.get("count") or 0))
    band = (1 - ACCEPT_RATIO_ERROR, 1 + ACCEPT_RATIO_ERROR)
    verdicts = []
    for k in ("p50", "p99"):
        ci, r = cis.get(k), ratios.get(k)
        if ci is None or r is None:
            why = row.get("unavailable") or f"no {k} interval (a side's {k} is 0 in most resamples)"
            return IntervalVerdict("", unavailable=why)
        verdicts.append(judge_within(r, ci[0], ci[1], band, count))
    if any(v.verdict == NOT_MET for v in verdicts):
        return IntervalVerdict(NOT_MET)
    if all(v.verdict == MET for v in verdicts):
        return IntervalVerdict(MET)
    return decided_together(verdicts)


def _max_error(row: dict) -> float | None:
    errors = [abs(row["ratios"][k] - 1) for k in ("p50", "p99") if row["ratios"] and row["ratios"][k] is not None]
    return max(errors) if len(errors) == 2 else None


def original_halves(original: TraceSet) -> dict:
    """The original against itself: its second half in time ÷ its first half, end to end.

    A twin cannot be closer to the traces than the traced system is to itself a few seconds
    later: on a shared machine a burst of interference (processes not scheduled for several
    milliseconds) lands in one half and decides its p99 from a few hundred samples. Halves in time,
    not odd/even traces: a burst delays consecutive requests, and odd/even would split it evenly."""
    ordered = sorted(original.traces, key=lambda t: t.start_ns)
    mid = len(ordered) // 2
    first = np.array([t.end_to_end_ns for t in ordered[:mid]], dtype=float)
    second = np.array([t.end_to_end_ns for t in ordered[mid:]], dtype=float)
    row = compare("original second half ÷ first half", first, second)
    row["max_ratio_error"] = _max_error(row) if row["ratios"] else None
    return row


def comparison(original: TraceSet, twin: TraceSet) -> dict:
    te, ts_ = samples(twin)
    # Services of the original the twin has no process for (store tracers' services) are compared as
    # part of the service that called them, as the twin runs them.
    oe, os_ = samples(original, _services(twin) or None)
    services = sorted(set(os_) | set(ts_))
    e2e = compare("end_to_end", oe, te)
    err = _max_error(e2e)
    halves = original_halves(original)
    noise = halves.get("max_ratio_error")
    return {
        "end_to_end": e2e,
        "services": [compare(s, os_.get(s), ts_.get(s)) for s in services],
        "max_ratio_error": err,
        "within_target": (err <= ACCEPT_RATIO_ERROR) if err is not None else None,
        # The contract judged by the intervals (measure.verdict.IntervalVerdict as a dict).
        "contract": asdict(contract_verdict(e2e)) if err is not None else None,
        "target_ratio_error": ACCEPT_RATIO_ERROR,
        "original_halves": halves,
        # The twin's error is no larger than the traced system's own run-to-run difference.
        "within_original_noise": (err <= noise) if err is not None and noise is not None else None,
    }


def _connections(rate_per_s: float, traces: list[Trace]) -> int:
    """Enough keep-alive connections for the open-loop rate (Little's law on the traced p99, × 4)."""
    p99_s = float(np.percentile([t.end_to_end_ns for t in traces], 99)) / 1e9 if traces else 0.01
    return int(min(256, max(8, math.ceil(rate_per_s * p99_s * 4))))


def run_twin(
    topology_doc: dict,
    model: str,
    rate_per_s: float,
    *,
    duration_s: float,
    warmup_s: float,
    connections: int,
    workdir: Path | None = None,
    extra_args: list[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> TwinRun:
    """Runs the (validated) topology under `model` at `rate_per_s`, traced; returns the twin's
    traces (the warm-up's left out), the load generator's and the graph's documents. Its files
    go to `workdir` (kept) or, without one, to a temporary folder removed after the run."""

    with ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tailscope-twin-")))
        workdir.mkdir(parents=True, exist_ok=True)
        topo_json = topology_mod.write_json(topology_doc, workdir / "twin-topology.json")
        requests = rate_per_s * (duration_s + warmup_s)
        sample = min(1.0, MAX_TWIN_TRACES / max(requests, 1.0))
        traces_dir = workdir / "traces"
        if progress:
            progress(f"twin under {model} at {rate_per_s:.4g}/s for {duration_s:g} s (tracing {sample:.3g})")
        front = topology_doc["front"]["path"]
        with graph(topo_json, model, workdir / "graph.json", sample, traces_dir, extra=extra_args) as (port, _):
            args = http_load_args(
                port,
                front,
                connections,
                rate_per_s,
                duration_s,
                warmup_s,
                timeout=f"{topology_doc.get('call_timeout_ms', 1000) * 2}ms",
            )
            load = run_engine(LOAD, args, timeout_s=duration_s + warmup_s + 120).document
        graph_doc = json.loads((workdir / "graph.json").read_text()) if (workdir / "graph.json").exists() else {}
        ts = read_traces([traces_dir / "traces.otlp.json"])
        ts.traces = split_warmup(ts.traces, warmup_s)[1]  # the warm-up's traces are not the twin's steady state
        return TwinRun(ts, load, graph_doc, rate_per_s, sample)


def load_summary(load: dict) -> dict:
    lat: dict = {}
    for m in load.get("measurements", []):
        if m.get("name") in ("latency", "request_latency") or "latency" in m:
            lat = (m.get("latency") or {}).get("percentiles") or {}
            break
    return {
        "achieved_per_s": achieved_per_s(load),
        "requested_per_s": (load.get("load") or {}).get("requested_per_s"),
        "errors": (load.get("load") or {}).get("errors_total", 0),
        "percentiles_ns": lat,
    }


def _check_services(topo: dict, topology_path: Path | str, original: TraceSet) -> None:
    traced = {s for t in original.traces for s in (*t.service_cp_ns, t.root.service)}
    modelled = set(topology_mod.services(topo))
    if not traced & modelled:
        raise ValueError(
            f"the topology {topology_path} models services {', '.join(sorted(modelled))}, none of which appears "
            f"in the traces (services {', '.join(sorted(traced)[:12])}): a twin is validated against the traces "
            "it was inferred from"
        )


def validate_at(
    topo: dict,
    original: TraceSet,
    model: str,
    rate_per_s: float,
    *,
    duration_s: float = 5.0,
    warmup_s: float = 1.0,
    workdir: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict:
    """The twin (a validated topology document) run under `model` at `rate_per_s` and compared with
    `original`, the traces recorded at that rate: `rate_per_s`, `twin` (its traces and the load
    generator's view) and the comparison (end_to_end, services, contract, original_halves, …)."""
    rate = min(max(rate_per_s, MIN_RATE_PER_S), MAX_RATE_PER_S)
    run = run_twin(
        topo,
        model,
        rate,
        duration_s=duration_s,
        warmup_s=warmup_s,
        connections=_connections(rate, original.traces),
        workdir=workdir,
        progress=progress,
    )
    return {
        "model": model,
        "rate_per_s": rate,
        "duration_s": duration_s,
        "twin": {
            "traces": len(run.traces.traces),
            "trace_sample": run.trace_sample,
            "load": load_summary(run.load),
            "queueing": queueing(run.graph),
        },
        "original": {"traces": len(original.traces)},
        **comparison(original, run.traces),
    }


def queueing(graph_doc: dict) -> list[dict]:
    """How much the twin queued at each of its limiters (the engine's per-limiter counters: capacity,
    acquisitions, waited, wait total/max, timeouts), with the mean wait per acquisition."""
    out = []
    for service, doc in sorted((graph_doc.get("services") or {}).items()):
        for lim in (doc or {}).get("capacities") or []:
            n = lim.get("acquisitions") or 0
            mean = lim["wait_total_ns"] / n if n and lim.get("wait_total_ns") is not None else None
            out.append({"service": service, **lim, "wait_mean_ns": mean})
    return out


def second_rate(
    topo: dict,
    topology_path: Path,
    second_files: list[Path] | None,
    first_rate_per_s: float,
    model: str,
    *,
    sampling: float,
    duration_s: float,
    warmup_s: float,
    workdir: Path | None,
    progress: Callable[[str], None] | None,
) -> tuple[dict | None, str | None]:
    """The twin at a second recording's rate, compared with that recording (the load dependence it was
    not fitted to), or (None, why)."""
    if not second_files:
        return None, "no second recording given (--second-traces): the load dependence is not checked"
    second = read_traces(second_files)
    if not second.traces:
        return None, f"no analyzable trace in the second recording ({', '.join(map(str, second_files))})"
    _check_services(topo, topology_path, second)
    recorded = recorded_rate(second.traces, sampling)
    if recorded.get("rate_per_s") is None:
        return None, f"the second recording's rate is unavailable: {recorded['unavailable']}"
    doc = validate_at(
        topo,
        second,
        model,
        recorded["rate_per_s"],
        duration_s=duration_s,
        warmup_s=warmup_s,
        workdir=workdir / "second-rate" if workdir is not None else None,
        progress=progress,
    )
    return {
        "traces": [str(f) for f in second_files],
        "recorded_rate": recorded,
        "rate_source": "the second recording's timestamps",
        "rate_ratio_to_first": doc["rate_per_s"] / first_rate_per_s,
        **doc,
    }, None


def validate(
    topology_path: Path,
    trace_files: list[Path],
    model: str,
    *,
    rate_per_s: float | None = None,
    sampling: float = 1.0,
    duration_s: float = 5.0,
    warmup_s: float = 1.0,
    workdir: Path | None = None,
    original: TraceSet | None = None,
    second_traces: list[Path] | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict:
    """The validation document (schema tailscope.twin.validation/1): the twin at the recorded rate (or
    `rate_per_s`) against the traces it was fitted to, and with `second_traces` at that second
    recording's own rate against it (`second_rate`; null with `second_rate_unavailable` without)."""
    topo = topology_mod.load(topology_path)
    original = original or read_traces(trace_files)
    if not original.traces:
        raise ValueError(f"no analyzable trace in {', '.join(map(str, trace_files))}")
    _check_services(topo, topology_path, original)
    recorded = recorded_rate(original.traces, sampling)
    rate = rate_per_s if rate_per_s is not None else recorded.get("rate_per_s")
    if rate is None:
        raise ValueError(f"the recording rate is unavailable ({recorded['unavailable']}): give --rate-per-s")
    first = validate_at(
        topo, original, model, rate, duration_s=duration_s, warmup_s=warmup_s, workdir=workdir, progress=progress
    )
    second, why = second_rate(
        topo,
        topology_path,
        second_traces,
        first["rate_per_s"],
        model,
        sampling=sampling,
        duration_s=duration_s,
        warmup_s=warmup_s,
        workdir=workdir,
        progress=progress,
    )
    return {
        "schema": "tailscope.twin.validation/1",
        "topology": str(topology_path),
        "traces": [str(f) for f in trace_files],
        "recorded_rate": recorded,
        "rate_source": "--rate-per-s" if rate_per_s is not None else "trace timestamps",
        **first,
        "second_rate": second,
        "second_rate_unavailable": why,
    }
