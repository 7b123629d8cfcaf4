"""How the `async` study runs: the plan (quick or full form, the run's options), then
tailscope-baseline's references and tailscope-asyncbench, one after the other, each reporting its
progress on its share of the study's bar. Returns the documents the runner stores.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tailscope.lab.engines import run_engine
from tailscope.store import EngineDocument
from tailscope.studies.asyncmodels.analysis import BASELINE, ENGINE, REFERENCES
from tailscope.studies.base import RunContext


@dataclass(frozen=True)
class RunPlan:
    """The two engine runs of the study: their arguments and the time either may take."""

    baseline_args: list[str]
    bench_args: list[str]
    timeout_s: float


def plan(ctx: RunContext) -> RunPlan:
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
    return RunPlan(base_args, bench_args, 3600 if ctx.form == "full" else 600)


def engine_progress(ctx: RunContext, prefix: str, lo: float, hi: float) -> Callable[[dict], None]:
    """An engine's progress lines mapped onto [lo, hi] of the study's bar. Not a StepProgress: each
    engine reports its own fraction done, finer than a step count could."""

    def on_progress(p: dict) -> None:
        f = float(p.get("fraction_done", 0.0))
        ctx.progress(f"async: {prefix} {p.get('phase', '')}", lo + (hi - lo) * f)

    return on_progress


def run_engines(ctx: RunContext, study: str) -> list[EngineDocument]:
    """The references first (the first tenth of the bar), then the benchmark."""
    p = plan(ctx)
    base = run_engine(
        BASELINE, p.baseline_args, timeout_s=p.timeout_s, on_progress=engine_progress(ctx, "references", 0.0, 0.1)
    )
    bench = run_engine(ENGINE, p.bench_args, timeout_s=p.timeout_s, on_progress=engine_progress(ctx, "", 0.1, 1.0))
    return [EngineDocument(study, BASELINE, base.document), EngineDocument(study, ENGINE, bench.document)]
