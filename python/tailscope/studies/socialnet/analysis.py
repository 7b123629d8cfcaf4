"""The socialnet study's analysis: stored documents → values (frozen dataclasses).

Every verdict the section states is decided here, as a value: whether a point met the p99
objective (by its 95 % interval: met, not met or undecided at this length, measure.verdict), the ratio at the objective and its bracket, met / not met of the two targets, what the
run's own costs say about a missed target, core scaling, the tracing cost per model and sampling, and whether the
capstone's Figure 8 holds. section.py only formats these values. Pure functions of the documents
(dicts read back from the store): tested without engines (tests/unit/test_socialnet_analysis.py).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tailscope.lab.graph import LOAD, SVC
from tailscope.lab.stores import NO_STORES_REASON
from tailscope.measure.intervals import QuantileInterval, order_statistic_ranks
from tailscope.measure.measurement import achieved_per_s, measurement
from tailscope.measure.verdict import MET as INTERVAL_MET
from tailscope.measure.verdict import NOT_MET as INTERVAL_NOT_MET
from tailscope.measure.verdict import UNDECIDED, IntervalVerdict, at_most, decided_together, judge_at_most
from tailscope.report.blocks import DOES_NOT_HOLD, HOLDS, NOT_COMPARABLE, PARTLY, UNAVAILABLE
from tailscope.store import EngineDocument
from tailscope.studies.common import error_bar
from tailscope.units import fmt_ns

# ---- the plan's numbers: run.py measures with them, the section states them, the analysis judges
# by them (and soak, isolation and analyze reuse some); here, the package's lowest module. -----

BASELINE_MODEL = "std-async"
# Keep-alive connections of the closed-loop ceiling and of the open-loop sweep: the same number, so
# no model's open-loop rate is capped below its ceiling by Little's law (one request in flight per
# connection: rate ≤ connections ÷ latency). With 32 for the sweep, coroutine at 3 700/s needed 33 in
# flight (p50 9 ms): its requests waited for a free connection (intended p99 200 ms, actual 13.5 ms),
# and its max rate at the objective was the generator's connection count, not the model.
CEILING_CONNECTIONS = 64
CONNECTIONS = CEILING_CONNECTIONS
SWEEP_FRACTIONS = [0.3, 0.6, 0.8, 0.95, 1.1, 1.3, 1.6]
COMMON_RATE_FRACTION = 0.6  # of the slowest model's ceiling: every model sustains it
P99_OBJECTIVE_NS = 50e6
# Best ÷ std-async max rate at the p99 objective: the goal set for this study (the article's 30k/8k ≈ 3.75).
TARGET_RATIO = 4.0
REFINE_MODELS = 2  # besides std-async: the contenders for "best" (refine_candidates)
BASELINE = "tailscope-baseline"
# The second ping's calls in flight: an RPC of the loaded graph shares wake-ups and sends with
# others, so its cost lies between this ping's and the one-at-a-time ping's.
PING_BATCHED_CONCURRENCY = 16
TRACE_SAMPLE = 0.01
# The traces the analyze study reads (capstone Figures 6 and 8) come from one steady point per model at
# this fraction of its closed-loop ceiling — the capstone traced at "around 70-80% of the system
# capacity" (§3.1.5) — sampled at STEADY_TRACE_SAMPLE (1 % of a 2 s point would give a call ~20 samples).
# The load is written beside the traces (TRACE_LOAD_FILE) and stored with the analysis (`trace_load`).
STEADY_FRACTION = 0.75
STEADY_TRACE_SAMPLE = 0.2
TRACE_LOAD_FILE = "load.json"
CAPSTONE_LOAD_RANGE = (0.7, 0.8)  # of capacity, the capstone's load for its traces and Figure 3
# Capstone Figure 6 (§3.1.2): "at least 45ms" of scheduling, join and queuing delay in one trace, whose
# latency lies in its tail of 50–200 ms (Figure 3): at least 45 ÷ 200 of the trace, whatever its length.
CAPSTONE_TRACE_DELAY_NS = 45e6
CAPSTONE_TAIL_NS = (50e6, 200e6)
FIGURE6_MIN_SHARE = CAPSTONE_TRACE_DELAY_NS / CAPSTONE_TAIL_NS[1]
# Capstone Figure 8 (§3.1.4): the tail of the async-call delays is "at least 2-8 times" their p90.
FIGURE8_TAIL_OVER_P90 = 2.0
# Capstone Figure 3 (§3): compose-post p50 ≈ 10 ms, p90 = 5 × p50, tail 50–200 ms.
CAPSTONE_P50_NS = 10e6
CAPSTONE_P90_OVER_P50 = 5.0
# A ratio counts as the capstone's when it reaches this share of it (its figures are rounded: "a factor
# of 5"); the tail counts when p99 ≥ the tail's low end over the median (50 ms ÷ 10 ms).
CAPSTONE_RATIO_SHARE = 0.8
CAPSTONE_TAIL_OVER_P50 = CAPSTONE_TAIL_NS[0] / CAPSTONE_P50_NS
# The tracing targets (issue 30): 100 % sampling costs at most TRACING_COST_TARGET of the closed-loop
# throughput (OpenTelemetry SDKs advertise a few µs per span; a tracer that costs more distorts the tails
# it records), and the 1 % every socialnet point is traced at (TRACE_SAMPLE) at most
# TRACING_COST_TARGET_SAMPLED: the sweeps' latencies are measured with it on.
TRACING_COST_TARGET = 0.02
TRACING_COST_TARGET_SAMPLED = 0.005
TRACING_COST_TARGETS = {1.0: TRACING_COST_TARGET, TRACE_SAMPLE: TRACING_COST_TARGET_SAMPLED}
# The model of the highest closed-loop ceiling, written by run.py under the run's socialnet artifacts
# once the ceilings are measured: the isolation study reads it to choose its models.
BEST_CEILING_FILE = "best-ceiling.json"
# A call's p99 is cited only when at least this many samples stand behind it (1 % of them lie beyond it).
MIN_P99_SAMPLES = 100
# The median of n pairs has a two-sided 95 % order-statistic interval from 6 pairs on (0.5⁶ ≤ 0.025).
MIN_PAIRS_FOR_INTERVAL = 6
# A point serves its offered rate when it achieved at least this share of it.
SERVED_SHARE = 0.95
# Best ÷ std-async at the objective within this share of the CPU-per-request ratio: CPU accounts for it.
CPU_RATIO_TOLERANCE = 0.1

# What limits std-async against the best model, beside the CPU-per-request ratio (TargetShortfall.gap).
GAP_TAIL = "tail"  # the ratio at the objective exceeds the CPU ratio: the tail limits std-async first
GAP_CPU = "cpu"  # within CPU_RATIO_TOLERANCE of the CPU ratio: CPU per request accounts for it
GAP_SHORT_OF_CPU = "short of cpu"  # below it: the best model reaches less than its CPU advantage

SCHEDULING, JOIN = "scheduling", "join"
PROBE_CALLS = ("probe_call_scheduling", "probe_call_join")

UNPINNED = "unpinned (graph and generator share every core)"
# The graph point of the work comparison (issue 27): the baseline model's closed loop again with
# `tailscope-svc --work simulated`, beside its closed-loop graph of real work ("{model}/graph-closed").
WORK_SIMULATED_GRAPH = "graph-closed-work-simulated"
# The simulated-stores arm (issue 27: best ÷ std-async at the objective on the real graph beside the
# simulated one, from one run). When the run's graphs ran on real stores, std-async and the best model
# run their ceiling, sweep and bisections once more with `--stores simulated`. Their documents carry
# `socialnet_point.stores_arm = "simulated"` and points named "{model}/simulated-stores/…", and
# summarize() splits them off first: nothing the run's own analysis reads sees them.
STORES_ARM = "stores_arm"
SIMULATED_ARM = "simulated"
SIMULATED_ARM_POINT = "simulated-stores"
# How the two arms' ratios compare (StoresComparison.difference): decided by their ranges of plausible
# ratios (the points' p99 intervals, else the grid's bracket), never by the estimates alone.
WIDER_ON_REAL = "wider on real stores"
NARROWER_ON_REAL = "narrower on real stores"
OVERLAPPING = "overlapping"


# ---- one point -----------------------------------------------------------------------------------


def p99_ns(doc: dict) -> float | None:
    """The point's p99 of latency_intended (from the intended send time), or None."""
    m = measurement(doc, "latency_intended")
    return m.p_ns("99") if m else None


def meets_objective(d: dict) -> bool:
    """A point meets the objective: p99 within it, no errors, and the rate was really served."""
    p99 = p99_ns(d)
    want = d["socialnet_point"]["rate_per_s"] or 0
    return (
        p99 is not None
        and p99 <= P99_OBJECTIVE_NS
        and not d["load"].get("errors_total")
        and achieved_per_s(d) >= SERVED_SHARE * want
    )


def _rate(d: dict) -> float:
    return d["socialnet_point"]["rate_per_s"]


def p99_interval(doc: dict) -> QuantileInterval | None:
    """The point's p99 of latency_intended with its 95 % interval (or why none); None: no measurement."""
    m = measurement(doc, "latency_intended")
    return m.interval("99") if m else None


def p99_bounds(d: dict) -> tuple[float, float] | None:
    """The point's p99 interval for an error bar: None without one or with fewer than 10 samples beyond
    the p99 (docs/measurement.md: a bound a handful of samples set is not drawn as precise)."""
    m = measurement(d, "latency_intended")
    return error_bar(m.interval("99"), "99" in m.low_confidence) if m else None


