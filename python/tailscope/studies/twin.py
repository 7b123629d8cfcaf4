"""Study `twin` (`tailscope bench twin`): the closed loop of trust, and what would change the tail
(docs/twin.md).

1. tailscope's own socialnet graph runs traced (every request) under one model at a fixed open-loop
   rate; `tailscope topology from-traces --calibrate` infers a topology from those traces; the
   inferred topology is compared structurally with topologies/socialnet.yaml; the twin runs under
   the same model at the rate read from the trace timestamps, traced; its end-to-end and
   per-service critical-path distributions are compared with the originals (p50/p90/p99 ratios, KS
   distance), beside the original against itself (its halves in time).
2. `advise` on the same traces and the same calibrated twin: the alternatives (quick: the traced
   model, pool-blocking with 10 workers, coroutine; full: every model, the threads study's pool
   sizes, a latency-driven placement) ranked by predicted p99 and max rate at the objective, with
   the leader's sensitivity to the CPU share of own time.
3. The closing loop: the recommended configuration measured directly on the real graph at the
   source run's rate; predicted p99 ÷ measured p99.
4. The same loop (steps 1, without advise) on topologies/hotel.yaml driven through /hotels.

The benchmark prints the ratios; it asserts nothing (tests/e2e/test_twin.py checks the structure).
Quick form: 20 s socialnet and 4 s hotel source/twin runs, each source after its warm-up (WARMUP_S:
the caches fill), advise rungs 1.5 s, the uncalibrated twins only in the full form (30 s, 10 s runs).
Options: `twin_model`, `twin_rate_per_s`, `objective_ms`, `scale`.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

from tailscope.lab import topology, yamlfile
from tailscope.lab.engines import EngineError, run_engine
from tailscope.lab.graph import LOAD, graph
from tailscope.lab.load import http_load_args
from tailscope.measure.measurement import measurement
from tailscope.report.blocks import Section, Table
from tailscope.store import EngineDocument, Store
from tailscope.studies.base import RunContext
from tailscope.studies.common import record_stores, requested_stores, study_section
from tailscope.traces.spans import TraceSet, cache_hit_ratios, read_traces, split_warmup
from tailscope.twin.advise import advice_lines, advise, inferred_twin
from tailscope.twin.commands import (
    VALIDATION_COLUMNS,
    correlation_line,
    from_traces,
    validation_rows,
    validation_verdict,
)
from tailscope.twin.fit import EMPIRICAL
from tailscope.twin.infer import InferOptions
from tailscope.twin.ladder import point_flags
from tailscope.twin.structure import differences
from tailscope.twin.validate import TwinRun, comparison, load_summary, run_twin
from tailscope.units import fmt_ns, fmt_ratio

ENGINE = "tailscope-twin"  # the documents this study stores are the driver's, not an engine's
RATE_PER_S = 100.0
CONNECTIONS = 16
DEFAULT_OBJECTIVE_MS = 50.0
HOTEL = topology.REPO_ROOT / "topologies" / "hotel.yaml"
# name → (topology file, the front path the source run drives)
GRAPHS = {"socialnet": (topology.SOCIALNET, "/wrk2-api/post/compose"), "hotel": (HOTEL, "/hotels")}
# The real graph's warm-up before its measured (and traced-for-the-twin) window, at the source rate:
# its caches start empty (the preload fills the document store only), and a cache an on_miss fills
# warms as its keys are drawn. Measured at 100/s (docs/twin.md "The warm source window"): socialnet's
# p50 fell from 6.4 ms (0–5 s) to 4.1, 4.0, 4.0 ms in the next 5 s windows while its Redis followers
# cache (962 keys) filled from 22 % to 56 %, 70 %, 85 %; hotel's memcached caches (80 keys, several a
# request) reach 99 % by 3 s and its p50 settles by 5 s.
WARMUP_S = {"socialnet": 10.0, "hotel": 5.0}
# The study infers its twins with each stage's observed quantiles (twin/fit.py, `empirical`): with the
# parametric kinds every socialnet service's p99 came out at 0.43–0.86× the traces' while the p50s
# matched (2026-11-27), the tail a log-space fit does not keep.
TWIN_DISTRIBUTIONS = EMPIRICAL


def _p50_p99(load: dict) -> tuple[float | None, float | None]:
    m = measurement(load, "latency_intended")
    return (m.p_ns("50"), m.p_ns("99")) if m else (None, None)


def _samples(load: dict) -> int | None:
    """How many requests stand behind the load generator's percentiles."""
    m = measurement(load, "latency_intended")
    return m.count if m else None


