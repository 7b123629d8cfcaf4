"""Study `async`: what launching and joining an async call really costs.

Runs `tailscope-baseline` (condvar hand-off, spin hand-off, thread start;
pinned) and `tailscope-asyncbench` in the same run, so every figure is stated
as a ratio to this machine's physical references measured minutes apart.
The probe, the deferred definitions and the procedure are in
docs/async-study.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tailscope.lab.engines import run_engine
from tailscope.measure.measurement import point_flags, unflagged
from tailscope.report import plots
from tailscope.report.blocks import DOES_NOT_HOLD, HOLDS, PARTLY, UNAVAILABLE, Figure, ReferenceCheck, Section, Table
from tailscope.store import EngineDocument, Store
from tailscope.studies.base import RunContext
from tailscope.studies.common import cite, find_document, study_section
from tailscope.units import fmt_count, fmt_ns, fmt_ratio

BASELINE = "tailscope-baseline"
ENGINE = "tailscope-asyncbench"
REFERENCES = ["condvar_handoff", "spin_handoff", "thread_create"]
REF_LABELS = {"condvar_handoff": "condvar hand-off", "spin_handoff": "spin hand-off", "thread_create": "thread start"}
MODEL_ORDER = ["deferred", "std-async", "std-thread", "fixed-pool", "spin-pool", "work-stealing", "coroutine"]
DELAYS = [("scheduling_delay", "Scheduling delay"), ("join_delay", "Join delay"), ("total", "Total")]
# (label, numerator model, mechanisms tried in order, reference, limit)
TARGETS = [
    (
        "fixed-pool p50 scheduling delay ÷ condvar hand-off p50",
        "fixed-pool",
        ["future", "continuation"],
        "condvar_handoff",
        1.5,
    ),
    (
        "spin-pool p50 scheduling delay ÷ spin hand-off p50",
        "spin-pool",
        ["future", "continuation"],
        "spin_handoff",
        3.0,
    ),
]
RESUME_TARGET_NS = 50.0
COMMON_RATE = "payload_common_rate"  # the engine's series of the payload comparison
PAYLOAD_ORDER = ["void", "long_long", "vector10000"]


class AsyncModelsStudy:
    name = "async"
    title = "Async models: scheduling and join delay"

    def run(self, ctx: RunContext) -> list[EngineDocument]:
        scale = ctx.options.get("scale")
        base_args = [
            "--only",
            ",".join(REFERENCES),
            "--placement",
            "pinned",
            "--artifacts",
            str(ctx.artifacts_dir / "async" / "baseline"),
        ]
        bench_args = ["--artifacts", str(ctx.artifacts_dir / "async")]
        if ctx.form == "full":
            base_args.append("--full")
        else:
            bench_args.append("--quick")
        if scale:
            base_args += ["--scale", str(float(scale))]
            bench_args += ["--scale", str(min(100.0, max(0.01, float(scale))))]
        if ctx.options.get("cpus"):
            base_args += ["--cpus", ctx.options["cpus"]]
            bench_args += ["--cpus", ctx.options["cpus"]]

        def progress(prefix: str, lo: float, hi: float):
            def on_progress(p: dict) -> None:
                f = float(p.get("fraction_done", 0.0))
                ctx.progress(f"async: {prefix} {p.get('phase', '')}", lo + (hi - lo) * f)

            return on_progress

        timeout = 3600 if ctx.form == "full" else 600
        base = run_engine(BASELINE, base_args, timeout_s=timeout, on_progress=progress("references", 0.0, 0.1))
        bench = run_engine(ENGINE, bench_args, timeout_s=timeout, on_progress=progress("", 0.1, 1.0))
        return [EngineDocument(self.name, BASELINE, base.document), EngineDocument(self.name, ENGINE, bench.document)]

    def section(self, store: Store, run_id: str) -> Section:
        sec = study_section(
            self,
            store,
            run_id,
            section_id="async",
            intro=(
                "A producer thread launches calls at an offered rate (open loop) and a separate consumer thread "
                "requests their values. Each call carries five timestamps: <em>trigger_async_fn</em>, "
                "<em>fn_start</em>, <em>fn_end</em>, <em>request_val</em>, <em>val_received</em>. "
                "Scheduling delay = fn_start − trigger (deferred calls: fn_start − request_val, with "
                "deferral_wait = request_val − trigger reported beside it); join delay = val_received − "
                "max(fn_end, request_val); total = val_received − trigger. Each model is ramped to saturation, "
                "then measured at a fraction of its own maximum rate. Ratios use the physical references "
                "measured in the same run."
            ),
        )
        docs = store.documents(run_id, self.name)
        found = find_document(docs, engine=ENGINE)
        bench = found.document if found else None
        refs = _references(store, run_id, docs)
        for d in docs:
            for w in d.document.get("warnings", []):
                sec.notes.append(f"{d.engine}: {w}")
        if bench is None or not bench.get("measurements"):
            sec.notes.append("no tailscope-asyncbench measurements were stored for this run")
            return sec
        for r in REFERENCES:
            if r not in refs:
                sec.notes.append(
                    f"baseline reference {REF_LABELS[r]} is missing from this run: ratios to it are shown as —"
                )
        data = BenchData(bench)
        main = data.main_load
        pin = _pinning_text(bench)

        for delay, label in DELAYS:
            fig = _cdf_figure(data, delay, label, refs, pin)
            if fig:
                sec.blocks.append(fig)
        sec.blocks.append(_delay_table(data, refs))
        for delay, label in DELAYS[:2]:
            pay = _payload_figure(data, delay, label)
            if pay:
                sec.blocks.append(pay)
        sweep = _sweep_figure(data)
        if sweep:
            sec.blocks.append(sweep)
        sec.blocks.append(_max_rate_table(data, refs))
        sec.blocks.append(_backlog_table(data, refs))
        sec.blocks.append(_targets_table(data, refs))
        sec.add_references([figure12_check(data), figures13_14_check(data)], "Capstone figures vs here")
        saturated = sorted({m["variant"] for m in data.at(main) if m.get("saturated")})
        if saturated:
            sec.notes.append(
                f"saturated at {main:g} % of max (backlog grew during the point, or in-flight limit): "
                + ", ".join(saturated)
            )
        return sec


# ---- data access -------------------------------------------------------------


@dataclass
class Ref:
    p50_ns: float
    samples: int


def _references(store: Store, run_id: str, docs: list[EngineDocument]) -> dict[str, Ref]:
    """Pinned baseline references of the same run: this study's own baseline
    document first, then the `baseline` study's, if it ran."""
    out: dict[str, Ref] = {}
    candidates = [d for d in docs if d.engine == BASELINE] + [
        d for d in store.documents(run_id, "baseline") if d.engine == BASELINE
    ]
    for d in candidates:
        for m in d.document.get("measurements", []):
            if m.get("variant") == "pinned" and m["name"] in REFERENCES and m["name"] not in out:
                out[m["name"]] = Ref(float(m["latency"]["percentiles"]["50"]), int(m["latency"]["count"]))
    return out


