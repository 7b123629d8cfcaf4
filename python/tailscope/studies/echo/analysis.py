"""The echo study's reading of its documents: every verdict, ratio, flag and chosen model as a value.

Documents (as the store gives them back) → frozen dataclasses. Nothing here writes a sentence or
draws a figure: section.py renders these values, and the tests assert them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from tailscope.measure.intervals import QuantileInterval, from_latency, percentile_key_q
from tailscope.measure.measurement import achieved_per_s, measurement
from tailscope.measure.verdict import MET as INTERVAL_MET
from tailscope.measure.verdict import NOT_MET as INTERVAL_NOT_MET
from tailscope.measure.verdict import UNDECIDED, IntervalVerdict, at_most_other
from tailscope.report.blocks import DOES_NOT_HOLD, HOLDS, NOT_COMPARABLE, PARTLY, UNAVAILABLE
from tailscope.store import EngineDocument
from tailscope.studies.common import find_document, round_rate

# The engines the study runs: tailscope-echo is the server under test; what it did reaches the
# store through tailscope-load's documents (and the floor through tailscope-baseline's).
LOAD = "tailscope-load"
ECHO = "tailscope-echo"
BASELINE = "tailscope-baseline"

MODELS = [
    "thread-per-connection",
    "poll",
    "poll-pool",
    "asio",
    "asio-mt",
    "epoll",
    "epoll-reuseport",
    "io-uring",
    "asio-coro",
]
THESIS_MODELS = {"thread-per-connection", "poll", "poll-pool", "asio", "asio-mt"}
# The common fixed rate: this fraction of the slowest model's closed-loop maximum at that
# connection count. A quarter leaves room for run-to-run noise on a shared machine, so no
# model is measured in overload (which would make the CDFs about queue growth, not the model).
COMMON_RATE_FRACTION = 0.25
# The thesis's recommendation ranges (connections, its §5.1): below 100, 100–2000, above 2000.
RANGES = [("< 100", 0, 99), ("100–2000", 100, 2000), ("> 2000", 2001, 10**9)]
# The issue-14 target, stated (not asserted): the best model's closed-loop throughput ÷ poll's
# at these connection counts, with a p99 no higher than poll's.
TARGET_RATIO = 1.3
TARGET_CONNECTIONS = (100, 1000)
# A closed-loop point whose server used less than this share of its cores was not limited by
# the server: the generator (or the round trip at few connections) set its throughput.
SERVER_SATURATED_CPU_SHARE = 0.9
# A load thread whose loop found work (a send due or a completion) in at least this share of its
# time was itself the limit (tailscope-load's generator_busy_share; busy-poll pacing makes its CPU
# 100 % either way, so CPU cannot tell).
GENERATOR_SATURATED_BUSY_SHARE = 0.9
# Closed-loop points from this many connections up that did not saturate the server are named in
# the report's notes: below it the round trip (every request waits for the one before it) is
# expected to set the pace.
SERVER_LIMIT_EXPECTED_FROM = 100
# A range's recommended model: the highest mean closed-loop throughput, or within this share of it
# with a lower p99 at the common rate.
PICK_WITHIN_SHARE = 0.95
# The thesis's recommendation (chapter 5, §5.1), one pick per range, each for "the best throughput":
# below 100 the synchronous thread-per-connection server (4.1.1), 100–2000 the multi-threaded
# Boost.Asio server (4.1.5), above 2000 the single-threaded poll server (4.1.2).
THESIS_PICKS = {"< 100": "thread-per-connection", "100–2000": "asio-mt", "> 2000": "poll"}
# The thesis's models whose advantage is more than one thread at work: its server had 8 logical CPUs
# (Table 3.2) and asio-mt's thread count was "adjusted to the logical cores number" (§4.1.5).
THESIS_MULTI_THREADED = frozenset({"thread-per-connection", "poll-pool", "asio-mt"})
THESIS_SERVER_CPUS = 8
# A pick within this share of the best of the thesis's five (mean closed-loop throughput) is a tie
# within a run's noise: the range partly holds.
THESIS_TIE_SHARE = 0.95

# A sweep point's mode (the first part of its stored point name).
CLOSED = "closed"  # as fast as possible (-R 0)
RATE = "rate"  # the common fixed rate, open loop

# Who set a point's throughput.
LIMIT_SERVER = "server"
LIMIT_GENERATOR = "generator"
LIMIT_BOTH = "both"
LIMIT_ROUND_TRIP = "round trip"
LIMIT_UNAVAILABLE = "unavailable"

# The issue target at one connection count.
MET = "met"
NOT_MET = "not met"
# The ratio's side of TARGET_RATIO is not shown by this run: poll's repeat moved more than the
# ratio's distance from the target (either side). Neither met nor missed.
MET_WITHIN_NOISE = "met on this run's figures, but within its noise"
NOT_MET_WITHIN_NOISE = "not met on this run's figures, but within its noise"
# The throughput ratio is met but the two p99 intervals overlap: neither met nor missed (measure.verdict).
TARGET_UNDECIDED = UNDECIDED

# The io-uring model's kernel features, as its ready line reports them, in report order.
IO_URING_FEATURES = ("multishot_accept", "multishot_recv", "provided_buffer_ring", "registered_files", "sqpoll")


# ---- one sweep point ----------------------------------------------------------------------------


@dataclass(frozen=True)
class EchoPoint:
    """One closed-loop or common-rate point, as its tailscope-load document measured it."""

    model: str
    connections: int
    mode: str  # CLOSED or RATE
    throughput_per_s: float
    # Latency from the intended send time (closed loop: intended = actual send).
    mean_ns: float
    p50_ns: float
    p90_ns: float
    p99_ns: float
    p999_ns: float
    samples: int
    low_confidence: frozenset[str] = frozenset()  # percentiles with fewer than 10 samples beyond them
    cdf: tuple[tuple[float, float], ...] = ()  # (value_ns, percentile 0..100)
    # Per percentile key, its 95 % interval or why there is none (measure.intervals); empty: not read.
    intervals: dict[str, QuantileInterval] = field(default_factory=dict)
    rate_per_s: float = 0.0  # the requested rate; 0 in closed loop
    # The server process over the measured window (/proc, 100 ms samples); None: not sampled.
    cpu_pct: float | None = None  # mean, 100 = one core
    cpu_sys_pct: float | None = None
    cpu_user_pct: float | None = None
    rss_bytes: int | None = None  # peak
    threads: int | None = None  # peak
    fds: int | None = None  # peak
    errors: int = 0
    error_kinds: dict[str, int] = field(default_factory=dict)  # only the kinds that occurred
    generator_bottleneck: bool = False  # the generator's self-check flagged the point
    # None, not 0, when the document has no self-check: a lag that was not measured.
    send_lag_p99_ns: float | None = None
    server_cpu: int | None = None
    client_cpu: int | None = None
    load_threads: int = 1
    load_cpus: tuple[int, ...] = ()
    load_pacing: str = "busy-poll"
    server_features: dict = field(default_factory=dict)  # what the model probed and uses (its ready line)
    generator_busy_share: float | None = None  # the busiest load thread's share of time with work
    generator_syscalls_per_request: float | None = None
    generator_io: str | None = None  # the I/O path tailscope-load used ("epoll", "uring")

    @property
    def server_limited(self) -> bool:
        """The server is pinned to one CPU: 100 % is all it can get."""
        return self.cpu_pct is not None and self.cpu_pct >= 100 * SERVER_SATURATED_CPU_SHARE

    @property
    def limit(self) -> str:
        """Who set the point's throughput, from its own measurements: the server (its core at least
        SERVER_SATURATED_CPU_SHARE busy), the generator (a load thread's loop found work at least
        GENERATOR_SATURATED_BUSY_SHARE of its time), both, or neither — then the round trip (few
        connections: every request waits for the one before it). LIMIT_UNAVAILABLE without the
        generator's busy share, unless the server alone shows it was the limit."""
        server = self.server_limited
        if self.generator_busy_share is None:
            return LIMIT_SERVER if server else LIMIT_UNAVAILABLE
        generator = self.generator_busy_share >= GENERATOR_SATURATED_BUSY_SHARE
        if server and generator:
            return LIMIT_BOTH
        if server:
            return LIMIT_SERVER
        if generator:
            return LIMIT_GENERATOR
        return LIMIT_ROUND_TRIP

    @property
    def limit_unavailable(self) -> str:
        """Why `limit` is LIMIT_UNAVAILABLE ("" when it is not)."""
        return "no generator busy share in the document" if self.limit == LIMIT_UNAVAILABLE else ""

    @property
    def cpu_per_echo_ns(self) -> float | None:
        """The server's CPU time per echo (its pinned core's busy share ÷ echoes per second): what one
        server core could carry is 1 / this, a figure that stands even where the generator limited the
        point. None when the server's CPU or the throughput was not measured."""
        if self.cpu_pct is None or not self.throughput_per_s:
            return None
        return self.cpu_pct / 100.0 / self.throughput_per_s * 1e9


