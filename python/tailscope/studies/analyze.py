"""Study `analyze`: critical paths of traces (from any Jaeger/OTLP source).

Run by `tailscope analyze FILE...`. The engine document (tailscope.critpath/1)
is stored whole. Its `measurements` — per-service critical-path time, end-to-end
latency, RPC scheduling/join delays, delay on the path and what-if projections,
computed by the engine with exact percentiles (docs/critical-path.md) — land in
the measurements and cdf_points tables like any engine's, and its `unavailable`
entries say which of them the traces could not give, and why.
"""

from __future__ import annotations

import json
from pathlib import Path

from tailscope.report import plots
from tailscope.report.blocks import (
    DOES_NOT_HOLD,
    HOLDS,
    NOT_COMPARABLE,
    UNAVAILABLE,
    Figure,
    ReferenceCheck,
    Section,
    Table,
)
from tailscope.store import EngineDocument, Store
from tailscope.studies.base import RunContext
from tailscope.studies.socialnet.analysis import (
    CAPSTONE_TAIL_NS,
    CAPSTONE_TRACE_DELAY_NS,
    FIGURE6_MIN_SHARE,
    TRACE_LOAD_FILE,
    trace_load_of,
    trace_load_reason,
)
from tailscope.studies.sources import CAPSTONE_FIGURE6
from tailscope.traces import timeline
from tailscope.traces.critpath import DELAY_FIGURES, delay_figure_text, pairing_text, run_critpath, summary_tables
from tailscope.traces.jaeger import JaegerQuery, JaegerQueryError, fetch, write_jaeger_file
from tailscope.units import fmt_count, fmt_ns, fmt_ratio

ENGINE = "tailscope-critpath"
TRACE_INDEX = "trace_index.ndjson"  # under the engine's --artifacts: one line per trace
MAX_SERVICE_CURVES = 8


