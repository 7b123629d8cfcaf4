"""Study `threads`, the analysis: the stored documents (dicts) → what the report says, as values.

Every verdict of the section is decided here — the recommended N, the rule of thumb holding or
not, where the shape differs from the article, the tail verdict of a point, whether the 1-minute
load average describes the points — so that section.py only formats and tests assert values.
Pure functions: no engines, no figures, no sentences.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tailscope.measure.intervals import QuantileInterval, from_latency
from tailscope.measure.measurement import achieved_per_s
from tailscope.measure.verdict import IntervalVerdict, at_most
from tailscope.report.blocks import DOES_NOT_HOLD, HOLDS, NOT_COMPARABLE, PARTLY, UNAVAILABLE
from tailscope.studies.threads.run import DEFAULT_OBJECTIVE_MS, FRONT, VARIANTS, WORKLOADS

Combo = tuple[str, str]  # (workload, variant)

COMPARE = (10, 100)  # the article's comparison: 100 vs 10 threads
# The article's shape, more threads → p99 and load up, throughput the same: a ratio below
# ARTICLE_RISE is "did not rise", a throughput change beyond ±ARTICLE_SAME_THROUGHPUT is "changed".
ARTICLE_RISE = 1.1
ARTICLE_SAME_THROUGHPUT = 0.1
# The rule of thumb N ≈ cores × (1 + wait/compute) "holds" when the recommended N is within this
# factor of it, either way.
RULE_OF_THUMB_FACTOR = 2.0
# The kernel's 1-minute load average is exponentially damped with a 1-minute time constant: it
# describes a point only if the point ran at least this long (else it mostly shows earlier points).
LOADAVG_MIN_WINDOW_S = 60.0

TAIL_NOT_ANALYSED = "not analysed"
TAIL_UNAVAILABLE = "unavailable"


@dataclass(frozen=True)
class TailFit:
    """The numbers a tail verdict rests on (tailscope.measure.tail.TailVerdict; a non-finite value is None)."""

    n: int  # samples the Hill estimator read
    k: int  # top order statistics it used
    alpha: float | None  # Hill tail index, with its bootstrap CI
    alpha_ci_low: float | None
    alpha_ci_high: float | None
    xi: float | None  # generalized Pareto shape of the excesses over the threshold
    mean_excess_slope: float | None
    threshold_ns: float  # the Hill threshold (the k-th largest latency)
    tail_fraction: float  # k / n
    exponential_scale_ns: float  # the fitted exponential tail's scale


@dataclass(frozen=True)
class TailReading:
    """A point's tail verdict as stored (run.tail_of), or why there is none."""

    kind: str | None  # heavy | exponential-like | light; None when unavailable
    unavailable: str | None  # the reason, when kind is None
    fit: TailFit | None = None
    ccdf: tuple[list[float], list[float]] | None = None  # (latency ns, P(X > x)) when stored

    @property
    def verdict(self) -> str:
        """The verdict's kind, or "unavailable"."""
        return self.kind or TAIL_UNAVAILABLE


def tail_reading(stored: dict | None) -> TailReading:
    """The `tail` entry of a point (run.tail_of) as a value."""
    t = stored or {}
    v = t.get("verdict")
    if not v:
        return TailReading(None, t.get("unavailable", TAIL_NOT_ANALYSED))
    h = v["hill"]
    ccdf = t.get("ccdf")
    fit = TailFit(
        n=h["n"],
        k=h["k"],
        alpha=h["alpha"],
        alpha_ci_low=h["ci_low"],
        alpha_ci_high=h["ci_high"],
        xi=v["xi"],
        mean_excess_slope=v["mean_excess_slope"],
        threshold_ns=h["threshold"],
        tail_fraction=v["tail_fraction"],
        exponential_scale_ns=v["exponential_scale"],
    )
    return TailReading(v["kind"], None, fit, (ccdf[0], ccdf[1]) if ccdf else None)


