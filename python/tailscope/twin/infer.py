"""Infer a topology (topologies/*.yaml form) from traces (docs/twin.md).

Per server span (an endpoint instance: the trace's root, or the server side of an RPC pair) the
spans below it in its own process become *items*: a call (a client span paired with a server
span, or a server span directly under the handler) or a store operation (a leaf span). Items
become stages:

- calls whose lifetimes overlap (from their launch — the probe's trigger time when tailscope's
  probe tags are present, else their start — to their end) are one group, launched `async`;
- a probe-tagged call that starts within `deferred_gap_us` of the moment the group's previous
  result was consumed (end + probe join delay) is a `deferred` member of that group: it started
  only when the parent asked for its value (DeathStarBench's std::launch::deferred). Without probe
  tags such a call is a sequential `call` (timing alone cannot tell the two apart, and they run
  alike on the handler thread);
- the join order is the order results were consumed (end + probe join delay, else end);
- a lone call is a `call` stage; consecutive leaf spans of one name are one `store` with a count;
- the parent's own time before, between and after the stages is fitted and becomes a `cpu`
  stage (a `cpu_fraction` share of it) and a `store` wait (the rest): a trace does not say
  whether a span's own time was computing or waiting.

Each endpoint's instances vote: the most frequent structure wins. Structures that differ from it
only by store spans inserted right after one of its stores are cache misses (`hit_ratio`,
`on_miss`); every other structure is reported as a conflicting version and left out. A read whose
span says it missed (tag tailscope.cache, written by tailscope-svc on real stores) in every
instance of the winning structure has its following stores as its miss path (hit_ratio 0), though
no instance shows its hit form.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np

from tailscope.diagnose.diagnosis import Diagnosis, diagnose
from tailscope.traces.spans import Span, Trace, TraceSet
from tailscope.twin import correlation, cpusplit
from tailscope.twin.capacities import (
    DEFAULT_MIN_CONFIDENCE,
    MIN_WAIT_SHARE_IN_PLACE,
    CapacityMap,
    Finding,
    capacity_map,
    wait_share_in_place,
)
from tailscope.twin.fit import EMPIRICAL, Fit, fit_durations, scale_dist

DEFAULT_DEFERRED_GAP_US = 20.0
DEFAULT_MIN_TRACES = 20
# None: decided per endpoint from the traces (cpusplit.py); a number 0…1 overrides it everywhere.
DEFAULT_CPU_FRACTION: float | None = None
# A group wider than this keeps its first calls only (reported): a fan-out of thousands of calls
# would make thousands of threads under std-async, a twin nobody asked for.
MAX_GROUP_CALLS = 256
# Own time whose median is below this is not a stage: it is the runtime's own bookkeeping, which
# the twin's runtime pays again.
MIN_OWN_TIME_US = 1.0
# The span name of an own-time wait (_own_time_stages: f"{service}.{endpoint}.own_{m}_wait").
OWN_TIME_WAIT = re.compile(r"\.own_\d+_wait$")
# Join order: a join delay above this is a wake-up (the parent slept on that result), below it a
# get() of a value that was already there. Groups wider than MAX_PERMUTED are ordered by end time.
WOKEN_JOIN_NS = 3000
MAX_PERMUTED = 6
STORE_SYSTEMS = ("mongodb", "mongo", "memcached", "redis", "mysql", "postgres", "cassandra", "kafka", "sql")
Key = tuple[str, str]  # (service, operation)


class InferenceError(ValueError):
    """Nothing (or nothing usable) can be inferred; the message says why."""


@dataclass
class Item:
    kind: str  # "call" | "store"
    name: str  # client span / store span name
    target: Key | None  # called endpoint
    start_ns: int
    end_ns: int
    launch_ns: int
    consumed_ns: int
    probed: bool
    ref: tuple[str, str] = ("", "")  # (trace id, span id): the key of diagnose's per-span waits
    op: Key = ("", "")  # the span's own (service, operation): its diagnose operation population
    site: tuple[str, str, str, str] = ("", "", "", "")  # (parent service, parent op, service, op): its call site
    client_side: bool = False  # a client span (not the called server span itself)
    # diagnose's name for the call site when one client operation calls several servers
    # ("HTTP GET → route:/route"); None when the plain operation names it.
    site_labelled: tuple[str, str, str, str] | None = None
    server_start_ns: int | None = None  # the paired server span's start (client spans)
    cache: str | None = None  # a cache read's answer, "hit" | "miss" (Span.cache)

    @property
    def member(self) -> tuple[str, str, str]:
        assert self.target is not None
        return (self.name, *self.target)


@dataclass
class StageObs:
    """One stage of one endpoint instance."""

    kind: str  # "call" | "group" | "store"
    items: list[Item]
    deferred: list[bool] = field(default_factory=list)  # group: per item, launch order

    @property
    def start_ns(self) -> int:
        return min(i.launch_ns for i in self.items)

    @property
    def end_ns(self) -> int:
        return max(i.consumed_ns for i in self.items)

    @property
    def missed(self) -> bool:
        """A store stage whose read said it missed (a miss of any repetition runs the miss path)."""
        return any(i.cache == "miss" for i in self.items)

    def token(self) -> tuple:
        if self.kind == "store":
            return ("store", self.items[0].name)
        if self.kind == "call":
            return ("call", *self.items[0].member)
        return ("group", tuple(sorted(i.member for i in self.items)))


@dataclass
class Instance:
    trace_id: str
    start_ns: int
    end_ns: int
    stages: list[StageObs]
    span_id: str = ""
    in_flight: int = 0  # handlers of the same service in flight at its start (cpusplit.py)

    def signature(self) -> tuple:
        return tuple(s.token() for s in self.stages)


def _is_store(token: tuple) -> bool:
    return token[0] == "store"


def _store_service(parent: Span, c: Span) -> bool:
    """A leaf span in another service that names a store system (a "mysql" or "redis" tracer's span
    right under the handler): the handler's store operation, not a call to a service. Without
    span.kind tags the analyzer pairs such a child as a server span (cross-process parent)."""
    return not c.children and c.service != parent.service and _system(c.service) != "store"


def _own_time_wait(parent: Span, c: Span) -> bool:
    """A twin's own-time wait (a `store` stage of system own-time, written by _own_time_stages): the
    handler's own time that the twin replays as a wait, read back as own time. Inferring from a twin's
    own traces (calibrate.py) must find the stages the source's traces gave — an own-time place whose
    wait were read as a store would leave only the bookkeeping around it as that place's own time, and
    calibration would then add back, not take off, the wait (2026-11-27: every own-time wait of the
    socialnet twin ran ~1.8× its fit, the twin's p50 1.2× the original's)."""
    return (
        not c.children
        and c.service == parent.service
        and c.operation.startswith(f"{parent.service}.")
        and OWN_TIME_WAIT.search(c.operation) is not None
    )


def _collect(span: Span, out: list[Item], flattened: list[str], trace_id: str = "") -> None:
    for c in span.children:
        site = (span.service, span.operation, c.service, c.operation)
        if _own_time_wait(span, c):
            continue  # its time stays in the gap around it: the handler's own time
        if c.is_server and not _store_service(span, c):  # the handler itself is the client side
            out.append(_item("call", f"{c.operation}_call", (c.service, c.operation), c, trace_id, site, False))
        elif c.server is not None and not _store_service(span, c):
            target = (c.server.service, c.server.operation)
            it = _item("call", c.operation, target, c, trace_id, site, True)
            it.server_start_ns = c.server.start_ns
            if c.server.service != c.service:
                it.site_labelled = (*site[:3], f"{c.operation} → {target[0]}:{target[1]}")
            out.append(it)
        elif c.children and c.server is None:  # an internal span: its children and own time are the handler's
            flattened.append(f"{c.service}:{c.operation}")
            _collect(c, out, flattened, trace_id)
        else:
            out.append(_item("store", c.operation, None, c, trace_id, site, False))


def _item(
    kind: str,
    name: str,
    target: Key | None,
    s: Span,
    trace_id: str = "",
    site: tuple[str, str, str, str] = ("", "", "", ""),
    client_side: bool = False,
) -> Item:
    launch = s.start_ns - s.probe_scheduling_ns if s.probe_scheduling_ns is not None else s.start_ns
    consumed = s.end_ns + s.probe_join_ns if s.probe_join_ns is not None else s.end_ns
    # A deferred call's scheduling delay is measured from the moment its value was asked for,
    # not from its launch (exec/async_probe.h): launch stays ≤ start either way.
    return Item(
        kind,
        name,
        target,
        s.start_ns,
        s.end_ns,
        min(launch, s.start_ns),
        max(consumed, s.end_ns),
        s.probe_scheduling_ns is not None or s.probe_join_ns is not None,
        (trace_id, s.span_id),
        (s.service, s.operation),
        site,
        client_side,
        cache=s.cache,
    )


def stages_of(items: list[Item], *, probes_in_input: bool, deferred_gap_ns: float) -> list[StageObs]:
    stages: list[StageObs] = []
    for it in sorted(items, key=lambda i: (i.launch_ns, i.start_ns)):
        prev = stages[-1] if stages else None
        if it.kind == "store":
            if prev is not None and prev.kind == "store" and prev.items[0].name == it.name:
                prev.items.append(it)
            else:
                stages.append(StageObs("store", [it]))
            continue
        if prev is not None and prev.kind in ("call", "group"):
            may_group = not probes_in_input or (it.probed and all(i.probed for i in prev.items))
            if it.launch_ns < max(i.end_ns for i in prev.items) and may_group:
                prev.kind = "group"
                prev.items.append(it)
                prev.deferred = prev.deferred or [False] * (len(prev.items) - 1)
                prev.deferred.append(False)
                continue
            # Deferred only where probe tags say the call was launched as one: without them a call
            # that starts when the previous result is consumed is the simpler thing, a sequential
            # call (hotel's Go handlers; it runs on the handler thread like a deferred call would).
            if probes_in_input and may_group and it.start_ns - prev.end_ns <= deferred_gap_ns:
                prev.kind = "group"
                prev.deferred = prev.deferred or [False] * len(prev.items)
                prev.items.append(it)
                prev.deferred.append(True)
                continue
        kind = "group" if probes_in_input and it.probed else "call"
        stages.append(StageObs(kind, [it], [False] if kind == "group" else []))
    return stages


def instances_of(trace: Trace, *, probes_in_input: bool, deferred_gap_ns: float, flattened: list[str]):
    """(endpoint key, Instance) for every server span of the trace, the root included."""
    stack: list[tuple[Span, Span | None]] = [(trace.root, None)]
    while stack:
        s, parent = stack.pop()
        if s is trace.root or (s.is_server and not (parent is not None and _store_service(parent, s))):
            items: list[Item] = []
            _collect(s, items, flattened, trace.trace_id)
            stages = stages_of(items, probes_in_input=probes_in_input, deferred_gap_ns=deferred_gap_ns)
            yield (s.service, s.operation), Instance(trace.trace_id, s.start_ns, s.end_ns, stages, s.span_id)
        stack.extend((c, s) for c in s.children)


def insertions(base: tuple, other: tuple) -> dict[int, tuple] | None:
    """`other` as `base` with runs of store tokens inserted right after some of base's stores:
    {index of the base store: inserted run}; None if `other` is not of that form."""
    i, j, last = 0, 0, -1
    runs: dict[int, list] = {}
    while j < len(other):
        if i < len(base) and base[i] == other[j]:
            last, i, j = i, i + 1, j + 1
        elif last >= 0 and _is_store(base[last]) and _is_store(other[j]) and (last in runs or i == last + 1):
            if last in runs and runs[last] is None:
                return None
            runs.setdefault(last, []).append(other[j])
            j += 1
        else:
            return None
    if i != len(base):
        return None
    return {k: tuple(v) for k, v in runs.items()}


def hit_form(sig: tuple, insts: list[Instance]) -> tuple:
    """`sig` less the run of stores right after each read that said it missed (tag tailscope.cache)
    in every one of `insts` (all of signature `sig`): the form its hits take. When the traces hold
    no hit of a read (a cold cache, or one its miss path never fills) no signature lacks the miss
    path, and without the tag it would be inferred as sibling stores. The run goes up to the next
    call or the end: with no hit to compare, a store that always follows the miss path is taken
    as part of it."""
    out: list[tuple] = []
    k = 0
    while k < len(sig):
        out.append(sig[k])
        k += 1
        if _is_store(sig[k - 1]) and insts and all(i.stages[k - 1].missed for i in insts):
            while k < len(sig) and _is_store(sig[k]):
                k += 1
    return tuple(out)


def _align(base: tuple, inst: Instance) -> tuple[list[StageObs], dict[int, list[StageObs]]] | None:
    """The instance's stages at base positions, and its inserted (miss) runs by base store index."""
    ins = insertions(base, inst.signature())
    if ins is None:
        return None
    at: list[StageObs] = []
    runs: dict[int, list[StageObs]] = {}
    j = 0
    for k in range(len(base)):
        at.append(inst.stages[j])
        j += 1
        n = len(ins.get(k, ()))
        if n:
            runs[k] = inst.stages[j : j + n]
            j += n
    return at, runs