def _float_or_none(v: object) -> float | None:
    return None if v is None else float(v)  # type: ignore[arg-type]


def read_points(docs: Iterable[EngineDocument]) -> list[EchoPoint]:
    """The closed-loop and common-rate points of the stored documents, in storage order (a document
    without an intended-latency measurement is no point)."""
    out = []
    for d in docs:
        doc = d.document
        ep = doc.get("echo_point")
        if d.engine != LOAD or not ep or d.point.split("/")[0] not in (CLOSED, RATE):
            continue
        meas = {m["name"]: m for m in doc.get("measurements", [])}
        lat = meas.get("latency_intended", {}).get("latency")
        if not lat:
            continue
        pct = lat["percentiles"]
        proc = (doc.get("server_resources") or {}).get("process") or {}
        load = doc.get("load", {})
        out.append(
            EchoPoint(
                model=ep["model"],
                connections=int(ep["connections"]),
                mode=ep["mode"],
                throughput_per_s=float(load.get("achieved_per_s") or 0),
                mean_ns=float(lat["mean"]),
                p50_ns=float(pct["50"]),
                p90_ns=float(pct["90"]),
                p99_ns=float(pct["99"]),
                p999_ns=float(pct["99.9"]),
                samples=int(lat.get("count") or 0),
                low_confidence=frozenset(lat.get("low_confidence") or ()),
                cdf=tuple((float(v), float(p)) for v, p in meas["latency_intended"].get("cdf", [])),
                intervals={k: from_latency(lat, k) for k in pct if percentile_key_q(k) is not None},
                rate_per_s=float(ep.get("rate_per_s") or 0),
                cpu_pct=_float_or_none(proc.get("cpu_pct_mean")),
                cpu_sys_pct=_float_or_none(proc.get("cpu_sys_pct_mean")),
                cpu_user_pct=_float_or_none(proc.get("cpu_user_pct_mean")),
                rss_bytes=proc.get("rss_bytes_max"),
                threads=proc.get("threads_max"),
                fds=proc.get("open_fds_max"),
                errors=int(load.get("errors_total") or 0),
                error_kinds={k: v for k, v in (load.get("errors") or {}).items() if v},
                generator_bottleneck=bool(load.get("generator_bottleneck")),
                send_lag_p99_ns=_float_or_none((load.get("self_check") or {}).get("send_lag_p99_ns")),
                server_cpu=ep.get("server_cpu"),
                client_cpu=ep.get("client_cpu"),
                load_threads=int(ep.get("load_threads") or 1),
                load_cpus=tuple(ep.get("load_cpus") or [ep.get("client_cpu")]),
                load_pacing=ep.get("load_pacing")
                or ("busy-poll" if doc.get("config", {}).get("busy_poll") else "sleep"),
                server_features=ep.get("server_features") or {},
                generator_busy_share=_float_or_none((load.get("generator_busy_share") or {}).get("max")),
                generator_syscalls_per_request=_float_or_none(load.get("generator_syscalls_per_request")),
                generator_io=(load.get("io") or {}).get("used"),
            )
        )
    return out


def models_in(points: Iterable[EchoPoint]) -> list[str]:
    """The models the points cover, in MODELS order."""
    seen = {p.model for p in points}
    return [m for m in MODELS if m in seen]