def objective_verdict(d: dict) -> IntervalVerdict:
    """The p99 objective at one point, judged by the p99's 95 % interval (measure.verdict.at_most at the
    achieved rate, one latency sample per request): met, not met, or undecided at this length with the
    run length that would decide it. Errors, or a rate not served, are NOT_MET outright (not a question
    of sampling); a point without an interval is verdict "" with the reason (its estimate then decides,
    meets_objective). run.py's bisection follows the estimates: a run adapts to what it measured."""
    want = d["socialnet_point"]["rate_per_s"] or 0
    if d["load"].get("errors_total") or achieved_per_s(d) < SERVED_SHARE * want:
        return IntervalVerdict(INTERVAL_NOT_MET)
    p99 = p99_interval(d)
    if p99 is None:
        return IntervalVerdict("", unavailable="no latency_intended measurement")
    return at_most(p99, P99_OBJECTIVE_NS, achieved_per_s(d) or None)


# ---- what the run adapts to (run.py calls these between phases) --------------------------------


def objective_bracket(sweep: list[dict], judge: Callable[[dict], bool] | None = None) -> tuple[float, float] | None:
    """(the highest offered rate that met the p99 objective, the lowest offered rate above it that
    missed), or None when no rate met it or none above the best one missed. `judge` replaces
    meets_objective (the soak also asks for idle CPU)."""
    ok = judge or meets_objective
    met = [_rate(d) for d in sweep if ok(d)]
    if not met:
        return None
    low = max(met)
    above = [_rate(d) for d in sweep if not ok(d) and _rate(d) > low]
    return (low, min(above)) if above else None


def refine_candidates(sweeps: dict[str, list[dict]]) -> list[str]:
    """The models whose objective bracket is bisected: std-async (the ratio's denominator), and of
    the others every one that could still be the best — whose first miss lies above the highest
    rate any other model met on the grid (two models meeting at the same grid rate are both
    refined) — at most REFINE_MODELS of them, the highest first."""
    met = {m: max((achieved_per_s(d) for d in ds if meets_objective(d)), default=0.0) for m, ds in sweeps.items()}
    brackets = {m: objective_bracket(ds) for m, ds in sweeps.items()}
    top = max((v for m, v in met.items() if m != BASELINE_MODEL), default=0.0)
    others = sorted(
        (m for m, b in brackets.items() if m != BASELINE_MODEL and b is not None and b[1] > top),
        key=lambda m: -met[m],
    )[:REFINE_MODELS]
    return [m for m in (BASELINE_MODEL, *others) if m in sweeps]


def at_objective_per_s(points: Iterable[dict]) -> float:
    """The highest achieved rate of `points` (one model's open-loop points) that met the objective; 0
    when none did."""
    return max((achieved_per_s(d) for d in points if meets_objective(d)), default=0.0)


def best_at_objective(points_by_model: Mapping[str, list[dict]]) -> str | None:
    """The model of the highest rate at the objective (the first of equal ones, in the mapping's order:
    the run's): what summarize() calls the best, from the points run.py holds after the bisections."""
    return max(points_by_model, key=lambda m: at_objective_per_s(points_by_model[m])) if points_by_model else None


def in_simulated_arm(doc: Mapping[str, Any]) -> bool:
    """A document of the simulated-stores arm (its socialnet_point says so), not of the run's own stores."""
    return (doc.get("socialnet_point") or {}).get(STORES_ARM) == SIMULATED_ARM


def simulated_arm_models(models: Sequence[str], best: str | None) -> list[str]:
    """The models the simulated-stores arm runs: std-async and the run's best, once each, in that order."""
    return [m for m in dict.fromkeys([BASELINE_MODEL, best or BASELINE_MODEL]) if m in models]


def _stores_modes(stores: Iterable[Mapping[str, Any] | None]) -> dict[str, str]:
    """mode → the first reason recorded with it, over `stores` objects (ready lines' or documents'); an
    absent object is an engine from before real stores: simulated."""
    modes: dict[str, str] = {}
    for raw in stores:
        mode = raw.get("mode") if isinstance(raw, Mapping) else "simulated"
        reason = str(raw.get("reason") or "no reason recorded") if isinstance(raw, Mapping) else NO_STORES_REASON
        modes.setdefault(str(mode), reason)
    return modes


def simulated_arm_skip_reason(stores: Iterable[Mapping[str, Any] | None], models: Sequence[str]) -> str | None:
    """Why the simulated-stores arm does not run (None: it runs), from the `stores` objects of the run's
    graphs so far (run.py: the ready lines; the analysis: the run's own load documents): it runs only when
    every one of them ran real stores — on simulated ones the run's ratio already is the simulated one."""
    if BASELINE_MODEL not in models:
        return f"{BASELINE_MODEL} was not among the run's models: the ratio has no denominator"
    modes = _stores_modes(stores)
    if not modes:
        return "the run measured no graph"
    if set(modes) == {"real"}:
        return None
    if "real" not in modes:
        why = "; ".join(modes.values())
        return f"the run's stores were simulated ({why}): its ratio above already is the simulated one"
    return (
        "the run's graphs ran on real and on simulated stores ("
        + "; ".join(f"{m}: {r}" for m, r in modes.items())
        + "): there is no one real-store ratio to set a simulated one beside"
    )


# ---- the values ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SweepPoint:
    """One open-loop point of a model's sweep (a grid rate, the common rate or a bisection)."""

    rate_per_s: float  # offered
    achieved_per_s: float
    p99_ns: float | None
    errors: int
    meets_objective: bool  # by the point estimate (what run.py's bisection followed)
    # The p99 with its 95 % interval (None: no measurement) and the objective judged by it.
    p99: QuantileInterval | None = None
    verdict: IntervalVerdict = IntervalVerdict("", unavailable="not judged")
    low_confidence: bool = False  # fewer than 10 samples beyond the p99

    @property
    def surely_met(self) -> bool:
        """Met by the interval, or by the estimate when the point has no interval."""
        return self.verdict.verdict == INTERVAL_MET or (self.verdict.verdict == "" and self.meets_objective)

    @property
    def possibly_met(self) -> bool:
        """Not surely missed: met, undecided, or met by the estimate when the point has no interval."""
        return self.surely_met or self.verdict.verdict == UNDECIDED


@dataclass(frozen=True)
class CommonRateLatency:
    """A model's latency_intended at the common rate."""

    rate_per_s: float
    p50_ns: float | None
    p99_ns: float | None
    cdf: tuple[tuple[float, float], ...]  # (value_ns, percentile 0..100); empty when not stored
    p99_interval: QuantileInterval | None = None  # the p99 with its 95 % interval (or why none)
    p99_low_confidence: bool = False  # fewer than 10 samples beyond the p99


@dataclass(frozen=True)
class ErrorCounts:
    """Summed over every service of the model's sweep graph."""

    errors: int
    rejections: int
    timeouts: int
    malformed_frames: int


@dataclass(frozen=True)
class StoreCpu:
    """One store process's CPU per front request (a real-store graph): its user + sys over the graph's
    life (the engine reads /proc/PID/stat just before stopping it) ÷ the front's requests."""

    system: str  # memcached | redis | mongodb (served by PostgreSQL)
    cpu_per_request_ns: float | None
    unavailable: str | None  # why cpu_per_request_ns is None


@dataclass(frozen=True)
class CpuSplit:
    """A model's CPU per request split into its services and each store process (issue 27): the store
    processes compete for the same cores, so a request's cost includes theirs."""

    stores_mode: str  # real | simulated
    stores_reason: str
    services_cpu_per_request_ns: float | None  # every service process (the graph's CPU total)
    stores: tuple[StoreCpu, ...]  # one per store server; empty when the stores were simulated
    stores_unavailable: str | None  # why there is no store CPU at all (simulated, or no servers recorded)

    @property
    def total_cpu_per_request_ns(self) -> float | None:
        """Services + every store; None when any part is unknown (a partial sum would read as a total)."""
        parts = [self.services_cpu_per_request_ns, *(s.cpu_per_request_ns for s in self.stores)]
        return sum(p for p in parts if p is not None) if None not in parts else None


@dataclass(frozen=True)
class ServiceWorkCpu:
    """One service's CPU per call with its work stages doing real work and burning the busy loops they
    keep (`simulated_cpu`), each from a closed-loop graph of the same model. `*_work_ns`: the work stages'
    own CPU (the engine reads the thread's CPU clock around each) ÷ the service's calls; `*_process_ns`:
    the service process's user + sys ÷ its calls (the stages plus the transport and runtime around them)."""

    service: str
    real_work_ns: float | None
    simulated_work_ns: float | None
    real_process_ns: float | None
    simulated_process_ns: float | None
    unavailable: str | None  # why a figure is None

    @property
    def work_ratio(self) -> float | None:
        """Real work ÷ the busy loop it replaced (per call)."""
        return _ratio(self.real_work_ns, self.simulated_work_ns)

    @property
    def process_ratio(self) -> float | None:
        return _ratio(self.real_process_ns, self.simulated_process_ns)


@dataclass(frozen=True)
class WorkComparison:
    """Real work vs the simulated topology's busy loops, per service with a work stage (issue 27)."""

    model: str
    real_mode: str  # the work mode each graph document recorded ("real", "simulated")
    simulated_mode: str
    services: tuple[ServiceWorkCpu, ...]
    real_cpu_per_request_ns: float | None  # every service process ÷ front requests
    simulated_cpu_per_request_ns: float | None
    unavailable: str | None  # why there is no comparison at all


@dataclass(frozen=True)
class Decomposition:
    """One model's CPU per request, taken apart with the run's own measurements. Every figure is a
    number or None, and every None has its reason in `unavailable` (keyed by the field's name)."""

    requests: int
    cpu_per_request_ns: float | None
    rpcs_per_request: float | None
    ctx_switches_per_request: float | None
    async_threads_per_request: float | None
    threads: int | None
    cpu_per_rpc_ns: float | None  # in-run ping, one call in flight, both ends
    ping_rtt_p50_ns: float | None
    transport_cpu_per_request_ns: float | None
    transport_share: float | None
    transport_exceeds_cpu: bool  # transport share > 1: the one-at-a-time ping overstates a batched RPC
    batched_cpu_per_rpc_ns: float | None  # PING_BATCHED_CONCURRENCY calls in flight: the transport's low end
    batched_transport_share: float | None
    thread_create_ns: float | None
    thread_create_cpu_per_request_ns: float | None
    thread_create_share: float | None
    rest_cpu_per_request_ns: float | None  # what neither the transport nor thread creation explains
    attributed_exceeds_cpu: bool  # the attributed costs exceed the CPU per request (rest is then None)
    unavailable: Mapping[str, str]
    split: CpuSplit