def _system(name: str) -> str:
    low = name.lower()
    for s in STORE_SYSTEMS:
        if s in low:
            return "mongodb" if s == "mongo" else s
    return "store"


def _sanitize(name: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_]+", "_", name).strip("_")
    return s or "op"


@dataclass
class EndpointModel:
    key: Key
    name: str
    base: tuple
    instances: int
    traces: int
    contributing: int
    variants: list[dict]
    stages: list[dict]  # topology stages (cpu/store own time inserted)
    fits: list[dict]
    hit_ratios: list[dict]
    calls_dropped: list[str] = field(default_factory=list)
    capacity: int | None = None  # the endpoint's capacity (a limit in front of its handler)
    cpu_split: cpusplit.CpuSplit | None = None


def _corrected(samples: list[int], label: str, corrections: dict[str, float]) -> list[int]:
    """Samples less what tailscope's runtime adds to this stage when it replays it (calibration)."""
    c = corrections.get(label)
    return samples if c is None else [max(0, int(x - c)) for x in samples]


def _own_time_stages(
    samples: list[int],
    label: str,
    cpu_fraction: float,
    fits: list[dict],
    corrections: dict[str, float],
    empirical: bool = False,
) -> list[dict]:
    """The parent's own time at one place of the handler as a cpu stage and/or a wait."""
    samples = _corrected(samples, label, corrections)
    if not samples or float(np.median(samples)) / 1000.0 < MIN_OWN_TIME_US:
        return []
    fit = fit_durations(samples, empirical=empirical)
    fits.append({"stage": label, **fit.to_json()})
    out: list[dict] = []
    if cpu_fraction > 0:
        out.append({"cpu": scale_dist(fit.dist, cpu_fraction)})
    if cpu_fraction < 1:
        out.append(
            {
                "store": {
                    "span": f"{label}_wait",
                    "system": "own-time",
                    "latency": scale_dist(fit.dist, 1 - cpu_fraction),
                }
            }
        )
    return out


