"""What the `tailscope topology from-traces`, `tailscope twin validate` and `tailscope advise`
commands do, apart from parsing their flags (python/tailscope/cli.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from tailscope.atomicfile import write_text_atomic
from tailscope.diagnose.diagnosis import Diagnosis, diagnose
from tailscope.lab import topology as topology_mod
from tailscope.lab.allow_list import check_base_url
from tailscope.measure.verdict import UNDECIDED, IntervalVerdict
from tailscope.traces import jaeger as jq
from tailscope.traces.spans import TraceSet, read_traces
from tailscope.twin.calibrate import DEFAULT_STEPS, calibrate
from tailscope.twin.infer import InferOptions, infer
from tailscope.units import fmt_count, fmt_ns, fmt_ratio


def fetch_jaeger(url: str, into: Path, *, service: str | None, limit: int, lookback: str) -> list[Path]:
    """Traces from a Jaeger query API, one Jaeger JSON file per service, through the same
    client as `tailscope analyze --jaeger` (jaeger_query: loopback/lab hosts only, paging
    by time windows, a trace that changed between pages refused). Raises ValueError
    naming the URL or the flag."""
    try:
        base = check_base_url(url, "--jaeger")
        lookback_s = jq.parse_lookback(lookback)
        services = [service] if service else [str(s) for s in jq.get_json(f"{base}/api/services")["data"]]
        if not services:
            raise ValueError(f"{base}: the Jaeger query API lists no service")
        files = []
        for i, svc in enumerate(services):
            traces, _ = jq.fetch(jq.JaegerQuery(base, svc, lookback_s=lookback_s, limit=limit))
            files.append(jq.write_jaeger_file(traces, into / f"jaeger-{i}.json"))
    except jq.JaegerQueryError as e:
        raise ValueError(str(e)) from e
    return files


def trace_inputs(
    files: tuple[Path, ...], jaeger_urls: tuple[str, ...], into: Path, *, service: str | None, limit: int, lookback: str
) -> list[Path]:
    """The trace FILES, then what each --jaeger URL holds (fetch_jaeger), fetched into its own
    folder under `into`."""
    inputs = list(files)
    for i, url in enumerate(jaeger_urls):
        sub = into / str(i)
        sub.mkdir()
        inputs += fetch_jaeger(url, sub, service=service, limit=limit, lookback=lookback)
    return inputs


@dataclass
class InferredTwin:
    """What `infer_twin` returns: the topology, its inference report, the diagnosis it was built
    from (None with --no-capacities) and the traces."""

    topology: dict
    report: dict
    diagnosis: Diagnosis | None
    traces: TraceSet


def infer_twin(
    files: list[Path],
    options: InferOptions,
    *,
    max_traces: int = 0,
    calibrate_model: str | None = None,
    progress: Callable[[str], None] | None = None,
    traces: TraceSet | None = None,
    calibration_steps: int = DEFAULT_STEPS,
) -> InferredTwin:
    """One call from trace files to the twin: read, diagnose (docs/diagnose.md), infer with the
    capacities carried (twin/capacities.py), calibrate under `calibrate_model` when given. Nothing is
    validated or written here (from_traces does both). `traces`: already read from `files`."""
    ts = traces if traces is not None else read_traces(files, max_traces=max_traces)
    diagnosis = diagnose(ts, sampling=options.sampling) if options.capacities and ts.traces else None
    if calibrate_model:
        topo, report = calibrate(
            ts, options, calibrate_model, progress=progress, diagnosis=diagnosis, steps=calibration_steps
        )
    else:
        topo, report = infer(ts, options, diagnosis=diagnosis)
    return InferredTwin(topo, report, diagnosis, ts)


def from_traces(
    files: list[Path],
    out: Path,
    options: InferOptions,
    *,
    max_traces: int = 0,
    calibrate_model: str | None = None,
    progress: Callable[[str], None] | None = None,
    traces: TraceSet | None = None,
    calibration_steps: int = DEFAULT_STEPS,
) -> tuple[dict, dict, TraceSet]:
    """Infers (infer_twin), validates with the engine (tailscope-svc --check-topology), then writes
    `out` (YAML) and `out`.inference.json, both atomically; nothing is written when any step fails.
    `traces`: read from `files` already (the twin study's warm window of them)."""
    twin = infer_twin(
        files,
        options,
        max_traces=max_traces,
        calibrate_model=calibrate_model,
        progress=progress,
        traces=traces,
        calibration_steps=calibration_steps,
    )
    topo, report, ts = twin.topology, twin.report, twin.traces
    topology_mod.validate(topo, str(out))  # the engine's validator: raises TopologyError verbatim
    split = (
        f"{options.cpu_fraction:g} of it CPU (--cpu-fraction), the rest waiting"
        if options.cpu_fraction is not None
        else "CPU or waiting per endpoint, by the rule in the report's cpu_split"
    )
    header = [
        f"# Inferred by `tailscope topology from-traces` from {report['traces']} traces "
        f"({', '.join(str(f) for f in files)}).",
        f"# What could not be inferred and how well each distribution fits: {out.name}.inference.json (docs/twin.md).",
        f"# Own time between calls: {split}.",
        f"# Capacities from the diagnosis: {len(report['capacities'])} carried, {len(report['not_carried'])} "
        "populations without one (not_carried)."
        if options.capacities
        else "# Capacities left out (--no-capacities): every stage replays its traced durations.",
        "# " + correlation_line(report.get("correlation")) + ".",
    ]
    rare = [f"{e['service']}:{e['operation']} ({e['traces']} traces)" for e in report["endpoints"] if e["rare"]]
    if rare:
        header.append(f"# Seen in fewer than {options.min_traces} traces (kept, flagged): " + "; ".join(rare))
    for c in report["cycles_dropped"]:
        header.append(f"# Recursive call dropped (a topology has no cycles): {c}")
    if "calibration" in report:
        header.append(
            f"# Calibrated under {report['calibration']['model']}: what tailscope's runtime adds to each stage "
            "was measured on one twin run and taken off (docs/twin.md)."
        )
    text = "\n".join(header) + "\n" + yaml.safe_dump(topo, sort_keys=False, width=120)
    report["topology"] = str(out)
    write_text_atomic(out.with_name(out.name + ".inference.json"), json.dumps(report, indent=1, allow_nan=False) + "\n")
    write_text_atomic(out, text)
    return topo, report, ts


def correlation_line(doc: dict | None) -> str:
    """The inference's within-request dependence in one line (docs/twin.md, "Correlated stage delays")."""
    if doc is None or doc.get("mean_correlation") is None:
        why = doc.get("unavailable") if doc else "not in this report"
        return f"correlated stage delays: unavailable ({why}); every stage draws independently"
    lam = [e["loading"] for e in doc["loadings"]]
    return (
        f"correlated stage delays: mean normal-score correlation {doc['mean_correlation']:.2f} over "
        f"{doc['pairs']} endpoint pairs; loadings {min(lam):.2f}–{max(lam):.2f} carried as each stage's `shared`"
    )


def inference_lines(report: dict) -> list[str]:
    """What `topology from-traces` prints: the graph, what was flagged, what was left out."""
    lines = [
        f"{report['traces']} traces, front {report['front']['service']}:{report['front']['operation']}, "
        f"{len(report['endpoints'])} endpoints"
    ]
    rate = report["recorded_rate"]
    if rate.get("rate_per_s") is not None:
        lines.append(
            f"recorded rate: {rate['rate_per_s']:.4g}/s ({rate['traces']} traces over {rate['span_s']:.3g} s, "
            f"sampling {rate['sampling']:g})"
        )
    else:
        lines.append(f"recorded rate: unavailable: {rate['unavailable']}")
    lines.append(correlation_line(report.get("correlation")))
    for e in report["endpoints"]:
        worst = max((f["ks_statistic"] or 0 for f in e["fits"]), default=None)
        fit = f", worst fit KS D {worst:.2f}" if worst is not None and e["fits"] else ""
        flag = " [rare]" if e["rare"] else ""
        lines.append(
            f"  {e['service']}:{e['operation']}{flag}: {e['instances']} calls in {e['traces']} traces, "
            f"structure of {e['structure_share']:.0%}{fit}: " + (" → ".join(e["structure"]) or "no calls")
        )
        for h in e["hit_ratios"]:
            lines.append(f"    {h['store']}: hit ratio {h['hit_ratio']:.3g} ({h['misses']} misses)")
        for v in e["variants_left_out"][:3]:
            lines.append(
                f"    other version left out ({v['count']} calls, {v['share']:.0%}): "
                + (" → ".join(v["stages"]) or "no calls")
            )
    for c in report.get("capacities", []):
        what = f"capacity {c['capacity']}" if "capacity" in c else f"max_in_flight {c['max_in_flight']}"
        conf = f", confidence {c['confidence']}" if c.get("confidence") else ""
        lines.append(f"{what} on {c['stage']} from {c['population']}{conf}: {c['evidence']}")
    limited_left = [n for n in report.get("not_carried", []) if n.get("verdict", "limit") == "limit"]
    # (low-confidence limits included: each says its confidence and evidence)
    for n in limited_left:
        lines.append(f"not carried: {n['population']}: {n['why']}")
    others = len(report.get("not_carried", [])) - len(limited_left)
    if others:
        lines.append(f"{others} populations without a limit (changed, not identifiable, no limit seen): not_carried")
    for c in report.get("cpu_split", []):
        lines.append(
            f"  own time of {c['service']}:{c['operation']}: {c['fraction']:.2g} CPU ({c['rule']}: {c['why']})"
        )
    for c in report["cycles_dropped"]:
        lines.append(f"recursive call dropped: {c}")
    for f in report["fanout_truncated"]:
        lines.append(f"fan-out truncated: {f}")
    for s, n in report["flattened_internal_spans"].items():
        lines.append(f"internal span {s} ({n}×): its children taken as its parent's")
    if report["other_entry_points"]:
        lines.append(
            "other entry points (kept as endpoints, not driven by the twin): "
            + ", ".join(f"{e['service']}:{e['operation']} ({e['traces']})" for e in report["other_entry_points"])
        )
    lines.append("not inferred: " + "; ".join(report["not_inferred"]))
    return lines


def validation_rows(doc: dict) -> list[list[str]]:
    """The validation table: one row per distribution (or `unavailable: reason`)."""
    rows = []
    for row in [doc["end_to_end"], *doc["services"]]:
        if row.get("unavailable"):
            rows.append([row["name"], "—", "—", "—", f"unavailable: {row['unavailable']}", "", "", ""])
            continue
        o, t, r = row["original"], row["twin"], row["ratios"]
        mark = " (low confidence)" if o["low_confidence_p99"] or t["low_confidence_p99"] else ""
        rows.append(
            [
                row["name"],
                f"{o['count']} / {t['count']}",
                f"{fmt_ns(o['p50_ns'])} / {fmt_ns(t['p50_ns'])}",
                f"{fmt_ns(o['p99_ns'])} / {fmt_ns(t['p99_ns'])}{mark}",
                fmt_ratio(r["p50"]) + ci_cell(row, "p50"),
                fmt_ratio(r["p90"]),
                fmt_ratio(r["p99"]) + ci_cell(row, "p99"),
                f"{row['ks']['statistic']:.3f}",
            ]
        )
    return rows


VALIDATION_COLUMNS = [
    "distribution",
    "samples (orig / twin)",
    "p50 (orig / twin)",
    "p99 (orig / twin)",
    "p50 ratio [95 % CI]",
    "p90 ratio",
    "p99 ratio [95 % CI]",
    "KS D",
]


def validation_verdict(doc: dict) -> str:
    err = doc.get("max_ratio_error")
    if err is None:
        return "end-to-end p50/p99 ratio: unavailable: " + str(doc["end_to_end"].get("unavailable"))
    within = "within" if doc["within_target"] else "outside"
    e2e = doc["end_to_end"]
    return (
        f"twin under {doc['model']} at {doc['rate_per_s']:.4g}/s ({doc['rate_source']}): end-to-end p50 "
        f"{fmt_ratio(e2e['ratios']['p50'])}{ci_text(e2e, 'p50')}, p99 {fmt_ratio(e2e['ratios']['p99'])}"
        f"{ci_text(e2e, 'p99')} of the traces — largest error {err:.1%}, {within} the "
        f"{doc['target_ratio_error']:.0%} target" + confidence_clause(doc) + noise_clause(doc)
    )


def queueing_lines(doc: dict) -> list[str]:
    """One line per limiter of the twin run: how much it queued (validate.queueing)."""
    out = []
    for q in (doc.get("twin") or {}).get("queueing") or []:
        mean = fmt_ns(q["wait_mean_ns"]) if q.get("wait_mean_ns") is not None else "unavailable (no acquisition)"
        out.append(
            f"  twin's {q.get('kind', 'limiter')} {q['service']}:{q.get('name')} capacity {q.get('capacity')}: "
            f"{fmt_count(q.get('acquisitions') or 0)} acquisitions, {fmt_count(q.get('waited') or 0)} waited, mean wait {mean}"
            + (f", {q['timeouts']} timed out" if q.get("timeouts") else "")
        )
    return out


def ci_cell(row: dict, key: str) -> str:
    ci = (row.get("ratio_ci95") or {}).get(key)
    return "" if ci is None else f" [{ci[0]:.2f}–{ci[1]:.2f}]"


def ci_text(row: dict, key: str) -> str:
    ci = (row.get("ratio_ci95") or {}).get(key)
    return "" if ci is None else f" (95 % CI {ci[0]:.2f}–{ci[1]:.2f}×)"


def confidence_clause(doc: dict) -> str:
    """The contract by the ratios' 95 % intervals (twin/validate.py contract_verdict): met, not met, or
    undecided at this length with how long would decide it; nothing for a document without it."""
    c = doc.get("contract")
    if not c:
        return ""
    v = IntervalVerdict(**c)
    if v.verdict == "":
        return f" (the intervals cannot judge it: {v.unavailable})"
    if v.verdict != UNDECIDED:
        return f" ({v.verdict} by the 95 % intervals)"
    if v.length_factor is None:
        return f" ({UNDECIDED}: {v.why_no_length})"
    return (
        f" ({UNDECIDED}: an interval straddles the ±{doc['target_ratio_error']:.0%} band; traces and twin "
        f"{v.length_factor:.1f}× as long ({fmt_count(v.samples_to_decide)} requests on the larger side) would decide it)"
    )


def noise_clause(doc: dict) -> str:
    """How far the original was from itself (its halves in time), beside the twin's error."""
    h = doc.get("original_halves")
    if not h:
        return ""
    if not h.get("ratios"):
        return f"; the original against itself: unavailable: {h.get('unavailable')}"
    return (
        f"; the original's second half ÷ first half: p50 {fmt_ratio(h['ratios']['p50'])}, p99 "
        f"{fmt_ratio(h['ratios']['p99'])} (largest {h['max_ratio_error']:.1%}: the twin is "
        f"{'within' if doc.get('within_original_noise') else 'beyond'} the traced run's own variation)"
    )