def _by_connections(points: Iterable[EchoPoint]) -> dict[int, dict[str, EchoPoint]]:
    by_c: dict[int, dict[str, EchoPoint]] = {}
    for p in points:
        by_c.setdefault(p.connections, {})[p.model] = p
    return by_c


# ---- what the sweep adapts to while it runs ------------------------------------------------------


def common_rate_per_s(achieved_per_model: dict[str, float]) -> float:
    """The common fixed rate at one connection count: COMMON_RATE_FRACTION of the slowest model's
    closed-loop maximum, rounded down; 0 when no model served anything."""
    if not achieved_per_model:
        return 0
    return round_rate(COMMON_RATE_FRACTION * min(achieved_per_model.values()))


def fastest_model(achieved_per_model: dict[str, float]) -> str | None:
    """The model with the highest closed-loop throughput (the measurement floor's server)."""
    if not achieved_per_model:
        return None
    return max(achieved_per_model, key=lambda m: achieved_per_model[m])


# ---- where things ran, and the generator ------------------------------------------------------------


@dataclass(frozen=True)
class Pinning:
    """Where the server and the load generator ran, over every point."""

    server_cpu: int | None  # the first point's
    load_threads: tuple[int, ...]  # the distinct counts, ascending
    load_cpus: tuple[int, ...]  # every client CPU any point used, ascending
    load_pacing: str  # the first point's


def pinning(points: Sequence[EchoPoint]) -> Pinning:
    p = points[0]
    return Pinning(
        server_cpu=p.server_cpu,
        load_threads=tuple(sorted({q.load_threads for q in points})),
        load_cpus=tuple(sorted({c for q in points for c in q.load_cpus})),
        load_pacing=p.load_pacing,
    )


@dataclass(frozen=True)
class GeneratorReading:
    """How the load generator ran, read from the documents: threads and I/O path per connection
    count, the fixed-rate points' self-check, and the closed-loop points it (or the round trip) limited."""

    threads_by_connections: tuple[tuple[int, tuple[int, ...]], ...]  # (connections, thread counts), ascending
    load_cpus: tuple[int, ...]
    io_by_connections: tuple[tuple[int, tuple[str, ...]], ...]  # (connections, I/O paths); empty: not recorded
    syscalls_per_request: tuple[float, float] | None  # (min, max) over the points; None: not recorded
    rate_points: int
    rate_points_passed: int  # fixed-rate points the generator's self-check did not flag
    rate_pacings: tuple[str, ...]
    # Closed-loop points from SERVER_LIMIT_EXPECTED_FROM connections up that left the server below
    # SERVER_SATURATED_CPU_SHARE of its core, in point order.
    not_server_limited: tuple[EchoPoint, ...]


def generator_reading(points: Sequence[EchoPoint]) -> GeneratorReading:
    threads: dict[int, set[int]] = {}
    io: dict[int, set[str]] = {}
    for p in points:
        threads.setdefault(p.connections, set()).add(p.load_threads)
        if p.generator_io:
            io.setdefault(p.connections, set()).add(p.generator_io)
    per_req = [p.generator_syscalls_per_request for p in points if p.generator_syscalls_per_request is not None]
    rate = [p for p in points if p.mode == RATE]
    return GeneratorReading(
        threads_by_connections=tuple((c, tuple(sorted(t))) for c, t in sorted(threads.items())),
        load_cpus=tuple(sorted({c for p in points for c in p.load_cpus})),
        io_by_connections=tuple((c, tuple(sorted(s))) for c, s in sorted(io.items())),
        syscalls_per_request=(min(per_req), max(per_req)) if per_req else None,
        rate_points=len(rate),
        rate_points_passed=sum(1 for p in rate if not p.generator_bottleneck),
        rate_pacings=tuple(sorted({p.load_pacing for p in rate})),
        not_server_limited=tuple(
            p
            for p in points
            if p.mode == CLOSED and not p.server_limited and p.connections >= SERVER_LIMIT_EXPECTED_FROM
        ),
    )


@dataclass(frozen=True)
class SelfCheck:
    """The generator self-check's verdict on the fixed-rate points, and how much of the worst flagged
    point's tail is the generator's own send lag."""

    flagged: int
    rate_points: int
    worst: EchoPoint | None  # the flagged point with the largest send-lag p99 ÷ latency p99; None: see lag_unavailable
    lag_share: float | None  # worst's send-lag p99 ÷ its latency p99
    lag_unavailable: str  # why there is no worst ("" when there is)


def self_check(rate: Sequence[EchoPoint]) -> SelfCheck | None:
    """None when the self-check flagged no fixed-rate point."""
    flagged = [p for p in rate if p.generator_bottleneck]
    if not flagged:
        return None
    lagged = [p for p in flagged if p.send_lag_p99_ns is not None and p.p99_ns]
    if not lagged:
        return SelfCheck(len(flagged), len(rate), None, None, "no flagged point's document carries a self-check lag")
    worst = max(lagged, key=lambda p: (p.send_lag_p99_ns or 0.0) / p.p99_ns)
    return SelfCheck(len(flagged), len(rate), worst, (worst.send_lag_p99_ns or 0.0) / worst.p99_ns, "")


@dataclass(frozen=True)
class IoUringFeatures:
    """What the io-uring model probed and used (its ready line)."""

    ring_setup: str | None  # None: the ready line does not say
    used: tuple[str, ...]  # IO_URING_FEATURES keys
    not_used: tuple[tuple[str, str], ...]  # (key, the fallback's reason)


def io_uring_features(points: Iterable[EchoPoint]) -> IoUringFeatures | None:
    """From the first io-uring point that reported its features; None when none did."""
    feats = next((p.server_features for p in points if p.model == "io-uring" and p.server_features), None)
    if not feats:
        return None
    used, not_used = [], []
    for key in IO_URING_FEATURES:
        f = feats.get(key)
        if isinstance(f, dict):
            if f.get("used"):
                used.append(key)
            else:
                not_used.append((key, str(f.get("reason", "no reason given"))))
    setup = feats.get("ring_setup")
    return IoUringFeatures(None if setup is None else str(setup), tuple(used), tuple(not_used))