class AnalyzeStudy:
    name = "analyze"
    title = "Critical paths of traces"

    def run(self, ctx: RunContext) -> list[EngineDocument]:
        """Analyzes the files given (`tailscope analyze`), or else the traces the
        socialnet study saved earlier in this run, one analysis per model."""
        algorithm = ctx.options.get("algorithm", "capstone")
        files = ctx.options.get("trace_files") or []
        if files:
            return self._analyze(ctx, [str(f) for f in files], algorithm, point="", art=ctx.artifacts_dir / "analyze")
        found = sorted((ctx.artifacts_dir / "socialnet" / "traces").glob("*/traces.jaeger.json"))
        docs: list[EngineDocument] = []
        for i, f in enumerate(found):
            model = f.parent.name
            ctx.progress(f"analyze: {model}", i / len(found))
            docs += self._analyze(ctx, [str(f)], algorithm, point=model, art=ctx.artifacts_dir / "analyze" / model)
            load = f.parent / TRACE_LOAD_FILE  # the load the socialnet study recorded these traces under
            if load.exists():
                docs[-1].document["trace_load"] = json.loads(load.read_text())
        return docs

    def _analyze(
        self, ctx: RunContext, files: list[str], algorithm: str, point: str, art: Path
    ) -> list[EngineDocument]:
        art.mkdir(parents=True, exist_ok=True)

        def on_progress(p: dict) -> None:
            if p.get("phase") == "input_done":
                ctx.progress(f"analyze: {Path(p.get('input', '')).name}", 0.5)

        # Traces from this run's own socialnet study: also project "no scheduling/join delay".
        no_delays = ctx.options.get("what_if_no_delays", not ctx.options.get("trace_files"))
        common = {
            "algorithm": algorithm,
            "what_if": ctx.options.get("what_if", []),
            "what_if_no_delays": bool(no_delays),
            "max_traces": int(ctx.options.get("max_traces", 0)),
            "stagger_window_us": ctx.options.get("stagger_window_us"),
            "jobs": ctx.options.get("jobs"),
        }
        # The index by default: what choosing the timelines' traces reads. --per-trace full keeps
        # every trace's whole result too (~225 bytes a span: the input's size again, to write and keep).
        doc = run_critpath(
            files, **common, artifacts_dir=art, per_trace=ctx.options.get("per_trace", "index"), on_progress=on_progress
        )
        # The worker threads the engine used (--jobs, after its cap to the allowed CPUs): the
        # result does not depend on them, the time does.
        doc["jobs"] = doc.get("config", {}).get("jobs")
        doc["timelines"] = self._timelines(ctx, files, common, art, doc)
        if not any("analysis" in e for e in doc["timelines"]):
            # Said in the report and by `tailscope analyze`, never a silently missing figure.
            doc["timelines_unavailable"] = _no_timeline_reason(art, doc)
        return [EngineDocument(self.name, ENGINE, doc, point)]

    def _timelines(self, ctx: RunContext, files: list[str], common: dict, art: Path, doc: dict) -> list[dict]:
        """Every span of the traces to draw (the median and p99 trace, or
        --trace IDs): a second, filtered pass of the engine, since keeping
        every span of a run would be as large as the input. Stored in the
        document; with --timeline also written as SVG files."""
        picks = timeline.choose_traces(art / TRACE_INDEX, list(ctx.options.get("timeline_traces") or []))
        if not picks:
            return []
        tdir = art / "timeline-pass"
        run_critpath(files, **common, timeline_traces=[p[0] for p in picks], artifacts_dir=tdir, per_trace="index")
        labels = dict(picks)
        entries: list[dict] = []
        tfile = tdir / "timelines.ndjson"
        if tfile.exists():
            with open(tfile) as f:
                for line in f:
                    if line.strip():
                        obj = json.loads(line)
                        obj["label"] = labels.get(obj["analysis"]["trace_id"], "")
                        entries.append(obj)
        missing = [tid for tid, _ in picks if tid not in {e["analysis"]["trace_id"] for e in entries}]
        for tid in missing:
            entries.append({"missing_trace_id": tid, "reason": "no trace with this id in the input"})
        # The engine writes traces in input order; the report reads median, then p99, then --trace ids.
        entries.sort(key=lambda e: timeline.label_rank(e.get("label", "--trace")))
        if ctx.options.get("timeline"):
            drawn = []
            for e in entries:
                if "analysis" in e and e["analysis"].get("analyzed"):
                    t = timeline.parse_timeline(e)
                    t.label = e["label"]
                    drawn.append(t)
            for e, path in zip(
                [e for e in entries if "analysis" in e and e["analysis"].get("analyzed")],
                timeline.write_svgs(drawn, art / "timelines"),
                strict=True,
            ):
                e["svg_path"] = str(path.relative_to(ctx.artifacts_dir))  # the run folder moves at the end
        return entries

    def section(self, store: Store, run_id: str) -> Section:
        by_point: dict[str, dict] = {}
        for d in store.documents(run_id, self.name):
            if d.engine == ENGINE:
                by_point[d.point] = d.document
        sec = Section(
            "analyze",
            self.title,
            "Per request, the critical path is the chain of work the response waited for. "
            "Bottlenecks are services with a long critical-path time (by mean) or an unstable one "
            "(by variability), the capstone study's two criteria.",
        )
        for study, name, variant, reason in store.unavailable(run_id):
            if study == self.name:
                sec.notes.append(f"{name} ({variant}) unavailable: {reason}")
        if not by_point:
            sec.notes.append(
                "no traces were analyzed in this run (the socialnet study saved none, or it did "
                "not run); `tailscope analyze FILE` analyzes any Jaeger or OTLP export"
            )
            return sec
        df_all = store.measurements(run_id, self.name)
        cdf_all = store.cdf(run_id, self.name)
        if len(by_point) > 1 or "" not in by_point:
            load = trace_load_of(next(iter(by_point.values())).get("trace_load"))
            how = (
                f"each held at {load.fraction * 100:.0f} % of its closed-loop ceiling, {load.trace_sample * 100:.0f} % sampling"
                if load
                else "over its open-loop sweep"
            )
            sec.intro += (
                f" Here: the traces the socialnet study recorded under each concurrency model ({how}), compared "
                "first, then the DeathStarBench model in detail."
            )
            sec.blocks.append(_model_comparison_table(by_point, df_all))
        point = "std-async" if "std-async" in by_point else next(iter(by_point))
        doc = by_point[point]
        df = df_all[df_all["point"] == point]
        cdf = cdf_all[cdf_all["point"] == point]
        where = f" ({point})" if point else ""
        s = doc["summary"]
        warn = {k: v for k, v in doc.get("warnings", {}).items() if v}
        inputs = ", ".join(Path(i["path"]).name for i in doc.get("inputs", []))
        sec.blocks.append(
            Table(
                f"Input{where}",
                ["inputs", "algorithm", "traces", "analyzed", "spans", "engine speed", "warnings"],
                [
                    [
                        inputs,
                        doc["algorithm"],
                        fmt_count(s["traces"]),
                        fmt_count(s["traces_analyzed"]),
                        fmt_count(s["spans"]),
                        f"{s['spans_per_s'] / 1e6:.2f} M spans/s",
                        ", ".join(f"{k} {v}" for k, v in warn.items()) or "none",
                    ]
                ],
                "Dirty data is counted, never fatal: children outliving parents are clipped as Jaeger does, "
                "orphans, duplicates, cycles and clock skew are listed under warnings.",
                numeric_from=2,
            )
        )
        if s["traces_analyzed"] == 0:
            sec.notes.append("no trace could be analyzed (see warnings)")
            return sec
        fig = _service_cdf_figure(df, cdf, doc)
        if fig:
            fig.title += where
            sec.blocks.append(fig)
        tables = summary_tables(doc)
        sec.blocks.append(_paths_table(tables["paths"], s["traces_analyzed"]))
        sec.blocks.append(_bottleneck_table(doc))
        sec.blocks.append(_delay_table(doc, where))
        dfig = _delay_figure(df, cdf, doc)
        if dfig:
            dfig.title += where
            sec.blocks.append(dfig)
        timeline_figs = _timeline_figures(doc, where)
        sec.blocks += timeline_figs
        if not timeline_figs:
            sec.notes.append(f"trace timelines{where} unavailable: {_timeline_note(doc)}")
        if point == "std-async":  # the run's own DeathStarBench-model traces: the capstone's setting
            sec.add_references([figure6_check(doc)], "Capstone Figure 6 vs here")
        if not tables["what_if"].empty:
            sec.blocks.append(_what_if_table(tables["what_if"], doc))
        return sec