def _store_fit(
    samples: list[int], label: str, fits: list[dict], corrections: dict[str, float], empirical: bool = False
) -> dict:
    fit: Fit = fit_durations(_corrected(samples, label, corrections), empirical=empirical)
    fits.append({"stage": label, **fit.to_json()})
    return fit.dist


def _store_stage(
    obs: list[StageObs],
    name: str,
    label: str,
    fits: list[dict],
    corrections: dict[str, float],
    caps: CapacityMap | None,
    empirical: bool = False,
) -> dict:
    """A store stage fitted to its spans: to their inferred service times (the queue wait removed)
    when diagnose found a limit on its population, which becomes the stage's capacity."""
    items = [i for o in obs for i in o.items]
    op = Counter(i.op for i in items).most_common(1)[0][0]
    finding = caps.operations.get(op) if caps is not None else None
    if finding is not None and caps is not None:
        durations = [caps.service_time(i.ref, i.end_ns - i.start_ns) for i in items]
        caps.carry(finding, label, "capacity", finding.servers)
    else:
        durations = [i.end_ns - i.start_ns for i in items]
    system = _system(name)
    store: dict = {"span": name, "system": system if system != "store" else _system(op[0])}
    store["latency"] = _store_fit(durations, label, fits, corrections, empirical)
    if finding is not None:
        store["capacity"] = finding.servers
    return store