def _measure(
    topo_json: Path,
    path: str,
    model: str,
    rate: float,
    duration: float,
    warmup: float,
    out: Path,
    *,
    trace: bool,
    stores: str | None = None,
) -> dict:
    """One run of a real graph (traced: every request, traces under out/source-traces) on the run's
    --stores: the twin's source traces come from the real-store graph when the stores are real. The
    twin itself keeps simulated stores (docs/twin.md)."""
    extra_traces = out / "source-traces" if trace else None
    with graph(topo_json, model, out / "graph.json", 1.0 if trace else 0.0, extra_traces, stores=stores) as (
        port,
        ready,
    ):
        args = http_load_args(port, path, CONNECTIONS, rate, duration, warmup, timeout="2s")
        return record_stores(run_engine(LOAD, args, timeout_s=duration + warmup + 120).document, ready)


class TwinStudy:
    name = "twin"
    title = "Twin: socialnet's and hotel's own traces → topology → twin, validated; what would change the tail"

    def _loop(self, ctx: RunContext, name: str, model: str, rate: float, duration: float, art: Path) -> dict:
        """Source run → inference (calibrated) → structure → twin(s) → comparison."""
        topo_path, path = GRAPHS[name]
        warmup = WARMUP_S[name]
        art.mkdir(parents=True, exist_ok=True)
        topo_json = topology.to_engine_json(topo_path, art / f"{name}.json")
        source_load = _measure(
            topo_json, path, model, rate, duration, warmup, art, trace=True, stores=requested_stores(ctx.options)
        )
        traces = art / "source-traces" / "traces.otlp.json"
        # The twin is inferred from, and compared with, the window the load generator measured: the
        # warm-up's requests are traced too, on caches still filling.
        read = read_traces([traces])
        warm_up, window = split_warmup(read.traces, warmup)
        options = InferOptions(name=f"{name}-twin", distributions=TWIN_DISTRIBUTIONS)
        calibrated_path = art / "calibrated.yaml"
        ctx.progress(f"twin: {name}: inferring and calibrating under {model}", 0.2)
        _, report, ts = from_traces(
            [traces], calibrated_path, options, calibrate_model=model, traces=dataclasses.replace(read, traces=window)
        )
        window_hits = cache_hit_ratios(window)
        # A cache that hit on every read of the window (warm, as intended) shows no miss path.
        never_missed = frozenset(name for name, r in window_hits.items() if r == 1.0)
        diffs = differences(
            yamlfile.safe_load(topo_path.read_text()),
            yamlfile.safe_load(calibrated_path.read_text()),
            driven_only=True,
            never_missed=never_missed,
        )
        twin_rate = report["recorded_rate"].get("rate_per_s") or rate

        def twin_of(topology_path: Path) -> TwinRun:
            return run_twin(
                topology.load(topology_path),
                model,
                twin_rate,
                duration_s=duration,
                warmup_s=warmup,
                connections=CONNECTIONS,
            )

        run = twin_of(calibrated_path)
        doc = {
            "schema": "tailscope.twin.validation/1",
            "engine": ENGINE,
            "graph": name,
            "topology": str(topo_path.relative_to(topology.REPO_ROOT)),
            "model": model,
            # What the source graph ran on (the twin's own stores are always simulated).
            "stores": source_load["stores"],
            "rate_per_s": twin_rate,
            "rate_source": "trace timestamps",
            "source": {
                "rate_per_s": rate,
                "duration_s": duration,
                "path": path,
                "load": load_summary(source_load),
                "warmup_s": warmup,
                "warmup_traces_left_out": len(warm_up),
                # Per cache read (tag tailscope.cache; none on simulated stores): hits ÷ reads.
                "cache_hit_ratio": {"warm_up": cache_hit_ratios(warm_up), "window": window_hits},
            },
            "twin": {
                "traces": len(run.traces.traces),
                "trace_sample": run.trace_sample,
                "load": load_summary(run.load),
            },
            "original": {"traces": len(ts.traces)},
            "structure_differences": diffs,
            # Reads whose miss path the structure check could not compare (and the twin lacks).
            "structure_not_observed": sorted(never_missed),
            "calibration": report.get("calibration"),
            # correlation: the measured within-request dependence the twin carries (docs/twin.md).
            "inference": {
                k: report[k] for k in ("traces", "recorded_rate", "assumptions", "not_inferred", "correlation")
            },
            **comparison(ts, run.traces),
        }
        doc["source"]["p50_ns"], doc["source"]["p99_ns"] = _p50_p99(source_load)
        doc["source"]["steadiness"] = steadiness(doc["original_halves"])
        doc["twin"]["p50_ns"], doc["twin"]["p99_ns"] = _p50_p99(run.load)
        if ctx.form == "full":  # the uncalibrated twin: how much calibration moved the figures
            inferred_path = art / "inferred.yaml"
            from_traces([traces], inferred_path, options)
            doc["uncalibrated"] = comparison(ts, twin_of(inferred_path).traces)
        doc["_traces"] = ts  # for advise; removed before storing
        return doc

    def run(self, ctx: RunContext) -> list[EngineDocument]:
        scale = float(ctx.options.get("scale") or 1.0)
        full = ctx.form == "full"
        # socialnet's source, twin and closing runs: 2000 traced requests at 100/s in the quick form, so a
        # p99 has 20 samples beyond it. With 1000 (10 s) the twin's p99 within ±15 % of the traces' by its
        # estimate was still undecided by the intervals, which said a run 1.9× as long would decide it
        # (2026-11-27). Hotel, a second check, stays shorter.
        duration = max(1.0, (30.0 if full else 20.0) * scale)
        hotel_duration = max(1.0, (10.0 if full else 4.0) * scale)
        advise_duration = max(1.0, (5.0 if full else 1.5) * scale)
        model = str(ctx.options.get("twin_model") or "std-async")
        rate = float(ctx.options.get("twin_rate_per_s") or RATE_PER_S)
        objective_ms = float(ctx.options.get("objective_ms") or DEFAULT_OBJECTIVE_MS)
        art = Path(ctx.artifacts_dir) / "twin"
        ctx.progress(f"twin: socialnet under {model} at {rate:g}/s, traced", 0.0)
        doc = self._loop(ctx, "socialnet", model, rate, duration, art)
        ts = doc.pop("_traces")

        ctx.progress("twin: advise on socialnet's traces", 0.4)
        calibration = doc.get("calibration") or {}
        corrections = {k: v * 1000.0 for k, v in (calibration.get("added_us") or {}).items()}
        advice = advise(
            ts,
            model,
            objective_ms=objective_ms,
            options=InferOptions(name="socialnet-twin", distributions=TWIN_DISTRIBUTIONS),
            duration_s=advise_duration,
            warmup_s=0.5,
            quick=not full,
            corrections=corrections,
            validation={
                k: doc[k] for k in ("end_to_end", "services", "max_ratio_error", "within_target", "original_halves")
            },
            progress=lambda m: ctx.progress(m, 0.6),
        )
        doc["advice"] = advice
        doc["closing_loop"] = self._closing_loop(ctx, advice, rate, duration, art, ts, corrections)

        ctx.progress(f"twin: hotel under {model} at {rate:g}/s, traced", 0.85)
        try:
            hotel = self._loop(ctx, "hotel", model, rate, hotel_duration, art / "hotel")
            hotel.pop("_traces")
        except (ValueError, EngineError) as e:  # InferenceError, TopologyError: the socialnet loop stands
            hotel = {"graph": "hotel", "unavailable": f"the hotel loop failed: {e}"}
        doc["hotel"] = hotel
        doc["measurements"], doc["unavailable"] = [], []
        (art / "validation.json").write_text(json.dumps(doc, indent=1, allow_nan=False))
        # A benchmark prints its comparison (docs/twin.md): the ratios, not a pass/fail.
        for d, label in ((doc, "socialnet"), (hotel, "hotel")):
            if d.get("unavailable"):
                print(f"{label}: unavailable: {d['unavailable']}", file=sys.stderr)
                continue
            if d.get("uncalibrated"):
                print(f"{label} uncalibrated " + validation_verdict({**d, **d["uncalibrated"]}), file=sys.stderr)
            print(f"{label} calibrated " + validation_verdict(d), file=sys.stderr)
            print(source_line(d), file=sys.stderr)
            print(f"{label} structure vs {d['topology']}: {structure_text(d)}", file=sys.stderr)
        for line in advice_lines(advice):
            print("advise: " + line, file=sys.stderr)
        print("closing loop: " + closing_line(doc["closing_loop"]), file=sys.stderr)
        ctx.progress("twin: done", 1.0)
        return [EngineDocument(self.name, ENGINE, doc)]

    def _closing_loop(
        self,
        ctx: RunContext,
        advice: dict,
        rate: float,
        duration: float,
        art: Path,
        ts: TraceSet,
        corrections: dict[str, float],
    ) -> dict:
        """The recommended configuration run twice at the source rate for the same time: on its twin
        (the prediction) and on the real graph (the measurement). Advise ranked on short rungs; the
        closing comparison runs both for the source run's length, so each p99 has as many samples
        behind it as the validation's (a 1.5 s rung's p99 is its 2nd slowest request)."""
        rec = advice["recommendation"]
        if not rec.get("alternative"):
            return {"predicted_p99_ns": None, "measured_p99_ns": None, "ratio": None, "unavailable": rec["unavailable"]}
        ctx.progress(f"twin: closing loop: {rec['alternative']} on its twin and on socialnet.yaml at {rate:g}/s", 0.8)
        topo, _ = inferred_twin(ts, InferOptions(name="socialnet-twin", distributions=TWIN_DISTRIBUTIONS), corrections)
        twin = run_twin(
            topo,
            rec["model"],
            rate,
            duration_s=duration,
            warmup_s=advice["warmup_s"],
            connections=advice["connections"],
            extra_args=rec["args"],
        )
        topo_json = topology.to_engine_json(topology.SOCIALNET, art / "closing-socialnet.json")
        path = GRAPHS["socialnet"][1]
        with graph(
            topo_json,
            rec["model"],
            art / "closing-graph.json",
            0.0,
            None,
            extra=rec["args"],
            stores=requested_stores(ctx.options),
        ) as (port, ready):
            # The twin run's connections: prediction and measurement differ only in the graph (twin or
            # real). The real graph's warm-up is the source run's: the twin was inferred from warm caches.
            warmup = WARMUP_S["socialnet"]
            args = http_load_args(port, path, advice["connections"], rate, duration, warmup, timeout="2s")
            load = record_stores(run_engine(LOAD, args, timeout_s=duration + warmup + 120).document, ready)
        predicted_p50, predicted = _p50_p99(twin.load)
        measured_p50, measured = _p50_p99(load)
        return {
            "alternative": rec["alternative"],
            "model": rec["model"],
            "args": rec["args"],
            "rate_per_s": rate,
            "duration_s": duration,
            "predicted_p99_ns": predicted,
            "predicted_p50_ns": predicted_p50,
            "predicted_flags": point_flags(twin.load, rate),
            "predicted_samples": _samples(twin.load),
            "advise_rung_p99_ns": rec["predicted_p99_ns"],
            "measured_p99_ns": measured,
            "measured_p50_ns": measured_p50,
            "measured_flags": point_flags(load, rate),
            "measured_samples": _samples(load),
            "ratio": predicted / measured if predicted and measured else None,
            "p50_ratio": predicted_p50 / measured_p50 if predicted_p50 and measured_p50 else None,
            "unavailable": None if measured and predicted else "a closing run completed no request",
            "load": load_summary(load),
            "stores": load["stores"],
        }

    def section(self, store: Store, run_id: str) -> Section:
        sec = study_section(
            self,
            store,
            run_id,
            graphs=True,
            intro="The socialnet and hotel graphs traced at every request; a topology inferred from those traces "
            "(tailscope topology from-traces --calibrate); the twin run under the same model at the rate read "
            "from the trace timestamps; distributions compared (twin ÷ original; KS D = largest gap between the "
            "two CDFs), beside the original against itself (second half ÷ first half in time). Then the twin run "
            "under alternatives (tailscope advise), and the recommendation measured on the real graph.",
        )
        docs = [d.document for d in store.documents(run_id, self.name)]
        if not docs:
            sec.notes.append("no twin validation was stored for this run")
            return sec
        d = docs[0]
        for g in (d, d.get("hotel")):
            if g and g.get("unavailable"):
                sec.notes.append(f"{g.get('graph')}: unavailable: {g['unavailable']}")
            elif g:
                sec.blocks.append(_validation_table(g))
                src, tw = g["source"], g["twin"]
                sec.notes.append(
                    f"{g.get('graph', 'socialnet')}: load generator (from the intended send time): original p50 "
                    f"{fmt_ns(src.get('p50_ns'))}, p99 {fmt_ns(src.get('p99_ns'))}; twin p50 {fmt_ns(tw.get('p50_ns'))}, "
                    f"p99 {fmt_ns(tw.get('p99_ns'))} (p99 ratio "
                    f"{fmt_ratio(tw['p99_ns'] / src['p99_ns']) if tw.get('p99_ns') and src.get('p99_ns') else 'unavailable'})"
                )
                if "warmup_s" in src:  # stored before the warm window: no such sentence
                    sec.notes.append(source_line(g))
                if "correlation" in (g.get("inference") or {}):  # stored before the twin carried it: none
                    sec.notes.append(
                        f"{g.get('graph', 'socialnet')} twin: {correlation_line(g['inference']['correlation'])}"
                    )
        if d.get("advice"):
            sec.blocks.append(advice_table(d["advice"], d.get("closing_loop")))
        return sec