def _model_comparison_table(by_point: dict[str, dict], df) -> Table:
    rows = []
    for point, doc in by_point.items():
        e2e = doc.get("end_to_end_ns", {})
        d = doc.get("delays", {})
        share = d.get("on_path_share_of_end_to_end")
        top = (doc.get("bottlenecks", {}).get("services_by_mean") or [{}])[0]
        var = (doc.get("bottlenecks", {}).get("services_by_variability") or [{}])[0]
        nd = next((w for w in doc.get("what_if", []) if w.get("scenario") == "no_delays"), None)
        rows.append(
            [
                point or "(input)",
                fmt_count(doc["summary"]["traces_analyzed"]),
                fmt_ns(e2e.get("p50")),
                fmt_ns(e2e.get("p99")),
                f"{share * 100:.1f} %" if share is not None else "unavailable",
                top.get("service", "—"),
                var.get("service", "—"),
                fmt_ratio(nd.get("p99_ratio")) if nd else "—",
            ]
        )
    shares = {
        point or "(input)": doc.get("delays", {}).get("on_path_share_of_end_to_end") for point, doc in by_point.items()
    }
    measured = {k: v for k, v in shares.items() if v is not None}
    if measured:
        best_text = f"Least delay on the path: {min(measured, key=lambda k: measured[k])}."
    else:
        best_text = "Delay on the path: unavailable for every model (no RPC pair found in the traces)."
    if measured and len(measured) < len(shares):
        best_text += f" Unavailable for {', '.join(k for k in shares if k not in measured)} (no RPC pair found)."
    caption = (
        "Per concurrency model: how much of each request's critical path is scheduling and join delay, "
        "the top bottleneck by mean and by variability, and the projected p99 if all delay were removed "
        f"(recomputed paths). {best_text} Requests are those sampled during each "
        "model's own load sweep, so rates differ between rows."
    )
    return Table(
        "Critical paths per concurrency model",
        ["model", "requests", "p50", "p99", "delay on path", "top by mean", "top by variability", "p99 without delays"],
        rows,
        caption,
        numeric_from=1,
    )


