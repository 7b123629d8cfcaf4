"""Study `placement`, analysis: stored documents (dicts) → values.

Every decision the report states is made here, as a value of a frozen dataclass: each service's
sensitivity score and its basis, the placements compared (the knapsack's choice, the random and
latency-driven ones), the lowest end-to-end p99 and each placement's ratio to colocated, the
generator-limited flags, the most sensitive service, which counter figures are available. Pure
functions of their inputs: no engines, no sentences, no figures.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeGuard

from tailscope.measure.intervals import QuantileInterval
from tailscope.measure.measurement import achieved_per_s, measurement
from tailscope.measure.verdict import IntervalVerdict, at_most_other
from tailscope.report.blocks import DOES_NOT_HOLD, HOLDS, NOT_COMPARABLE, PARTLY, UNAVAILABLE
from tailscope.studies.placement.knapsack import Item
from tailscope.studies.placement.knapsack import solve as knapsack

SVC, LOAD = "tailscope-svc", "tailscope-load"
ANALYSIS = "placement-analysis"  # the study's own document: pools, sizing, decisions
SERVICES = ("frontend", "search", "geo", "rate", "profile", "recommendation", "reservation", "user")
# A real store server is placed like a service under this prefix (the name the /proc sampler gives it,
# lab/stores.py): "store:memcached", "store:redis", "store:mongodb".
STORE_PREFIX = "store:"


def is_store(unit: str) -> bool:
    return unit.startswith(STORE_PREFIX)


def store_system(unit: str) -> str:
    """store:redis → redis (the key of the topology's store_servers)."""
    return unit.removeprefix(STORE_PREFIX)


KERNELS = ("cpu", "l1i", "l1d", "l2", "l3", "membw", "memcap")
# Defaults of the score (docs/placement-study.md): as in the thesis, the 8-instance points and
# membw weigh most. Override with options["score_weights"] = {"intensity": {...}, "kernel": {...}}.
DEFAULT_WEIGHTS: dict[str, dict] = {
    "intensity": {1: 1.0, 2: 1.5, 4: 2.0, 8: 3.0},
    "kernel": {"cpu": 1.0, "l1i": 1.0, "l1d": 1.0, "l2": 1.0, "l3": 1.5, "membw": 2.0, "memcap": 1.0},
    "position": {"same-core": 1.0, "other-core": 1.0},
}
RANDOM_SEEDS = (1, 2)

# The metrics a score uses: IPC where the PMU counts (the thesis's metric), else the service's own
# latency and CPU time. End-to-end p99 is shown, not scored: it moves with every other service.
SCORE_METRICS_COUNTERS = ("ipc", "exclusive_p99_ns")
SCORE_METRICS_NO_COUNTERS = ("exclusive_p99_ns", "cpu_per_request_ns")
# What a score rests on (SensitivityScore.basis): one of these.
BASIS_COUNTERS = "IPC loss and exclusive p99"
BASIS_NO_COUNTERS = "exclusive p99 and CPU time per request"

TOPDOWN_LEVEL1 = ("frontend_bound", "bad_speculation", "backend_bound", "retiring")
# The counter figures that make the IPC / MPKI bars worth drawing.
IPC_BAR_FIGURES = ("ipc", "llc_mpki", "l1d_mpki")

# How a placement was chosen (Scenario.method); the scenario names are these, random ones numbered.
COLOCATED, KNAPSACK, RANDOM, LATENCY_DRIVEN = "colocated", "knapsack", "random", "latency-driven"
# Which pool a service got from the knapsack (SizingRow.pool).
PERFORMANCE_POOL, GENERAL_POOL = "performance", "general"

NO_MEASUREMENTS = "no placement measurements were stored for this run"
NO_COUNTERS = "the graph's documents carry no per-service hardware counters (tailscope-svc without --counters)"

# (kernel, instances, position) of one interference point: a column of the heatmap.
Interference = tuple[str, int, str | None]


# ---- sizing --------------------------------------------------------------------------------------


def weight_millicores(peak_cpu_pct: float | None) -> int:
    """A service's CPU need as the knapsack's integer weight: peak CPU % × 10, rounded up, ≥ 1."""
    return max(1, math.ceil((peak_cpu_pct or 0.0) * 10))


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of a small sample; None when empty."""
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q / 100 * len(s)) - 1))]


# ---- sensitivity points and scores -----------------------------------------------------------------


@dataclass(frozen=True)
class SensitivityPoint:
    """One sensitivity point: the tested service's metrics, alone on the performance pool (kernel
    None: the isolated baseline) or beside `instances` of a stress kernel at `position`."""

    service: str
    kernel: str | None
    instances: int = 0
    position: str | None = None
    exclusive_p50_ns: float | None = None
    exclusive_p99_ns: float | None = None
    traces: int = 0
    e2e_p50_ns: float | None = None
    e2e_p99_ns: float | None = None
    generator_bottleneck: bool = False
    cpu_per_request_ns: float | None = None
    ipc: float | None = None
    derived: Mapping[str, float] = field(default_factory=dict)  # the counter figures measured
    counter_reasons: tuple[str, ...] = ()  # why the others were not
    placement: dict | None = None  # what /proc showed of the service's placement


def relative_slowdowns(base: SensitivityPoint, point: SensitivityPoint) -> dict[str, float]:
    """Relative slowdown of each metric both points have: (interfered − isolated) ÷ isolated;
    IPC is a rate, so its loss is isolated ÷ interfered − 1."""
    out = {}
    for key in ("exclusive_p99_ns", "exclusive_p50_ns", "cpu_per_request_ns", "e2e_p99_ns"):
        b, p = getattr(base, key), getattr(point, key)
        if b and p is not None and b > 0:
            out[key] = p / b - 1
    b, p = base.ipc, point.ipc
    if b and p:
        out["ipc"] = b / p - 1
    return out


@dataclass(frozen=True)
class SensitivityScore:
    """A service's sensitivity: the weighted mean over its interference points of the mean relative
    slowdown of the score metrics (None when no point had one), and what it rests on."""

    service: str
    score: float | None
    basis: str  # BASIS_COUNTERS or BASIS_NO_COUNTERS
    cells: Mapping[Interference, float]  # the mean relative slowdown of each interference point

    @property
    def uses_counters(self) -> bool:
        return self.basis == BASIS_COUNTERS


def sensitivity_scores(points: Sequence[SensitivityPoint], weights: dict) -> dict[str, SensitivityScore]:
    """Per service (with an isolated point): its score; `basis` says which metrics (IPC or latency +
    CPU time)."""
    out: dict[str, SensitivityScore] = {}
    for service in dict.fromkeys(p.service for p in points):
        mine = [p for p in points if p.service == service]
        base = next((p for p in mine if p.kernel is None), None)
        if base is None:
            continue
        counters = base.ipc is not None
        metrics = SCORE_METRICS_COUNTERS if counters else SCORE_METRICS_NO_COUNTERS
        num = den = 0.0
        cells: dict[Interference, float] = {}
        for p in mine:
            kernel = p.kernel
            if kernel is None:
                continue
            slow = relative_slowdowns(base, p)
            vals = [slow[m] for m in metrics if m in slow]
            if not vals:
                continue
            s = sum(vals) / len(vals)
            w = (
                weights["intensity"].get(p.instances, 1.0)
                * weights["kernel"].get(kernel, 1.0)
                * weights["position"].get(p.position, 1.0)
            )
            cells[(kernel, p.instances, p.position)] = s
            num, den = num + w * s, den + w
        out[service] = SensitivityScore(
            service, num / den if den else None, BASIS_COUNTERS if counters else BASIS_NO_COUNTERS, cells
        )
    return out


# ---- placements ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    """One placement compared: the services on the performance pool (None: nothing pinned), how
    they were chosen and within what budget."""

    method: str  # COLOCATED, KNAPSACK, RANDOM or LATENCY_DRIVEN
    performance: tuple[str, ...] | None
    capacity_millicores: int
    seed: int | None = None  # RANDOM: the shuffle's seed
    total_score: float | None = None  # KNAPSACK: the chosen services' total score
    total_weight_millicores: int | None = None  # KNAPSACK: the CPU they use


def fill_pool(order: Sequence[str], weights: dict[str, int], capacity: int) -> list[str]:
    """Services taken in `order` while they fit the capacity (the random and latency-driven placements)."""
    chosen, used = [], 0
    for s in order:
        if used + weights[s] <= capacity:
            chosen.append(s)
            used += weights[s]
    return chosen


def scenarios(
    services: Sequence[str],
    weights: dict[str, int],
    scores: dict[str, float | None],
    exclusive_p99: dict[str, float | None],
    capacity: int,
    seeds: Sequence[int] = RANDOM_SEEDS,
) -> dict[str, Scenario]:
    """The placements compared, by name: colocated (pins nothing), the knapsack's, one random per
    seed (random-1, random-2, …) and the latency-driven one."""
    items = [Item(s, weights[s], max(scores.get(s) or 0.0, 0.0)) for s in services]
    best = knapsack(items, capacity)
    out = {
        COLOCATED: Scenario(COLOCATED, None, capacity),
        KNAPSACK: Scenario(
            KNAPSACK, tuple(best.chosen), capacity, total_score=best.value, total_weight_millicores=best.weight
        ),
    }
    for i, seed in enumerate(seeds, 1):
        order = list(services)
        random.Random(seed).shuffle(order)
        out[f"{RANDOM}-{i}"] = Scenario(RANDOM, tuple(fill_pool(order, weights, capacity)), capacity, seed=seed)
    by_latency = sorted(services, key=lambda s: -(exclusive_p99.get(s) or 0.0))
    out[LATENCY_DRIVEN] = Scenario(LATENCY_DRIVEN, tuple(fill_pool(by_latency, weights, capacity)), capacity)
    return out


# ---- reading the stored documents -----------------------------------------------------------------


def derived_counters(sv: dict) -> tuple[dict[str, float], list[str]]:
    """The derived counter figures of one service (IPC, MPKI, top-down) that were measured, and the
    reasons given for those that were not (tailscope-svc --counters; docs/placement-study.md)."""
    hw = sv.get("counters") or {}
    derived = hw.get("derived") if isinstance(hw.get("derived"), dict) else None
    if derived is None:
        return {}, [NO_COUNTERS]
    values: dict[str, float] = {}
    reasons: list[str] = []
    given = derived.get("reasons") if isinstance(derived.get("reasons"), dict) else {}
    for key, raw in derived.items():
        if key == "reasons":
            continue
        v: object = raw
        why = given.get(key) or derived.get(f"{key}_reason")
        if isinstance(raw, dict) and "value" in raw:  # {value, reason}
            v, why = raw.get("value"), raw.get("reason")
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            values[key] = float(v)
        elif isinstance(v, dict):  # top-down: {source, frontend_bound, ..., pipeline_width} or {reason}
            # Only the level-1 shares are figures; pipeline_width is the parameter they were computed with.
            parts = {
                f"{key}.{k}": float(x)
                for k, x in v.items()
                if k in TOPDOWN_LEVEL1 and isinstance(x, (int, float)) and not isinstance(x, bool)
            }
            values |= parts
            if not parts and v.get("reason"):
                reasons.append(f"{key}: {v['reason']}")
        elif why:
            reasons.append(f"{key}: {why}")
    return values, reasons


def _store_figures(gdoc: dict | None, unit: str) -> dict:
    """CPU time per front request of one store server from the merged graph document's `stores`
    (its CPU over the graph's life ÷ the front's requests); a store has no counters or placement of
    its own there, so its score rests on latency and CPU time."""
    g = gdoc or {}
    requests = int(((g.get("totals") or {}).get("front") or {}).get("requests") or 0)
    servers = ((g.get("stores") or {}).get("servers")) or []
    server = next((s for s in servers if isinstance(s, dict) and s.get("system") == store_system(unit)), {})
    cpu_s = server.get("cpu_s")
    cpu = float(cpu_s) if isinstance(cpu_s, (int, float)) and not isinstance(cpu_s, bool) else None
    return {
        "cpu_per_request_ns": cpu * 1e9 / requests if cpu and requests > 0 else None,
        "ipc": None,
        "derived": {},
        "counter_reasons": ("a store server runs no tailscope counters",),
        "placement": None,
    }


def _service_figures(gdoc: dict | None, service: str) -> dict:
    """CPU time per request and counters of one service (or store server) from the graph's document."""
    if is_store(service):
        return _store_figures(gdoc, service)
    sv = ((gdoc or {}).get("services") or {}).get(service) or {}
    cpu = sv.get("cpu") or {}
    requests = int((sv.get("counters") or {}).get("requests") or 0)
    cpu_s = (cpu.get("user_s") or 0) + (cpu.get("sys_s") or 0)
    derived, reasons = derived_counters(sv)
    return {
        "cpu_per_request_ns": cpu_s * 1e9 / requests if requests and cpu_s else None,
        "ipc": derived.get("ipc"),
        "derived": derived,
        "counter_reasons": tuple(reasons),
        "placement": sv.get("placement"),
    }