@dataclass(frozen=True)
class CorePoint:
    """A model's closed-loop ceiling with the graph on `cpus` CPUs."""

    cpus: int
    ceiling_per_s: float
    cpu_per_request_ns: float | None


@dataclass(frozen=True)
class ModelResult:
    """One concurrency model's figures."""

    model: str
    ceiling_per_s: float | None  # closed loop; None when no closed-loop run was stored
    ceiling_ratio: float | None  # ÷ std-async's ceiling
    at_objective_per_s: float  # highest achieved rate that met the objective; 0 when none did
    ratio: float | None  # at_objective ÷ std-async's; None when std-async met it at no rate
    first_miss_per_s: float | None  # the lowest offered rate above at_objective that missed it
    bisections: int
    sweep: tuple[SweepPoint, ...]  # by offered rate
    common: CommonRateLatency | None
    cpu_per_request_ns: float | None  # over the sweep's graph
    threads: int | None  # sum over services of the per-process maximum
    errors: ErrorCounts
    decomposition: Decomposition
    cores: tuple[CorePoint, ...]  # by CPU count, ending with the all-CPU ceiling
    ceiling_cpu_per_request_ns: float | None  # the closed-loop run's own graph
    # The max rate at the objective as the p99 intervals bound it: the highest achieved rate surely
    # met (0: none) and the highest not surely missed (SweepPoint.surely_met / possibly_met).
    at_objective_sure_per_s: float = 0.0
    at_objective_possible_per_s: float = 0.0


@dataclass(frozen=True)
class ObjectiveReach:
    """One model's side of the ratio's bracket: it met the objective at `met_per_s` and missed at
    `first_miss_per_s` (None: at no higher rate tried)."""

    model: str
    met_per_s: float
    first_miss_per_s: float | None
    bisections: int


@dataclass(frozen=True)
class RatioBracket:
    """How far the rates tried pin best ÷ std-async at the objective: each model's max lies between
    the highest rate that met it and the next rate tried, which missed (the grid, then the
    bisections of that bracket)."""

    baseline: ObjectiveReach
    best: ObjectiveReach
    low: float | None  # best's met ÷ std-async's first miss; None: no lower bound
    high: float | None  # best's first miss ÷ std-async's met; None: no upper bound


@dataclass(frozen=True)
class RatioTarget:
    """The study's target: the best model ≥ TARGET_RATIO × std-async at the p99 objective."""

    best: str
    ratio: float | None  # None: std-async met the objective at none of its rates
    met: bool  # by the point estimates; False when the ratio is undefined
    bracket: RatioBracket | None  # None when the best is std-async itself, or the ratio is undefined
    unavailable: str | None  # why the ratio is undefined
    # The target judged by the p99 intervals: best's rate surely at the objective ÷ std-async's not
    # surely missed (low) and the reverse (high; None: unbounded, std-async surely met it nowhere).
    # MET when low ≥ TARGET_RATIO, NOT_MET when high < it, else UNDECIDED with the length that decides
    # every point in between (measure.verdict.decided_together).
    verdict: IntervalVerdict = IntervalVerdict("", unavailable="not judged")
    low_by_intervals: float | None = None
    high_by_intervals: float | None = None
    # Why some of the two models' points had no p99 interval (their estimates decide them); "" if all had.
    estimates_only: str = ""


@dataclass(frozen=True)
class BusyCores:
    """Ceiling × the closed-loop run's CPU per request."""

    model: str
    ceiling_per_s: float
    cores: float


@dataclass(frozen=True)
class TargetShortfall:
    """The ratio target missed by a model other than std-async: the costs the run measured for both."""

    best: str
    ratio: float  # best ÷ std-async at the objective
    baseline: Decomposition
    contender: Decomposition
    threads: tuple[int | None, int | None]  # (std-async, best)
    cpu_ratio: float | None  # std-async ÷ best CPU per request; None: see unavailable
    unavailable: str | None  # why the CPU per request (and so everything below) is missing
    busy: tuple[BusyCores, ...]
    cpu_per_rpc_ns: float | None  # the best model's ping, else std-async's
    gap: str | None  # GAP_TAIL, GAP_CPU or GAP_SHORT_OF_CPU; None without a CPU ratio


@dataclass(frozen=True)
class ModelScaling:
    """A model's ceiling from 1 graph CPU to all."""

    model: str
    points: tuple[CorePoint, ...]
    growth: float | None  # last ÷ first ceiling; None when either is 0
    cpu_growth: float  # last ÷ first CPU count


@dataclass(frozen=True)
class CeilingRatios:
    """A model's ceiling ÷ std-async's, per CPU count both ran on."""

    model: str
    by_cpus: tuple[tuple[int, float], ...]


@dataclass(frozen=True)
class CoreScaling:
    """The core-scaling runs: the only scaling evidence a small machine gives."""

    models: tuple[ModelScaling, ...]  # std-async first when it ran; empty when unavailable
    ratios: tuple[CeilingRatios, ...]  # only when std-async ran
    unavailable: str | None


@dataclass(frozen=True)
class TracingCost:
    """One model's closed-loop throughput at one sampling (`sample`: 1.0 or TRACE_SAMPLE) vs tracing
    off, alternated pairs (on one graph, or on fresh graphs in older runs): a row of the section's
    tracing-cost table."""

    model: str
    pairs: int
    ratio: float  # on ÷ off, median of the pairs
    cost: float  # 1 − ratio
    on_per_s: tuple[float, ...]
    off_per_s: tuple[float, ...]
    met: bool  # cost ≤ target, by the median (False without a target)
    # The median cost's distribution-free 95 % interval over the pairs (order statistics, as a percentile's):
    # None below MIN_PAIRS_FOR_INTERVAL pairs; the target judged by it (verdict "" and why without one).
    cost_interval: tuple[float, float] | None = None
    verdict: IntervalVerdict = IntervalVerdict("", unavailable="not judged")
    sample: float = 1.0  # the "on" side's sampling (stored runs before trace_sample: 100 %)
    target: float | None = TRACING_COST_TARGET  # TRACING_COST_TARGETS[sample]; None: no target for it
    # True: both sides of every pair ran on one warmed graph, its sampling switched by a signal (ABBA
    # order, socialnet/tracing.py); False: each point on a fresh graph (stored runs before the switch).
    one_graph: bool = False
    # The same pairs judged by CPU instead of throughput (socialnet/tracing.py SamplingSwitcher): per pair,
    # the services' extra CPU per request with tracing on ÷ the whole machine's busy CPU per request with it
    # off — the share of the machine's work per request that tracing adds. Median, its 95 % interval over
    # the pairs and the target judged by it; None with cpu_unavailable when a point had no CPU reading.
    cpu_cost: float | None = None
    cpu_cost_interval: tuple[float, float] | None = None
    cpu_verdict: IntervalVerdict = IntervalVerdict("", unavailable="not judged")
    cpu_unavailable: str = ""
    # True: every pair's two sides were 1-s stretches of ONE closed-loop run, the sampling switched on the
    # load generator's interval boundaries (socialnet/tracing.py run_switched_tracing); on_per_s and
    # off_per_s are then those sides' rates. `dropped`: sides that could not be paired, and why.
    switched: bool = False
    dropped: tuple[str, ...] = ()
    # A switched run's slots as it recorded them: (slot s, guard slots, used slots, warm-up s).
    slots: tuple[float, int, int, float] = (0.0, 0, 0, 0.0)
    switcher: str = ""  # the switching thread's scheduling policy, as the run recorded it


@dataclass(frozen=True)
class ConnectionsLine:
    model: str
    points: tuple[tuple[int, float], ...]  # (connections, p99_ns), by connections
    # Per point, the p99's 95 % interval (lo_ns, hi_ns) for an error bar; None: none, or < 10 beyond it.
    bounds: tuple[tuple[float, float] | None, ...] = ()


@dataclass(frozen=True)
class ConnectionsSweep:
    """p99 at the common rate over the connection counts."""

    rate_per_s: float
    lines: tuple[ConnectionsLine, ...]


@dataclass(frozen=True)
class StoresArm:
    """best ÷ std-async at the p99 objective on one arm's stores: the run's own graphs, or the
    simulated-stores arm beside them (issue 27). Both come from the same code (_model_results and
    _ratio_target over the arm's documents)."""

    stores: str  # the mode the arm's graphs recorded: "real" or "simulated" ("" when the arm did not run)
    stores_reason: str
    best: str | None  # the ratio's numerator: the run's best model, in both arms
    per: Mapping[str, ModelResult]  # the ratio's two models (one when the best is std-async)
    target: RatioTarget | None  # None: the arm did not run (see unavailable)
    unavailable: str | None  # why the arm did not run

    @property
    def ratio(self) -> float | None:
        return self.target.ratio if self.target else None

    @property
    def ratio_range(self) -> tuple[float, float | None] | None:
        """The plausible ratios: by the points' p99 intervals where they judged it, else the grid's bracket
        (low 0: no lower bound; high None: unbounded); None without a ratio."""
        t = self.target
        if t is None or t.ratio is None:
            return None
        if t.verdict.verdict and t.low_by_intervals is not None:
            return t.low_by_intervals, t.high_by_intervals
        if t.bracket is None:  # the best is std-async: 1× exactly
            return t.ratio, t.ratio
        return t.bracket.low or 0.0, t.bracket.high


@dataclass(frozen=True)
class StoresComparison:
    """The run's ratio at the objective beside the simulated-stores arm's (same two models, same
    procedure, only the stores differ)."""

    run: StoresArm
    simulated: StoresArm  # unavailable, with the reason, when the arm did not run
    run_over_simulated: float | None  # the run's ratio ÷ the arm's; None: either is undefined
    # WIDER_ON_REAL / NARROWER_ON_REAL when the two ranges of plausible ratios do not overlap, OVERLAPPING
    # when they do; None: no comparison (see the arms' unavailable and RatioTarget.unavailable).
    difference: str | None


