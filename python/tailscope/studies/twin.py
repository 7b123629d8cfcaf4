"""Study `twin` (`tailscope bench twin`): the closed loop of trust (docs/twin.md).

tailscope's own socialnet graph runs traced (every request) under one model at a fixed open-loop
rate; `tailscope topology from-traces` infers a topology from those traces; the inferred topology
is compared structurally with topologies/socialnet.yaml; the twin runs under the same model at the
rate read from the trace timestamps, traced; its end-to-end and per-service critical-path
distributions are compared with the originals (p50/p90/p99 ratios, KS distance). The benchmark
prints the ratios and whether they are within 15 %; it asserts nothing (that is a test's job:
tests/test_twin.py checks the structure, not the timing).

Quick form: std-async at 100 requests/s, 4 s per run (+1 s warm-up); full: 10 s per run.
Options: `twin_model`, `twin_rate_per_s`, `scale`.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import yaml

from .. import topology
from ..engines import run_engine
from ..store import EngineDocument, Store
from ..twin.commands import VALIDATION_COLUMNS, from_traces, validation_rows, validation_verdict
from ..twin.infer import InferOptions
from ..twin.structure import differences
from ..twin.validate import comparison, load_summary, run_twin
from ..units import fmt_ns, fmt_ratio
from . import RunContext, Section, Table
from ._common import http_load_args, measurement, unavailable_notes
from .socialnet import LOAD, PATH, graph

ENGINE = "tailscope-twin"  # the documents this study stores are the driver's, not an engine's
RATE_PER_S = 100.0
CONNECTIONS = 16


class TwinStudy:
    name = "twin"
    title = "Twin: socialnet's own traces → topology → twin, validated"

    def run(self, ctx: RunContext) -> list[EngineDocument]:
        scale = float(ctx.options.get("scale") or 1.0)
        duration = max(1.0, (10.0 if ctx.form == "full" else 4.0) * scale)
        warmup = 1.0
        model = str(ctx.options.get("twin_model") or "std-async")
        rate = float(ctx.options.get("twin_rate_per_s") or RATE_PER_S)
        art = Path(ctx.artifacts_dir) / "twin"
        art.mkdir(parents=True, exist_ok=True)
        topo_json = topology.to_engine_json(topology.SOCIALNET, art / "socialnet.json")
        ctx.progress(f"twin: socialnet under {model} at {rate:g}/s, traced", 0.0)
        with graph(topo_json, model, art / "source-graph.json", 1.0, art / "source-traces") as (port, _):
            args = http_load_args(port, PATH, CONNECTIONS, rate, duration, warmup, timeout="2s")
            source_load = run_engine(LOAD, args, timeout_s=duration + warmup + 120).document
        traces = art / "source-traces" / "traces.otlp.json"
        ctx.progress("twin: inferring the topology", 0.4)
        inferred_path = art / "inferred.yaml"
        _, report, ts = from_traces([traces], inferred_path, InferOptions(name="socialnet-twin"))
        diffs = differences(yaml.safe_load(topology.SOCIALNET.read_text()), yaml.safe_load(inferred_path.read_text()))
        ctx.progress(f"twin: calibrating under {model}", 0.5)
        calibrated_path = art / "calibrated.yaml"
        _, calibrated_report, _ = from_traces(
            [traces], calibrated_path, InferOptions(name="socialnet-twin"), calibrate_model=model
        )
        ctx.progress(f"twin: the uncalibrated twin under {model}", 0.6)
        twin_rate = report["recorded_rate"].get("rate_per_s") or rate
        with tempfile.TemporaryDirectory(prefix="tailscope-twin-") as tmp:
            raw = run_twin(
                topology.load(inferred_path),
                model,
                twin_rate,
                duration_s=duration,
                warmup_s=warmup,
                connections=CONNECTIONS,
                workdir=Path(tmp),
            )
        ctx.progress(f"twin: the calibrated twin under {model}", 0.8)
        with tempfile.TemporaryDirectory(prefix="tailscope-twin-") as tmp:
            run = run_twin(
                topology.load(calibrated_path),
                model,
                twin_rate,
                duration_s=duration,
                warmup_s=warmup,
                connections=CONNECTIONS,
                workdir=Path(tmp),
            )
        doc = {
            "schema": "tailscope.twin.validation/1",
            "engine": ENGINE,
            "model": model,
            "rate_per_s": twin_rate,
            "rate_source": "trace timestamps",
            "source": {"rate_per_s": rate, "duration_s": duration, "load": load_summary(source_load)},
            "twin": {
                "traces": len(run.traces.traces),
                "trace_sample": run.trace_sample,
                "load": load_summary(run.load),
            },
            "original": {"traces": len(ts.traces)},
            "structure_differences": diffs,
            "calibration": calibrated_report.get("calibration"),
            "uncalibrated": comparison(ts, raw.traces),
            "inference": {k: report[k] for k in ("traces", "recorded_rate", "assumptions", "not_inferred")},
            "measurements": [],
            "unavailable": [],
            **comparison(ts, run.traces),
        }
        for p, load in (("source", source_load), ("twin", run.load)):
            m = measurement(load, "latency_intended")
            doc[p]["p50_ns"], doc[p]["p99_ns"] = (m.p_ns("50"), m.p_ns("99")) if m else (None, None)
        (art / "validation.json").write_text(json.dumps(doc, indent=1, allow_nan=False))
        # A benchmark prints its comparison (docs/twin.md): the ratios, not a pass/fail.
        raw_doc = {**doc, **doc["uncalibrated"]}
        print("uncalibrated " + validation_verdict(raw_doc), file=sys.stderr)
        print("calibrated " + validation_verdict(doc), file=sys.stderr)
        print(
            "structure vs topologies/socialnet.yaml: " + ("identical" if not diffs else "; ".join(diffs)),
            file=sys.stderr,
        )
        ctx.progress("twin: done", 1.0)
        return [EngineDocument(self.name, ENGINE, doc)]

    def section(self, store: Store, run_id: str) -> Section:
        sec = Section(
            "twin",
            self.title,
            "The socialnet graph traced at every request; a topology inferred from those traces (tailscope "
            "topology from-traces); the twin run under the same model at the rate read from the trace "
            "timestamps; distributions compared (twin ÷ original; KS D = largest gap between the two CDFs).",
        )
        sec.notes += unavailable_notes(store, run_id, self.name)
        docs = [d.document for d in store.documents(run_id, self.name)]
        if not docs:
            sec.notes.append("no twin validation was stored for this run")
            return sec
        d = docs[0]
        diffs = d.get("structure_differences") or []
        finding = "calibrated " + validation_verdict(d)
        if d.get("uncalibrated"):
            finding += "; uncalibrated " + validation_verdict({**d, **d["uncalibrated"]}).split(": ", 1)[1]
        sec.blocks.append(
            Table(
                "Twin vs original: end-to-end and per-service critical-path time",
                VALIDATION_COLUMNS,
                validation_rows(d),
                f"{d['original']['traces']} original traces ({d['model']}, {d['source']['rate_per_s']:g}/s offered); "
                f"{d['twin']['traces']} twin traces at {d['rate_per_s']:.4g}/s. {finding}. Structure vs "
                "topologies/socialnet.yaml: "
                + ("identical." if not diffs else f"{len(diffs)} difference(s): " + "; ".join(diffs)),
                numeric_from=1,
            )
        )
        src, tw = d["source"], d["twin"]
        sec.notes.append(
            f"load generator (from the intended send time): original p50 {fmt_ns(src.get('p50_ns'))}, p99 "
            f"{fmt_ns(src.get('p99_ns'))}; twin p50 {fmt_ns(tw.get('p50_ns'))}, p99 {fmt_ns(tw.get('p99_ns'))} "
            f"(p99 ratio {fmt_ratio(tw['p99_ns'] / src['p99_ns']) if tw.get('p99_ns') and src.get('p99_ns') else 'unavailable'})"
        )
        return sec


STUDY = TwinStudy()