def _site_of(item: Item, table: dict) -> object:
    if item.site_labelled is not None and item.site_labelled in table:
        return table[item.site_labelled]
    return table.get(item.site)


def _call_capacity(items: list[Item], caps: CapacityMap | None, label: str) -> int | None:
    """A client-side limit on these calls (one call of every instance): their call site's, else (for
    client spans) their operation's — when its waits lie between the client span's start and the
    server span's, where the engine's client pool queues them."""
    if caps is None:
        return None
    item = items[0]
    finding = _site_of(item, caps.call_sites)
    if finding is None and item.client_side:
        finding = caps.operations.get(item.op)
    if finding is None:
        return None
    assert isinstance(finding, Finding)
    if item.client_side:
        waits = [caps.wait_ns.get(i.ref, 0) for i in items]
        room = [(i.server_start_ns or i.start_ns) - i.start_ns for i in items]
        share = wait_share_in_place(waits, room)
        if share is not None and share < MIN_WAIT_SHARE_IN_PLACE:
            caps.reject(
                finding,
                label,
                f"only {share:.0%} of its inferred waits lie between the client span's start and the server "
                "span's (where a client pool queues): the queue is further down",
            )
            return None
    caps.carry(finding, label, "capacity", finding.servers)
    return finding.servers


def model_endpoint(
    key: Key,
    name: str,
    insts: list[Instance],
    traces: int,
    names: dict[Key, str],
    cpu_fraction: float | None,
    corrections: dict[str, float],
    caps: CapacityMap | None = None,
    cpu_adjust: float = 0.0,
    empirical: bool = False,
) -> EndpointModel:
    counts = Counter(i.signature() for i in insts)
    top = counts.most_common(1)[0][0]
    # The tag's evidence adds the hit form of the most frequent structure, which the traces may not hold.
    hits = hit_form(top, [i for i in insts if i.signature() == top])
    candidates = [*counts] + ([hits] if hits not in counts else [])
    related = sorted(
        (s for s in candidates if insertions(s, top) is not None or insertions(top, s) is not None), key=len
    )
    base = next(s for s in related if insertions(s, top) is not None)
    aligned = [(inst, a) for inst in insts if (a := _align(base, inst)) is not None]
    variants = [
        {"count": c, "share": c / len(insts), "stages": [_describe(t) for t in sig]}
        for sig, c in counts.most_common()
        if insertions(base, sig) is None
    ]
    fits: list[dict] = []
    hit_ratios: list[dict] = []
    stages: list[dict] = []
    label = f"{key[0]}.{name}"
    # A queue in front of the endpoint (diagnose: its server spans' population has a limit) is inside
    # the server span before the first stage: the twin's endpoint capacity adds it back under load.
    endpoint_cap = caps.operations.get(key) if caps is not None else None
    if endpoint_cap is not None and caps is not None:
        waits = [caps.wait_ns.get((inst.trace_id, inst.span_id), 0) for inst, _ in aligned]
        room = [(at[0].start_ns if base else inst.end_ns) - inst.start_ns for inst, (at, _) in aligned]
        share = wait_share_in_place(waits, room)
        if share is not None and share < MIN_WAIT_SHARE_IN_PLACE:
            caps.reject(
                endpoint_cap,
                f"{key[0]}:{name} (endpoint)",
                f"only {share:.0%} of its inferred waits lie before its first stage (where an endpoint's "
                "capacity queues): they are inside its stages, the shadow of a limit further down",
            )
            endpoint_cap = None
        else:
            caps.carry(endpoint_cap, f"{key[0]}:{name} (endpoint)", "capacity", endpoint_cap.servers)

    def wait_of(inst: Instance) -> int:
        return caps.wait_ns.get((inst.trace_id, inst.span_id), 0) if endpoint_cap is not None and caps else 0

    # Own time per place m (0 … len(base); the last is after the last stage), per aligned instance.
    own: list[list[int]] = []
    for m in range(len(base) + 1):
        gaps = []
        for inst, (at, runs) in aligned:
            prev_end = inst.start_ns + wait_of(inst) if m == 0 else _run_end(at[m - 1], runs.get(m - 1))
            end = at[m].start_ns if m < len(base) else inst.end_ns
            gaps.append(max(0, end - prev_end))
        own.append(gaps)
    split = cpusplit.decide(
        [sum(g[n] for g in own) for n in range(len(aligned))],
        [inst.in_flight for inst, _ in aligned],
        given=cpu_fraction,
        adjust=cpu_adjust,
    )
    for m, token in enumerate(base):
        stages += _own_time_stages(own[m], f"{label}.own_{m}", split.fraction, fits, corrections, empirical)
        obs = [at[m] for _, (at, _) in aligned]
        if token[0] == "store":
            store = _store_stage(obs, token[1], f"{label}.{token[1]}", fits, corrections, caps, empirical)
            count = int(round(float(np.median([len(o.items) for o in obs]))))
            if count > 1:
                store["count"] = min(count, 1000)
            misses = [runs[m] for _, (_, runs) in aligned if m in runs]
            if misses:
                run_counts = Counter(tuple(s.token() for s in r) for r in misses)
                run = run_counts.most_common(1)[0][0]
                on_miss = []
                for n, t in enumerate(run):
                    miss_obs = [r[n] for r in misses if len(r) > n and r[n].token() == t]
                    on_miss.append(
                        {
                            "store": _store_stage(
                                miss_obs, t[1], f"{label}.{t[1]}(miss)", fits, corrections, caps, empirical
                            )
                        }
                    )
                store["hit_ratio"] = round(1 - len(misses) / len(aligned), 4)
                store["on_miss"] = on_miss
                hit_ratios.append(
                    {
                        "store": token[1],
                        "hit_ratio": store["hit_ratio"],
                        "misses": len(misses),
                        "instances": len(aligned),
                    }
                )
            stages.append({"store": store})
        elif token[0] == "call":
            name_, svc, op = token[1:]
            call = {"service": svc, "endpoint": names[(svc, op)], "span": name_}
            c = _call_capacity([o.items[0] for o in obs], caps, f"{label}.{name_}")
            if c is not None:
                call["capacity"] = c
            stages.append({"call": call})
        else:
            group, reps = _group(obs, names)
            for call in group["calls"]:
                c = _call_capacity(reps[call["name"]], caps, f"{label}.{call['name']}")
                if c is not None:
                    call["capacity"] = c
            _bound_fan_out(group, obs, caps, f"{label}.group_{m}")
            stages.append({"group": group})
    stages += _own_time_stages(own[len(base)], f"{label}.own_{len(base)}", split.fraction, fits, corrections, empirical)
    return EndpointModel(
        key,
        name,
        base,
        len(insts),
        traces,
        len(aligned),
        variants,
        stages,
        fits,
        hit_ratios,
        capacity=endpoint_cap.servers if endpoint_cap is not None else None,
        cpu_split=split,
    )