# ---- in-run ratios and the target -----------------------------------------------------------


def empty_syscall_ns(docs: Iterable[EngineDocument]) -> float | None:
    """The run's empty system call, p50 (tailscope-baseline empty_syscall), or None."""
    base = find_document(docs, engine=BASELINE)
    m = measurement(base.document if base else None, "empty_syscall")
    return m.p_ns("50") if m else None


def repeat_spread(docs: Iterable[EngineDocument], closed: Iterable[EchoPoint]) -> dict[int, float]:
    """Per connection count: |poll's repeat − poll| ÷ poll, closed-loop throughput, from the
    second poll run the sweep makes after every model (point repeat/poll/C)."""
    first = {p.connections: p.throughput_per_s for p in closed if p.model == "poll" and p.throughput_per_s}
    spread = {}
    for d in docs:
        if d.engine != LOAD or not d.point.startswith("repeat/poll/"):
            continue
        c = int(d.document.get("echo_point", {}).get("connections", 0))
        again = achieved_per_s(d.document)
        if c in first and again:
            spread[c] = abs(again - first[c]) / first[c]
    return spread


@dataclass(frozen=True)
class RepeatP99:
    """poll's p99 at one count, first run beside its repeat: `verdict` is at_most_other(again, first)
    (measure.verdict) — MET: the repeat's interval lies wholly below the first's, NOT_MET: wholly above,
    UNDECIDED: they overlap, i.e. the run moved no more than sampling explains at p99; "" with the
    reason when a run has no interval."""

    connections: int
    first: QuantileInterval
    again: QuantileInterval
    verdict: IntervalVerdict

    @property
    def apart(self) -> bool:
        """The two runs' p99 intervals are disjoint: the run moved more than its sampling explains."""
        return self.verdict.verdict in (INTERVAL_MET, INTERVAL_NOT_MET)


def repeat_p99(docs: Iterable[EngineDocument], closed: Iterable[EchoPoint]) -> list[RepeatP99]:
    """Per connection count where poll was repeated: its p99 with its interval in both runs, and
    whether the intervals tell them apart (the noise line's p99 half; repeat_spread is throughput's)."""
    first = {p.connections: p for p in closed if p.model == "poll"}
    out = []
    for d in docs:
        if d.engine != LOAD or not d.point.startswith("repeat/poll/"):
            continue
        c = int(d.document.get("echo_point", {}).get("connections", 0))
        m = measurement(d.document, "latency_intended")
        if c not in first or m is None or "99" not in first[c].intervals:
            continue
        a, b = m.interval("99"), first[c].intervals["99"]
        out.append(
            RepeatP99(
                c, b, a, at_most_other(a, b, achieved_per_s(d.document) or None, first[c].throughput_per_s or None)
            )
        )
    return sorted(out, key=lambda r: r.connections)


@dataclass(frozen=True)
class RatioRow:
    """One model at one connection count beside poll (and io-uring beside epoll), closed loop."""

    point: EchoPoint
    throughput_vs_poll: float | None  # None: no poll point (or poll served nothing) at this count
    p99_vs_poll: float | None
    io_uring_vs_epoll: tuple[float, float] | None  # (throughput ratio, p99 ratio); io-uring rows only
    per_core_vs_poll: float | None  # echoes per core-second ÷ poll's = poll's CPU per echo ÷ this one's


@dataclass(frozen=True)
class TargetReading:
    """The issue's target at one connection count: the best model's throughput ÷ poll's ≥ TARGET_RATIO,
    with a p99 no higher than poll's."""

    connections: int
    unavailable: str = ""  # why it cannot be judged ("" when it can); the fields below are then unset
    best: str = ""  # the model with the highest closed-loop throughput
    ratio: float = math.nan  # best's throughput ÷ poll's
    p99_no_higher: bool = False  # best's p99 ≤ poll's, as point estimates
    # best's p99 ≤ poll's judged by their 95 % intervals (met / not met / undecided at this length, with the
    # run length that would decide it); verdict "" with `unavailable` set when a point has no interval, and
    # then the point estimates decide (p99_no_higher).
    p99_verdict: IntervalVerdict = IntervalVerdict("", unavailable="not judged")
    met: bool = False
    server_limited: bool = False  # both best's and poll's points were server-limited
    spread: float | None = None  # how far poll's repeat moved at this count (None: not repeated)
    # The throughput ratio's side of TARGET_RATIO is within poll's own movement between two runs of the
    # point: ratio ÷ (1 + spread) falls below the target while the ratio meets it, or ratio × (1 + spread)
    # reaches it while the ratio does not (and the p99 would not have decided "not met" anyway).
    within_noise: bool = False

    @property
    def p99_undecided(self) -> bool:
        """The ratio is met, and whether the p99 is no higher is undecided at this length."""
        return self.ratio >= TARGET_RATIO and self.p99_verdict.verdict == UNDECIDED

    @property
    def verdict(self) -> str:
        """MET, NOT_MET, MET_WITHIN_NOISE, NOT_MET_WITHIN_NOISE or TARGET_UNDECIDED (a reading with
        `unavailable` set has no verdict)."""
        if self.p99_undecided:
            return TARGET_UNDECIDED
        if self.within_noise:
            return MET_WITHIN_NOISE if self.met else NOT_MET_WITHIN_NOISE
        return MET if self.met else NOT_MET


@dataclass(frozen=True)
class SyscallShare:
    """What of poll's CPU per echo a model can remove outright: its user time and the entry cost of
    its two system calls per echo (a recv and a send; the run's empty system call). The rest is the
    socket work of that recv and send, which an io_uring server performs too, and poll's own
    readiness calls."""

    syscall_ns: float  # the run's empty system call (baseline p50)
    entries_share: float  # 2 × syscall_ns ÷ poll's CPU per echo
    user_share: float  # poll's user CPU ÷ its CPU
    # 1 / (1 − entries_share − user_share): poll's echoes per core-second without both;
    # None when the two add up to all of its CPU per echo (no bound to state).
    carry_factor: float | None