@dataclass(frozen=True)
class SocialnetSummary:
    """Everything the section shows, decided."""

    models: tuple[str, ...]  # in the order the run measured them (the engine's --list-models order)
    per: Mapping[str, ModelResult]
    common_rate_per_s: float | None
    best: str | None  # the highest rate at the objective
    target: RatioTarget | None  # None when no model was measured
    shortfall: TargetShortfall | None  # only when the target was missed by another model than std-async
    core_scaling: CoreScaling | None  # None when no model was measured
    tracing: tuple[TracingCost, ...]  # one row per (model, sampling): tracing_costs; empty when none ran
    connections: ConnectionsSweep | None
    pinning: str  # where the graph and the generator ran
    pinned: bool  # tailscope run --cpus
    work: WorkComparison | None = None  # None: the run measured no simulated-work graph
    stores: StoresComparison | None = None  # None: no model was measured


# ---- documents → values ---------------------------------------------------------------------------------


def summarize_documents(docs: Sequence[EngineDocument]) -> SocialnetSummary | None:
    """The summary of a run's stored socialnet documents; None when it stored no load point."""
    loads = [d.document for d in docs if d.engine == LOAD and "socialnet_point" in d.document]
    if not loads:
        return None
    graphs = {d.point: d.document for d in docs if d.engine == SVC}
    baseline = next((d.document for d in docs if d.engine == BASELINE), None)
    return summarize(loads, graphs, baseline)


def models_in_run_order(loads: list[dict]) -> list[str]:
    """The models of these load documents in the order the run measured them (the store keeps
    insertion order; the run goes through the engine's model list in its order)."""
    return list(dict.fromkeys(d["socialnet_point"]["model"] for d in loads))


def summarize(loads: list[dict], graphs: dict[str, dict], baseline: dict | None = None) -> SocialnetSummary:
    """Everything the section shows, from the stored documents. `graphs`: tailscope-svc documents by
    point ("{model}/graph", "{model}/ping"); `baseline`: the run's thread_create baseline document.
    The simulated-stores arm's documents (in_simulated_arm, points "{model}/simulated-stores/…") are split
    off first: every figure but `stores` is the run's own stores'."""
    arm_loads = [d for d in loads if in_simulated_arm(d)]
    loads = [d for d in loads if not in_simulated_arm(d)]
    marker = f"/{SIMULATED_ARM_POINT}/"
    arm_graphs = {k.replace(marker, "/", 1): v for k, v in graphs.items() if marker in k}
    graphs = {k: v for k, v in graphs.items() if marker not in k}
    models = models_in_run_order(loads)
    per = _model_results(loads, graphs, baseline)
    common_rate = next((p.common.rate_per_s for p in reversed(per.values()) if p.common is not None), None)
    best = max(per, key=lambda m: per[m].at_objective_per_s) if per else None
    target = _ratio_target(per, best) if best else None
    shortfall = (
        _shortfall(per, best, target.ratio)
        if best and target and target.ratio is not None and not target.met and best != BASELINE_MODEL
        else None
    )
    pinning = loads[0]["socialnet_point"].get("pinning", UNPINNED) if loads else UNPINNED
    pinned = bool(pinning) and not pinning.startswith("unpinned")
    return SocialnetSummary(
        models=tuple(models),
        per=per,
        common_rate_per_s=common_rate,
        best=best,
        target=target,
        shortfall=shortfall,
        core_scaling=_core_scaling(per, pinned) if per else None,
        tracing=tuple(tracing_costs(loads)),
        connections=connections_sweep(loads),
        pinning=pinning,
        pinned=pinned,
        work=work_comparison(graphs),
        stores=stores_comparison(loads, per, best, target, arm_loads, arm_graphs, baseline) if best else None,
    )


def _model_results(loads: list[dict], graphs: Mapping[str, dict], baseline: dict | None) -> dict[str, ModelResult]:
    """Each model's figures from one arm's load documents and its graphs (by point, "{model}/graph", …),
    in run order; the ratios are to this arm's std-async."""
    partial: dict[str, dict[str, Any]] = {}
    for m in models_in_run_order(loads):
        mine = [d for d in loads if d["socialnet_point"]["model"] == m]
        closed = [d for d in mine if d["socialnet_point"]["kind"] == "closed"]
        sweep = sorted((d for d in mine if d["socialnet_point"]["kind"] in ("rate", "common", "refine")), key=_rate)
        at_objective = at_objective_per_s(sweep)
        # The grid's other side: the lowest offered rate above it that missed the objective.
        first_miss = min(
            (_rate(d) for d in sweep if not meets_objective(d) and _rate(d) > at_objective),
            default=None,
        )
        common = next((d for d in sweep if d["socialnet_point"]["kind"] == "common"), None)
        g = graphs.get(f"{m}/graph") or {}
        totals = g.get("totals", {})
        front_requests = (totals.get("front") or {}).get("requests") or 0
        errors = {
            k: sum(int(s.get("counters", {}).get(k, 0)) for s in g.get("services", {}).values())
            for k in ("errors", "rejections", "timeouts", "malformed_frames")
        }
        partial[m] = {
            "model": m,
            "ceiling_per_s": achieved_per_s(closed[0]) if closed else None,
            "at_objective_per_s": at_objective,
            "first_miss_per_s": first_miss,
            "bisections": sum(1 for d in sweep if d["socialnet_point"]["kind"] == "refine"),
            "sweep": tuple(_sweep_point(d) for d in sweep),
            "common": _common_latency(common) if common is not None else None,
            "cpu_per_request_ns": (totals.get("cpu_s", 0) * 1e9 / front_requests) if front_requests else None,
            "threads": totals.get("threads_max_sum"),
            "errors": ErrorCounts(**errors),
            "decomposition": decompose(g, graphs.get(f"{m}/ping"), baseline, graphs.get(f"{m}/ping-batched")),
            "cores": _core_points(mine, graphs, m, closed[0] if closed else None),
            "ceiling_cpu_per_request_ns": _graph_cpu_per_request(graphs.get(f"{m}/graph-closed") or {}),
        }
    for p in partial.values():
        p["at_objective_sure_per_s"] = max((q.achieved_per_s for q in p["sweep"] if q.surely_met), default=0.0)
        p["at_objective_possible_per_s"] = max((q.achieved_per_s for q in p["sweep"] if q.possibly_met), default=0.0)
    base = partial.get(BASELINE_MODEL, {}).get("at_objective_per_s") or 0
    base_ceiling = partial.get(BASELINE_MODEL, {}).get("ceiling_per_s") or 0
    return {
        m: ModelResult(
            **p,
            ratio=p["at_objective_per_s"] / base if base else None,
            ceiling_ratio=p["ceiling_per_s"] / base_ceiling if base_ceiling and p["ceiling_per_s"] else None,
        )
        for m, p in partial.items()
    }


def stores_comparison(
    loads: list[dict],
    per: Mapping[str, ModelResult],
    best: str,
    target: RatioTarget | None,
    arm_loads: list[dict],
    arm_graphs: Mapping[str, dict],
    baseline: dict | None = None,
) -> StoresComparison:
    """The run's best ÷ std-async at the objective beside the simulated-stores arm's: the arm's figures
    from the same _model_results and _ratio_target as the run's, over its own documents; when it has
    none, why (simulated_arm_skip_reason on the run's documents, else: a run from before the arm)."""
    two = simulated_arm_models(list(per), best)
    run_modes = _stores_modes(d.get("stores") for d in loads if d["socialnet_point"]["model"] in two)
    run_mode = next(iter(run_modes)) if len(run_modes) == 1 else "mixed"
    run = StoresArm(run_mode, "; ".join(run_modes.values()), best, {m: per[m] for m in two}, target, None)
    if not arm_loads:
        why = simulated_arm_skip_reason((d.get("stores") for d in loads), list(per)) or (
            "the run stored no simulated-stores arm (a run from before the arm)"
        )
        return StoresComparison(run, StoresArm("", "", best, {}, None, why), None, None)
    arm_per = _model_results(arm_loads, arm_graphs, baseline)
    # The arm ran the run's best; should it be missing (a failed start), its other model stands in.
    arm_best = best if best in arm_per else next((m for m in arm_per if m != BASELINE_MODEL), BASELINE_MODEL)
    arm_modes = _stores_modes(d.get("stores") for d in arm_loads)
    arm_mode = next(iter(arm_modes)) if len(arm_modes) == 1 else "mixed"
    arm_target = _ratio_target(arm_per, arm_best) if BASELINE_MODEL in arm_per else None
    no_baseline = None if arm_target else f"the arm stored no {BASELINE_MODEL} point: the ratio has no denominator"
    arm = StoresArm(arm_mode, "; ".join(arm_modes.values()), arm_best, arm_per, arm_target, no_baseline)
    ratio = _ratio(run.ratio, arm.ratio)
    return StoresComparison(run, arm, ratio, _difference(run, arm) if ratio is not None else None)


def _difference(run: StoresArm, arm: StoresArm) -> str:
    """WIDER_ON_REAL / NARROWER_ON_REAL when the two ranges of plausible ratios do not overlap, else
    OVERLAPPING (a difference the run's length cannot tell from sampling)."""
    a, b = run.ratio_range, arm.ratio_range
    assert a is not None and b is not None  # both ratios are defined
    if b[1] is not None and a[0] > b[1]:
        return WIDER_ON_REAL
    if a[1] is not None and a[1] < b[0]:
        return NARROWER_ON_REAL
    return OVERLAPPING


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def work_mode(graph: dict) -> str:
    """The work mode a graph document recorded (an engine before work modes recorded none: it did real work)."""
    raw = graph.get("work")
    return str(raw.get("mode")) if isinstance(raw, dict) and raw.get("mode") else "real (no mode recorded)"