def steadiness(halves: dict) -> dict:
    """The source window's steadiness: its second half ÷ first half p99 in time (validate.original_halves).
    Far from 1 the traced system was still changing (caches filling), and no twin matches both halves."""
    p99 = (halves.get("ratios") or {}).get("p99")
    if p99 is None:
        return {"p99_second_over_first": None, "unavailable": halves.get("unavailable") or "no p99 of a half"}
    return {"p99_second_over_first": p99, "unavailable": None}


def source_line(d: dict) -> str:
    """The source window in one sentence: its warm-up, its steadiness and its caches' hit ratios."""
    src = d["source"]
    st = src.get("steadiness") or {}
    steady = (
        fmt_ratio(st["p99_second_over_first"])
        if st.get("p99_second_over_first") is not None
        else f"unavailable ({st.get('unavailable')})"
    )
    hits = src.get("cache_hit_ratio") or {}
    before, window = hits.get("warm_up") or {}, hits.get("window") or {}
    caches = "; ".join(
        f"{name} {before[name]:.0%} → {r:.0%}" if name in before else f"{name} {r:.0%}" for name, r in window.items()
    )
    return (
        f"{d.get('graph', 'socialnet')} source: traced after a {src.get('warmup_s', 0):g} s warm-up at "
        f"{src['rate_per_s']:g}/s ({src.get('warmup_traces_left_out', 0)} warm-up traces left out); its second half "
        f"÷ first half p99 {steady}"
        + (f"; cache hit ratio, warm-up → window: {caches}" if caches else "; no cache read tagged its answer")
    )