@dataclass(frozen=True)
class CpuReading:
    """At one target connection count: the model with the least server CPU per echo beside poll."""

    connections: int
    unavailable: str = ""  # why it cannot be read ("" when it can); the fields below are then unset
    best: str = ""
    best_cpu_per_echo_ns: float = math.nan
    poll_cpu_per_echo_ns: float = math.nan
    ratio: float = math.nan  # poll's CPU per echo ÷ best's: echoes per core-second ÷ poll
    at_least_target: bool = False  # ratio ≥ TARGET_RATIO
    # (model, system time ÷ its CPU) for poll and the best model (when not poll), where measured: on
    # loopback a server's send also runs the TCP receive path of the client's socket, work every model
    # pays per echo whatever its own loop costs.
    kernel_shares: tuple[tuple[str, float], ...] = ()
    syscall: SyscallShare | None = None
    syscall_unavailable: str = ""  # why syscall is None


@dataclass(frozen=True)
class RatioReading:
    """The in-run ratio table's values: rows per connection count and model, poll's repeat spread,
    the issue's target and the CPU per echo at TARGET_CONNECTIONS."""

    rows: tuple[RatioRow, ...]  # ascending connections, models in MODELS order
    spread: tuple[tuple[int, float], ...]  # (connections, spread), ascending; empty: poll not repeated
    targets: tuple[TargetReading, ...]  # one per TARGET_CONNECTIONS
    cpu: tuple[CpuReading, ...]  # one per TARGET_CONNECTIONS
    repeat_p99: tuple[RepeatP99, ...] = ()  # poll's p99 in both runs, by count; empty: not repeated


def _syscall_share(poll: EchoPoint, poll_cpe: float, syscall_ns: float | None) -> tuple[SyscallShare | None, str]:
    if not syscall_ns:
        return None, "the baseline has no empty_syscall measurement"
    entries = 2 * syscall_ns / poll_cpe
    if poll.cpu_user_pct is None or not poll.cpu_pct:
        return None, "no user CPU for poll's server"
    user = poll.cpu_user_pct / poll.cpu_pct
    removable = entries + user
    return SyscallShare(syscall_ns, entries, user, 1 / (1 - removable) if removable < 1 else None), ""


def _kernel_shares(*points: EchoPoint | None) -> tuple[tuple[str, float], ...]:
    return tuple(
        (p.model, p.cpu_sys_pct / p.cpu_pct)
        for p in points
        if p is not None and p.cpu_sys_pct is not None and p.cpu_pct
    )


def _cpu_reading(c: int, ms: dict[str, EchoPoint], syscall_ns: float | None) -> CpuReading:
    poll = ms.get("poll")
    poll_cpe = poll.cpu_per_echo_ns if poll else None
    costs = [(cpe, m) for m, p in ms.items() if (cpe := p.cpu_per_echo_ns)]
    if poll is None or not poll_cpe or not costs:
        return CpuReading(c, unavailable=f"no server CPU for poll or any model at {c}")
    cpe, best = min(costs)
    ratio = poll_cpe / cpe
    syscall, why = _syscall_share(poll, poll_cpe, syscall_ns)
    return CpuReading(
        c,
        best=best,
        best_cpu_per_echo_ns=cpe,
        poll_cpu_per_echo_ns=poll_cpe,
        ratio=ratio,
        at_least_target=ratio >= TARGET_RATIO,
        kernel_shares=_kernel_shares(poll, ms[best] if best != "poll" else None),
        syscall=syscall,
        syscall_unavailable=why,
    )


def _target_reading(c: int, ms: dict[str, EchoPoint], spread: dict[int, float]) -> TargetReading:
    poll = ms.get("poll")
    if not poll or not poll.throughput_per_s:
        return TargetReading(c, unavailable=f"no poll point at {c}")
    best = max(ms.values(), key=lambda p: p.throughput_per_s)
    ratio = best.throughput_per_s / poll.throughput_per_s
    p99_ok = best.p99_ns <= poll.p99_ns
    p99_verdict = _p99_at_most(best, poll)
    if p99_verdict.verdict in (INTERVAL_MET, INTERVAL_NOT_MET):
        p99_ok_by_interval = p99_verdict.verdict == INTERVAL_MET
    else:  # undecided is not met; without intervals the point estimates decide, as before intervals existed
        p99_ok_by_interval = p99_ok and p99_verdict.verdict != UNDECIDED
    met = ratio >= TARGET_RATIO and p99_ok_by_interval
    moved = spread.get(c)
    return TargetReading(
        c,
        best=best.model,
        ratio=ratio,
        p99_no_higher=p99_ok,
        p99_verdict=p99_verdict,
        met=met,
        server_limited=best.server_limited and poll.server_limited,
        spread=moved,
        # For a miss the p99 must not be shown higher either: undecided by the intervals still counts.
        within_noise=_ratio_side_within_noise(
            ratio,
            moved,
            met,
            p99_verdict.verdict != INTERVAL_NOT_MET and (p99_verdict.verdict != "" or p99_ok),
        ),
    )


def _ratio_side_within_noise(ratio: float, moved: float | None, met: bool, p99_not_higher: bool) -> bool:
    """Whether poll's repeat moved enough to put the ratio on the other side of TARGET_RATIO: the
    closed-loop throughput of one point has no interval of its own, so the run's own movement between
    two runs of the same point is the band it is judged in. A miss the p99 decides is a miss whatever
    the ratio."""
    if moved is None:
        return False
    if met:
        return ratio / (1 + moved) < TARGET_RATIO
    return p99_not_higher and ratio * (1 + moved) >= TARGET_RATIO


def _p99_at_most(best: EchoPoint, poll: EchoPoint) -> IntervalVerdict:
    """best's p99 ≤ poll's by their intervals; a closed-loop point records one sample per echo, so its
    throughput is its sample rate (what "how long would decide it" divides by)."""
    if best is poll:
        return IntervalVerdict("", unavailable="the best model is poll itself")
    missing = IntervalVerdict("", unavailable="no p99 interval in the documents")
    a, b = best.intervals.get("99"), poll.intervals.get("99")
    if a is None or b is None:
        return missing
    return at_most_other(a, b, best.throughput_per_s or None, poll.throughput_per_s or None)