def _service_cdf_figure(df, cdf, doc) -> Figure | None:
    svc = df[df["name"] == "cp_time"].sort_values("mean_ns", ascending=False)
    if svc.empty:
        return None
    top = svc.head(MAX_SERVICE_CURVES)
    fig, ax = plots.new_figure(9.5, 4.4)
    for i, (_, r) in enumerate(top.iterrows()):
        pts = cdf[(cdf["name"] == "cp_time") & (cdf["variant"] == r["variant"])]
        plots.value_cdf(
            ax,
            pts["value_ns"],
            pts["percentile"],
            color=plots.PALETTE[i % 8],
            linewidth=1.5,
            label=f"{r['variant']} (n={int(r['samples'])})",
        )
    ax.set_xlabel("critical-path time per request")
    ax.set_ylabel("fraction of requests")
    ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    worst = top.iloc[0]
    share = next(
        (o.get("share_of_end_to_end") for o in doc.get("services", []) if o.get("service") == worst["variant"]), None
    )
    share_txt = f", {share * 100:.0f} % of all end-to-end time" if share is not None else ""
    finding = (
        f"{worst['variant']} has the longest critical-path time: mean {fmt_ns(worst['mean_ns'])}, "
        f"p99 {fmt_ns(worst['p99_ns'])}{share_txt}."
    )
    return Figure(
        "Critical-path time per service",
        plots.to_svg(fig),
        f"Per request, the time each service spends on the critical path ({doc['algorithm']} algorithm); "
        f"{MAX_SERVICE_CURVES} services with the largest mean shown; n = requests where the service "
        "is on the path. Exact percentiles.",
        finding,
    )


def service_chain(path: str) -> str:
    """A critical path (service:operation → …) as the services it passes through, a run of spans in
    one service written once: short enough for a table row, while the operations go under the table."""
    chain: list[str] = []
    for hop in path.split(" → "):
        service = hop.split(":", 1)[0]
        if not chain or chain[-1] != service:
            chain.append(service)
    return " → ".join(chain)


def _paths_table(paths, analyzed: int) -> Table:
    rows = []
    details = []
    for _, p in paths.iterrows():
        rows.append(
            [
                str(p["rank"]),
                service_chain(p["path"]),
                fmt_count(p["count"]),
                f"{p['fraction'] * 100:.1f} %",
                fmt_ns(p["p50_ns"]),
                fmt_ns(p["p99_ns"]),
            ]
        )
        details.append((f"path {p['rank']}", p["path"]))
    return Table(
        "Most frequent critical paths",
        ["rank", "services on the path", "requests", "share", "p50", "p99"],
        rows,
        f"Distinct sequences of service:operation on the critical path, of {fmt_count(analyzed)} analyzed "
        "requests, shown as the services they pass through (each path's operations: the list under the "
        "table). p50/p99: end-to-end latency of the requests that took that path.",
        numeric_from=2,
        wrap_columns=(1,),
        details=details,
        details_title="Operations of each path",
    )


