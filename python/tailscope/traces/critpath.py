"""Critical-path analysis of traces, for notebooks and the `analyze` study.

    from tailscope.traces.critpath import critical_paths
    a = critical_paths("traces.json")          # Jaeger JSON, NDJSON, OTLP JSON, .gz
    a.services.groupby("service").exclusive_ns.describe()
    a.bottlenecks                              # ranked by mean and by variability

The work is done by the native engine `tailscope-critpath` (streaming, ~1 M
spans/s); this module runs it and turns its document (docs/critical-path.md)
and its per-trace NDJSON into pandas DataFrames.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from tailscope.lab.engines import run_engine
from tailscope.units import fmt_count, fmt_ns

ENGINE = "tailscope-critpath"
ALGORITHMS = ("capstone", "jaeger", "crisp")
# --per-trace: the index only (trace_index.ndjson), or also every trace's result (critical_paths.ndjson).
PER_TRACE = ("index", "full")


@dataclass
class CriticalPathAnalysis:
    document: dict  # the engine's whole result (schema tailscope.critpath/1)
    traces: pd.DataFrame  # one row per trace: trace_id, analyzed, span_count, end_to_end_ns, path, delay_on_path_ns
    sections: pd.DataFrame  # trace_id, span_id, service, operation, start_ns, end_ns (tile each root span)
    operations: pd.DataFrame  # trace_id, service, operation, exclusive_ns (critical-path time per trace)
    services: pd.DataFrame  # trace_id, service, exclusive_ns
    rpc_delays: pd.DataFrame  # trace_id, client_service, server_service, server_operation, scheduling_ns, join_ns
    paths: pd.DataFrame  # distinct critical paths: rank, count, fraction, path, p50_ns, p99_ns, mean_ns
    bottlenecks: pd.DataFrame  # criterion (by_mean / by_variability), rank, service, operation, ...
    what_if: pd.DataFrame  # scenario, projected mean/p50/p99 and ratios to measured
    trace_what_if: pd.DataFrame  # trace_id, scenario, end_to_end_ns (projected, per trace)

    @property
    def warnings(self) -> dict[str, int]:
        return {k: v for k, v in self.document.get("warnings", {}).items() if v}


def run_critpath(
    paths: Sequence[str | Path],
    *,
    algorithm: str = "capstone",
    what_if: Sequence[str] = (),
    what_if_no_delays: bool = False,
    max_traces: int = 0,
    top: int = 10,
    stagger_window_us: float | None = None,
    timeline_traces: Sequence[str] = (),
    jobs: int | None = None,
    artifacts_dir: Path,
    per_trace: str = "index",
    timeout_s: float = 3600,
    on_progress=None,
) -> dict:
    """The engine's document; under `artifacts_dir` its trace_index.ndjson and,
    with per_trace="full", critical_paths.ndjson (every trace's whole result,
    about the input's size: only for a caller that reads it)."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm '{algorithm}' (one of {', '.join(ALGORITHMS)})")
    if per_trace not in PER_TRACE:
        raise ValueError(f"unknown per-trace output '{per_trace}' (one of {', '.join(PER_TRACE)})")
    args = ["--algorithm", algorithm, "--artifacts", str(artifacts_dir), "--per-trace", per_trace, "--top", str(top)]
    if max_traces:
        args += ["--max-traces", str(max_traces)]
    for service in what_if:
        args += ["--what-if", service]
    if what_if_no_delays:
        args.append("--what-if-no-delays")
    if stagger_window_us is not None:
        args += ["--stagger-window-us", repr(float(stagger_window_us))]
    for trace_id in timeline_traces:
        args += ["--timeline-trace", trace_id]
    if jobs is not None:  # else the engine's default: every CPU this process may run on
        args += ["--jobs", str(jobs)]
    args += [str(p) for p in paths]
    return run_engine(ENGINE, args, timeout_s=timeout_s, on_progress=on_progress).document


def load_ndjson(path: Path) -> dict[str, pd.DataFrame]:
    """Per-trace results (one JSON object per line) as flat tables."""
    traces, sections, ops, services, rpcs, what_if = [], [], [], [], [], []
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            t = json.loads(line)
            tid = t["trace_id"]
            analyzed = bool(t.get("analyzed"))
            traces.append(
                {
                    "trace_id": tid,
                    "analyzed": analyzed,
                    "span_count": t.get("span_count", 0),
                    "end_to_end_ns": t.get("end_to_end_ns"),
                    "path": " → ".join(t.get("path", [])) if analyzed else None,
                    "delay_on_path_ns": t.get("delays", {}).get("on_path_ns") if analyzed else None,
                }
            )
            if not analyzed:
                continue
            sections += [{"trace_id": tid, **s} for s in t.get("sections", [])]
            ops += [{"trace_id": tid, **o} for o in t.get("operations", [])]
            services += [{"trace_id": tid, **s} for s in t.get("services", [])]
            for r in t.get("delays", {}).get("rpc", []):
                rpcs.append(
                    {
                        "trace_id": tid,
                        "client_service": r.get("service"),
                        "client_operation": r.get("operation"),
                        "server_service": r.get("server_service"),
                        "server_operation": r.get("server_operation"),
                        "scheduling_ns": r.get("scheduling_ns"),
                        "join_ns": r.get("join_ns"),
                        "rule": r.get("rule"),
                    }
                )
            what_if += [
                {"trace_id": tid, "scenario": w["scenario"], "end_to_end_ns": w["end_to_end_ns"]}
                for w in t.get("what_if", [])
            ]

    def frame(rows, cols):
        return pd.DataFrame(rows, columns=cols) if not rows else pd.DataFrame(rows)

    return {
        "traces": frame(traces, ["trace_id", "analyzed", "span_count", "end_to_end_ns", "path", "delay_on_path_ns"]),
        "sections": frame(sections, ["trace_id", "span_id", "service", "operation", "start_ns", "end_ns"]),
        "operations": frame(ops, ["trace_id", "service", "operation", "exclusive_ns"]),
        "services": frame(services, ["trace_id", "service", "exclusive_ns"]),
        "rpc_delays": frame(
            rpcs,
            [
                "trace_id",
                "client_service",
                "client_operation",
                "server_service",
                "server_operation",
                "scheduling_ns",
                "join_ns",
                "rule",
            ],
        ),
        "trace_what_if": frame(what_if, ["trace_id", "scenario", "end_to_end_ns"]),
    }


def summary_tables(doc: dict) -> dict[str, pd.DataFrame]:
    paths = [
        {
            "rank": p["rank"],
            "count": p["count"],
            "fraction": p["fraction"],
            "path": " → ".join(p["path"]),
            "mean_ns": p["end_to_end_ns"].get("mean"),
            "p50_ns": p["end_to_end_ns"].get("p50"),
            "p99_ns": p["end_to_end_ns"].get("p99"),
            "example_trace_id": p.get("example_trace_id"),
        }
        for p in doc.get("critical_paths", {}).get("top", [])
    ]
    bottlenecks = []
    for criterion in ("by_mean", "by_variability", "services_by_mean", "services_by_variability"):
        for b in doc.get("bottlenecks", {}).get(criterion, []):
            bottlenecks.append({"criterion": criterion, **{k: v for k, v in b.items() if not isinstance(v, dict)}})
    what_if = []
    for w in doc.get("what_if", []):
        e2e = w.get("end_to_end_ns", {})
        what_if.append(
            {
                "scenario": w["scenario"],
                "mean_ns": e2e.get("mean"),
                "p50_ns": e2e.get("p50"),
                "p99_ns": e2e.get("p99"),
                "mean_ratio": w.get("mean_ratio"),
                "p50_ratio": w.get("p50_ratio"),
                "p99_ratio": w.get("p99_ratio"),
            }
        )
    return {"paths": pd.DataFrame(paths), "bottlenecks": pd.DataFrame(bottlenecks), "what_if": pd.DataFrame(what_if)}


def critical_paths(
    *paths: str | Path,
    algorithm: str = "capstone",
    what_if: Sequence[str] = (),
    what_if_no_delays: bool = False,
    max_traces: int = 0,
    top: int = 10,
) -> CriticalPathAnalysis:
    """Analyzes trace files and returns the per-trace and aggregate results as DataFrames."""
    if not paths:
        raise ValueError("critical_paths() needs at least one trace file")
    with tempfile.TemporaryDirectory(prefix="tailscope-critpath-") as tmp:
        doc = run_critpath(
            list(paths),
            algorithm=algorithm,
            what_if=list(what_if),
            what_if_no_delays=what_if_no_delays,
            max_traces=max_traces,
            top=top,
            artifacts_dir=Path(tmp),
            per_trace="full",  # load_ndjson reads every trace's result
        )
        ndjson = Path(tmp) / "critical_paths.ndjson"
        per_trace = load_ndjson(ndjson) if ndjson.exists() else load_ndjson_from_doc(doc)
    return CriticalPathAnalysis(document=doc, **per_trace, **summary_tables(doc))


def load_ndjson_from_doc(doc: dict) -> dict[str, pd.DataFrame]:
    """Fallback when no artifacts were written: the traces embedded in the document."""
    with tempfile.NamedTemporaryFile("w", suffix=".ndjson", delete=False) as f:
        for t in doc.get("traces", []):
            f.write(json.dumps(t) + "\n")
    try:
        return load_ndjson(Path(f.name))
    finally:
        Path(f.name).unlink()


# The delay figures of a critpath document, in the order `tailscope analyze`
# prints them: (key under "delays", label).
DELAY_FIGURES = (
    ("rpc_scheduling_ns", "RPC scheduling delay"),
    ("rpc_join_ns", "RPC join delay"),
    ("launch_stagger_ns", "launch stagger"),
    ("probe_scheduling_ns", "async-probe scheduling delay"),
    ("probe_join_ns", "async-probe join delay"),
    ("on_path_ns", "delay on the critical path"),
)


def delay_figure_text(d: dict | None) -> str:
    """One distribution of the document as text: its figures, or
    "unavailable: <reason>" when it is empty (never a count of 0)."""
    if not d or d.get("count") is None:
        reason = (d or {}).get("unavailable") or "not in the document (an engine older than this driver?)"
        return f"unavailable: {reason}"
    return (
        f"n={fmt_count(d['count'])}  p50 {fmt_ns(d.get('p50'))}  p90 {fmt_ns(d.get('p90'))}  "
        f"p99 {fmt_ns(d.get('p99'))}  max {fmt_ns(d.get('max'))}"
    )


def pairing_text(doc: dict) -> str:
    """How the RPC pairs were found, from the document's counts."""
    p = doc.get("delays", {}).get("pairing")
    if not p:
        return "RPC pairs: unavailable: the document has no pairing counts"
    rules = p.get("by_rule", {})
    parts = [f"{n} by {rule.replace('_', ' ')}" for rule, n in rules.items() if n]
    text = f"RPC pairs: {p.get('pairs', 0)}" + (f" ({', '.join(parts)})" if parts else "")
    if p.get("name_confirmed_cross_process"):
        text += f"; {p['name_confirmed_cross_process']} cross-process pairs confirmed by _client/_server names"
    if p.get("retried_server_children"):
        text += f"; {p['retried_server_children']} retried server spans not paired"
    return text


def delay_summary_lines(doc: dict) -> list[str]:
    """What `tailscope analyze` prints about delays: the pairing, then each
    delay figure or the reason it is unavailable."""
    d = doc.get("delays", {})
    lines = [pairing_text(doc)]
    for key, label in DELAY_FIGURES:
        lines.append(f"{label}: {delay_figure_text(d.get(key))}")
    share = d.get("on_path_share_of_end_to_end")
    if share is None:
        reason = d.get("on_path_share_unavailable") or "no RPC pair found"
        lines.append(f"delay share of end-to-end time: unavailable: {reason}")
    else:
        lines.append(f"delay share of end-to-end time (traces with RPC pairs): {share * 100:.1f} %")
    return lines