def sensitivity_points(docs: Sequence[dict]) -> list[SensitivityPoint]:
    """One point per sensitivity run: the tested service's metrics (load + graph documents joined by tag)."""
    graphs = {d["placement_point"]["tag"]: d for d in docs if "services" in d and "placement_point" in d}
    rows = []
    for d in docs:
        pp = d.get("placement_point") or {}
        if pp.get("kind") != "sensitivity" or "load" not in d:
            continue
        service = pp["service"]
        m = measurement(d, "latency_intended")
        ex = (pp.get("exclusive") or {}).get(service) or {}
        rows.append(
            SensitivityPoint(
                service=service,
                kernel=pp.get("kernel"),
                instances=pp.get("instances") or 0,
                position=pp.get("position"),
                exclusive_p50_ns=ex.get("p50_ns"),
                exclusive_p99_ns=ex.get("p99_ns"),
                traces=ex.get("traces", 0),
                e2e_p50_ns=m.p_ns("50") if m else None,
                e2e_p99_ns=m.p_ns("99") if m else None,
                generator_bottleneck=bool(d["load"].get("generator_bottleneck")),
                **_service_figures(graphs.get(pp["tag"]), service),
            )
        )
    return rows


def stored_weights(analysis: dict) -> dict:
    """The score weights the run used (its analysis document's plan; intensities back to ints)."""
    weights = (analysis.get("plan") or {}).get("weights")
    if not weights:
        return DEFAULT_WEIGHTS
    return {
        "intensity": {int(k): v for k, v in weights["intensity"].items()},
        "kernel": weights["kernel"],
        "position": weights["position"],
    }