def _fmt_number(v: float | None, fmt: str, scale: float = 1.0) -> str:
    """A figure the engine may leave out (a service never on the path has no CV): "—", never 0."""
    return "—" if v is None else fmt.format(float(v) * scale)


def _bottleneck_table(doc) -> Table:
    rows = []
    b = doc.get("bottlenecks", {})
    for criterion, label in (("services_by_mean", "mean"), ("services_by_variability", "variability")):
        for e in b.get(criterion, [])[:5]:
            rows.append(
                [
                    label,
                    str(e["rank"]),
                    e["service"],
                    fmt_ns(e.get("mean_per_trace_ns")),
                    fmt_ns(e.get("stddev_per_trace_ns")),
                    _fmt_number(e.get("cv_per_trace"), "{:.2f}"),
                    _fmt_number(e.get("share_of_end_to_end"), "{:.1f} %", 100),
                    _fmt_number(e.get("frequency"), "{:.0f} %", 100),
                ]
            )
    return Table(
        "Bottleneck services",
        ["criterion", "rank", "service", "mean / request", "stddev", "CV", "share of e2e", "on path"],
        rows,
        "Ranked by mean critical-path time per request and by its standard deviation (variability). "
        "'on path': fraction of requests where the service is on the critical path.",
        numeric_from=3,
    )


def _delay_figure(df, cdf, doc) -> Figure | None:
    names = [
        ("rpc_scheduling", "RPC scheduling delay"),
        ("rpc_join", "RPC join delay"),
        ("delay_on_path", "delay on the critical path"),
    ]
    present = [(n, lbl) for n, lbl in names if n in set(df["name"])]
    if not present:
        return None
    fig, ax = plots.new_figure(8.5, 3.8)
    for i, (n, lbl) in enumerate(present):
        pts = cdf[cdf["name"] == n]
        samples = int(df[df["name"] == n].iloc[0]["samples"])
        plots.value_cdf(
            ax, pts["value_ns"], pts["percentile"], color=plots.PALETTE[i], linewidth=1.5, label=f"{lbl} (n={samples})"
        )
    ax.set_ylabel("fraction")
    ax.legend(fontsize=8, loc="lower right")
    d = doc.get("delays", {})
    share = d.get("on_path_share_of_end_to_end")
    finding = (
        f"Scheduling and join delay make up {share * 100:.1f} % of end-to-end time on the critical path "
        "(traces with an RPC pair)."
        if share is not None
        else f"Delay on the critical path: unavailable: {d.get('on_path_share_unavailable') or 'no RPC pair found'}."
    )
    return Figure(
        "Scheduling and join delays",
        plots.to_svg(fig),
        "Scheduling delay: server span start − client span start; join delay: client span end − server "
        "span end (per RPC, clamped at 0 on clock skew). Delay on path: the part of both that lies on "
        "each request's critical path.",
        finding,
    )


def _delay_table(doc: dict, where: str) -> Table:
    """Every delay figure of the document, or the reason it is unavailable."""
    d = doc.get("delays", {})
    rows = []
    for key, label in DELAY_FIGURES:
        dist = d.get(key) or {}
        if dist.get("count") is None:
            rows.append([label, delay_figure_text(dist), "", "", "", ""])
        else:
            rows.append(
                [
                    label,
                    fmt_count(dist["count"]),
                    fmt_ns(dist.get("p50")),
                    fmt_ns(dist.get("p90")),
                    fmt_ns(dist.get("p99")),
                    fmt_ns(dist.get("max")),
                ]
            )
    window = d.get("launch_stagger_window_ns")
    window_text = f" Launch stagger: window {fmt_ns(window)}." if window is not None else ""
    return Table(
        f"Delays{where}",
        ["delay", "samples", "p50", "p90", "p99", "max"],
        rows,
        f"{pairing_text(doc)}.{window_text} Without span.kind tags a span whose parent is in another "
        "service or process is read as the server side of its parent (docs/critical-path.md).",
        numeric_from=1,
    )