def _per_call(graph: dict, service: str) -> tuple[float | None, float | None, str | None]:
    """(work-stage CPU, process CPU) per call of `service` in `graph`, and why one is None."""
    s = (graph.get("services") or {}).get(service)
    if not isinstance(s, dict):
        return None, None, "the graph document has no such service"
    calls = int((s.get("counters") or {}).get("requests") or 0)
    if calls <= 0:
        return None, None, "the service served no call"
    cpu = s.get("cpu") or {}
    process = (
        (cpu["user_s"] + cpu["sys_s"]) * 1e9 / calls
        if isinstance(cpu.get("user_s"), (int, float)) and isinstance(cpu.get("sys_s"), (int, float))
        else None
    )
    work = s.get("work")
    if not isinstance(work, dict) or not isinstance(work.get("cpu_ns"), (int, float)):
        return None, process, "the graph document has no work counters (an engine before work stages were timed)"
    return work["cpu_ns"] / calls, process, None if process is not None else "the service's CPU was not recorded"


def work_comparison(graphs: Mapping[str, dict]) -> WorkComparison | None:
    """Per service with a work stage: CPU per call with real work ("{model}/graph-closed") and with the
    busy loops ("{model}/graph-closed-work-simulated"). None when the run has no simulated-work graph."""
    key = next((k for k in graphs if k.endswith("/" + WORK_SIMULATED_GRAPH)), None)
    if key is None:
        return None
    model = key[: -len(WORK_SIMULATED_GRAPH) - 1]
    simulated = graphs[key]
    real = graphs.get(f"{model}/graph-closed")
    if real is None:
        return WorkComparison(
            model, "unavailable", work_mode(simulated), (), None, None, f"no closed-loop graph of {model} was stored"
        )

    def staged(g: dict) -> set[str]:
        return {
            n
            for n, s in (g.get("services") or {}).items()
            if isinstance(s, dict) and int((s.get("work") or {}).get("stages") or 0) > 0
        }

    rows = []
    for name in sorted(staged(real) | staged(simulated)):
        rw, rp, rwhy = _per_call(real, name)
        sw, sp, swhy = _per_call(simulated, name)
        why = "; ".join(f"{label}: {w}" for label, w in (("real", rwhy), ("simulated", swhy)) if w) or None
        rows.append(ServiceWorkCpu(name, rw, sw, rp, sp, why))
    return WorkComparison(
        model,
        work_mode(real),
        work_mode(simulated),
        tuple(rows),
        _graph_cpu_per_request(real),
        _graph_cpu_per_request(simulated),
        None if rows else "no service of the graph ran a work stage",
    )


def _sweep_point(d: dict) -> SweepPoint:
    m = measurement(d, "latency_intended")
    return SweepPoint(
        _rate(d),
        achieved_per_s(d),
        p99_ns(d),
        d["load"].get("errors_total", 0),
        meets_objective(d),
        p99=m.interval("99") if m else None,
        verdict=objective_verdict(d),
        low_confidence=bool(m and "99" in m.low_confidence),
    )


def _common_latency(doc: dict) -> CommonRateLatency:
    m = measurement(doc, "latency_intended")
    return CommonRateLatency(
        rate_per_s=_rate(doc),
        p50_ns=m.p_ns("50") if m else None,
        p99_ns=m.p_ns("99") if m else None,
        cdf=tuple(m.cdf) if m else (),
        p99_interval=m.interval("99") if m else None,
        p99_low_confidence=bool(m and "99" in m.low_confidence),
    )


def _ratio_target(per: Mapping[str, ModelResult], best: str) -> RatioTarget:
    base = per[BASELINE_MODEL].at_objective_per_s if BASELINE_MODEL in per else 0.0
    if not base:
        return RatioTarget(best, None, False, None, "std-async met the p99 objective at none of its rates")
    ratio = per[best].at_objective_per_s / base
    verdict, low, high = _ratio_verdict(per, best)
    sides = [per[BASELINE_MODEL], per[best]]
    no_interval = next((q.verdict.unavailable for r in sides for q in r.sweep if q.verdict.unavailable), "")
    if not any(q.p99 is not None and q.p99.available for r in sides for q in r.sweep):
        # No point has an interval (documents from before intervals): the estimates alone decide, and say so.
        verdict, low, high, no_interval = IntervalVerdict("", unavailable=no_interval or "no p99"), None, None, ""
    return RatioTarget(
        best, ratio, ratio >= TARGET_RATIO, _ratio_bracket(per, best), None, verdict, low, high, no_interval
    )


def _ratio_verdict(per: Mapping[str, ModelResult], best: str) -> tuple[IntervalVerdict, float | None, float | None]:
    """best ÷ std-async at the objective judged by the points' p99 intervals: (verdict, low, high).
    Each model's max rate at the objective lies between its highest rate surely met and its highest
    not surely missed; the ratio between the extremes of the two. (Each point's interval is 95 %; the
    pair of ends is judged together, so this is a range of plausible ratios, not a 95 % interval of it.)"""
    a, b = per[BASELINE_MODEL], per[best]
    if best == BASELINE_MODEL:
        return IntervalVerdict(INTERVAL_NOT_MET), 1.0, 1.0  # std-async against itself: 1×
    low = b.at_objective_sure_per_s / a.at_objective_possible_per_s
    high = b.at_objective_possible_per_s / a.at_objective_sure_per_s if a.at_objective_sure_per_s else None
    if low >= TARGET_RATIO:
        return IntervalVerdict(INTERVAL_MET), low, high
    if high is not None and high < TARGET_RATIO:
        return IntervalVerdict(INTERVAL_NOT_MET), low, high
    # What leaves it open: the undecided points above each model's surely met rate.
    open_points = [
        q.verdict
        for r in (a, b)
        for q in r.sweep
        if q.verdict.verdict == UNDECIDED and q.achieved_per_s > r.at_objective_sure_per_s
    ]
    if not open_points:  # cannot happen (an open range needs an undecided point), but say so if it does
        return IntervalVerdict(UNDECIDED, why_no_length="no undecided point bounds the ratio"), low, high
    return decided_together(open_points), low, high


def _ratio_bracket(per: Mapping[str, ModelResult], best: str) -> RatioBracket | None:
    if best == BASELINE_MODEL:
        return None
    a, b = per[BASELINE_MODEL], per[best]
    return RatioBracket(
        baseline=ObjectiveReach(a.model, a.at_objective_per_s, a.first_miss_per_s, a.bisections),
        best=ObjectiveReach(b.model, b.at_objective_per_s, b.first_miss_per_s, b.bisections),
        low=b.at_objective_per_s / a.first_miss_per_s if a.first_miss_per_s else None,
        high=b.first_miss_per_s / a.at_objective_per_s if b.first_miss_per_s else None,
    )


def _shortfall(per: Mapping[str, ModelResult], best: str, ratio: float) -> TargetShortfall:
    """The target missed: which costs the run measured for std-async and the best model."""
    a, b = per[BASELINE_MODEL].decomposition, per[best].decomposition
    ca, cb = a.cpu_per_request_ns, b.cpu_per_request_ns
    threads = (a.threads, b.threads)
    if ca is None or cb is None:
        why = a.unavailable.get("cpu_per_request_ns") or b.unavailable.get("cpu_per_request_ns") or "not measured"
        return TargetShortfall(best, ratio, a, b, threads, None, why, (), None, None)
    cpu_ratio = ca / cb
    # The closed-loop run's own CPU per request (its graph document): the sweep's graph also served
    # the overloaded rates, whose CPU per request is not the ceiling's.
    busy = tuple(
        BusyCores(m, c, c * cpu / 1e9)
        for m in (BASELINE_MODEL, best)
        if (c := per[m].ceiling_per_s) and (cpu := per[m].ceiling_cpu_per_request_ns)
    )
    # The measured ratio at the objective beside the CPU ratio: what is not explained by CPU.
    if ratio > cpu_ratio * (1 + CPU_RATIO_TOLERANCE):
        gap = GAP_TAIL
    elif ratio >= cpu_ratio * (1 - CPU_RATIO_TOLERANCE):
        gap = GAP_CPU
    else:
        gap = GAP_SHORT_OF_CPU
    return TargetShortfall(best, ratio, a, b, threads, cpu_ratio, None, busy, b.cpu_per_rpc_ns or a.cpu_per_rpc_ns, gap)


def _core_points(
    mine: list[dict], graphs: Mapping[str, dict], model: str, closed: dict | None
) -> tuple[CorePoint, ...]:
    """A model's closed-loop ceiling per number of graph CPUs: the core-scaling runs, then the
    all-CPU ceiling (its CPU count from the runs' allowed_cpus); CPU per request from each graph."""
    points = []
    for d in sorted(
        (d for d in mine if d["socialnet_point"]["kind"] == "cores"),
        key=lambda d: len(d["socialnet_point"]["graph_cpus"]),
    ):
        k = len(d["socialnet_point"]["graph_cpus"])
        g = graphs.get(f"{model}/graph-cores-{k}") or {}
        points.append(CorePoint(k, achieved_per_s(d), _graph_cpu_per_request(g)))
    if points and closed is not None:
        allowed = mine[0]["socialnet_point"].get("allowed_cpus") or next(
            (d["socialnet_point"].get("allowed_cpus") for d in mine if d["socialnet_point"].get("allowed_cpus")), None
        )
        if allowed:
            points.append(
                CorePoint(
                    int(allowed),
                    achieved_per_s(closed),
                    _graph_cpu_per_request(graphs.get(f"{model}/graph-closed") or {}),
                )
            )
    return tuple(points)


def _graph_cpu_per_request(g: dict) -> float | None:
    totals = g.get("totals", {})
    requests = (totals.get("front") or {}).get("requests") or 0
    return totals.get("cpu_s", 0) * 1e9 / requests if requests else None