@dataclass(frozen=True)
class Point:
    """One load point (closed or open loop) as the report reads it."""

    workload: str
    variant: str
    threads: int
    users: int
    kind: str  # "closed" | "open"
    rate_per_s: float | None  # the open loop's intended rate
    achieved_per_s: float
    completed: int
    mean_ns: float | None
    p50_ns: float | None
    p90_ns: float | None
    p99_ns: float | None
    p999_ns: float | None
    count: int | None
    low_confidence: tuple[str, ...]  # percentiles with fewer than 10 samples beyond them
    errors: int
    cpu_pct: float | None  # the whole machine's busy time
    front_cpu_pct: float | None
    procs_running: float | None  # system run queue, mean
    inst_load: float | None  # instantaneous load, mean
    loadavg_1m: float | None  # the kernel's 1-minute load average at the end of the point
    window_s: float  # the sampler's window
    front_runnable: float | None  # the front's threads in state R, mean
    front_threads: int | None
    vcs_per_req: float | None  # the front's voluntary context switches per request
    ics_per_req: float | None  # ... involuntary
    rq_wait_per_req_ns: float | None  # the front's threads' run-queue wait per request
    compute_ns: float | None  # the front's CPU time per request
    tail: TailReading
    flags: tuple[str, ...]
    p99_ci: QuantileInterval | None = None  # the p99 with its 95 % interval (or why none); None: no p99
    p999_ci: QuantileInterval | None = None  # the same for p99.9

    @property
    def intervals(self) -> dict[str, QuantileInterval]:
        """The tail percentiles' intervals by key, for latency_cells."""
        return {k: i for k, i in (("99", self.p99_ci), ("99.9", self.p999_ci)) if i is not None}

    @property
    def combo(self) -> Combo:
        return (self.workload, self.variant)


def _latency_intended(doc: dict) -> dict:
    return next((m["latency"] for m in doc.get("measurements", []) if m.get("name") == "latency_intended"), {})


def point_from_document(doc: dict) -> Point:
    """A load point's document (kind closed or open) as a Point."""
    tp = doc["threads_point"]
    lat = _latency_intended(doc)
    pct = lat.get("percentiles", {})
    ps = tp.get("procstat", {})
    sysm = ps.get("system", {})
    front = (ps.get("processes") or {}).get(FRONT, {})
    load = doc.get("load", {})
    window = ps.get("window_s") or 0
    achieved = achieved_per_s(doc)
    # Requests served in the sampler's window (≈ the measured window), for per-request figures.
    in_window = achieved * window if window else 0

    def per_request(v):
        return v / in_window if v is not None and in_window else None

    cpu_pct = front.get("cpu_pct")
    return Point(
        workload=tp["workload"],
        variant=tp["variant"],
        threads=tp["threads"],
        users=tp["users"],
        kind=tp["kind"],
        rate_per_s=tp.get("rate_per_s"),
        achieved_per_s=achieved,
        completed=load.get("requests_completed") or 0,
        mean_ns=lat.get("mean"),
        p50_ns=pct.get("50"),
        p90_ns=pct.get("90"),
        p99_ns=pct.get("99"),
        p999_ns=pct.get("99.9"),
        count=lat.get("count"),
        low_confidence=tuple(lat.get("low_confidence") or ()),
        errors=load.get("errors_total") or 0,
        cpu_pct=sysm.get("cpu_busy_pct"),
        front_cpu_pct=cpu_pct,
        procs_running=sysm.get("procs_running_mean"),
        inst_load=sysm.get("instantaneous_load_mean"),
        loadavg_1m=sysm.get("loadavg_1m_end"),
        window_s=window,
        front_runnable=front.get("runnable_threads_mean"),
        front_threads=front.get("threads_max"),
        vcs_per_req=per_request(front.get("voluntary_ctx_switches")),
        ics_per_req=per_request(front.get("involuntary_ctx_switches")),
        rq_wait_per_req_ns=per_request(front.get("runqueue_wait_ns")),
        compute_ns=per_request(cpu_pct / 100 * window * 1e9) if cpu_pct is not None and window else None,
        tail=tail_reading(tp.get("tail")),
        flags=tuple(tp.get("flags") or ()),
        p99_ci=from_latency(lat, "99") if "99" in pct else None,
        p999_ci=from_latency(lat, "99.9") if "99.9" in pct else None,
    )