def structure_text(d: dict) -> str:
    """The structure check's result: identical or each difference, then the reads whose miss path
    the traced window could not show (they hit every time)."""
    diffs = d.get("structure_differences") or []
    text = "identical" if not diffs else f"{len(diffs)} difference(s): " + "; ".join(diffs)
    unseen = d.get("structure_not_observed") or []
    if unseen:
        text += (
            f" (not compared: the miss path of {', '.join(unseen)}, which hit on every read of the traced window,"
            " so the twin has no miss path there)"
        )
    return text


def _validation_table(d: dict) -> Table:
    finding = "calibrated " + validation_verdict(d)
    if d.get("uncalibrated"):
        finding += "; uncalibrated " + validation_verdict({**d, **d["uncalibrated"]}).split(": ", 1)[1]
    name = d.get("graph", "socialnet")
    return Table(
        f"Twin vs original ({name}): end-to-end and per-service critical-path time",
        VALIDATION_COLUMNS,
        validation_rows(d),
        f"{d['original']['traces']} original traces ({d['model']}, {d['source']['rate_per_s']:g}/s offered); "
        f"{d['twin']['traces']} twin traces at {d['rate_per_s']:.4g}/s. {finding}. Structure vs "
        f"{d.get('topology', 'topologies/socialnet.yaml')} (what its front path reaches): {structure_text(d)}.",
        numeric_from=1,
    )


