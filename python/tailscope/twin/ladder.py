"""The rate ladder: one way to run a twin at rising rates and say what each rung shows.

Both rankings of the twin use it — `tailscope advise` (tailscope's models on the twin) and
`tailscope diagnose --advise` (what-ifs in the user's terms, twin/whatif.py). A rung is one fresh
twin run at a multiple of the recorded rate; its p50/p99 are the load generator's, from the intended
send time. A rung is **flagged** when it cannot be cited as a clean finding: errors, < 95 % of the
offered rate served (saturated), or the load generator was the bottleneck. A flagged rung never
meets the objective. The ladder stops at the first rung that misses the objective (higher rungs only
load a twin that already missed) — except the first `always` rungs, which run whatever the earlier
ones showed (the what-ifs are predicted at the recorded rate *and* at 2× even when the recorded rate
already misses). The highest rate meeting the objective is a bound from the rungs, never interpolated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tailscope.lab.engines import EngineError
from tailscope.measure.measurement import measurement
from tailscope.twin.validate import TwinRun, load_summary, run_twin

ACHIEVED_FRACTION = 0.95


def point_flags(load: dict, rate: float) -> list[str]:
    """Why a rung cannot be cited as a clean finding (from the load generator's document)."""
    s = load_summary(load)
    flags = []
    if s["errors"]:
        flags.append(f"{s['errors']} errors")
    if s["achieved_per_s"] < ACHIEVED_FRACTION * rate:
        flags.append(f"saturated (served {s['achieved_per_s']:.4g} of {rate:.4g}/s)")
    if (load.get("load") or {}).get("generator_bottleneck"):
        flags.append("generator-limited")
    return flags


def latency_ns(load: dict, key: str) -> float | None:
    """Percentile `key` ("50", "99") of the load generator's latency from the intended send time."""
    m = measurement(load, "latency_intended")
    return m.p_ns(key) if m else None


def latency_intervals(load: dict) -> dict:
    """The 95 % intervals of p50 and p99 (measure.intervals, as the engine wrote them) for a rung:
    `p50_ci_ns`/`p99_ci_ns` = [lo, hi], or None with the reason in `ci_unavailable` — so a study that
    compares a rung with a measurement can judge the comparison (measure.verdict.ratio_within)."""
    m = measurement(load, "latency_intended")
    out: dict = {}
    why: dict[str, str] = {}
    for key in ("50", "99"):
        i = m.interval(key) if m else None
        ok = i is not None and i.available and i.lo_ns is not None and i.hi_ns is not None
        out[f"p{key}_ci_ns"] = [i.lo_ns, i.hi_ns] if ok and i is not None else None
        if not ok:
            why[f"p{key}"] = i.unavailable if i is not None else "no latency measurement"
    return out | ({"ci_unavailable": why} if why else {})


def latency_count(load: dict) -> int | None:
    """How many requests stand behind the rung's percentiles."""
    m = measurement(load, "latency_intended")
    return m.count if m else None


@dataclass(frozen=True)
class TwinRuns:
    """How every twin run of one ranking is run: the same measured time, warm-up and connections
    for the validation, every alternative and the sensitivity runs, so their percentiles compare."""

    duration_s: float
    warmup_s: float
    connections: int
    progress: Callable[[str], None] | None

    def run(self, topo: dict, model: str, rate_per_s: float, extra_args: list[str] | None = None) -> TwinRun:
        return run_twin(
            topo,
            model,
            rate_per_s,
            duration_s=self.duration_s,
            warmup_s=self.warmup_s,
            connections=self.connections,
            extra_args=extra_args,
            progress=self.progress,
        )


def rung(run: TwinRun, rate_per_s: float, objective_ns: float) -> dict:
    """One rung's point: p50/p99 with their request count, flags, whether it meets the objective."""
    p50, p99 = latency_ns(run.load, "50"), latency_ns(run.load, "99")
    flags = point_flags(run.load, rate_per_s)
    return {
        "rate_per_s": rate_per_s,
        "p50_ns": p50,
        "p99_ns": p99,
        "requests": latency_count(run.load),
        **latency_intervals(run.load),
        "flags": flags,
        "meets": p99 is not None and p99 <= objective_ns and not flags,
        **load_summary(run.load),
    }


def climb(
    run_at: Callable[[float], TwinRun],
    rate_per_s: float,
    ladder: list[float],
    objective_ns: float,
    *,
    always: int = 1,
    on_run: Callable[[float, TwinRun], None] | None = None,
) -> list[dict]:
    """The rungs of one twin: `run_at(rate)` for each multiple of `rate_per_s` in `ladder`, stopping
    after the first miss beyond the first `always` rungs, or at an engine error (said, not skipped).
    `on_run(multiple, run)` sees every completed run (the baseline's first rung is the validation)."""
    points: list[dict] = []
    for i, k in enumerate(ladder):
        rate = rate_per_s * k
        try:
            run = run_at(rate)
        except EngineError as e:  # e.g. --workers beyond the machine's thread limit
            points.append({"rate_per_s": rate, "p50_ns": None, "p99_ns": None, "unavailable": str(e), "flags": []})
            break
        if on_run is not None:
            on_run(k, run)
        points.append(rung(run, rate, objective_ns))
        if not points[-1]["meets"] and i + 1 >= always:
            break
    return points


def max_rate(points: list[dict]) -> tuple[float | None, str]:
    """The highest rung rate meeting the objective (None when none did) and the bound in words:
    from the rungs run, never interpolated. Only an unbroken run of met rungs from the first counts."""
    met: list[float] = []
    for p in points:
        if not p.get("meets"):
            break
        met.append(float(p["rate_per_s"]))
    failed = points[len(met)] if len(met) < len(points) else None
    if not met:
        return None, "none: the recorded rate already misses the objective or is flagged"
    if failed is None:
        return max(met), f"≥ {max(met):.4g}/s (every rung tried met it)"
    return max(met), f"≥ {max(met):.4g}/s, < {failed['rate_per_s']:.4g}/s (the next rung missed)"


def ladder_result(points: list[dict], objective_ns: float) -> dict:
    """What both callers rank by, from one ladder's rungs: the first rung's prediction (or why there
    is none), its flags, whether it meets the objective, the highest rate meeting it and the rungs."""
    first = points[0] if points else {}
    best, bound = max_rate(points) if points else (None, "none: not run")
    return {
        "predicted_p99_ns": first.get("p99_ns"),
        "predicted_p99_unavailable": first.get("unavailable")
        or (None if first.get("p99_ns") is not None else "no request completed"),
        "predicted_flags": first.get("flags", []),
        "within_objective": first.get("p99_ns") is not None and first["p99_ns"] <= objective_ns,
        "max_rate_at_objective_per_s": best,
        "max_rate_bound": bound,
        "points": points,
    }


def rank(results: list[dict]) -> list[dict]:
    """The ranking of both callers: a prediction before none, within the objective at the recorded
    rate first, clean before flagged, then by the highest rate meeting the objective, then by p99.
    Each result carries `predicted_p99_ns`, `within_objective`, `predicted_flags` and
    `max_rate_at_objective_per_s`; `rank` (1 …) is set on each."""
    ranked = sorted(
        results,
        key=lambda r: (
            r["predicted_p99_ns"] is None,
            not r["within_objective"],
            bool(r["predicted_flags"]),
            -(r["max_rate_at_objective_per_s"] or 0),
            r["predicted_p99_ns"] or 0,
        ),
    )
    for i, r in enumerate(ranked, 1):
        r["rank"] = i
    return ranked