class BenchData:
    def __init__(self, doc: dict):
        self.doc = doc
        cfg = doc.get("config", {})
        self.main_load = float(cfg.get("measure_at_pct", 75))
        self.sweep_payload = cfg.get("sweep_payload", "long_long")
        self.measurements = doc.get("measurements", [])
        self.max_rates: dict[str, float] = doc.get("max_rate_per_s", {})

    def at(self, load: float, name: str | None = None, payload: str | None = None) -> list[dict]:
        out = []
        for m in self.measurements:
            if m.get("series") == COMMON_RATE:
                continue
            if m.get("load_pct") is None or abs(float(m["load_pct"]) - load) > 1e-6:
                continue
            if name and m["name"] != name:
                continue
            if payload and m.get("payload") != payload:
                continue
            out.append(m)
        return sorted(out, key=_variant_key)

    def one(self, load: float, name: str, model: str, mechanism: str, payload: str) -> dict | None:
        for m in self.at(load, name, payload):
            if m.get("model") == model and m.get("mechanism") == mechanism:
                return m
        return None

    def loads(self) -> list[float]:
        return sorted(
            {
                float(m["load_pct"])
                for m in self.measurements
                if m.get("load_pct") is not None and m.get("series") != COMMON_RATE
            }
        )

    def common_rate(self, name: str) -> list[dict]:
        """The payload comparison: `name` of every payload at the rate all payloads of a model sustain."""
        return sorted(
            (m for m in self.measurements if m.get("series") == COMMON_RATE and m["name"] == name), key=_variant_key
        )

    def resume(self) -> dict | None:
        return next((m for m in self.measurements if m["name"] == "same_thread_resume"), None)


def _variant_key(m: dict):
    model = m.get("model", "")
    return (MODEL_ORDER.index(model) if model in MODEL_ORDER else 99, m.get("mechanism", ""), m.get("payload", ""))


def _p(m: dict, key: str) -> float:
    return float(m["latency"]["percentiles"][key])


def _ratio(v: float | None, ref: Ref | None) -> float | None:
    if v is None or ref is None or not ref.p50_ns:
        return None
    return v / ref.p50_ns