def closing_line(c: dict | None) -> str:
    if not c:
        return "unavailable: no closing-loop run was stored"
    if c.get("ratio") is None:
        return f"unavailable: {c.get('unavailable')}"
    flags = f" [flagged: {'; '.join(c['measured_flags'])}]" if c.get("measured_flags") else ""
    pflags = f" [flagged: {'; '.join(c['predicted_flags'])}]" if c.get("predicted_flags") else ""
    n_pred, n_meas = c.get("predicted_samples"), c.get("measured_samples")
    samples = f" ({n_pred} / {n_meas} requests)" if n_pred and n_meas else ""
    seconds = f" for {c['duration_s']:g} s" if c.get("duration_s") else ""
    p50 = f"; p50 {fmt_ratio(c['p50_ratio'])}" if c.get("p50_ratio") else ""
    rung = (
        f"; advise's {fmt_ns(c['advise_rung_p99_ns'])} came from its short rung"
        if c.get("advise_rung_p99_ns") and c.get("duration_s")
        else ""
    )
    return (
        f"{c['alternative']} at {c['rate_per_s']:g}/s{seconds}: predicted (its twin) p99 "
        f"{fmt_ns(c['predicted_p99_ns'])}{pflags}, measured (the real graph) {fmt_ns(c['measured_p99_ns'])}{flags}"
        f"{samples} — predicted ÷ measured {fmt_ratio(c['ratio'])}{p50}{rung}"
    )