# ---- the report's values ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SizingRow:
    """A service's CPU need (from the sizing run), its score and the pool the knapsack gave it."""

    service: str
    peak_pct: float | None
    p95_pct: float | None
    weight_millicores: int
    score: float | None  # None: not tested (or no interference point gave a slowdown)
    pool: str  # PERFORMANCE_POOL or GENERAL_POOL


@dataclass(frozen=True)
class Slowdown:
    """One cell of the heatmap: a service's mean relative slowdown at one interference point."""

    service: str
    interference: Interference
    slowdown: float


@dataclass(frozen=True)
class Heatmap:
    """Services × interference points; a cell is None where that point was not measured."""

    services: tuple[str, ...]
    columns: tuple[Interference, ...]
    cells: tuple[tuple[float | None, ...], ...]
    largest: Slowdown | None  # None: no cell has a slowdown

    @property
    def available(self) -> bool:
        return bool(self.services)


@dataclass(frozen=True)
class PlacedScenario:
    """A placement as the run stored it: the services on each pool (None: unpinned) and how it was chosen."""

    name: str
    performance: tuple[str, ...] | None
    general: tuple[str, ...] | None
    how: str  # the run's own description (stored in its analysis document)


@dataclass(frozen=True)
class ScenarioOutcome:
    """What one placement measured end to end, at the study's offered rate."""

    name: str
    p50_ns: float | None
    p99_ns: float | None
    p99_low_confidence: bool  # too few samples beyond p99
    achieved_per_s: float
    errors: int
    generator_bottleneck: bool  # the generator's own lag, not the graph, may set the tail
    p99_vs_colocated: float | None  # this p99 ÷ colocated's (1 for colocated); None: either unavailable
    # p50 and p99 with their 95 % intervals (measure.intervals); None: no latency measurement.
    p50: QuantileInterval | None = None
    p99: QuantileInterval | None = None