def _core_scaling(per: Mapping[str, ModelResult], pinned: bool) -> CoreScaling:
    """How the measured models' ceilings (std-async's and the best ceiling's) grew from 1 graph CPU
    to all, and the ratio between them at each count."""
    models = [m for m in dict.fromkeys([BASELINE_MODEL, *per]) if m in per and per[m].cores]
    if not models:
        why = (
            "the graph was pinned to one CPU (tailscope run --cpus), so there was no smaller CPU count to run it on"
            if pinned
            else "no closed-loop run on fewer CPUs was stored (a machine with one allowed CPU has none to drop)"
        )
        return CoreScaling((), (), why)
    scaling = []
    for m in models:
        pts = per[m].cores
        first, last = pts[0].ceiling_per_s, pts[-1].ceiling_per_s
        growth = last / first if first and last else None
        scaling.append(ModelScaling(m, pts, growth, pts[-1].cpus / pts[0].cpus))
    ratios = []
    if models[0] == BASELINE_MODEL:
        a = {p.cpus: p.ceiling_per_s for p in per[BASELINE_MODEL].cores}
        for other in models[1:]:
            b = {p.cpus: p.ceiling_per_s for p in per[other].cores}
            by_cpus = tuple((k, b[k] / a[k]) for k in sorted(a) if k in b and a[k])
            if by_cpus:
                ratios.append(CeilingRatios(other, by_cpus))
    return CoreScaling(tuple(scaling), tuple(ratios), None)


def decompose(
    graph: dict | None, ping: dict | None, baseline: dict | None, ping_batched: dict | None = None
) -> Decomposition:
    """One model's CPU per request, taken apart with the run's own measurements: its graph document,
    its in-run pings (one call in flight; `ping_batched`: PING_BATCHED_CONCURRENCY in flight, the
    transport's low end) and the run's thread_create baseline."""
    why: dict[str, str] = {}
    g = graph or {}
    totals = g.get("totals") or {}
    services = (g.get("services") or {}).values()
    requests = (totals.get("front") or {}).get("requests") or 0
    if not graph:
        why["graph"] = "the model's graph wrote no result document"
    cpu_per_request = rpcs = ctx_per_request = async_threads = None
    if not requests:
        for f in ("cpu_per_request_ns", "rpcs_per_request", "ctx_switches_per_request", "async_threads_per_request"):
            why[f] = "the front served no request"
    else:
        cpu_per_request = totals["cpu_s"] * 1e9 / requests if "cpu_s" in totals else None
        if cpu_per_request is None:
            why["cpu_per_request_ns"] = "the graph document has no CPU total"
        # Every downstream RPC is counted once, by its caller.
        calls = [s.get("counters", {}).get("calls") for s in services]
        rpcs = sum(calls) / requests if calls and None not in calls else None
        if rpcs is None:
            why["rpcs_per_request"] = "the services' calls counters are missing"
        ctx = totals.get("ctx_switches")
        ctx_per_request = ctx / requests if ctx is not None else None
        if ctx is None:
            why["ctx_switches_per_request"] = "the graph document has no context-switch counts"
        started = [s.get("counters", {}).get("async_threads") for s in services]
        async_threads = sum(started) / requests if started and None not in started else None
        if async_threads is None:
            why["async_threads_per_request"] = "the services' async_threads counters are missing"
    threads = totals.get("threads_max_sum")
    if threads is None:
        why["threads"] = "the graph document has no thread counts"

    p = (ping or {}).get("ping") or {}
    cpu_per_rpc = p.get("cpu_per_call_ns")
    rtt_p50 = ((p.get("rtt") or {}).get("percentiles") or {}).get("50")
    if cpu_per_rpc is None:
        why["cpu_per_rpc_ns"] = _reasons(ping) or "no ping phase was run for this model"
    transport = _product(rpcs, cpu_per_rpc)
    transport_share = _share(transport, cpu_per_request)
    batched_cpu_per_rpc = ((ping_batched or {}).get("ping") or {}).get("cpu_per_call_ns")
    if batched_cpu_per_rpc is None:
        why["batched_cpu_per_rpc_ns"] = _reasons(ping_batched) or "no batched ping was run for this model"
    batched_share = _share(_product(rpcs, batched_cpu_per_rpc), cpu_per_request)
    if batched_share is None:
        why["batched_transport_share"] = why.get("batched_cpu_per_rpc_ns") or "CPU per request missing"
    if transport_share is None:
        why["transport_share"] = why.get("cpu_per_rpc_ns") or why.get("rpcs_per_request") or "CPU per request missing"

    create = measurement(baseline, "thread_create") if baseline else None
    thread_create = create.p_ns("50") if create else None
    if thread_create is None:
        why["thread_create_ns"] = _reasons(baseline) or "no thread_create baseline in this run"
    thread_create_per_request = _product(async_threads, thread_create)
    thread_create_share = _share(thread_create_per_request, cpu_per_request)
    if thread_create_share is None:
        why["thread_create_share"] = (
            why.get("thread_create_ns") or why.get("async_threads_per_request") or "CPU per request missing"
        )
    explained = [v for v in (transport, thread_create_per_request) if v]
    rest = cpu_per_request - sum(explained) if cpu_per_request is not None and explained else None
    exceeds = rest is not None and rest < 0
    if exceeds:
        # The ping runs one call at a time; in the loaded graph calls share wake-ups and sends, so an
        # RPC there can cost less than the ping's: a negative remainder is that, not a measurement.
        rest = None
        why["rest_cpu_per_request_ns"] = (
            f"the attributed costs ({fmt_ns(sum(explained))}) exceed the CPU per request ({fmt_ns(cpu_per_request)}): "
            "the in-run ping's CPU per RPC, one call in flight, overstates an RPC of the loaded graph"
        )
    elif rest is None:
        why["rest_cpu_per_request_ns"] = "nothing of the CPU per request could be attributed"
    return Decomposition(
        requests=requests,
        cpu_per_request_ns=cpu_per_request,
        rpcs_per_request=rpcs,
        ctx_switches_per_request=ctx_per_request,
        async_threads_per_request=async_threads,
        threads=threads,
        cpu_per_rpc_ns=cpu_per_rpc,
        ping_rtt_p50_ns=rtt_p50,
        transport_cpu_per_request_ns=transport,
        transport_share=transport_share,
        transport_exceeds_cpu=transport_share is not None and transport_share > 1,
        batched_cpu_per_rpc_ns=batched_cpu_per_rpc,
        batched_transport_share=batched_share,
        thread_create_ns=thread_create,
        thread_create_cpu_per_request_ns=thread_create_per_request,
        thread_create_share=thread_create_share,
        rest_cpu_per_request_ns=rest,
        attributed_exceeds_cpu=exceeds,
        unavailable=why,
        split=cpu_split(g, requests, cpu_per_request),
    )


def cpu_split(graph: dict, requests: int, services_cpu_per_request_ns: float | None) -> CpuSplit:
    """The graph document's CPU per request split into services and each store server (the merged
    document's top-level `stores` object, docs/stores.md). A graph from an engine before real stores
    records no `stores`: simulated, and the reason says so."""
    found = graph.get("stores")
    raw: dict = found if isinstance(found, dict) else {}
    mode = str(raw.get("mode")) if raw.get("mode") in ("real", "simulated") else "simulated"
    reason = str(raw.get("reason") or NO_STORES_REASON)
    servers = [s for s in raw.get("servers") or [] if isinstance(s, dict)]
    stores: list[StoreCpu] = []
    for s in servers:
        system = str(s.get("system") or "unnamed store")
        cpu_s = s.get("cpu_s")
        if not requests:
            stores.append(StoreCpu(system, None, "the front served no request"))
        elif isinstance(cpu_s, (int, float)) and not isinstance(cpu_s, bool):
            stores.append(StoreCpu(system, cpu_s * 1e9 / requests, None))
        else:
            why = s.get("cpu_s_reason") or s.get("died")
            stores.append(StoreCpu(system, None, str(why or "the graph document records no CPU for this store")))
    if mode == "simulated":
        stores_why: str | None = f"stores simulated ({reason}): no store process ran"
    elif not stores:
        stores_why = "the graph ran real stores but its document lists no store server"
    else:
        stores_why = None
    return CpuSplit(mode, reason, services_cpu_per_request_ns, tuple(stores), stores_why)


def _reasons(doc: dict | None) -> str:
    """The reasons an engine document gives for what it could not measure, joined ("" if none)."""
    return "; ".join(r for r in (u.get("reason", "") for u in (doc or {}).get("unavailable") or []) if r)


def _product(a: float | None, b: float | None) -> float | None:
    return a * b if a is not None and b is not None else None


def _share(part: float | None, whole: float | None) -> float | None:
    return part / whole if part is not None and whole else None


def _trace_sample(d: dict) -> float:
    """The sampling a tracing point belongs to: its "on" side's, recorded on both sides of the pair
    (`trace_sample`); a document from before the field was a 100 % pair."""
    return float(d["socialnet_point"].get("trace_sample", 1.0))


def tracing_costs(loads: list[dict]) -> list[TracingCost]:
    """One TracingCost per (model, sampling) of the run's tracing pairs, each judged against its own
    target (TRACING_COST_TARGETS): the models in run order, 100 % before 1 % within a model. A group
    without a complete pair with a non-zero "off" side has no row."""
    tracing = [d for d in loads if d["socialnet_point"]["kind"] in TRACING_KINDS]
    rows = []
    for model in models_in_run_order(tracing):
        mine = [d for d in tracing if d["socialnet_point"]["model"] == model]
        for sample in sorted({_trace_sample(d) for d in mine}, reverse=True):
            group = [d for d in mine if _trace_sample(d) == sample]
            row = _tracing_row(model, sample, group)
            if row is not None:
                rows.append(row)
    return rows


# The load documents of the tracing pairs: a point per side (runs before the switched run), or one
# switched run carrying every side (socialnet/tracing.py run_switched_tracing).
TRACING_KINDS = ("tracing-on", "tracing-off", "tracing-switched")


def tracing_cost(loads: list[dict]) -> TracingCost | None:
    """The first row of tracing_costs (the quick form's only one: the best model at 100 %); None when
    the run has no complete pair."""
    rows = tracing_costs(loads)
    return rows[0] if rows else None