def _bound_fan_out(group: dict, obs: list[StageObs], caps: CapacityMap | None, label: str) -> None:
    """`max_in_flight: k` when every call of the group is of one call site that diagnose found
    bounded to waves of k, and the group has more than k calls (else k would bound nothing, or
    bound other calls too: left out, and the report says so)."""
    if caps is None:
        return
    sites = {i.site_labelled if i.site_labelled in caps.fan_outs else i.site for o in obs for i in o.items}
    if len(sites) != 1:
        return
    site = next(iter(sites))
    if site is None or site not in caps.fan_outs:
        return
    k, evidence = caps.fan_outs[site]
    if len(group["calls"]) <= k:
        return
    group["max_in_flight"] = k
    population = f"fan-out {site[0]}:{site[1]} → {site[2]}:{site[3]}"
    caps.used.add(population)
    caps.carried.append(
        {
            "population": population.removeprefix("fan-out "),
            "kind": "bounded_fan_out",
            "max_in_flight": k,
            "confidence": None,
            "evidence": evidence,
            "stage": label,
        }
    )


def _run_end(stage: StageObs, run: list[StageObs] | None) -> int:
    return max([stage.end_ns, *(s.end_ns for s in run or [])])


def join_orders(o: StageObs) -> list[list[int]]:
    """Every order of a group's items (indexes, launch order) in which the parent can have
    consumed their results: the orders of least violation of the probe's join arithmetic.

    A probe's join delay is measured from max(end, the moment the parent asked) to the moment it
    had the value (exec/async_probe.h), and the parent asks one result after the other. So along
    the true order v_k = max(end_k, v_{k-1}) + join_k, and an item whose join delay is a wake-up
    (> WOKEN_JOIN_NS: the parent slept on it) must have ended after v_{k-1}, an item whose join
    delay is a bare get() must have ended before. Every order of least violation (in ns) is
    returned: results that were all there before the parent asked fit any order among themselves,
    and such an instance says nothing about their order (a busy machine makes many of them).
    Groups wider than MAX_PERMUTED are ordered by end + join delay; without probe tags the results
    are taken in the order they ended.
    """
    items = o.items
    by_end = sorted(range(len(items)), key=lambda n: (items[n].consumed_ns, items[n].end_ns))
    if len(items) > MAX_PERMUTED or not all(i.probed for i in items):
        return [by_end]
    deferred = o.deferred or [False] * len(items)
    launched = [i.launch_ns for n, i in enumerate(items) if not deferred[n]]
    v0 = max(launched) if launched else min(i.start_ns for i in items)
    best: list[list[int]] = []
    best_cost: int | None = None
    for perm in itertools.permutations(by_end):
        v, cost = v0, 0
        for n in perm:
            it = items[n]
            waited = deferred[n] or it.consumed_ns - it.end_ns > WOKEN_JOIN_NS
            if waited and it.end_ns < v:
                cost += v - it.end_ns
            elif not waited and it.end_ns > v:
                cost += it.end_ns - v
            v = max(it.end_ns, v) + (it.consumed_ns - it.end_ns)
            if best_cost is not None and cost > best_cost:
                break
        if best_cost is None or cost < best_cost:
            best, best_cost = [list(perm)], cost
        elif cost == best_cost:
            best.append(list(perm))
    return best


def join_order(o: StageObs) -> list[int]:
    """The most likely order of join_orders (ties by end time)."""
    return join_orders(o)[0]