# ---- the thesis's results beside this run's (reference rows) ----------------------------------------

# The knapsack improves on colocated when its end-to-end latency is at most this share of colocated's
# (a 10 % margin: one short point's p99 moves by about that much from run to run).
KNAPSACK_BETTER_SHARE = 0.9


@dataclass(frozen=True)
class KnapsackVsColocated:
    """The thesis's §6.3.5 (the knapsack placement gave the best latency and tail latency, improving on
    colocated) beside this run: holds when the knapsack's p50 and p99 are both at most
    KNAPSACK_BETTER_SHARE of colocated's, partly when one is; unavailable when either placement was not
    measured or was flagged (generator-limited, too few samples beyond p99)."""

    verdict: str
    knapsack: ScenarioOutcome | None
    colocated: ScenarioOutcome | None
    p50_ratio: float | None  # knapsack ÷ colocated
    p99_ratio: float | None
    reason: str = ""  # why UNAVAILABLE
    # "knapsack ≤ KNAPSACK_BETTER_SHARE × colocated" at p50 and p99 judged by the two points' 95 %
    # intervals (measure.verdict.at_most_other): met, not met or undecided at this length. The
    # reference row's verdict (holds / partly / does not hold) stays the estimates'; these say which
    # of its two improvements the intervals confirm. Verdict "" with the reason when a point has none.
    p50_verdict: IntervalVerdict = IntervalVerdict("", unavailable="not judged")
    p99_verdict: IntervalVerdict = IntervalVerdict("", unavailable="not judged")