def worst_tracing_cost(rows: Sequence[TracingCost], sample: float) -> TracingCost | None:
    """The row of the highest median cost at `sample` (the first of equal ones); None: no row at it."""
    at = [r for r in rows if r.sample == sample]
    return max(at, key=lambda r: r.cost) if at else None


@dataclass(frozen=True)
class _Side:
    """One side of a tracing pair: its throughput, requests and CPU (None with `cpu_why` when unread)."""

    per_s: float
    requests: int
    services_cpu_s: float | None
    machine_busy_s: float | None
    cpu_why: str = ""


def _point_side(d: dict) -> _Side:
    cpu = d["socialnet_point"].get("tracing_cpu") or {}
    why = "" if "services_cpu_s" in cpu else cpu.get("unavailable") or "the run did not read its points' CPU"
    return _Side(
        achieved_per_s(d),
        int((d.get("load") or {}).get("requests_completed") or 0),
        cpu.get("services_cpu_s"),
        cpu.get("machine_busy_s"),
        why,
    )


def _switched_pairs(docs: list[dict]) -> tuple[list[tuple[_Side, _Side]], list[str]]:
    """(on, off) per complete pair of the switched runs' sides, and why each dropped side was dropped."""
    pairs: list[tuple[_Side, _Side]] = []
    dropped: list[str] = []
    for d in docs:
        p = d["socialnet_point"]
        if p.get("tracing_unavailable"):
            dropped.append(p["tracing_unavailable"])
            continue
        by_pair: dict[int, dict[bool, dict]] = {}
        for side in p.get("tracing_sides") or []:
            if side.get("dropped"):
                dropped.append(side["dropped"])
            else:
                by_pair.setdefault(int(side["pair"]), {})[bool(side["on"])] = side
        for i in sorted(by_pair):
            sides = by_pair[i]
            if True in sides and False in sides:
                pairs.append((_switched_side(sides[True]), _switched_side(sides[False])))
    return pairs, dropped


def _switched_side(side: dict) -> _Side:
    return _Side(
        side["requests"] / side["seconds"],
        int(side["requests"]),
        side.get("services_cpu_s"),
        side.get("machine_busy_s"),
        side.get("cpu_unavailable", ""),
    )


def _tracing_row(model: str, sample: float, group: list[dict]) -> TracingCost | None:
    """The pairs' on ÷ off throughput (median) of one (model, sampling): the sides of its switched runs,
    or the i-th "on" point with the i-th "off" (the run alternates them, and the store keeps their order)."""
    switched = [d for d in group if d["socialnet_point"]["kind"] == "tracing-switched"]
    dropped: list[str] = []
    if switched:
        pairs, dropped = _switched_pairs(switched)
    else:
        on = [d for d in group if d["socialnet_point"]["kind"] == "tracing-on"]
        off = [d for d in group if d["socialnet_point"]["kind"] == "tracing-off"]
        pairs = [(_point_side(a), _point_side(b)) for a, b in zip(on, off)]
    pairs = [(a, b) for a, b in pairs if b.per_s > 0]
    if not pairs:
        return None
    ratios = sorted(a.per_s / b.per_s for a, b in pairs)
    n = len(ratios)
    mid = statistics.median(ratios)
    target = TRACING_COST_TARGETS.get(sample)
    cost_interval, verdict = _tracing_verdict([1 - r for r in reversed(ratios)], 1 - mid, target, sample)
    cpu_costs, cpu_why = _tracing_cpu_costs(pairs)
    cpu_cost = cpu_interval = None
    cpu_verdict = IntervalVerdict("", unavailable=cpu_why)
    if cpu_costs:
        cpu_cost = statistics.median(cpu_costs)
        cpu_interval, cpu_verdict = _tracing_verdict(cpu_costs, cpu_cost, target, sample)
    return TracingCost(
        model=model,
        pairs=n,
        ratio=mid,
        cost=1 - mid,
        on_per_s=tuple(a.per_s for a, _ in pairs),
        off_per_s=tuple(b.per_s for _, b in pairs),
        met=target is not None and 1 - mid <= target,
        cost_interval=cost_interval,
        verdict=verdict,
        sample=sample,
        target=target,
        one_graph=bool(switched) or all(d["socialnet_point"].get("tracing_switch") for d in group),
        cpu_cost=cpu_cost,
        cpu_cost_interval=cpu_interval,
        cpu_verdict=cpu_verdict,
        cpu_unavailable=cpu_why,
        switched=bool(switched),
        dropped=tuple(dropped),
        slots=_switched_slots(switched[0]) if switched else (0.0, 0, 0, 0.0),
        switcher=str(switched[0]["socialnet_point"].get("tracing_switcher") or "") if switched else "",
    )


def _switched_slots(d: dict) -> tuple[float, int, int, float]:
    s = d["socialnet_point"].get("tracing_slots") or {}
    return (
        float(s.get("slot_s", 0.0)),
        int(s.get("guard_slots", 0)),
        int(s.get("used_slots", 0)),
        float((d.get("config") or {}).get("warmup_s", 0.0)),
    )


def _tracing_cpu_costs(pairs: list[tuple[_Side, _Side]]) -> tuple[list[float], str]:
    """Per pair (on, off), ascending: (services' CPU per request on − off) ÷ the machine's busy CPU per
    request off; ([], why) when any side lacks the reading (runs stored before it, or a service's /proc
    entry gone) or completed no request."""
    costs = []
    for a, b in pairs:
        if a.services_cpu_s is None or b.services_cpu_s is None or b.machine_busy_s is None:
            return [], a.cpu_why or b.cpu_why or "the run did not read its points' CPU"
        if a.requests <= 0 or b.requests <= 0 or b.machine_busy_s <= 0:
            return [], "a point completed no request or its machine reading was empty"
        costs.append((a.services_cpu_s / a.requests - b.services_cpu_s / b.requests) / (b.machine_busy_s / b.requests))
    return sorted(costs), ""


def _tracing_verdict(
    costs: list[float], median: float, target: float | None, sample: float
) -> tuple[tuple[float, float] | None, IntervalVerdict]:
    """The median cost's 95 % interval from the pairs' order statistics (measure.intervals, the same
    binomial interval on the rank as a percentile's) and `target` judged by it; the length that
    would decide it is counted in pairs (`samples_to_decide`). `costs` ascending."""
    ranks = order_statistic_ranks(len(costs), 0.5)
    if ranks is None:
        why = f"an interval of the median needs {MIN_PAIRS_FOR_INTERVAL} alternated pairs, this run has {len(costs)}"
        return None, IntervalVerdict("", unavailable=why)
    lo, hi = costs[ranks.lower_rank - 1], costs[ranks.upper_rank - 1]
    if target is None:
        return (lo, hi), IntervalVerdict("", unavailable=f"no target is set for {sample * 100:g} % sampling")
    return (lo, hi), judge_at_most(median, lo, hi, target, len(costs))


def connections_sweep(loads: list[dict]) -> ConnectionsSweep | None:
    """Each model's p99 over the connection counts at the common rate; None when none was run."""
    conn = [d for d in loads if d["socialnet_point"]["kind"] == "connections"]
    if not conn:
        return None
    lines = []
    for m in models_in_run_order(conn):
        mine = sorted(
            (d for d in conn if d["socialnet_point"]["model"] == m and p99_ns(d)),
            key=lambda d: d["socialnet_point"]["connections"],
        )
        if mine:
            pts = tuple((d["socialnet_point"]["connections"], p99_ns(d) or 0.0) for d in mine)
            lines.append(ConnectionsLine(m, pts, tuple(p99_bounds(d) for d in mine)))
    return ConnectionsSweep(_rate(conn[0]), tuple(lines))


# ---- capstone Figure 8: the async calls of this run's traces (the analyze study's measurements) ----


@dataclass(frozen=True)
class CallDelay:
    """One async call's delay in one model's traces (a probe_call_* measurement of analyze)."""

    model: str  # the analyze document's point: the model whose traces
    call: str  # the measurement's variant (service:client span)
    kind: str  # SCHEDULING or JOIN
    p99_ns: float
    samples: int


@dataclass(frozen=True)
class AsyncCallDelays:
    """What the Figure 8 panels show, in numbers."""

    largest: CallDelay  # the largest p99 of any call, however few its samples
    samples: int  # call samples over every panel


@dataclass(frozen=True)
class PooledDelay:
    """std-async's delay over every async call of its traces (analyze's probe_scheduling / probe_join)."""

    kind: str  # SCHEDULING or JOIN
    p50_ns: float
    p90_ns: float
    p99_ns: float
    samples: int

    @property
    def tail_over_p90(self) -> float | None:
        return self.p99_ns / self.p90_ns if self.p90_ns > 0 else None

    @property
    def heavy_tail(self) -> bool:
        """The capstone's shape: the tail at least FIGURE8_TAIL_OVER_P90 × the p90."""
        r = self.tail_over_p90
        return r is not None and r >= FIGURE8_TAIL_OVER_P90


@dataclass(frozen=True)
class Figure8Comparison:
    """The capstone's Figure 8 (§3.1.4: most async calls wait close to 0 ms, the p90 is 5× higher and the
    tail 10–40 ms, "at least 2-8 times" the p90; std::async, traced at 70–80 % of capacity) beside this
    run: std-async's scheduling and join delay over every async call (holds when each tail is at least
    FIGURE8_TAIL_OVER_P90 × its p90, partly when one is), with the largest per-call p99 and the other
    models' for context. NOT_COMPARABLE when the traces do not come from a steady 70–80 % load."""

    pooled: tuple[PooledDelay, ...]  # std-async's, with MIN_P99_SAMPLES or more samples
    std_async: CallDelay | None  # std-async's largest cited per-call p99
    others: tuple[CallDelay, ...]  # each other model's largest cited per-call p99, by model
    std_async_highest: bool  # above every other model's largest (and there is another model)
    verdict: str  # HOLDS, PARTLY, DOES_NOT_HOLD, NOT_COMPARABLE or UNAVAILABLE
    unavailable: str | None  # why UNAVAILABLE or NOT_COMPARABLE
    trace_load: TraceLoad | None = None