def closed_points(points: Sequence[Point]) -> list[Point]:
    return [p for p in points if p.kind == "closed"]


# ---- the recommended thread count ----------------------------------------------------------------------


@dataclass(frozen=True)
class Recommendation:
    """The recommended N of one (workload, variant) beside the rule of thumb N ≈ cores × (1 + wait/compute)."""

    best: Point | None  # highest closed-loop throughput with p99 ≤ objective and no errors; None: no N met it
    compute_ns: float | None  # the front's CPU time per request, median over the closed-loop points
    wait_ns: float | None  # the least-loaded point's mean latency minus compute
    wait_at: tuple[int, int] | None  # (N, users) of that least-loaded point
    analytic: float | None  # cores × (1 + wait/compute); None when compute or wait was not measured
    cores: int
    rule_holds: bool | None  # best N within RULE_OF_THUMB_FACTOR of `analytic`; None without both
    # The best point's p99 against the objective by its 95 % interval (measure.verdict.at_most): the
    # choice follows the estimates; this says whether the interval confirms it, or how long would.
    objective: IntervalVerdict = IntervalVerdict("", unavailable="no recommended N")


def recommend(points: Sequence[Point], objective_ns: float, cores: int) -> Recommendation:
    """The N with the highest closed-loop throughput among points with p99 within the objective and
    no errors, and the analytic N ≈ cores × (1 + wait/compute) from this run's measurements."""
    closed = closed_points(points)
    ok = [p for p in closed if p.p99_ns is not None and p.p99_ns <= objective_ns and not p.errors]
    best = max(ok, key=lambda p: p.achieved_per_s, default=None)
    computes = sorted(p.compute_ns for p in closed if p.compute_ns)
    compute = computes[len(computes) // 2] if computes else None
    # Wait: what a request spends not computing when it does not queue — the least-loaded point's mean
    # latency minus its compute (backend wait + loopback + runtime hand-offs).
    quiet = min((p for p in closed if p.mean_ns), key=lambda p: p.mean_ns or 0.0, default=None)
    wait = max(quiet.mean_ns - compute, 0.0) if quiet and quiet.mean_ns and compute else None
    analytic = cores * (1 + wait / compute) if wait is not None and compute else None
    rule_holds = (
        1 / RULE_OF_THUMB_FACTOR <= best.threads / analytic <= RULE_OF_THUMB_FACTOR if best and analytic else None
    )
    return Recommendation(
        best=best,
        compute_ns=compute,
        wait_ns=wait,
        wait_at=(quiet.threads, quiet.users) if quiet else None,
        analytic=analytic,
        cores=cores,
        rule_holds=rule_holds,
        objective=_objective(best, objective_ns),
    )


def _objective(best: Point | None, objective_ns: float) -> IntervalVerdict:
    if best is None:
        return IntervalVerdict("", unavailable="no recommended N")
    if best.p99_ci is None:
        return IntervalVerdict("", unavailable="no p99")
    return at_most(best.p99_ci, objective_ns, best.achieved_per_s or None)


# ---- the article's comparison -------------------------------------------------------------------------


@dataclass(frozen=True)
class MetricChange:
    """One figure of the two compared points; `ratio` = at_hi / at_lo (None when at_lo is 0)."""

    at_lo: float
    at_hi: float
    ratio: float | None


def _ratio(lo: float | None, hi: float | None) -> float | None:
    return hi / lo if lo and hi is not None else None


@dataclass(frozen=True)
class ThreadComparison:
    """The article's comparison at the most users: `hi` vs `lo` threads, as ratios hi / lo, and
    where the shape differs from the article's (more threads → higher p99 and load, same throughput)."""

    lo: int
    hi: int
    users: int
    at_lo: Point
    at_hi: Point
    p99_ratio: float | None
    load_ratio: float | None  # instantaneous load
    runq_ratio: float | None
    front_runnable_ratio: float | None
    throughput_ratio: float | None
    p99_did_not_rise: bool  # p99_ratio < ARTICLE_RISE
    load_did_not_rise: bool  # load_ratio < ARTICLE_RISE
    throughput_changed: bool  # |throughput_ratio − 1| > ARTICLE_SAME_THROUGHPUT

    @property
    def differs_from_article(self) -> bool:
        return self.p99_did_not_rise or self.load_did_not_rise or self.throughput_changed

    def change(self, metric: str) -> MetricChange | None:
        """`metric` (a Point field) at both thread counts; None when either point lacks it."""
        a, b = getattr(self.at_lo, metric), getattr(self.at_hi, metric)
        if a is None or b is None:
            return None
        return MetricChange(a, b, _ratio(a, b))


def compare_threads(points: Sequence[Point]) -> ThreadComparison | None:
    """The article's comparison at the most users: COMPARE[1] vs COMPARE[0] threads (else the largest
    vs the smallest N run) as ratios of p99, instantaneous load, run queue and throughput."""
    closed = closed_points(points)
    if not closed:
        return None
    ns = sorted({p.threads for p in closed})
    lo, hi = COMPARE if all(n in ns for n in COMPARE) else (ns[0], ns[-1])
    if lo == hi:
        return None
    users = max(p.users for p in closed)
    a = next((p for p in closed if p.threads == lo and p.users == users), None)
    b = next((p for p in closed if p.threads == hi and p.users == users), None)
    if not a or not b:
        return None
    p99 = _ratio(a.p99_ns, b.p99_ns)
    load = _ratio(a.inst_load, b.inst_load)
    thr = _ratio(a.achieved_per_s, b.achieved_per_s)
    return ThreadComparison(
        lo=lo,
        hi=hi,
        users=users,
        at_lo=a,
        at_hi=b,
        p99_ratio=p99,
        load_ratio=load,
        runq_ratio=_ratio(a.procs_running, b.procs_running),
        front_runnable_ratio=_ratio(a.front_runnable, b.front_runnable),
        throughput_ratio=thr,
        p99_did_not_rise=p99 is not None and p99 < ARTICLE_RISE,
        load_did_not_rise=load is not None and load < ARTICLE_RISE,
        throughput_changed=thr is not None and abs(thr - 1) > ARTICLE_SAME_THROUGHPUT,
    )


# ---- the article's shape as reference rows -----------------------------------------------------------

# The article's setup: Ballerina's workers never block (its pool is this study's non-blocking variant),
# 10 vs 100 threads, "message transformation" (CPU-bound: this study's transform) and "simple
# pass-through" (IO-bound: passthrough).
ARTICLE_VARIANT = "non-blocking"
ARTICLE_CPU_BOUND, ARTICLE_IO_BOUND = "transform", "passthrough"
# Which figure each row compares (ArticleCheck.figure).
P99_CPU_BOUND = "p99, CPU-bound"
P99_IO_BOUND = "p99, IO-bound"
LOAD_CPU_BOUND = "load, CPU-bound"


@dataclass(frozen=True)
class ArticleCheck:
    """One of the article's findings at 10 vs 100 threads beside this run's non-blocking variant:
    P99_CPU_BOUND — p99 rises (≥ ARTICLE_RISE) with throughput the same (within
    ±ARTICLE_SAME_THROUGHPUT: the article's TPS moved at most 7 %), partly when only the p99 rose;
    P99_IO_BOUND — p99 does not rise; LOAD_CPU_BOUND — the load rises (≥ ARTICLE_RISE). NOT_COMPARABLE
    when the run did not measure both 10 and 100 threads; UNAVAILABLE when a figure is missing."""

    figure: str  # P99_CPU_BOUND, P99_IO_BOUND or LOAD_CPU_BOUND
    workload: str
    verdict: str
    comparison: ThreadComparison | None
    reason: str = ""  # why NOT_COMPARABLE or UNAVAILABLE


def article_checks(points: Sequence[Point]) -> tuple[ArticleCheck, ...]:
    """The article's three findings, from the non-blocking variant's closed-loop points."""
    out = []
    for figure, workload in (
        (P99_CPU_BOUND, ARTICLE_CPU_BOUND),
        (P99_IO_BOUND, ARTICLE_IO_BOUND),
        (LOAD_CPU_BOUND, ARTICLE_CPU_BOUND),
    ):
        mine = [p for p in closed_points(points) if p.combo == (workload, ARTICLE_VARIANT)]
        if not mine:
            out.append(ArticleCheck(figure, workload, UNAVAILABLE, None, f"{workload} {ARTICLE_VARIANT} was not run"))
            continue
        ns = sorted({p.threads for p in mine})
        if not all(n in ns for n in COMPARE):
            why = (
                f"the article compared {COMPARE[0]} and {COMPARE[1]} threads; this run measured "
                f"N = {', '.join(map(str, ns))} for {workload} {ARTICLE_VARIANT}"
            )
            out.append(ArticleCheck(figure, workload, NOT_COMPARABLE, None, why))
            continue
        c = compare_threads(mine)
        ratio = None if c is None else (c.load_ratio if figure == LOAD_CPU_BOUND else c.p99_ratio)
        if c is None or ratio is None:
            what = "load" if figure == LOAD_CPU_BOUND else "p99"
            why = f"no {what} at both {COMPARE[0]} and {COMPARE[1]} threads at the same users count"
            out.append(ArticleCheck(figure, workload, UNAVAILABLE, c, why))
            continue
        rose = ratio >= ARTICLE_RISE
        if figure == P99_CPU_BOUND:
            verdict = (HOLDS if not c.throughput_changed else PARTLY) if rose else DOES_NOT_HOLD
        elif figure == P99_IO_BOUND:
            verdict = DOES_NOT_HOLD if rose else HOLDS
        else:
            verdict = HOLDS if rose else DOES_NOT_HOLD
        out.append(ArticleCheck(figure, workload, verdict, c))
    return tuple(out)


# ---- the graphs ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GraphFailure:
    """A graph that did not start (e.g. --workers above the thread limit), with the engine's reason."""

    workload: str
    variant: str
    threads: int
    reason: str


@dataclass(frozen=True)
class GraphHealth:
    """What the graphs' own documents say, summed over the run."""

    thread_create_failures: int  # threads the system refused to create
    rejections: int  # requests the services rejected
    io_dispatchers: tuple[int, ...]  # the distinct IO dispatcher counts of the pool services (fixed for every N)
    failed: tuple[GraphFailure, ...]


def graph_health(graph_docs: Sequence[dict]) -> GraphHealth:
    failures, rejections, dispatchers, failed = 0, 0, set(), []
    for g in graph_docs:
        tp = g["threads_point"]
        if tp.get("failed"):
            failed.append(GraphFailure(tp["workload"], tp["variant"], tp["threads"], tp["failed"]))
            continue
        for s in g.get("services", {}).values():
            md = s.get("model_details", {})
            failures += int(md.get("thread_create_failures") or 0)
            rejections += int(s.get("counters", {}).get("rejections") or 0)
            if "io_dispatchers" in md:
                dispatchers.add(md["io_dispatchers"])
    return GraphHealth(failures, rejections, tuple(sorted(dispatchers)), tuple(failed))


# ---- the whole study ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pinning:
    """Where the generator and the graph ran, as the first load point recorded it (empty: not recorded)."""

    load_cpus: tuple[int, ...]
    graph_cpus: tuple[int, ...]


@dataclass(frozen=True)
class ThreadsAnalysis:
    """Everything the threads section shows, decided."""

    points: tuple[Point, ...]  # every load point, in stored order
    combos: tuple[Combo, ...]  # (workload, variant) pairs: WORKLOADS order then socialnet, then VARIANTS order
    threads: tuple[int, ...]  # every N run, ascending
    objective_ns: float  # the p99 objective
    cores: int  # the graph's CPUs
    pinning: Pinning
    graphs: GraphHealth
    window_s: float  # the longest closed-loop point's window
    loadavg_describes_points: bool  # window_s ≥ LOADAVG_MIN_WINDOW_S
    top_users: int  # the most users of any closed-loop point (0 without one)
    most_users: int  # the most users of any point (0 without one)
    worst_open: Point | None  # the open-loop point with the highest p99
    recommendations: Mapping[Combo, Recommendation]
    comparisons: Mapping[Combo, ThreadComparison | None]
    article: tuple[ArticleCheck, ...] = ()  # the article's findings at 10 vs 100 threads (reference rows)

    @property
    def closed(self) -> list[Point]:
        return closed_points(self.points)

    @property
    def has_open(self) -> bool:
        return any(p.kind == "open" for p in self.points)

    @property
    def flagged(self) -> list[Point]:
        return [p for p in self.points if p.flags]


def objective_ns_of(docs: Sequence[dict]) -> float:
    """The p99 objective the run recorded (the first document's), else DEFAULT_OBJECTIVE_MS."""
    return ((docs[0]["threads_point"].get("objective_ms") if docs else None) or DEFAULT_OBJECTIVE_MS) * 1e6


def analyze(docs: Sequence[dict]) -> ThreadsAnalysis:
    """The study's documents (each with `threads_point`, in stored order) → the section's values."""
    loads = [d for d in docs if d["threads_point"]["kind"] in ("closed", "open")]
    graphs = [d for d in docs if d["threads_point"]["kind"] == "graph"]
    points = tuple(point_from_document(d) for d in loads)
    # Workloads in WORKLOADS order then socialnet, variants in VARIANTS order (not a set's order).
    workloads, variants = [*WORKLOADS, "socialnet"], list(VARIANTS)
    combos = tuple(sorted({p.combo for p in points}, key=lambda c: (workloads.index(c[0]), variants.index(c[1]))))
    cores: int | None = None
    pin: dict = {}
    if loads:
        tp = loads[0]["threads_point"]
        pin = tp["pinning"]
        cores = len(pin.get("graph_cpus") or []) or tp.get("procstat", {}).get("system", {}).get("cpus")
    cores = cores or 1
    objective_ns = objective_ns_of(docs)
    closed = closed_points(points)
    window = max((p.window_s for p in closed), default=0)
    opens = [p for p in points if p.kind == "open" and p.p99_ns]
    return ThreadsAnalysis(
        points=points,
        combos=combos,
        threads=tuple(sorted({p.threads for p in points})),
        objective_ns=objective_ns,
        cores=cores,
        pinning=Pinning(tuple(pin.get("load_cpus") or ()), tuple(pin.get("graph_cpus") or ())),
        graphs=graph_health(graphs),
        window_s=window,
        loadavg_describes_points=window >= LOADAVG_MIN_WINDOW_S,
        top_users=max((p.users for p in closed), default=0),
        most_users=max((p.users for p in points), default=0),
        worst_open=max(opens, key=lambda p: p.p99_ns or 0.0, default=None),
        recommendations={c: recommend([p for p in points if p.combo == c], objective_ns, cores) for c in combos},
        comparisons={c: compare_threads([p for p in points if p.combo == c]) for c in combos},
        article=article_checks(points),
    )