def ratios(
    closed: Sequence[EchoPoint],
    spread: dict[int, float] | None = None,
    syscall_ns: float | None = None,
    repeats: Sequence[RepeatP99] = (),
) -> RatioReading | None:
    """In-run ratios at every connection count: each model ÷ poll (throughput and p99), io-uring ÷ epoll;
    `spread`: per count, how far poll's repeat moved (repeat_spread). None when no count has poll."""
    spread = spread or {}
    by_c = _by_connections(closed)
    if not any("poll" in ms for ms in by_c.values()):
        return None
    rows = []
    for c in sorted(by_c):
        ms = by_c[c]
        poll = ms.get("poll")
        for m in models_in(ms.values()):
            p = ms[m]
            epoll = ms.get("epoll")
            vs_epoll = None
            if m == "io-uring" and epoll and epoll.throughput_per_s:
                vs_epoll = (p.throughput_per_s / epoll.throughput_per_s, p.p99_ns / max(epoll.p99_ns, 1))
            cpe, poll_cpe = p.cpu_per_echo_ns, poll.cpu_per_echo_ns if poll else None
            rows.append(
                RatioRow(
                    p,
                    throughput_vs_poll=p.throughput_per_s / poll.throughput_per_s
                    if poll and poll.throughput_per_s
                    else None,
                    p99_vs_poll=p.p99_ns / poll.p99_ns if poll and poll.p99_ns else None,
                    io_uring_vs_epoll=vs_epoll,
                    per_core_vs_poll=poll_cpe / cpe if cpe and poll_cpe else None,
                )
            )
    return RatioReading(
        rows=tuple(rows),
        spread=tuple(sorted(spread.items())),
        targets=tuple(_target_reading(c, by_c.get(c, {}), spread) for c in TARGET_CONNECTIONS),
        cpu=tuple(_cpu_reading(c, by_c.get(c, {}), syscall_ns) for c in TARGET_CONNECTIONS),
        repeat_p99=tuple(repeats),
    )


# ---- what the figures' findings state -----------------------------------------------------------------


@dataclass(frozen=True)
class ThroughputLeader:
    """The fastest and the slowest model at one connection count (closed loop)."""

    connections: int
    fastest: EchoPoint
    slowest: EchoPoint
    ratio: float  # fastest ÷ slowest (slowest's throughput taken as at least 1/s)


def throughput_leaders(closed: Iterable[EchoPoint]) -> list[ThroughputLeader]:
    by_c: dict[int, list[EchoPoint]] = {}
    for p in closed:
        by_c.setdefault(p.connections, []).append(p)
    out = []
    for c in sorted(by_c):
        best = max(by_c[c], key=lambda p: p.throughput_per_s)
        worst = min(by_c[c], key=lambda p: p.throughput_per_s)
        out.append(ThroughputLeader(c, best, worst, best.throughput_per_s / max(worst.throughput_per_s, 1)))
    return out


@dataclass(frozen=True)
class LatencySpread:
    """The closed-loop latency spread across models at the run's highest connection count."""

    connections: int
    lowest_p99: EchoPoint
    highest_p99: EchoPoint
    p99_ratio: float  # highest ÷ lowest (lowest taken as at least 1 ns)
    lowest_mean: EchoPoint
    highest_mean: EchoPoint
    mean_ratio: float  # highest ÷ lowest (lowest taken as at least 1 ns)
    p999_low_confidence: bool  # some p99.9 there rests on fewer than 10 tail samples


def latency_spread(closed: Sequence[EchoPoint]) -> LatencySpread:
    top_c = max(p.connections for p in closed)
    at_top = [p for p in closed if p.connections == top_c]
    best = min(at_top, key=lambda p: p.p99_ns)
    worst = max(at_top, key=lambda p: p.p99_ns)
    lo = min(at_top, key=lambda p: p.mean_ns)
    hi = max(at_top, key=lambda p: p.mean_ns)
    return LatencySpread(
        top_c,
        best,
        worst,
        worst.p99_ns / max(best.p99_ns, 1),
        lo,
        hi,
        hi.mean_ns / max(lo.mean_ns, 1),
        any("99.9" in p.low_confidence for p in at_top),
    )


@dataclass(frozen=True)
class ResourceReading:
    """Server memory and CPU efficiency at the run's highest connection count (closed loop)."""

    connections: int
    largest_rss: EchoPoint
    smallest_rss: EchoPoint
    rss_ratio: float  # largest ÷ smallest
    most_efficient: EchoPoint | None  # most requests per CPU-%; None: no point has the server's CPU
    requests_per_cpu_pct: float | None  # most_efficient's req/s ÷ its CPU % (CPU taken as at least 1 %)


def resource_reading(closed: Sequence[EchoPoint]) -> ResourceReading | None:
    """None when no point at the highest count has a resource sample."""
    top_c = max(p.connections for p in closed)
    at_top = [p for p in closed if p.connections == top_c and p.rss_bytes]
    if not at_top:
        return None
    big = max(at_top, key=lambda p: p.rss_bytes or 0)
    small = min(at_top, key=lambda p: p.rss_bytes or 0)
    eff = max(
        (p for p in at_top if p.cpu_pct),
        key=lambda p: p.throughput_per_s / max(p.cpu_pct or 0.0, 1),
        default=None,
    )
    return ResourceReading(
        top_c,
        big,
        small,
        (big.rss_bytes or 0) / (small.rss_bytes or 1),
        eff,
        eff.throughput_per_s / max(eff.cpu_pct or 0.0, 1) if eff else None,
    )


@dataclass(frozen=True)
class CommonRateReading:
    """The model with the lowest p99 at the common fixed rate, at one connection count."""

    connections: int
    rate_per_s: float
    lowest_p99: EchoPoint


def common_rate_readings(rate: Iterable[EchoPoint]) -> list[CommonRateReading]:
    by_c: dict[int, list[EchoPoint]] = {}
    for p in rate:
        by_c.setdefault(p.connections, []).append(p)
    return [CommonRateReading(c, by_c[c][0].rate_per_s, min(by_c[c], key=lambda p: p.p99_ns)) for c in sorted(by_c)]


# ---- the recommendation per connection range, and the thesis's -------------------------------------------