def _no_timeline_reason(art: Path, doc: dict) -> str:
    """Why no timeline could be drawn, from what the engine wrote."""
    if not (doc.get("summary") or {}).get("traces_analyzed"):
        return "no trace could be analyzed"
    if not (art / TRACE_INDEX).exists():
        return f"the engine wrote no trace index ({TRACE_INDEX}), so no trace could be chosen"
    return "the engine's timeline pass returned none of the chosen traces"


def _timeline_note(doc: dict) -> str:
    missing = [e for e in doc.get("timelines", []) if "missing_trace_id" in e]
    if missing:
        return "; ".join(f"trace {e['missing_trace_id']}: {e['reason']}" for e in missing)
    return str(doc.get("timelines_unavailable") or "no timeline was stored with this analysis")


def _drawn_timelines(doc: dict) -> list[timeline.TimelineTrace]:
    out = []
    for e in doc.get("timelines", []):
        if "analysis" in e and e["analysis"].get("analyzed"):
            t = timeline.parse_timeline(e)
            t.label = e.get("label", "")
            out.append(t)
    # Median first, then p99, then --trace ids, whatever order the document holds them in.
    return sorted(out, key=lambda t: timeline.label_rank(t.label or "--trace"))


FIGURE6_REPORTED = (
    "a slow compose-post trace: the first four async calls waited 8–23 ms to be scheduled, the next ones 37 ms; "
    "at least 45 ms of scheduling, join and queuing delay (std::async, 70–80 % of capacity)"
)


def figure6_check(doc: dict) -> ReferenceCheck:
    """The capstone's Figure 6 (a compose-post trace, Jaeger-UI style, with its delays) beside this
    run's drawn traces. The capstone's trace carries at least 45 ms of scheduling, join and queuing
    delay and lies in its 50–200 ms tail (Figure 3), so the delay is at least FIGURE6_MIN_SHARE (45 ÷ 200)
    of it: judged on the p99 trace (the tail trace, like the capstone's), with the engine's exact delay
    on the critical path. Not comparable when the traces do not come from a steady 70–80 % load."""
    traces = [t for t in _drawn_timelines(doc) if t.rpc and t.delay_on_path_ns is not None]
    if not traces:
        why = (
            "no drawn trace has an RPC pair"
            if _drawn_timelines(doc)
            else f"no timeline was drawn ({_timeline_note(doc)})"
        )
        return ReferenceCheck("capstone Figure 6", FIGURE6_REPORTED, "unavailable", UNAVAILABLE, why, CAPSTONE_FIGURE6)
    parts = []
    for t in traces:
        d = int(t.delay_on_path_ns or 0)
        share = d / t.end_to_end_ns if t.end_to_end_ns else None
        parts.append(
            f"{t.label} trace {fmt_ns(d)} of {fmt_ns(t.end_to_end_ns)}"
            + (f" ({share * 100:.0f} %)" if share is not None else "")
        )
    here = "scheduling + join delay on the critical path: " + "; ".join(parts)
    tail = next((t for t in traces if t.label == "p99"), max(traces, key=lambda t: t.end_to_end_ns or 0))
    not_here = trace_load_reason(trace_load_of(doc.get("trace_load")))
    if not_here:
        return ReferenceCheck(
            "capstone Figure 6",
            FIGURE6_REPORTED,
            here,
            NOT_COMPARABLE,
            f"{not_here}. Measured all the same: {here}.",
            CAPSTONE_FIGURE6,
        )
    share = (tail.delay_on_path_ns or 0) / tail.end_to_end_ns if tail.end_to_end_ns else 0.0
    verdict = HOLDS if share >= FIGURE6_MIN_SHARE else DOES_NOT_HOLD
    why = (
        f"{here}; the {tail.label or 'longest'} trace's delay is {share * 100:.0f} % of it, against at least "
        f"{FIGURE6_MIN_SHARE * 100:.1f} % in the capstone's trace ({fmt_ns(CAPSTONE_TRACE_DELAY_NS)} of delay in a "
        f"trace no longer than its {fmt_ns(CAPSTONE_TAIL_NS[1])} tail); the capstone's std::async is the std-async "
        "model here."
    )
    return ReferenceCheck("capstone Figure 6", FIGURE6_REPORTED, here, verdict, why, CAPSTONE_FIGURE6)