def _group(obs: list[StageObs], names: dict[Key, str]) -> tuple[dict, dict[str, list[Item]]]:
    """Members (by launch rank), each member's launch mode and the join order, by majority; and the
    observed items of each call name (where its call site and waits are looked up)."""
    reps: dict[tuple, list[Item]] = defaultdict(list)
    ranks: dict[tuple, list[float]] = defaultdict(list)
    deferred: dict[tuple, Counter] = defaultdict(Counter)
    # Each instance's vote is split over the orders its timestamps allow, so instances that cannot
    # tell (every result already there) do not outvote the ones that can.
    joins: dict[tuple, float] = defaultdict(float)
    for o in obs:
        seen: Counter = Counter()
        keyed = []
        for n, it in enumerate(o.items):  # launch order
            seen[it.member] += 1
            k = (*it.member, seen[it.member])  # the k-th call to one endpoint in a fan-out
            keyed.append((k, it))
            reps[k].append(it)
            ranks[k].append(n)
            deferred[k][bool(o.deferred[n]) if o.deferred else False] += 1
        orders = join_orders(o)
        for allowed in orders:
            joins[tuple(keyed[n][0] for n in allowed)] += 1.0 / len(orders)
    members = sorted(ranks, key=lambda k: float(np.mean(ranks[k])))[:MAX_GROUP_CALLS]
    call_names: dict[tuple, str] = {}
    used: set[str] = set()
    calls = []
    for k in members:
        span, svc, op, nth = k
        base = _sanitize(span.removesuffix("_client").removesuffix("_call"))
        cname = base if nth == 1 and base not in used else f"{base}_{nth}"
        while cname in used:
            cname += "_"
        used.add(cname)
        call_names[k] = cname
        launch = "deferred" if deferred[k].most_common(1)[0][0] else "async"
        calls.append({"name": cname, "service": svc, "endpoint": names[(svc, op)], "span": span, "launch": launch})
    voted = max(joins.items(), key=lambda kv: kv[1])[0]  # first of equal weights: insertion order
    order = [k for k in voted if k in call_names]
    order += [k for k in members if k not in order]
    return {"calls": calls, "join": [call_names[k] for k in order]}, {call_names[k]: reps[k] for k in members}


def _describe(token: tuple) -> str:
    if token[0] == "store":
        return f"store {token[1]}"
    if token[0] == "call":
        return f"call {token[2]}:{token[3]}"
    return "group " + ", ".join(f"{svc}:{op}" for _, svc, op in token[1])


def _break_cycles(endpoints: dict[Key, EndpointModel], front: Key, names: dict[Key, str]) -> list[str]:
    """Removes calls that close a cycle (recursion), depth first from the front; returns them."""
    by_name = {(k[0], names[k]): k for k in endpoints}
    dropped: list[str] = []
    state: dict[Key, int] = {}  # 1 on the stack, 2 done

    def targets(stages: list[dict]) -> list[tuple[dict, list[dict] | None, Key]]:
        out: list[tuple[dict, list[dict] | None, Key]] = []
        for st in stages:
            if "call" in st:
                out.append((st, None, by_name[(st["call"]["service"], st["call"]["endpoint"])]))
            elif "group" in st:
                for c in st["group"]["calls"]:
                    out.append((c, st["group"]["calls"], by_name[(c["service"], c["endpoint"])]))
        return out

    def visit(k: Key) -> None:
        state[k] = 1
        ep = endpoints[k]
        for ref, group_calls, t in targets(ep.stages):
            if state.get(t) == 1:
                dropped.append(f"{k[0]}:{k[1]} → {t[0]}:{t[1]}")
                ep.calls_dropped.append(f"{t[0]}:{t[1]}")
                if group_calls is None:
                    ep.stages = [s for s in ep.stages if s is not ref]
                else:
                    grp = next(s["group"] for s in ep.stages if "group" in s and s["group"]["calls"] is group_calls)
                    grp["calls"] = [c for c in group_calls if c is not ref]
                    grp["join"] = [n for n in grp["join"] if n != ref["name"]]
                    if not grp["calls"]:
                        ep.stages = [s for s in ep.stages if not ("group" in s and s["group"] is grp)]
            elif t not in state:
                visit(t)
        state[k] = 2

    for k in [front, *endpoints]:
        if k not in state:
            visit(k)
    return dropped


@dataclass
class InferOptions:
    cpu_fraction: float | None = DEFAULT_CPU_FRACTION  # None: decided per endpoint (cpusplit.py)
    deferred_gap_us: float = DEFAULT_DEFERRED_GAP_US
    min_traces: int = DEFAULT_MIN_TRACES
    sampling: float = 1.0  # the fraction of requests the traces are (for the recorded rate)
    name: str = "inferred"
    # Carry diagnose's capacities into the topology (False: today's twin without them, --no-capacities).
    capacities: bool = True
    # The least confidence of a diagnose limit the twin carries (capacities.py).
    capacity_confidence: str = DEFAULT_MIN_CONFIDENCE
    # advise's sensitivity: every inferred split moved this share of the way to 0 (< 0) or 1 (> 0).
    cpu_adjust: float = 0.0
    # Carry the measured within-request dependence of endpoint delays as each stage's `shared`
    # loading (False: every stage draws independently, --no-correlation; correlation.py).
    correlation: bool = True
    # How a stage's durations become its distribution: PARAMETRIC (the kind of the four the KS test
    # likes best) or EMPIRICAL (the observed quantiles, tail included: fit.py); --distributions.
    distributions: str = "parametric"