@dataclass(frozen=True)
class RangeReading:
    """One of the thesis's connection ranges, read from this run's closed-loop and common-rate points."""

    name: str
    connections: tuple[int, ...]  # this run's counts in the range (empty: none)
    score: dict[str, float]  # mean closed-loop throughput per model over the range's counts
    p99_at_rate: dict[str, float]  # mean p99 at the common rate per model (inf: not measured)
    server_limited: bool  # every closed-loop point in the range used ≥ 90 % of the server's core

    @property
    def pick(self) -> str | None:
        """Highest mean throughput; among models within 5 % of it, the lowest p99 at the common rate."""
        if not self.score:
            return None
        top = max(self.score.values())
        contenders = [m for m, v in self.score.items() if v >= PICK_WITHIN_SHARE * top]
        return min(contenders, key=lambda m: self.p99_at_rate[m])

    @property
    def lowest_tail(self) -> str | None:
        """The model with the lowest mean p99 at the common rate (None: no model scored)."""
        return min(self.score, key=lambda m: self.p99_at_rate[m]) if self.score else None

    @property
    def thesis_best(self) -> str | None:
        """The thesis's model with the highest mean throughput."""
        return max((m for m in self.score if m in THESIS_MODELS), key=lambda m: self.score[m], default=None)

    @property
    def thesis_best_ratio(self) -> float | None:
        """thesis_best's mean throughput ÷ pick's."""
        pick, best = self.pick, self.thesis_best
        return self.score[best] / self.score[pick] if pick and best else None


def range_readings(closed: Sequence[EchoPoint], rate: Sequence[EchoPoint]) -> list[RangeReading]:
    out = []
    for name, lo, hi in RANGES:
        cs = sorted({p.connections for p in closed if lo <= p.connections <= hi})
        score: dict[str, float] = {}
        p99: dict[str, float] = {}
        for m in models_in(closed):
            vals = [p.throughput_per_s for p in closed if p.model == m and p.connections in cs]
            if cs and len(vals) == len(cs):
                score[m] = sum(vals) / len(vals)
                tails = [p.p99_ns for p in rate if p.model == m and p.connections in cs]
                p99[m] = sum(tails) / len(tails) if tails else math.inf
        limited = all(p.server_limited for p in closed if p.connections in cs)
        out.append(RangeReading(name, tuple(cs), score, p99, limited))
    return out


@dataclass(frozen=True)
class ThesisRange:
    """One of the thesis's three ranges beside this run: is its pick the best of the thesis's five models
    (mean closed-loop throughput over the range's counts)? NOT_COMPARABLE where the run could not
    reproduce the thesis's setup for that range (no count in it; a multi-threaded pick on a server pinned
    to one CPU), UNAVAILABLE where the pick was not measured."""

    name: str
    thesis_pick: str  # THESIS_PICKS[name]
    verdict: str  # HOLDS, PARTLY, DOES_NOT_HOLD, NOT_COMPARABLE or UNAVAILABLE (report.blocks)
    connections: tuple[int, ...]  # this run's counts in the range
    thesis_best: str | None  # the best of the thesis's five here (None: none measured)
    pick_share: float | None  # the pick's mean throughput ÷ thesis_best's (1 when it is the best; None: not measured)
    recommended: str | None  # this run's recommendation overall (RangeReading.pick)
    server_limited: bool
    reason: str = ""  # why NOT_COMPARABLE or UNAVAILABLE ("" otherwise)


@dataclass(frozen=True)
class ThesisReading:
    """The thesis's per-range recommendation beside this run's, one ThesisRange per range (RANGES order)."""

    ranges: tuple[ThesisRange, ...]
    server_cpus: int | None  # the CPUs the server was pinned to (None: not pinned)

    def range(self, name: str) -> ThesisRange:
        return next(r for r in self.ranges if r.name == name)


def server_cpus(points: Sequence[EchoPoint]) -> int | None:
    """How many CPUs the server had: 1 when the points were pinned to a server CPU, None when not."""
    return 1 if points and all(p.server_cpu is not None for p in points) else None


def _thesis_verdict(
    r: RangeReading, pick: str, share: float | None, cpus: int | None, counts: list[int]
) -> tuple[str, str]:
    """(verdict, reason) of one range: see ThesisRange."""
    if not r.connections:
        measured = ", ".join(map(str, counts)) or "none"
        return NOT_COMPARABLE, f"this run measured no connection count in the range (its counts: {measured})"
    if pick not in r.score:
        return UNAVAILABLE, f"{pick} was not measured at every count of the range"
    if pick in THESIS_MULTI_THREADED and cpus == 1:
        return NOT_COMPARABLE, (
            f"the thesis's pick {pick} is multi-threaded and its server had {THESIS_SERVER_CPUS} logical CPUs "
            "(asio-mt ran one thread per logical core); here the server is pinned to one CPU, so its threads "
            "take turns on one core"
        )
    if r.thesis_best == pick:
        return HOLDS, ""
    return (PARTLY if share is not None and share >= THESIS_TIE_SHARE else DOES_NOT_HOLD), ""


def thesis_reading(closed: Sequence[EchoPoint], rate: Sequence[EchoPoint]) -> ThesisReading:
    cpus = server_cpus(closed)
    counts = sorted({p.connections for p in closed})
    out = []
    for r in range_readings(closed, rate):
        pick = THESIS_PICKS[r.name]
        best = r.thesis_best
        share = r.score[pick] / r.score[best] if best and pick in r.score and r.score[best] else None
        verdict, reason = _thesis_verdict(r, pick, share, cpus, counts)
        out.append(ThesisRange(r.name, pick, verdict, r.connections, best, share, r.pick, r.server_limited, reason))
    return ThesisReading(tuple(out), cpus)


# ---- the measurement floor and the coordinated-omission demo ------------------------------------------


@dataclass(frozen=True)
class FloorRow:
    """tailscope-load against the fastest model over one connection (point floor/<model>/<kind>)."""

    model: str
    kind: str  # CLOSED (back to back) or RATE (1000 req/s)
    p50_ns: float
    p99_ns: float | None
    samples: int
    ratio: float  # p50 ÷ the ping-pong's p50