def _call(row: Mapping[str, Any]) -> CallDelay:
    kind = SCHEDULING if str(row["name"]).endswith("scheduling") else JOIN
    return CallDelay(str(row["point"]), str(row["variant"]), kind, float(row["p99_ns"]), int(row["samples"]))


def _probe_calls(rows: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [r for r in rows if r["name"] in PROBE_CALLS]


def async_call_delays(rows: Iterable[Mapping[str, Any]]) -> AsyncCallDelays | None:
    """From analyze's measurement rows (point, name, variant, p99_ns, samples); None without probe calls."""
    calls = _probe_calls(rows)
    if not calls:
        return None
    first: dict[tuple[str, str, str], Mapping[str, Any]] = {}
    for r in calls:
        first.setdefault((str(r["point"]), str(r["variant"]), str(r["name"])), r)
    # The figure's order (panel, call, scheduling before join): the first of equal p99s is named.
    order = sorted(first, key=lambda k: (k[0], k[1], PROBE_CALLS.index(k[2])))
    largest: CallDelay | None = None
    for key in order:
        c = _call(first[key])
        if largest is None or c.p99_ns > largest.p99_ns:
            largest = c
    assert largest is not None
    return AsyncCallDelays(largest, int(sum(int(r["samples"]) for r in calls)))


def _pooled(rows: Iterable[Mapping[str, Any]], model: str) -> tuple[PooledDelay, ...]:
    out = []
    for name, kind in (("probe_scheduling", SCHEDULING), ("probe_join", JOIN)):
        r = next((r for r in rows if r["name"] == name and str(r["point"]) == model), None)
        if r is None or int(r["samples"]) < MIN_P99_SAMPLES:
            continue
        vals = [float(v) for k in ("p50_ns", "p90_ns", "p99_ns") if (v := r.get(k)) is not None]
        if len(vals) < 3 or any(math.isnan(v) for v in vals):  # None or NaN: not measured
            continue
        out.append(PooledDelay(kind, vals[0], vals[1], vals[2], int(r["samples"])))
    return tuple(out)


def figure8_comparison(
    rows: Iterable[Mapping[str, Any]], trace_load: Mapping[str, Any] | None = None
) -> Figure8Comparison | None:
    """std-async's delay over every async call against the capstone's Figure 8 shape; the largest cited
    per-call p99 of each model beside it. `trace_load`: what load std-async's traces came from (the
    analyze document's `trace_load`). None when the run analyzed no traces with probe delays."""
    rows = list(rows)
    calls = _probe_calls(rows)
    if not calls and not any(r["name"] in ("probe_scheduling", "probe_join") for r in rows):
        return None
    worst: dict[str, CallDelay] = {}
    for r in calls:
        if int(r["samples"]) < MIN_P99_SAMPLES:
            continue
        c = _call(r)
        if c.model not in worst or c.p99_ns > worst[c.model].p99_ns:
            worst[c.model] = c
    others = tuple(w for m, w in sorted(worst.items()) if m != BASELINE_MODEL)
    mine = worst.get(BASELINE_MODEL)
    highest = mine is not None and bool(others) and all(mine.p99_ns > w.p99_ns for w in others)
    pooled = _pooled(rows, BASELINE_MODEL)
    load = trace_load_of(trace_load)
    if not pooled:
        why = f"std-async's traces have no scheduling or join delay with {MIN_P99_SAMPLES} or more samples"
        return Figure8Comparison(pooled, mine, others, highest, UNAVAILABLE, why, load)
    not_here = trace_load_reason(load)
    if not_here:
        return Figure8Comparison(pooled, mine, others, highest, NOT_COMPARABLE, not_here, load)
    heavy = [p.heavy_tail for p in pooled]
    verdict = HOLDS if all(heavy) else PARTLY if any(heavy) else DOES_NOT_HOLD
    return Figure8Comparison(pooled, mine, others, highest, verdict, None, load)


# ---- what load the traces come from (capstone Figures 6 and 8), and capstone Figure 3 -----------------


@dataclass(frozen=True)
class TraceLoad:
    """The load a model's traces were recorded under (TRACE_LOAD_FILE beside them)."""

    kind: str  # "steady": one rate for the whole trace set
    fraction: float  # offered rate ÷ the model's closed-loop ceiling
    rate_per_s: float
    ceiling_per_s: float
    achieved_per_s: float
    trace_sample: float


def trace_load_of(raw: Mapping[str, Any] | None) -> TraceLoad | None:
    """The TraceLoad of a stored `trace_load` object; None when there is none (or it lacks a field)."""
    if not raw:
        return None
    try:
        return TraceLoad(
            str(raw["kind"]),
            float(raw["fraction"]),
            float(raw["rate_per_s"]),
            float(raw["ceiling_per_s"]),
            float(raw["achieved_per_s"]),
            float(raw["trace_sample"]),
        )
    except (KeyError, TypeError, ValueError):
        return None


def trace_load_reason(load: TraceLoad | None) -> str | None:
    """Why traces recorded under `load` are not the capstone's (a steady load at 70–80 % of capacity),
    or None when they are."""
    lo, hi = CAPSTONE_LOAD_RANGE
    capstone = f"the capstone traced a steady load at {lo * 100:.0f} %–{hi * 100:.0f} % of capacity"
    if load is None:
        return (
            f"the traces come from the open-loop sweep, which runs each model from {min(SWEEP_FRACTIONS):g}× to "
            f"{max(SWEEP_FRACTIONS):g}× its ceiling (overloaded requests among them); {capstone}"
        )
    if load.kind != "steady" or not lo <= load.fraction <= hi:
        return (
            f"the traces come from a {load.kind} load at {load.fraction * 100:.0f} % of the model's ceiling; {capstone}"
        )
    if load.achieved_per_s < SERVED_SHARE * load.rate_per_s:
        return (
            f"the traced point served {load.achieved_per_s:.0f} of the {load.rate_per_s:.0f} requests/s offered "
            f"({load.fraction * 100:.0f} % of the ceiling): the graph was overloaded there; {capstone}"
        )
    return None


@dataclass(frozen=True)
class Figure3Comparison:
    """The capstone's Figure 3 (§3: compose-post p50 ≈ 10 ms, p90 5× the median, tail 50–200 ms) beside
    std-async's latency at 70–80 % of its ceiling: the shape (p90 ÷ p50, p99 ÷ p50) judged, the scale
    (p50 ÷ the capstone's) stated. NOT_COMPARABLE when no std-async point ran at 70–80 % of its ceiling."""

    kind: str | None  # the point's kind ("steady", or a sweep "rate"); None: no such point
    fraction: float | None  # offered ÷ ceiling
    rate_per_s: float | None
    p50_ns: float | None
    p90_ns: float | None
    p99_ns: float | None
    verdict: str
    unavailable: str | None  # why NOT_COMPARABLE or UNAVAILABLE

    @property
    def p90_over_p50(self) -> float | None:
        return self.p90_ns / self.p50_ns if self.p90_ns and self.p50_ns else None

    @property
    def p99_over_p50(self) -> float | None:
        return self.p99_ns / self.p50_ns if self.p99_ns and self.p50_ns else None

    @property
    def scale(self) -> float | None:
        """p50 ÷ the capstone's ≈ 10 ms."""
        return self.p50_ns / CAPSTONE_P50_NS if self.p50_ns else None


def figure3_comparison(loads: Sequence[dict]) -> Figure3Comparison:
    """From the socialnet load documents: std-async's steady point (else the sweep point nearest 75 % of
    its ceiling within 70–80 %) against the capstone's Figure 3."""
    lo, hi = CAPSTONE_LOAD_RANGE
    mine = [d for d in loads if d["socialnet_point"]["model"] == BASELINE_MODEL]
    closed = next((d for d in mine if d["socialnet_point"]["kind"] == "closed"), None)
    ceiling = achieved_per_s(closed) if closed else 0.0
    candidates: list[tuple[int, float, dict]] = []
    for d in mine:
        sp = d["socialnet_point"]
        if sp["kind"] == "steady" and sp.get("fraction"):
            candidates.append((0, float(sp["fraction"]), d))
        elif sp["kind"] in ("rate", "common", "refine") and ceiling > 0:
            candidates.append((1, _rate(d) / ceiling, d))
    inside = sorted((c for c in candidates if lo <= c[1] <= hi), key=lambda c: (c[0], abs(c[1] - STEADY_FRACTION)))
    if not inside:
        why = f"no std-async point ran at {lo * 100:.0f} %–{hi * 100:.0f} % of its closed-loop ceiling (the capstone's load)"
        return Figure3Comparison(None, None, None, None, None, None, NOT_COMPARABLE, why)
    _, fraction, d = inside[0]
    m = measurement(d, "latency_intended")
    p50, p90, p99 = (m.p_ns("50"), m.p_ns("90"), m.p_ns("99")) if m else (None, None, None)
    kind, rate = d["socialnet_point"]["kind"], _rate(d)
    if not (p50 and p90 and p99):
        why = "the point has no latency percentiles"
        return Figure3Comparison(kind, fraction, rate, p50, p90, p99, UNAVAILABLE, why)
    if achieved_per_s(d) < SERVED_SHARE * rate:
        why = f"the point served {achieved_per_s(d):.0f} of the {rate:.0f} requests/s offered: overloaded, not steady"
        return Figure3Comparison(kind, fraction, rate, p50, p90, p99, NOT_COMPARABLE, why)
    body = p90 / p50 >= CAPSTONE_RATIO_SHARE * CAPSTONE_P90_OVER_P50
    tail = p99 / p50 >= CAPSTONE_TAIL_OVER_P50
    verdict = HOLDS if body and tail else PARTLY if body or tail else DOES_NOT_HOLD
    return Figure3Comparison(kind, fraction, rate, p50, p90, p99, verdict, None)