def knapsack_vs_colocated(outcomes: Sequence[ScenarioOutcome]) -> KnapsackVsColocated:
    by = {o.name: o for o in outcomes}
    k, c = by.get(KNAPSACK), by.get(COLOCATED)
    if k is None or c is None:
        missing = " and ".join(n for n, o in ((KNAPSACK, k), (COLOCATED, c)) if o is None)
        return KnapsackVsColocated(UNAVAILABLE, k, c, None, None, f"{missing} not measured in this run")
    p50 = k.p50_ns / c.p50_ns if k.p50_ns and c.p50_ns else None
    p99 = k.p99_ns / c.p99_ns if k.p99_ns and c.p99_ns else None
    flagged = [
        f"{o.name} ({'generator-limited' if o.generator_bottleneck else 'too few samples beyond p99'})"
        for o in (k, c)
        if o.generator_bottleneck or o.p99_low_confidence
    ]
    if flagged or p50 is None or p99 is None:
        why = f"flagged: {', '.join(flagged)}" if flagged else "a p50 or p99 is missing"
        return KnapsackVsColocated(UNAVAILABLE, k, c, p50, p99, why)
    better = [r <= KNAPSACK_BETTER_SHARE for r in (p50, p99)]
    verdict = HOLDS if all(better) else PARTLY if any(better) else DOES_NOT_HOLD
    by_interval = [_improved(k, c, "p50"), _improved(k, c, "p99")]
    return KnapsackVsColocated(verdict, k, c, p50, p99, "", *by_interval)


def _improved(k: ScenarioOutcome, c: ScenarioOutcome, which: str) -> IntervalVerdict:
    a, b = getattr(k, which), getattr(c, which)
    if a is None or b is None:
        return IntervalVerdict("", unavailable="no latency measurement")
    rates = (k.achieved_per_s or None, c.achieved_per_s or None)
    return at_most_other(a, b, *rates, share_of_b=KNAPSACK_BETTER_SHARE)