def _timeline_figures(doc: dict, where: str) -> list[Figure]:
    figs = []
    for t in _drawn_timelines(doc):
        on_path_rpcs = [r for r in t.rpc if r["client_span_id"] in t.on_path]
        delay_ns = sum(r["scheduling_ns"] + r["join_ns"] for r in on_path_rpcs)
        finding = (
            f"{len(t.spans)} spans in {len({s['service'] for s in t.spans})} services; {len(t.on_path)} on the "
            f"critical path; {len(t.rpc)} RPC pairs, whose scheduling + join delay sum to {fmt_ns(delay_ns)} "
            f"on the path's client spans."
            if t.rpc
            else f"{len(t.spans)} spans; RPC delays: unavailable: no RPC pair found in this trace."
        )
        figs.append(
            Figure(
                f"Timeline of the {t.label} trace{where}",
                timeline.render_svg(t),
                f"Trace {t.trace_id}, end to end {fmt_ns(t.end_to_end_ns)} (chosen as the {t.label} trace by "
                "end-to-end duration). Spans grouped per service; critical-path spans outlined and underlined "
                "in red; scheduling and join delays shaded; ▼ launch and ▲ join of each RPC.",
                finding,
            )
        )
    return figs


def _what_if_table(wi, doc) -> Table:
    rows = []
    for _, w in wi.iterrows():
        rows.append(
            [
                w["scenario"],
                fmt_ns(w["mean_ns"]),
                fmt_ns(w["p50_ns"]),
                fmt_ns(w["p99_ns"]),
                fmt_ratio(w["mean_ratio"]),
                fmt_ratio(w["p99_ratio"]),
            ]
        )
    e2e = doc.get("end_to_end_ns", {})
    rows.insert(0, ["measured", fmt_ns(e2e.get("mean")), fmt_ns(e2e.get("p50")), fmt_ns(e2e.get("p99")), "1×", "1×"])
    return Table(
        "What if",
        ["scenario", "mean", "p50", "p99", "mean ratio", "p99 ratio"],
        rows,
        "Each trace is replayed with the scenario's time removed and its critical path recomputed (the "
        "path may move to another branch, so the gain is not a subtraction).",
        numeric_from=1,
    )


STUDY = AnalyzeStudy()


class JaegerAnalyzeStudy(AnalyzeStudy):
    """The analyze study, fed from a live Jaeger: the traces are fetched into the
    run's staging folder first, then analysed as a file."""

    def __init__(self, query: JaegerQuery):
        self.query = query

    def run(self, ctx: RunContext):
        ctx.progress(f"jaeger: {self.query.service}", 0.0)
        traces, summary = fetch(self.query)
        if not traces:
            op = f" operation {self.query.operation}" if self.query.operation else ""
            raise JaegerQueryError(
                f"Jaeger at {self.query.base_url} holds no traces of service {self.query.service}{op} "
                f"in the last {self.query.lookback_s} s: nothing to analyse"
            )
        out = write_jaeger_file(traces, ctx.artifacts_dir / "jaeger" / "traces.jaeger.json")
        (out.parent / "query.json").write_text(json.dumps({**self.query.__dict__, **summary}, indent=1))
        ctx.progress(f"jaeger: {summary['traces']} traces in {summary['pages']} pages", 0.3)
        ctx.options["trace_files"] = [str(out)]
        return super().run(ctx)