def recorded_rate(traces: list[Trace], sampling: float) -> dict:
    """Requests per second the traces were recorded at, from the root spans' start times."""
    starts = sorted(t.start_ns for t in traces)
    if len(starts) < 2 or starts[-1] == starts[0]:
        return {"rate_per_s": None, "unavailable": f"{len(starts)} trace(s) over no time span: no rate can be derived"}
    span_s = (starts[-1] - starts[0]) / 1e9
    return {
        "rate_per_s": (len(starts) - 1) / span_s / sampling,
        "traces": len(starts),
        "span_s": span_s,
        "sampling": sampling,
    }


def _local_ns(inst: Instance) -> int:
    """The instance's own time and store time: its span less the time its calls and groups cover
    (what the endpoint's own stages take in this request)."""
    covered, reached = 0, inst.start_ns
    for s in sorted((s for s in inst.stages if s.kind != "store"), key=lambda s: s.start_ns):
        start, end = max(s.start_ns, reached), min(s.end_ns, inst.end_ns)
        covered += max(0, end - start)
        reached = max(reached, end)
    return max(0, inst.end_ns - inst.start_ns - covered)


def local_delays(by_key: dict[Key, list[Instance]]) -> dict[Key, dict[str, float]]:
    """Per endpoint, per trace id: its local delay in that request (the mean when it ran several
    times in it) — what correlation.measure correlates."""
    out: dict[Key, dict[str, float]] = {}
    for k, insts in by_key.items():
        per_trace: dict[str, list[int]] = defaultdict(list)
        for inst in insts:
            per_trace[inst.trace_id].append(_local_ns(inst))
        out[k] = {t: float(np.mean(v)) for t, v in per_trace.items()}
    return out


def _set_shared(stages: list[dict], loading: float) -> None:
    """Every latency distribution of these stages (cpu, store, a store's miss path) loads
    `loading` on the request's common factor. A constant (a bare number) stays as it is."""
    for st in stages:
        dists = []
        if "cpu" in st:
            dists.append(st["cpu"])
        if "store" in st:
            dists.append(st["store"]["latency"])
            _set_shared(st["store"].get("on_miss", []), loading)
        for d in dists:
            if isinstance(d, dict) and d.get("kind") != "constant":
                d["shared"] = loading


def _correlation_report(options: InferOptions, by_key: dict[Key, list[Instance]]) -> tuple[dict, dict[Key, float]]:
    """(the report's "correlation", the loading per endpoint the topology carries)."""
    if not options.correlation:
        return {"mean_correlation": None, "unavailable": "not measured (--no-correlation)"}, {}
    corr, why = correlation.measure(local_delays(by_key))
    if corr is None:
        return {"mean_correlation": None, "unavailable": why}, {}
    carried = {k: round(v, 3) for k, v in corr.loadings.items() if round(v, 3) > 0}
    return corr.to_json(), carried


def _mark_in_flight(by_key: dict[Key, list[Instance]]) -> None:
    """Each instance's count of its service's handlers in flight at its start (cpusplit.py)."""
    by_service: dict[str, list[Instance]] = defaultdict(list)
    for k, insts in by_key.items():
        by_service[k[0]] += insts
    for insts in by_service.values():
        counts = cpusplit.in_flight_at([i.start_ns for i in insts], [i.end_ns for i in insts])
        for inst, n in zip(insts, counts):
            inst.in_flight = int(n)