@dataclass(frozen=True)
class KernelDisagreement:
    """One tested service: the kernel that cut its IPC most and the one that raised its end-to-end p99
    most (each at the kernel's highest intensity measured, mean over positions)."""

    service: str
    ipc_kernel: str
    ipc_loss: float  # relative: isolated ÷ interfered − 1
    latency_kernel: str
    latency_rise: float  # relative: interfered ÷ isolated − 1

    @property
    def disagree(self) -> bool:
        return self.ipc_kernel != self.latency_kernel


@dataclass(frozen=True)
class IpcVsLatency:
    """The thesis's §6.3.4: IPC and tail latency disagree on what hurts a service (IPC lowest under the
    memory-bandwidth kernel, tail latency among its lowest there). Here, per tested service with IPC at
    two or more kernels: do the kernel that cuts IPC most and the one that raises the end-to-end p99 most
    (the thesis's wrk2 tail) differ? Holds when they differ for every such service, partly for some;
    unavailable without IPC (no usable PMU: the reason says why)."""

    verdict: str
    services: tuple[KernelDisagreement, ...]
    reason: str = ""


def ipc_vs_latency(points: Sequence[SensitivityPoint]) -> IpcVsLatency:
    rows = []
    for service in dict.fromkeys(p.service for p in points):
        mine = [p for p in points if p.service == service]
        base = next((p for p in mine if p.kernel is None), None)
        if base is None or base.ipc is None:
            continue
        top = {k: max(p.instances for p in mine if p.kernel == k) for k in {p.kernel for p in mine if p.kernel}}
        ipc: dict[str, list[float]] = {}
        lat: dict[str, list[float]] = {}
        for p in mine:
            if p.kernel is None or p.instances != top[p.kernel]:
                continue
            slow = relative_slowdowns(base, p)
            if "ipc" in slow and "e2e_p99_ns" in slow:
                ipc.setdefault(p.kernel, []).append(slow["ipc"])
                lat.setdefault(p.kernel, []).append(slow["e2e_p99_ns"])
        if len(ipc) < 2:
            continue
        mean = {k: (sum(ipc[k]) / len(ipc[k]), sum(lat[k]) / len(lat[k])) for k in ipc}
        ik = max(mean, key=lambda k: mean[k][0])
        lk = max(mean, key=lambda k: mean[k][1])
        rows.append(KernelDisagreement(service, ik, mean[ik][0], lk, mean[lk][1]))
    if not rows:
        reasons = sorted({r for p in points if p.kernel is None for r in p.counter_reasons})
        why = "no tested service has IPC at two or more interference kernels" + (
            f": {'; '.join(reasons)}" if reasons else ""
        )
        return IpcVsLatency(UNAVAILABLE, (), why)
    differ = [r.disagree for r in rows]
    verdict = HOLDS if all(differ) else PARTLY if any(differ) else DOES_NOT_HOLD
    return IpcVsLatency(verdict, tuple(rows))


@dataclass(frozen=True)
class LatencyPlacements:
    """The thesis's three hand-made latency placements (§5.4, §6.3.5: latency1–3, which did not improve
    on colocated) beside this run. This study does not run them — its latency-driven placement fills the
    performance pool by largest exclusive critical-path p99, one variant — so the row is NOT_COMPARABLE,
    with that placement's outcome shown beside."""

    verdict: str
    latency_driven: ScenarioOutcome | None
    reason: str


LATENCY_PLACEMENTS_REASON = (
    "the thesis's latency1–3 were three placements made by hand from its tail-latency results, placing together "
    "services sensitive to different resources; this study runs one latency-driven placement instead (largest "
    "exclusive critical-path p99 first while it fits the pool), not the thesis's pairing"
)