def _pinning_text(doc: dict) -> str:
    cfg = doc.get("config", {})
    if cfg.get("placement") != "pinned":
        return "Unpinned"
    return (
        f"Producer on CPU {cfg.get('producer_cpu')} (unpinned for std-async/std-thread, whose threads would "
        f"inherit it), consumer on CPU {cfg.get('consumer_cpu')}, {cfg.get('workers')} pool worker(s) on "
        f"CPU(s) {cfg.get('worker_cpus')}"
    )


def _label(m: dict) -> str:
    return f"{m.get('model')}/{m.get('mechanism')}"


# ---- figures -----------------------------------------------------------------


def _cdf_figure(data: BenchData, delay: str, label: str, refs: dict[str, Ref], pin: str) -> Figure | None:
    rows = data.at(data.main_load, delay, data.sweep_payload)
    if not rows:
        return None
    fig, ax = plots.new_figure(9.5, 4.6)
    models = [mm for mm in MODEL_ORDER if any(m.get("model") == mm for m in rows)]
    plots.latency_cdf(
        ax,
        [
            plots.CdfCurve(
                _label(m),
                [(float(v), float(p)) for v, p in m["cdf"]],
                plots.PALETTE[models.index(m["model"]) % len(plots.PALETTE)] if m["model"] in models else "#000",
                "-" if m.get("mechanism") == "future" else "--",
            )
            for m in rows
        ],
        ylabel=label.lower(),
    )
    for ref_name, ls in (("condvar_handoff", ":"), ("spin_handoff", "-.")):
        if ref_name in refs:
            ax.axhline(
                refs[ref_name].p50_ns, color="#57606a", linestyle=ls, linewidth=1, label=f"{REF_LABELS[ref_name]} p50"
            )
    ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    finding = _extremes_finding(rows, label, refs)
    samples = sum(int(m["latency"]["count"]) for m in rows)
    return Figure(
        f"{label} per model ({data.sweep_payload} payload, {data.main_load:g} % of each model's max rate)",
        plots.to_svg(fig),
        f"{pin}. Solid: std::promise/std::future; dashed: the model's own mechanism (continuation slot, "
        f"thread join, coroutine resumption). Grey lines: baseline references of the same run. "
        f"{fmt_count(samples)} calls in all, warm-up excluded.",
        finding,
    )


def _extremes_finding(rows: list[dict], label: str, refs: dict[str, Ref]) -> str:
    """Lowest and highest p50 among the points; flagged points are left out (and the line says how
    many), so a saturated point's queueing is never read as the model's cost."""
    clean = unflagged(rows, point_flags)
    left_out = len(rows) - len(clean)
    skipped = f" ({left_out} flagged point(s) left out: saturated)" if left_out else ""
    if not clean:
        return f"Every point was flagged saturated: no lowest or highest {label.lower()} is stated."
    best = min(clean, key=lambda m: _p(m, "50"))
    worst = max(clean, key=lambda m: _p(m, "50"))
    r_best = _ratio(_p(best, "50"), refs.get("condvar_handoff"))
    return (
        f"Lowest p50 {label.lower()}: {_label(best)} at {fmt_ns(_p(best, '50'))}"
        + (f" ({fmt_ratio(r_best)} the condvar hand-off)" if r_best is not None else "")
        + f"; highest: {_label(worst)} at {fmt_ns(_p(worst, '50'))} "
        f"({fmt_ratio(_p(worst, '50') / max(_p(best, '50'), 1.0))} the lowest){skipped}."
    )


def payload_finding(rows: list[dict], delay: str) -> str:
    """The biggest change of p50 `delay` from the smallest to the largest payload of one
    model/mechanism, from unflagged points only; a pair with a flagged point is never compared."""
    payloads = sorted({str(m.get("payload")) for m in rows}, key=_payload_key)
    if len(payloads) < 2:
        return "No model was measured with more than one payload."
    small, large = payloads[0], payloads[-1]
    by = {(m["model"], m["mechanism"], m.get("payload")): m for m in rows}
    biggest: tuple[float, str, float, float] | None = None
    flagged_pairs = 0
    for model, mech in sorted({(m["model"], m["mechanism"]) for m in rows}):
        ma, mb = by.get((model, mech, small)), by.get((model, mech, large))
        if not ma or not mb:
            continue
        if point_flags(ma) or point_flags(mb):
            flagged_pairs += 1
            continue
        if _p(ma, "50") > 0 and _p(mb, "50") > 0:
            r = _p(mb, "50") / _p(ma, "50")
            if biggest is None or abs(math.log(r)) > abs(math.log(biggest[0])):
                biggest = (r, f"{model}/{mech}", _p(ma, "50"), _p(mb, "50"))
    skipped = f" {flagged_pairs} pair(s) with a saturated point were not compared." if flagged_pairs else ""
    if biggest is None:
        return f"No unflagged pair of payload points to compare {delay.replace('_', ' ')}.{skipped}"
    r, variant, a, b = biggest
    return (
        f"{delay.replace('_', ' ').capitalize()}: payload changes it most for {variant} — p50 "
        f"{fmt_ns(a)} with {small} vs {fmt_ns(b)} with {large} ({fmt_ratio(r)}), at a rate both sustain.{skipped}"
    )