def infer(
    ts: TraceSet,
    options: InferOptions,
    corrections: dict[str, float] | None = None,
    diagnosis: Diagnosis | None = None,
) -> tuple[dict, dict]:
    """(topology document, inference report). Raises InferenceError when there is no graph.
    `corrections`: fit label → ns to take off every sample of that stage (calibration).
    `diagnosis`: diagnose's findings on the same traces (computed here when capacities are on and
    none is given); its capacities go into the topology (capacities.py)."""
    if not ts.traces:
        raise InferenceError(f"no analyzable trace in the input ({ts.traces_read} trace(s) read)")
    if not any(t.rpc_pairs for t in ts.traces):
        services = sorted({t.root.service for t in ts.traces})
        raise InferenceError(
            f"no cross-service span in {len(ts.traces)} trace(s) (services seen at the root: "
            f"{', '.join(services[:5])}): no RPC pair, so there is no call graph to infer"
        )
    probes = ts.has_probes
    gap_ns = options.deferred_gap_us * 1000.0
    flattened: list[str] = []
    by_key: dict[Key, list[Instance]] = defaultdict(list)
    traces_of: dict[Key, set[str]] = defaultdict(set)
    roots: Counter = Counter()
    for t in ts.traces:
        roots[(t.root.service, t.root.operation)] += 1
        for key, inst in instances_of(t, probes_in_input=probes, deferred_gap_ns=gap_ns, flattened=flattened):
            by_key[key].append(inst)
            traces_of[key].add(t.trace_id)
    front = roots.most_common(1)[0][0]
    _mark_in_flight(by_key)
    caps: CapacityMap | None = None
    if options.capacities:
        caps = capacity_map(
            diagnosis if diagnosis is not None else diagnose(ts, sampling=options.sampling),
            options.capacity_confidence,
        )

    names: dict[Key, str] = {}
    for svc in sorted({k[0] for k in by_key}):
        used: set[str] = set()
        for k in sorted(k for k in by_key if k[0] == svc):
            n = _sanitize(k[1].removesuffix("_server"))
            while n in used:
                n += "_"
            used.add(n)
            names[k] = n

    endpoints: dict[Key, EndpointModel] = {}
    fanout_truncated: list[str] = []
    for k, insts in by_key.items():
        ep = model_endpoint(
            k,
            names[k],
            insts,
            len(traces_of[k]),
            names,
            options.cpu_fraction,
            corrections or {},
            caps,
            options.cpu_adjust,
            options.distributions == EMPIRICAL,
        )
        for st in ep.stages:
            if "group" in st:
                widest = max((len(o.items) for i in insts for o in i.stages if o.kind == "group"), default=0)
                if widest > MAX_GROUP_CALLS:
                    fanout_truncated.append(f"{k[0]}:{k[1]}: {widest} calls kept as {MAX_GROUP_CALLS}")
        endpoints[k] = ep
    cycles = _break_cycles(endpoints, front, names)
    correlation_doc, loadings = _correlation_report(options, by_key)
    for k, lam in loadings.items():
        _set_shared(endpoints[k].stages, lam)

    e2e_ms = max(t.end_to_end_ns for t in ts.traces) / 1e6
    front_op = front[1]
    topo: dict = {
        "name": options.name,
        "description": f"inferred from {len(ts.traces)} traces by tailscope topology from-traces",
        "call_timeout_ms": int(min(600_000, max(1000, math.ceil(10 * e2e_ms)))),
        "front": {
            "service": front[0],
            "path": front_op if front_op.startswith("/") else "/" + names[front],
            "endpoint": names[front],
        },
        "services": [],
    }
    for svc in sorted({k[0] for k in endpoints}, key=lambda s: (s != front[0], s)):
        eps = []
        for k in sorted((k for k in endpoints if k[0] == svc), key=lambda k: names[k]):
            ep_doc: dict = {"name": names[k], "span": k[1]}
            if endpoints[k].capacity is not None:
                ep_doc["capacity"] = endpoints[k].capacity
            ep_doc["stages"] = endpoints[k].stages
            eps.append(ep_doc)
        topo["services"].append({"name": svc, "endpoints": eps})

    report = {
        "schema": "tailscope.twin.inference/1",
        "traces": len(ts.traces),
        "traces_read": ts.traces_read,
        "inputs": ts.inputs,
        "trace_warnings": ts.warnings,
        "front": {"service": front[0], "operation": front[1], "traces": roots[front]},
        "other_entry_points": [
            {"service": k[0], "operation": k[1], "traces": c} for k, c in roots.most_common() if k != front
        ],
        "recorded_rate": recorded_rate(ts.traces, options.sampling),
        "assumptions": {
            "cpu_fraction": "auto" if options.cpu_fraction is None else options.cpu_fraction,
            "capacities": options.capacities,
            "capacity_confidence": options.capacity_confidence,
            "deferred_gap_us": options.deferred_gap_us,
            "min_traces": options.min_traces,
            "correlation": options.correlation,
            "distributions": options.distributions,
            "probe_tags": probes,
            "launch_inference": "probe tags (trigger and join times)"
            if probes
            else "span times only: back-to-back calls become sequential calls",
        },
        "not_inferred": _not_inferred(options),
        "capacities": caps.carried if caps is not None else [],
        "not_carried": caps.not_carried() if caps is not None else [],
        "sequential_chains_kept": caps.chains if caps is not None else [],
        # The within-request dependence of endpoint delays and each endpoint's loading, carried as
        # its stages' `shared` (correlation.py); null + reason when not measured.
        "correlation": correlation_doc,
        "cpu_split": [
            {"service": k[0], "operation": k[1], "endpoint": ep.name, **ep.cpu_split.to_json()}
            for k, ep in sorted(endpoints.items())
            if ep.cpu_split is not None
        ],
        "flattened_internal_spans": dict(Counter(flattened)),
        "cycles_dropped": cycles,
        "fanout_truncated": fanout_truncated,
        "endpoints": [
            {
                "service": k[0],
                "operation": k[1],
                "endpoint": ep.name,
                "instances": ep.instances,
                "traces": ep.traces,
                "rare": ep.traces < options.min_traces,
                "structure_share": ep.contributing / ep.instances,
                "structure": [_describe(t) for t in ep.base],
                "variants_left_out": ep.variants,
                "hit_ratios": ep.hit_ratios,
                "fits": ep.fits,
                "calls_dropped": ep.calls_dropped,
            }
            for k, ep in sorted(endpoints.items())
        ],
    }
    return topo, report


def _not_inferred(options: InferOptions) -> list[str]:
    out = [
        "CPU vs waiting inside a span's own time (not in a trace): "
        + (
            f"cpu_fraction {options.cpu_fraction:g} of it is a cpu stage, the rest a wait (--cpu-fraction)"
            if options.cpu_fraction is not None
            else "decided per endpoint by whether it grows with the handlers in flight (cpu_split: rule per endpoint)"
        ),
        "request and response sizes (not in a trace): the engine's defaults (64 bytes)",
    ]
    if options.capacities:
        out += [
            "the concurrency model of each service: given by the user (--model); pools, locks and fan-out limits "
            "only where diagnose found them (capacities; the rest under not_carried)",
            "store behaviour under other load beyond the capacities found: service times replayed as distributions",
        ]
    else:
        out += [
            "the concurrency model and thread counts of each service: given by the user (--model); "
            "capacities left out (--no-capacities)",
            "store and cache behaviour under other load: the traced latencies are replayed as distributions",
        ]
    return out


def fit_medians_us(report: dict) -> dict[str, float]:
    """Fit label → sample median (µs) of an inference report."""
    return {f["stage"]: f["median_us"] for e in report["endpoints"] for f in e["fits"]}