def latency_placements(outcomes: Sequence[ScenarioOutcome]) -> LatencyPlacements:
    o = next((o for o in outcomes if o.name == LATENCY_DRIVEN), None)
    return LatencyPlacements(NOT_COMPARABLE, o, LATENCY_PLACEMENTS_REASON)


@dataclass(frozen=True)
class PlacementSummary:
    """Everything the report says of the placement study, decided."""

    pools_general: tuple[int, ...]
    pools_performance: tuple[int, ...]
    pools_how: str
    same_core: str | None  # what same-core interference meant here (the run's words)
    rate_per_s: float | None
    capacity_millicores: int | None
    points: tuple[SensitivityPoint, ...]
    scores: Mapping[str, SensitivityScore]
    sizing: tuple[SizingRow, ...]
    heatmap: Heatmap
    placements: Mapping[str, PlacedScenario]  # every placement planned, in the run's order
    outcomes: tuple[ScenarioOutcome, ...]  # the measured ones, in the same order
    lowest_p99: str | None  # the outcome with the lowest end-to-end p99 (ties: by name)
    generator_limited: tuple[str, ...]  # outcomes flagged generator-limited
    knapsack_placed_none: bool  # the knapsack put no service on the performance pool
    most_sensitive: str | None  # the service with the highest score (None: none scored)
    score_bases: tuple[str, ...]  # the bases of the scores, sorted
    scored_without_counters: bool  # no score used hardware counters
    counter_bars: Mapping[str, Mapping[str, float]]  # isolated service → its counter figures
    counter_reasons: tuple[str, ...]  # why counter figures are missing (isolated points)
    ipc_bars_available: bool
    highest_ipc: str | None
    topdown_dominant: Mapping[str, str]  # service → its largest top-down level-1 category
    knapsack_check: KnapsackVsColocated | None = None  # the thesis's §6.3.5 beside this run
    ipc_check: IpcVsLatency | None = None  # the thesis's §6.3.4 beside this run
    latency_check: LatencyPlacements | None = None  # the thesis's latency1–3 beside this run

    def outcome(self, name: str) -> ScenarioOutcome:
        return next(o for o in self.outcomes if o.name == name)

    @property
    def topdown_available(self) -> bool:
        return bool(self.topdown_dominant)


def has_measurements(analysis: dict | None) -> TypeGuard[dict]:
    """Whether the run measured anything: its analysis document is stored and has pools (a machine
    below 2 cores stores one without: then the report says NO_MEASUREMENTS)."""
    return analysis is not None and "pools" in analysis


def _heatmap(points: Sequence[SensitivityPoint], scores: Mapping[str, SensitivityScore]) -> Heatmap:
    """Services × (kernel, instances, position)."""
    cols = sorted(
        {(p.kernel, p.instances, p.position) for p in points if p.kernel},
        key=lambda c: (KERNELS.index(c[0]) if c[0] in KERNELS else 99, c[1], c[2] or ""),
    )
    rows = [s for s in scores if any(p.service == s and p.kernel for p in points)]
    cells = [[scores[s].cells.get(c) for c in cols] for s in rows]  # None: not measured
    flat = [(v, r, c) for r, row in zip(rows, cells) for c, v in zip(cols, row) if v is not None]
    largest = None
    if flat:
        v, r, c = max(flat)
        largest = Slowdown(r, c, v)
    return Heatmap(
        tuple(rows),
        tuple((str(k), n, pos) for k, n, pos in cols),
        tuple(tuple(row) for row in cells),
        largest,
    )


def _outcomes(docs: Sequence[dict], planned: Sequence[str]) -> list[ScenarioOutcome]:
    sc_docs = {
        d["placement_point"]["scenario"]: d
        for d in docs
        if (d.get("placement_point") or {}).get("kind") == "scenario" and "load" in d
    }
    measured = {}
    for name in planned:
        d = sc_docs.get(name)
        if d is None:
            continue
        m = measurement(d, "latency_intended")
        measured[name] = (d, m, m.p_ns("99") if m else None)
    base = measured[COLOCATED][2] if COLOCATED in measured else None
    return [
        ScenarioOutcome(
            name=name,
            p50_ns=m.p_ns("50") if m else None,
            p99_ns=p99,
            p99_low_confidence=m is not None and "99" in m.low_confidence,
            achieved_per_s=achieved_per_s(d),
            errors=d["load"].get("errors_total", 0),
            generator_bottleneck=bool(d["load"].get("generator_bottleneck")),
            p99_vs_colocated=p99 / base if base and p99 else None,
            p50=m.interval("50") if m else None,
            p99=m.interval("99") if m else None,
        )
        for name, (d, m, p99) in measured.items()
    ]