@dataclass(frozen=True)
class FloorReading:
    """What tailscope-load adds to a blocking loopback ping-pong, same cores, same run."""

    pingpong_p50_ns: float
    pingpong_p99_ns: float | None
    pingpong_samples: int
    rows: tuple[FloorRow, ...]  # in storage order
    closed_ratio: float | None  # the like-for-like row's ratio (None: not measured)
    rate_ratio: float | None


def floor_reading(docs: Iterable[EngineDocument]) -> FloorReading | None:
    """None without the baseline's ping-pong or without any floor point."""
    docs = list(docs)
    base = find_document(docs, engine=BASELINE)
    ping = measurement(base.document if base else None, "tcp_pingpong")
    a = ping.p_ns("50") if ping else None
    if not ping or not a:
        return None
    rows = []
    for d in docs:
        if not d.point.startswith("floor/"):
            continue
        _, model, kind = d.point.split("/")
        ours = measurement(d.document, "latency_intended")
        b = ours.p_ns("50") if ours else None
        if ours is None or b is None:
            continue
        rows.append(FloorRow(model, kind, b, ours.p_ns("99"), ours.count, b / a))
    if not rows:
        return None
    ratio = {r.kind: r.ratio for r in rows}  # the last of each kind, as stored
    return FloorReading(a, ping.p_ns("99"), ping.count, tuple(rows), ratio.get(CLOSED), ratio.get(RATE))


@dataclass(frozen=True)
class CoordinatedOmission:
    """A server stalling stall_ms every stall_every_ms at a fixed rate: the p99 from the intended send
    time, from the actual send time, and wrk's, each beside the analytic expectation."""

    stall_every_ms: float
    stall_ms: float
    rate_per_s: float
    connections: int
    expected_p99_ns: float
    corrected_p99_ns: float  # from the intended send time
    uncorrected_p99_ns: float  # from the actual send time
    corrected_ratio: float  # corrected ÷ expected
    uncorrected_ratio: float  # uncorrected ÷ expected
    corrected_off: float  # |corrected ÷ expected − 1|
    under_report: float  # expected ÷ uncorrected (uncorrected taken as at least 1 ns)
    wrk_p99_ns: float | None  # None: see wrk_unavailable
    wrk_ratio: float | None  # wrk ÷ expected
    wrk_unavailable: str


def coordinated_omission(docs: Iterable[EngineDocument]) -> CoordinatedOmission | None:
    """None without the demo's document or its measurements."""
    d = find_document(docs, point_prefix="co/")
    if not d or "co_demo" not in d.document:
        return None
    co = d.document["co_demo"]
    intended, actual = measurement(d.document, "latency_intended"), measurement(d.document, "latency_actual")
    if intended is None or actual is None:
        return None
    base, corr, unc = intended.p_ns("50"), intended.p_ns("99"), actual.p_ns("99")
    if base is None or corr is None or unc is None:
        return None
    every, stall = co["stall_every_ms"] * 1e6, co["stall_ms"] * 1e6
    # A request intended at a uniform random time waits out the rest of a stall with probability
    # stall/every, uniformly over [0, stall]: P(L > x) = (stall/every)(1 - x/stall) = 1 % at
    # x = stall - 0.01 * every. Plus the ordinary service time (taken as the measured p50).
    expected = stall - 0.01 * every + base
    wrk = co.get("wrk_p99_ns") or None
    return CoordinatedOmission(
        stall_every_ms=co["stall_every_ms"],
        stall_ms=co["stall_ms"],
        rate_per_s=co["rate_per_s"],
        connections=co["connections"],
        expected_p99_ns=expected,
        corrected_p99_ns=corr,
        uncorrected_p99_ns=unc,
        corrected_ratio=corr / expected,
        uncorrected_ratio=unc / expected,
        corrected_off=abs(corr / expected - 1),
        under_report=expected / max(unc, 1),
        wrk_p99_ns=wrk,
        wrk_ratio=wrk / expected if wrk else None,
        wrk_unavailable="" if wrk else str(co.get("wrk_unavailable", "")),
    )


# ---- the whole reading -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class EchoReading:
    """Everything the echo section shows, read from one run's documents."""

    points: tuple[EchoPoint, ...]  # closed-loop and common-rate points, in storage order
    closed: tuple[EchoPoint, ...]
    rate: tuple[EchoPoint, ...]
    pinning: Pinning | None  # None: no points
    with_errors: tuple[EchoPoint, ...]  # points whose load reported errors
    generator: GeneratorReading | None
    io_uring: IoUringFeatures | None
    self_check: SelfCheck | None
    throughput: tuple[ThroughputLeader, ...]
    latency: LatencySpread | None  # None: no closed-loop point
    resources: ResourceReading | None
    common_rate: tuple[CommonRateReading, ...]
    ratios: RatioReading | None
    ranges: tuple[RangeReading, ...]  # empty: no closed-loop point
    thesis: ThesisReading | None  # None: no closed-loop point
    floor: FloorReading | None
    coordinated_omission: CoordinatedOmission | None


def read(docs: Sequence[EngineDocument]) -> EchoReading:
    points = read_points(docs)
    closed = [p for p in points if p.mode == CLOSED]
    rate = [p for p in points if p.mode == RATE]
    return EchoReading(
        points=tuple(points),
        closed=tuple(closed),
        rate=tuple(rate),
        pinning=pinning(points) if points else None,
        with_errors=tuple(p for p in points if p.errors),
        generator=generator_reading(points) if points else None,
        io_uring=io_uring_features(points),
        self_check=self_check(rate),
        throughput=tuple(throughput_leaders(closed)),
        latency=latency_spread(closed) if closed else None,
        resources=resource_reading(closed) if closed else None,
        common_rate=tuple(common_rate_readings(rate)),
        ratios=ratios(closed, repeat_spread(docs, closed), empty_syscall_ns(docs), repeat_p99(docs, closed))
        if closed
        else None,
        ranges=tuple(range_readings(closed, rate)) if closed else (),
        thesis=thesis_reading(closed, rate) if closed else None,
        floor=floor_reading(docs),
        coordinated_omission=coordinated_omission(docs),
    )