def advice_table(a: dict, closing: dict | None) -> Table:
    """Report section "What would change my tail": the ranking, every line from the advice document."""
    v = a["validation_error"]
    rows = []
    for r in a["ranked"]:
        p99 = (
            fmt_ns(r["predicted_p99_ns"])
            if r["predicted_p99_ns"] is not None
            else f"unavailable: {r['predicted_p99_unavailable']}"
        )
        rows.append(
            [
                str(r["rank"]),
                r["alternative"],
                r["threads"],
                p99,
                r["max_rate_bound"],
                "; ".join(r["predicted_flags"]) or "—",
                "validated" if r["validated_directly"] else f"extrapolated (p99 {fmt_ratio(v['p99_ratio'])})",
            ]
        )
    lines = advice_lines(a)
    return Table(
        "What would change my tail",
        [
            "rank",
            "alternative",
            "threads",
            f"predicted p99 at {a['rate_per_s']:.4g}/s",
            f"max rate at p99 ≤ {a['objective_ms']:g} ms",
            "flags",
            "validation",
        ],
        rows,
        f"tailscope advise ({a['form']} form: {len(a['ranked'])} alternatives, rates × {', '.join(f'{k:g}' for k in a['ladder'])} "
        f"of the recorded rate, {a['duration_s']:g} s each) on the same traces. "
        + " ".join(line for line in lines if line.startswith(("recommended", "sensitivity")))
        + " Closing loop: "
        + closing_line(closing)
        + ".",
        numeric_from=3,
        wrap_columns=(2, 4),
    )


STUDY = TwinStudy()