def _payload_key(p: str) -> tuple[int, str]:
    return (PAYLOAD_ORDER.index(p) if p in PAYLOAD_ORDER else len(PAYLOAD_ORDER), p)


def _payload_figure(data: BenchData, delay: str, label: str) -> Figure | None:
    """Capstone Figures 13/14: `delay` per payload, every payload of a model at one common rate."""
    import numpy as np

    rows = data.common_rate(delay)
    payloads = sorted({str(m.get("payload")) for m in rows}, key=_payload_key)
    if len(payloads) < 2:
        return None
    variants = sorted(
        {(m["model"], m["mechanism"]) for m in rows},
        key=lambda v: (MODEL_ORDER.index(v[0]) if v[0] in MODEL_ORDER else 99, v[1]),
    )
    by = {(m["model"], m["mechanism"], m.get("payload")): m for m in rows}
    fig, ax = plots.new_figure(8.5, 3.8)
    width = 0.8 / len(payloads)
    x = np.arange(len(variants))
    for k, p in enumerate(payloads):
        vals, hatch = [], []
        for model, mech in variants:
            m = by.get((model, mech, p))
            vals.append(_p(m, "50") if m else np.nan)
            hatch.append(bool(m and point_flags(m)))
        bars = ax.bar(x + (k - (len(payloads) - 1) / 2) * width, vals, width, label=p, color=plots.PALETTE[k % 8])
        for bar, flagged in zip(bars, hatch):
            if flagged:
                bar.set_hatch("xx")
    ax.set_yscale("log")
    plots.format_ns_axis(ax.yaxis)
    ax.set_xticks(x, [f"{a}/{b}" for a, b in variants], rotation=35, ha="right", fontsize=7)
    ax.set_ylabel(f"p50 {label.lower()}")
    ax.legend(fontsize=8, title="payload", loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    rates = data.doc.get("payload_common_rate_per_s", {})
    rate_text = ", ".join(f"{mm} {fmt_count(r)}/s" for mm, r in sorted(rates.items(), key=lambda kv: _model_key(kv[0])))
    return Figure(
        f"{label} per payload, at a rate every payload sustains",
        plots.to_svg(fig),
        f"p50 per model, mechanism and payload; log scale. Each model's payloads are offered one common rate, "
        f"{data.main_load:g} % of the lowest of its payloads' own maximum rates ({rate_text}). Hatched: a point "
        "flagged saturated (not used by the finding). vector10000 is std::vector<int> of 10 000 elements.",
        payload_finding(rows, delay),
    )


def _model_key(model: str) -> int:
    return MODEL_ORDER.index(model) if model in MODEL_ORDER else 99


def _sweep_figure(data: BenchData) -> Figure | None:
    loads = data.loads()
    if len(loads) < 2:
        return None
    fig, ax = plots.new_figure(9.5, 4.2)
    growth = []
    variants = sorted(
        {
            (m["model"], m["mechanism"])
            for m in data.measurements
            if m["name"] == "total" and m.get("payload") == data.sweep_payload
        },
        key=lambda v: (MODEL_ORDER.index(v[0]) if v[0] in MODEL_ORDER else 99, v[1]),
    )
    models = [v[0] for v in variants]
    for model, mech in variants:
        found = [(load, data.one(load, "total", model, mech, data.sweep_payload)) for load in loads]
        pts = [(load, m) for load, m in found if m]
        if len(pts) < 2:
            continue
        color = (
            plots.PALETTE[MODEL_ORDER.index(model) % 8]
            if model in MODEL_ORDER
            else plots.PALETTE[models.index(model) % 8]
        )
        ax.plot(
            [load for load, _ in pts],
            [_p(m, "99") for _, m in pts],
            "-o" if mech == "future" else "--o",
            color=color,
            markersize=3,
            linewidth=1.2,
            label=f"{model}/{mech}",
        )
        # The growth a finding may state: between the lowest and the highest point not flagged
        # saturated (a saturated point's tail is queueing that grows with the point's length).
        clean = [(load, m) for load, m in pts if not point_flags(m)]
        if len(clean) >= 2 and _p(clean[0][1], "99") > 0:
            lo, hi = clean[0][1], clean[-1][1]
            growth.append(
                (_p(hi, "99") / _p(lo, "99"), model, mech, clean[0][0], clean[-1][0], _p(lo, "99"), _p(hi, "99"))
            )
    ax.set_yscale("log")
    plots.format_ns_axis(ax.yaxis)
    ax.set_xlabel("offered load, % of the model's own max rate")
    ax.set_ylabel("p99 total delay")
    ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    if growth:
        g = max(growth)
        finding = (
            f"Among points not flagged saturated, the tail grows most for {g[1]}/{g[2]}: p99 total "
            f"{fmt_ns(g[5])} at {g[3]:g} % → {fmt_ns(g[6])} at {g[4]:g} % of max ({fmt_ratio(g[0])})."
        )
    else:
        finding = "Fewer than two unsaturated load points per model: no growth is stated."
    return Figure(
        f"Load sweep: p99 total delay vs load ({data.sweep_payload} payload)",
        plots.to_svg(fig),
        "Each model is offered a fraction of its own saturation rate, so the x axis means 'how close to "
        "its limit', not the same absolute rate.",
        finding,
    )


# ---- tables ------------------------------------------------------------------


def _delay_table(data: BenchData, refs: dict[str, Ref]) -> Table:
    rows = []
    names = ["scheduling_delay", "deferral_wait", "join_delay", "total"]
    for m in sorted(
        data.at(data.main_load, payload=data.sweep_payload),
        key=lambda m: (_variant_key(m), names.index(m["name"]) if m["name"] in names else 9),
    ):
        if m["name"] not in names:
            continue
        low = set(m["latency"].get("low_confidence", []))

        def cell(k: str, m: dict = m, low: set = low) -> str:  # bound now: called in this iteration
            return fmt_ns(_p(m, k)) + (" *" if k in low else "")

        p50 = _p(m, "50")
        rows.append(
            [
                _label(m),
                m["name"],
                fmt_count(m["latency"]["count"]),
                cell("50"),
                cell("90"),
                cell("99"),
                cell("99.9"),
                fmt_ratio(_ratio(p50, refs.get("condvar_handoff"))),
                fmt_ratio(_ratio(p50, refs.get("spin_handoff"))),
                fmt_ratio(_ratio(p50, refs.get("thread_create"))),
            ]
        )
    return Table(
        f"Delays at {data.main_load:g} % of each model's max rate ({data.sweep_payload} payload)",
        [
            "model/mechanism",
            "delay",
            "samples",
            "p50",
            "p90",
            "p99",
            "p99.9",
            "p50 ÷ condvar",
            "p50 ÷ spin",
            "p50 ÷ thread start",
        ],
        rows,
        "Ratios divide the p50 by the p50 of the pinned baseline reference of the same run. * = fewer than 10 "
        "samples lie beyond this percentile. deferral_wait exists for deferred calls only.",
        numeric_from=2,
    )


def _max_rate_table(data: BenchData, refs: dict[str, Ref]) -> Table:
    rows = []
    thread = refs.get("thread_create")
    ramps = data.doc.get("ramps", {})
    for model in sorted(data.max_rates, key=lambda x: MODEL_ORDER.index(x) if x in MODEL_ORDER else 99):
        rate = float(data.max_rates[model])
        per_call = 1e9 / rate if rate > 0 else None
        steps = ramps.get(model, {}).get("steps", [])
        found = ramps.get(model, {}).get("saturation_found", False)
        rows.append(
            [
                model,
                f"{rate:,.0f}".replace(",", "\u2009"),
                fmt_ns(per_call),
                fmt_ratio(per_call / thread.p50_ns) if (per_call and thread) else "—",
                str(len(steps)),
                "yes" if found else "no (cap reached)",
            ]
        )
    best = max(data.max_rates.items(), key=lambda kv: kv[1]) if data.max_rates else None
    worst = min(data.max_rates.items(), key=lambda kv: kv[1]) if data.max_rates else None
    caption = (
        "Highest achieved rate of a sustained ramp step (offered rate doubled per step, then refined between "
        "the last sustained and the first saturated step). Per-call budget = 1 / max rate."
    )
    if best and worst and worst[1] > 0:
        caption += f" {best[0]} sustains {fmt_ratio(best[1] / worst[1])} the rate of {worst[0]}."
    return Table(
        "Maximum sustained rate per model",
        ["model", "max calls/s", "per-call budget", "budget ÷ thread start", "ramp steps", "saturation found"],
        rows,
        caption,
        numeric_from=1,
    )


def _backlog(m: dict) -> dict:
    return m.get("observed", {}).get("backlog", {}) or {}


def _runqueue_share(b: dict) -> float | None:
    """Share of the point the pool's workers spent runnable but waiting for a CPU."""
    sched = b.get("sched") or {}
    w, window = sched.get("workers"), sched.get("window_ns")
    if not w or not window:
        return None
    return float(w["runqueue_wait_ns"]) / (float(window) * max(1, int(w.get("threads", 1))))


def explain(m: dict, refs: dict[str, Ref]) -> str:
    """One sentence, from the point's own data, on where its scheduling delay comes from."""
    b = _backlog(m)
    p50 = _p(m, "50")
    if not b:
        return "no backlog data in this document"
    lead = f"p50 {fmt_ns(p50)}: "
    if b.get("grew"):
        return (
            lead + "overloaded — the backlog grew during the point (median lateness "
            f"{fmt_ns(b.get('lateness_first_quarter_p50_ns'))} → {fmt_ns(b.get('lateness_last_quarter_p50_ns'))} "
            "from the first to the last quarter of the calls), so the delay is queueing and keeps growing"
        )
    if m.get("model") == "deferred":
        return lead + "deferred calls run inside the request; no queue"
    parts = []
    q50 = b.get("queue_p50")
    rq = _runqueue_share(b)
    stall = b.get("stall_fraction")
    if q50:
        parts.append(
            f"queueing — the median call found {fmt_count(q50)} earlier call(s) not yet started "
            f"(mean {b.get('queue_mean', 0):.3g}, max {fmt_count(b.get('queue_max'))}), though the backlog "
            "did not grow"
        )
        if stall is not None and stall > 0.05:
            parts.append(
                f"for {stall * 100:.0f} % of the point calls waited while no body started (gaps up to "
                f"{fmt_ns(b.get('stall_max_ns'))})"
            )
        if rq is not None and rq > 0.05:
            parts.append(f"the worker(s) sat runnable on a run queue, waiting for a CPU, {rq * 100:.0f} % of the point")
    else:
        parks = b.get("worker_parks_per_call")
        if parks is not None and parks >= 0.5:
            parts.append(
                f"hand-off — the median call found an empty queue, and the worker had parked before "
                f"{parks * 100:.0f} % of the calls: a kernel wake-up per call"
            )
        elif parks is not None:
            parts.append(
                f"hand-off — the median call found an empty queue and a running worker "
                f"(parked before {parks * 100:.0f} % of the calls)"
            )
        else:
            parts.append("the median call found no call ahead of it")
    why = [w for w in m.get("observed", {}).get("why_saturated", []) if not w.startswith("backlog grew")]
    if why:
        parts.append(
            "saturated: "
            + ", ".join(why)
            + (
                f" (in flight up to {fmt_count(b.get('in_flight_max'))}; the producer was held back)"
                if "in-flight limit reached" in why
                else ""
            )
        )
    hand = b.get("empty_queue_scheduling_p50_ns")
    if hand is not None and q50:
        ref_name = "spin_handoff" if m.get("model") in ("spin-pool", "work-stealing") else "condvar_handoff"
        r = _ratio(hand, refs.get(ref_name))
        parts.append(
            f"calls launched into an empty queue ({fmt_count(b.get('empty_queue_calls'))}) had p50 "
            f"{fmt_ns(hand)}" + (f" ({fmt_ratio(r)} the {REF_LABELS[ref_name]})" if r is not None else "")
        )
    return lead + "; ".join(parts)


def _backlog_table(data: BenchData, refs: dict[str, Ref]) -> Table:
    rows = []
    readings: list[tuple[str, str]] = []
    loads = data.loads()
    shown = sorted({loads[0] if loads else data.main_load, data.main_load})
    for load in shown:
        for m in data.at(load, "scheduling_delay", data.sweep_payload):
            b = _backlog(m)
            rq = _runqueue_share(b)
            parks = b.get("worker_parks_per_call")
            rows.append(
                [
                    f"{_label(m)} @ {load:g} %",
                    fmt_count(m.get("offered_per_s")),
                    fmt_count(m.get("achieved_per_s")),
                    fmt_count(b.get("queue_p50")) if "queue_p50" in b else "—",
                    (f"{b['in_flight_mean']:.3g} / {fmt_count(b['in_flight_max'])}" if "in_flight_mean" in b else "—"),
                    ("grew" if b.get("grew") else "steady") if b else "—",
                    "—" if rq is None else f"{rq * 100:.0f} %",
                    "—" if parks is None else f"{parks:.2f}",
                    fmt_ns(b.get("empty_queue_scheduling_p50_ns")),
                ]
            )
            readings.append((f"{_label(m)} @ {load:g} %", explain(m, refs)))
    return Table(
        "What the calls met: queue, backlog and CPU (scheduling delay)",
        [
            "model/mechanism @ load",
            "offered/s",
            "achieved/s",
            "queue p50",
            "in flight mean / max",
            "backlog",
            "workers on run queue",
            "parks per call",
            "p50, empty queue",
        ],
        rows,
        "Computed after each point from the five stamps of every call (nothing added to the timed path). Queue = "
        "calls launched earlier and not yet started when a call was launched; in flight = launched and not yet "
        "received. Backlog 'grew' = the median lateness (val_received − intended start) of the last quarter of the "
        "calls exceeds the first quarter's by more than 5 % of the point: the point is overloaded. Workers on run "
        "queue = time the pool's threads were runnable but waiting for a CPU (/proc schedstat), as a share of the "
        "point. Parks per call = times a worker went to sleep in the kernel ÷ calls. p50, empty queue = scheduling "
        "delay of the calls that found no call ahead of them: the hand-off alone.",
        numeric_from=1,
        details=readings,
    )


def _targets_table(data: BenchData, refs: dict[str, Ref]) -> Table:
    rows = []
    readings: list[tuple[str, str]] = []
    loads = data.loads()
    for label, model, mechs, ref_name, limit in TARGETS:
        ref = refs.get(ref_name)
        for load in sorted({loads[0] if loads else data.main_load, data.main_load}):
            for mech in mechs:
                m = data.one(load, "scheduling_delay", model, mech, data.sweep_payload)
                if not m:
                    continue
                r = _ratio(_p(m, "50"), ref)
                rows.append(
                    [
                        f"{label} ({mech}, {load:g} % load)",
                        fmt_ns(_p(m, "50")),
                        fmt_ns(ref.p50_ns) if ref else "—",
                        fmt_ratio(r),
                        f"≤ {limit:g}×",
                        "—" if r is None else ("met" if r <= limit else "not met"),
                    ]
                )
                readings.append((rows[-1][0], explain(m, refs)))
                hand = _backlog(m).get("empty_queue_scheduling_p50_ns")
                if hand is not None:
                    rh = _ratio(hand, ref)
                    rows.append(
                        [
                            "  same, calls launched into an empty queue only",
                            fmt_ns(hand),
                            fmt_ns(ref.p50_ns) if ref else "—",
                            fmt_ratio(rh),
                            f"≤ {limit:g}×",
                            "—" if rh is None else ("met" if rh <= limit else "not met"),
                        ]
                    )
                    readings.append(
                        (
                            f"{label} ({mech}, {load:g} % load), empty queue only",
                            f"{fmt_count(_backlog(m).get('empty_queue_calls'))} calls: the hand-off without queueing",
                        )
                    )
    resume = data.resume()
    if resume:
        v = _p(resume, "50")
        rows.append(
            [
                "coroutine resumed on the same thread, p50",
                fmt_ns(v),
                fmt_ns(RESUME_TARGET_NS),
                fmt_ratio(v / RESUME_TARGET_NS),
                "≤ 1× (50 ns)",
                "met" if v <= RESUME_TARGET_NS else "not met",
            ]
        )
        readings.append((rows[-1][0], "mean of 1000 resume→suspend round trips per sample"))
    return Table(
        "Performance targets, as measured (not asserted)",
        ["target", "measured p50", "reference", "ratio", "target", "verdict"],
        rows,
        "Targets from the study's issue, at the lowest load of the sweep and at the main load. Each is "
        "also shown for the calls that were launched into an empty queue (the hand-off without queueing): "
        "the baseline references are closed-loop (each hand-off starts when both threads are known to be "
        "running), while the benchmark's calls arrive open-loop, also while a worker is off its CPU.",
        numeric_from=1,
        details=readings,
    )


# ---- the capstone's figures beside this run ------------------------------------


def figure12_check(data: BenchData) -> ReferenceCheck:
    """The capstone's Figure 12, as we read it (its text is not in the repository; issue 3 states its
    finding): the launch policies side by side — std::async vs std::thread vs deferred, scheduling and
    join delay. Its finding: std::thread beats std::async. Judged on the p99 of both delays with
    std::future (the capstone's mechanism) at the main load; a flagged point is never compared."""
    reported = "as we read its Figure 12 (launch policies): std::thread beats std::async on scheduling and join delay"
    load = data.main_load
    pts = {
        (model, delay): data.one(load, delay, model, "future", data.sweep_payload)
        for model in ("std-async", "std-thread", "deferred")
        for delay in ("scheduling_delay", "join_delay")
    }
    missing = [f"{m} {d.replace('_', ' ')}" for (m, d), v in pts.items() if v is None and m != "deferred"]
    if missing:
        return ReferenceCheck(
            "capstone Figure 12",
            reported,
            "unavailable",
            UNAVAILABLE,
            f"not measured in this run: {', '.join(missing)}",
        )
    flagged = [
        cite(f"{m}/future {d.replace('_', ' ')}", point_flags(v))
        for (m, d), v in pts.items()
        if v is not None and m != "deferred" and point_flags(v)
    ]
    if flagged:
        return ReferenceCheck(
            "capstone Figure 12",
            reported,
            "unavailable",
            UNAVAILABLE,
            f"a point it would compare was flagged at {load:g} % of max: {', '.join(flagged)}",
        )
    wins = []
    parts = []
    for delay in ("scheduling_delay", "join_delay"):
        a, th = pts[("std-async", delay)], pts[("std-thread", delay)]
        assert a is not None and th is not None
        wins.append(_p(th, "99") <= _p(a, "99"))
        parts.append(
            f"{delay.replace('_', ' ')} p99 std::thread {fmt_ns(_p(th, '99'))} vs std::async {fmt_ns(_p(a, '99'))} "
            f"({fmt_ratio(_p(th, '99') / max(_p(a, '99'), 1.0))})"
        )
    verdict = HOLDS if all(wins) else PARTLY if any(wins) else DOES_NOT_HOLD
    a_s, th_s = pts[("std-async", "scheduling_delay")], pts[("std-thread", "scheduling_delay")]
    assert a_s is not None and th_s is not None
    rates = (
        f"each at {load:g} % of its own max rate (std::async {fmt_count(a_s.get('offered_per_s'))}/s, "
        f"std::thread {fmt_count(th_s.get('offered_per_s'))}/s offered)"
    )
    deferred = pts[("deferred", "scheduling_delay")]
    deferred_text = (
        f"; deferred starts its body {fmt_ns(_p(deferred, '50'))} after the request (p50): no hand-off"
        + (" [flagged: " + "; ".join(point_flags(deferred)) + "]" if point_flags(deferred) else "")
        if deferred is not None
        else ""
    )
    here = "; ".join(parts)
    return ReferenceCheck("capstone Figure 12", reported, here, verdict, f"{here}, {rates}{deferred_text}.")


# A payload changes a delay when its p50 moves by at least this factor from void to the largest
# payload: the rule this report applies, stated with every verdict.
PAYLOAD_CHANGE = 1.5


def figures13_14_check(data: BenchData) -> ReferenceCheck:
    """The capstone's Figures 13/14: scheduling and join delay per return type (void, long long, a vector
    of 10 000). Its finding: the size of the promised value changes the delays. Judged on std::async with
    std::future (the capstone's policy and mechanism) at the common rate every payload sustains; other
    model/mechanisms are counted beside it. Pairs with a flagged point are not compared."""
    reported = "the size of the promised value (void, long long, vector of 10 000) changes scheduling and join delay"
    changed: dict[str, list[str]] = {}
    async_moves: list[tuple[str, float]] = []
    skipped = 0
    compared = 0
    for delay in ("scheduling_delay", "join_delay"):
        rows = data.common_rate(delay)
        payloads = sorted({str(m.get("payload")) for m in rows}, key=_payload_key)
        if len(payloads) < 2:
            continue
        small, large = payloads[0], payloads[-1]
        by = {(m["model"], m["mechanism"], m.get("payload")): m for m in rows}
        for model, mech in sorted({(m["model"], m["mechanism"]) for m in rows}):
            ma, mb = by.get((model, mech, small)), by.get((model, mech, large))
            if not ma or not mb or _p(ma, "50") <= 0 or _p(mb, "50") <= 0:
                continue
            if point_flags(ma) or point_flags(mb):
                skipped += 1
                continue
            compared += 1
            r = _p(mb, "50") / _p(ma, "50")
            moved = max(r, 1 / r) >= PAYLOAD_CHANGE
            if moved:
                changed.setdefault(delay, []).append(f"{model}/{mech}")
            if model == "std-async" and mech == "future":
                async_moves.append((f"{delay.replace('_', ' ')} {small} → {large} {fmt_ratio(r)}", r))
    skipped_text = f"; {skipped} pair(s) with a flagged point not compared" if skipped else ""
    if not async_moves:
        return ReferenceCheck(
            "capstone Figures 13/14",
            reported,
            "unavailable",
            UNAVAILABLE,
            "std::async/future has no unflagged pair of payload points at a common rate in this run" + skipped_text,
        )
    async_changed = [text for text, r in async_moves if max(r, 1 / r) >= PAYLOAD_CHANGE]
    others = sum(len(v) for v in changed.values()) - len(async_changed)
    verdict = HOLDS if async_changed else (PARTLY if others else DOES_NOT_HOLD)
    here = "std::async/future p50: " + ", ".join(text for text, _ in async_moves)
    why = (
        f"{here} (a change counts at ×{PAYLOAD_CHANGE:g} or more either way); across every model, "
        f"{sum(len(v) for v in changed.values())} of {compared} unflagged delay pairs changed that much"
        f"{skipped_text}; at each model's common rate, {data.main_load:g} % of the lowest of its payloads' max rates."
    )
    return ReferenceCheck("capstone Figures 13/14", reported, here, verdict, why)


STUDY = AsyncModelsStudy()