def summarize(docs: Sequence[dict], analysis: dict) -> PlacementSummary:
    """The study's values from the stored documents (sensitivity, scenarios) and its analysis document."""
    points = sensitivity_points(docs)
    scores = sensitivity_scores(points, stored_weights(analysis))
    plans = analysis.get("scenarios") or {}
    placements = {}
    for name, sc in plans.items():
        perf = sc.get("performance")
        placements[name] = PlacedScenario(
            name,
            None if perf is None else tuple(perf),
            None if perf is None else tuple(x for x in analysis.get("units") or SERVICES if x not in perf),
            sc.get("how", ""),
        )
    outcomes = _outcomes(docs, list(plans))
    ranked = sorted((o.p99_ns, o.name) for o in outcomes if o.p99_ns)
    knap = set((plans.get(KNAPSACK) or {}).get("performance") or [])
    sizing = tuple(
        SizingRow(
            svc,
            v.get("peak_pct"),
            v.get("p95_pct"),
            v["weight_millicores"],
            scores[svc].score if svc in scores else None,
            PERFORMANCE_POOL if svc in knap else GENERAL_POOL,
        )
        for svc, v in (analysis.get("sizing") or {}).items()
    )
    scored = {s: v.score for s, v in scores.items() if v.score is not None}
    bases = tuple(sorted({scores[s].basis for s in scored}))
    base_points = [p for p in points if p.kernel is None]
    counter_bars = {p.service: p.derived for p in base_points if p.derived}
    with_ipc = [g for g in counter_bars if counter_bars[g].get("ipc") is not None]
    topdown = {g: v for g, v in counter_bars.items() if any(k.startswith("topdown.") for k in v)}
    parts = sorted({k for v in topdown.values() for k in v if k.startswith("topdown.")})
    pools = analysis.get("pools") or {}
    return PlacementSummary(
        pools_general=tuple(pools.get("general") or ()),
        pools_performance=tuple(pools.get("performance") or ()),
        pools_how=pools.get("how", ""),
        same_core=analysis.get("same_core"),
        rate_per_s=analysis.get("rate_per_s"),
        capacity_millicores=analysis.get("capacity_millicores"),
        points=tuple(points),
        scores=scores,
        sizing=sizing,
        heatmap=_heatmap(points, scores),
        placements=placements,
        outcomes=tuple(outcomes),
        lowest_p99=ranked[0][1] if ranked else None,
        generator_limited=tuple(o.name for o in outcomes if o.generator_bottleneck),
        knapsack_placed_none=(plans.get(KNAPSACK) or {}).get("performance") == [],
        most_sensitive=max(scored, key=lambda s: scored[s]) if scored else None,
        score_bases=bases,
        scored_without_counters=bool(scored) and BASIS_COUNTERS not in bases,
        counter_bars=counter_bars,
        counter_reasons=tuple(sorted({r for p in base_points for r in p.counter_reasons})),
        ipc_bars_available=any(k in v for v in counter_bars.values() for k in IPC_BAR_FIGURES),
        highest_ipc=max(with_ipc, key=lambda g: counter_bars[g]["ipc"]) if with_ipc else None,
        topdown_dominant={g: max(parts, key=lambda p: v.get(p) or 0.0).split(".", 1)[1] for g, v in topdown.items()},
        knapsack_check=knapsack_vs_colocated(outcomes),
        ipc_check=ipc_vs_latency(points),
        latency_check=latency_placements(outcomes),
    )
