"""What-ifs in the user's terms: changes a team can make in its own code, as edits of the twin.

A what-if is found in the twin (a topology dict, docs/microservices.md, with the capacities of
docs/twin.md "A twin that queues") and justified by the diagnosis (`tailscope.diagnosis/1`,
docs/diagnose.md):

| kind | the change in the user's code | the twin's edit |
|---|---|---|
| `capacity` | a bigger pool, connection pool or a lock removed: c → 2c, and removed | `capacity: c` on an endpoint, a store or a call (every stage sharing that limiter) |
| `fan_out` | a fan-out limit k → n (n = the most calls one request made) | a group's `max_in_flight` |
| `parallel` | a sequential chain run in parallel | a store's `parallel: true`; a run of sync calls → one async group |
| `faster` | one stage X % faster (stages of the services the slowest requests grow in, first) | the stage's distribution scaled by 1 − X/100 |
| `cores` | more cores | the services' `cpus` lists removed (unavailable when none is set: the twin already has every CPU the machine allows) |

Every what-if says its change in a sentence naming the user's services, operations and systems —
never a tailscope model — and the evidence it rests on (the diagnosis's population, confidence,
samples and figures). `apply(topology)` returns a new topology dict and never changes its argument.
A what-if the twin cannot express carries `unavailable` with the reason and is not run.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass

from tailscope.diagnose.diagnosis import population_name
from tailscope.lab import machine
from tailscope.twin.fit import EMPIRICAL, scale_dist, table_quantile_us
from tailscope.units import fmt_ns

CAPACITY, FAN_OUT, PARALLEL, FASTER, CORES = "capacity", "fan_out", "parallel", "faster", "cores"
KINDS = (CAPACITY, FAN_OUT, PARALLEL, FASTER, CORES)
MAX_CAPACITY = 100_000  # the engine's bound on capacity and max_in_flight
DEFAULT_FASTER_PERCENT = 50.0
# "Make one stage faster" is offered for this many services (those the slowest requests grow in most).
MAX_FASTER = 3
OWN_TIME_SYSTEM = "own-time"  # the inferred twin's wait share of a handler's own time (twin/infer.py)
REMOVED = "removed"
# Why a finding of the diagnosis has no place in the twin (docs/twin.md: what from-traces carries).
NOT_CARRIED = (
    "the inference did not carry it (`topology from-traces` writes why in its report's not_carried: a "
    "confidence below --capacity-confidence, a shadow of a queue elsewhere) or the twin was made without "
    "capacities (--no-capacities, or a --topology without them)"
)


@dataclass(frozen=True)
class WhatIf:
    id: str
    kind: str
    # Where: {"service", "span", "place"} for a capacity (place endpoint|store|call), else
    # {"service", "endpoint", "stage"[, "count"]}; cores: {"services": [...]}.
    target: dict
    from_value: int | float | str | list | None
    to_value: int | float | str | list | None
    sentence: str
    evidence: dict
    unavailable: str | None = None
    # faster: the factor each duration of the stage is multiplied by.
    factor: float | None = None

    def apply(self, topology: dict) -> dict:
        """The twin with this change made (a deep copy; `topology` is left as it was)."""
        if self.unavailable is not None:
            raise ValueError(f"what-if {self.id} cannot be applied: {self.unavailable}")
        topo = copy.deepcopy(topology)
        t = self.target
        if self.kind == CAPACITY:
            for holder in _capacity_holders(topo, t["service"], t["span"], t["place"]):
                if self.to_value == REMOVED:
                    holder.pop("capacity", None)
                else:
                    holder["capacity"] = self.to_value
        elif self.kind == FAN_OUT:
            _stage(topo, t)["group"]["max_in_flight"] = self.to_value
        elif self.kind == PARALLEL:
            stages = _endpoint(topo, t["service"], t["endpoint"])["stages"]
            i = t["stage"]
            if "store" in stages[i]:
                stages[i]["store"]["parallel"] = True
            else:
                stages[i : i + t["count"]] = [_group_of([s["call"] for s in stages[i : i + t["count"]]])]
        elif self.kind == FASTER:
            assert self.factor is not None
            ep = _endpoint(topo, t["service"], t["endpoint"])
            if t.get("own_time"):
                for s in ep["stages"]:
                    if "cpu" in s:
                        s["cpu"] = scale_dist(s["cpu"], self.factor)
                    elif "store" in s and s["store"].get("system") == OWN_TIME_SYSTEM:
                        s["store"]["latency"] = scale_dist(s["store"]["latency"], self.factor)
            else:
                store = ep["stages"][t["stage"]]["store"]
                store["latency"] = scale_dist(store["latency"], self.factor)
        elif self.kind == CORES:
            for svc in topo["services"]:
                if svc["name"] in t["services"]:
                    svc.pop("cpus", None)
        else:
            raise ValueError(f"unknown what-if kind {self.kind}")
        return topo

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "kind": self.kind,
            "target": self.target,
            "from": self.from_value,
            "to": self.to_value,
            "sentence": self.sentence,
            "evidence": self.evidence,
            "unavailable": self.unavailable,
        }


# ---- walking the twin ---------------------------------------------------------------------------


def _endpoint(topo: dict, service: str, endpoint: str) -> dict:
    for svc in topo["services"]:
        if svc["name"] == service:
            for ep in svc["endpoints"]:
                if ep["name"] == endpoint:
                    return ep
    raise ValueError(f"the topology has no endpoint {service}.{endpoint}")


def _stage(topo: dict, target: dict) -> dict:
    return _endpoint(topo, target["service"], target["endpoint"])["stages"][target["stage"]]


def _all_stages(stages: list[dict]) -> Iterator[dict]:
    """Every stage, the cache-miss paths' too."""
    for s in stages:
        yield s
        if "store" in s:
            yield from _all_stages(s["store"].get("on_miss") or [])


def _calls(stage: dict) -> list[dict]:
    if "call" in stage:
        return [stage["call"]]
    if "group" in stage:
        return list(stage["group"]["calls"])
    return []


def _capacity_holders(topo: dict, service: str, span: str, place: str) -> list[dict]:
    """The mappings that carry one limiter's `capacity`: an endpoint, or every store (call) of the
    service with that span name — the engine shares the limiter among them."""
    out = []
    for svc in topo["services"]:
        if svc["name"] != service:
            continue
        for ep in svc["endpoints"]:
            if place == "endpoint":
                if ep.get("span") == span:
                    out.append(ep)
                continue
            for s in _all_stages(ep["stages"]):
                if place == "store" and "store" in s and s["store"].get("span") == span:
                    out.append(s["store"])
                elif place == "call":
                    out += [c for c in _calls(s) if c.get("span") == span]
    return out


def _group_of(calls: list[dict]) -> dict:
    """Sync calls → one group launching them all at once, joined in their old order."""
    members, used = [], set()
    for n, c in enumerate(calls, 1):
        name = re.sub(r"[^A-Za-z0-9_]", "_", c.get("span") or c["endpoint"])
        name = f"{name}_{n}"
        while name in used:
            name += "_"
        used.add(name)
        members.append({**c, "name": name, "launch": "async"})
    return {"group": {"calls": members, "join": [m["name"] for m in members]}}


def dist_median_us(dist: dict) -> float | None:
    """The median of a topology DIST (µs), or None for a kind without one here."""
    kind = dist.get("kind")
    if kind == "constant":
        return float(dist["us"])
    if kind == "lognormal":
        return float(dist["median_us"])
    if kind == "exponential":
        return float(dist["mean_us"]) * math.log(2)
    if kind == "uniform":
        return (float(dist["min_us"]) + float(dist["max_us"])) / 2
    if kind == EMPIRICAL:
        return table_quantile_us(dist["quantiles_us"], 0.5)
    return None


# ---- the diagnosis's evidence ------------------------------------------------------------------


def _population(diagnosis: dict, service: str, operation: str, *, parent_service: str | None = None) -> dict | None:
    """The population of (service, operation) — the operation's own first, then a call site —
    preferring one with a limit."""
    pops = [
        p
        for p in diagnosis.get("populations", [])
        if p["service"] == service
        and p["operation"] == operation
        and (parent_service is None or p["kind"] == "operation" or p.get("parent_service") == parent_service)
    ]
    pops.sort(key=lambda p: (p["capacity"]["verdict"] != "limit", p["kind"] != "operation"))
    return pops[0] if pops else None


def _store_population(diagnosis: dict, service: str, span: str) -> dict | None:
    """The population of a store stage of `service` named `span`: (service, span), or — a store whose
    client is traced as a service of its own (a database's own tracer name) — the one operation of
    that name in another service."""
    own = _population(diagnosis, service, span)
    if own is not None:
        return own
    others = {p["service"] for p in diagnosis.get("populations", []) if p["operation"] == span}
    return _population(diagnosis, others.pop(), span) if len(others) == 1 else None


def _no_evidence(reason: str) -> dict:
    """The evidence of a what-if the diagnosis has no finding for: the twin's structure alone."""
    return {"population": None, "confidence": None, "samples": None, "figures": {}, "unavailable": reason}


def capacity_evidence(p: dict | None, where: str) -> dict:
    if p is None:
        return _no_evidence(f"no population of the diagnosis is {where}")
    c = p["capacity"]
    return {
        "population": population_name(p),
        "finding": c["verdict"],
        "confidence": c["confidence"],
        "samples": c["spans"],
        "figures": {
            k: c.get(k)
            for k in (
                "servers",
                "at_least",
                "queued_arrivals",
                "waited",
                "duration_p50_ns",
                "duration_p99_ns",
                "service_p50_ns",
                "service_p99_ns",
                "wait_p99_ns",
                "duration_rank_correlation",
            )
        },
    }


def _fan_out(diagnosis: dict, service: str, parent_op: str, callees: set[tuple[str | None, str]]) -> dict | None:
    return next(
        (
            f
            for f in diagnosis.get("bounded_fan_outs", [])
            if f["parent_service"] == service
            and f["parent_operation"] == parent_op
            and (f["service"], f["operation"]) in callees
        ),
        None,
    )


def _chain(diagnosis: dict, service: str, parent_op: str, children: set[tuple[str | None, str]]) -> dict | None:
    """The sequential chain under (service, parent_op) of one of `children` ((None, op): any service)."""
    return next(
        (
            c
            for c in diagnosis.get("sequential_chains", [])
            if c["parent_service"] == service
            and c["parent_operation"] == parent_op
            and ((c["service"], c["operation"]) in children or (None, c["operation"]) in children)
        ),
        None,
    )


def _site_evidence(finding: dict | None, kind: str, samples_key: str) -> dict:
    if finding is None:
        return _no_evidence(f"the diagnosis found no {kind} here: the twin's structure alone")
    figures = {
        k: v for k, v in finding.items() if k not in ("parent_service", "parent_operation", "service", "operation")
    }
    return {
        # A fan-out or chain finding names its call site with a call-site population's keys.
        "population": population_name({**finding, "kind": "call_site"}),
        "finding": kind,
        # A structural finding in ≥ 90 % of the instances that could show it (diagnose/calls.py).
        "confidence": "high" if finding[samples_key] >= 100 else "medium" if finding[samples_key] >= 10 else "low",
        "samples": finding[samples_key],
        "figures": figures,
    }


def _endpoint_spans(topo: dict) -> dict[tuple[str, str], str]:
    """(service, endpoint name) → the endpoint's server span name."""
    return {(s["name"], e["name"]): e.get("span", e["name"]) for s in topo["services"] for e in s["endpoints"]}


def _client_names(call: dict, spans: dict[tuple[str, str], str]) -> set[str]:
    """The names a call's client span has in the diagnosis: its span name, or — where one client name
    calls several servers (OpenTelemetry's "HTTP GET") — "span → callee service:operation"."""
    span = call.get("span", "")
    callee = spans.get((call["service"], call["endpoint"]))
    return {span, f"{span} → {call['service']}:{callee}"} if callee is not None else {span}


def _callee_keys(call: dict, service: str, spans: dict[tuple[str, str], str]) -> set[tuple[str | None, str]]:
    """The (service, operation) a call shows as in the traces: its server span, or its client span."""
    out: set[tuple[str | None, str]] = {(service, name) for name in _client_names(call, spans)}
    if (call["service"], call["endpoint"]) in spans:
        out.add((call["service"], spans[(call["service"], call["endpoint"])]))
    return out


# ---- finding the what-ifs ----------------------------------------------------------------------


def _id(*parts: object) -> str:
    return "/".join(re.sub(r"\s+", "_", str(p)) for p in parts)


def _capacity_whatifs(topo: dict, diagnosis: dict) -> tuple[list[WhatIf], set[tuple[str, str]]]:
    spans = _endpoint_spans(topo)
    seen: dict[tuple[str, str, str], tuple[int, str]] = {}  # (service, span, place) → (c, words)
    for svc in topo["services"]:
        for ep in svc["endpoints"]:
            if "capacity" in ep:
                seen.setdefault((svc["name"], ep.get("span", ep["name"]), "endpoint"), (ep["capacity"], ""))
            for s in _all_stages(ep["stages"]):
                if "store" in s and "capacity" in s["store"]:
                    st = s["store"]
                    seen.setdefault((svc["name"], st["span"], "store"), (st["capacity"], st.get("system", "store")))
                for cl in _calls(s):
                    if "capacity" in cl:
                        seen.setdefault((svc["name"], cl["span"], "call"), (cl["capacity"], cl["service"]))
    out = []
    for (service, span, place), (c, other) in seen.items():
        pop = _store_population(diagnosis, service, span) if place == "store" else _population(diagnosis, service, span)
        if pop is None and place == "call":  # a client name that calls several servers: named by its callee
            pop = next(
                (
                    q
                    for s in topo["services"]
                    if s["name"] == service
                    for ep in s["endpoints"]
                    for st in _all_stages(ep["stages"])
                    for cl in _calls(st)
                    if cl.get("span") == span
                    for name in sorted(_client_names(cl, spans) - {span})
                    if (q := _population(diagnosis, service, name)) is not None
                ),
                None,
            )
        if pop is None and place == "call":  # traces without client spans: the call site into the callee
            callee = next(
                (
                    (cl["service"], spans.get((cl["service"], cl["endpoint"]), ""))
                    for s in topo["services"]
                    if s["name"] == service
                    for ep in s["endpoints"]
                    for st in _all_stages(ep["stages"])
                    for cl in _calls(st)
                    if cl.get("span") == span
                ),
                None,
            )
            if callee is not None:
                pop = _population(diagnosis, callee[0], callee[1], parent_service=service)
        evidence = capacity_evidence(pop, f"{service}:{span}")
        target = {"service": service, "span": span, "place": place}
        doubled = min(2 * c, MAX_CAPACITY)
        for to in (doubled, REMOVED):
            if to == doubled and doubled == c:
                continue
            out.append(
                WhatIf(
                    _id(CAPACITY, service, span, to),
                    CAPACITY,
                    target,
                    c,
                    to,
                    _capacity_sentence(target, other, c, to),
                    evidence,
                )
            )
    modelled = {(s, sp) for s, sp, _ in seen}
    return out, modelled


def _capacity_sentence(t: dict, other: str, c: int, to: int | str) -> str:
    svc, span = t["service"], t["span"]
    one = " (a lock or a single connection)" if c == 1 else ""
    if t["place"] == "endpoint":
        one = " (one at a time: a lock around the handler, or a single worker)" if c == 1 else ""
        if to == REMOVED:
            return f"remove the limit of {c} '{span}' requests at once in {svc}{one}: no worker pool or lock around the handler"
        return f"raise the worker pool of {svc} '{span}' from {c} to {to} requests at once"
    if t["place"] == "store":
        where = f"{svc} → {other} '{span}'" if other and other != "store" else f"{svc} '{span}'"
    else:
        where = f"{svc} → {other} '{span}'"
    if to == REMOVED:
        return f"remove the limit of {c} in flight on {where}{one}: no pool, no lock"
    return f"raise the connection pool of {where} from {c} to {to}"


def _encloses_capacity(topo: dict, service: str, span: str) -> bool:
    """Whether the spans named `span` in `service` (an endpoint's server span or a call's client span)
    contain a capacity the twin has — in that endpoint or anything it calls. A queue shows as a limit
    on every span that encloses it (the caller's span waits as long as the callee's queue); the twin
    models it once, where it is."""
    endpoints = {(s["name"], e["name"]): e for s in topo["services"] for e in s["endpoints"]}
    spans = _endpoint_spans(topo)
    start: list[tuple[str, str]] = [
        (sv, n) for (sv, n), e in endpoints.items() if sv == service and e.get("span") == span
    ]
    for (sv, _), e in endpoints.items():
        if sv == service:
            for st in _all_stages(e["stages"]):
                for c in _calls(st):
                    if span in _client_names(c, spans):
                        if "capacity" in c:
                            return True
                        start.append((c["service"], c["endpoint"]))
    seen: set[tuple[str, str]] = set()
    while start:
        key = start.pop()
        if key in seen or key not in endpoints:
            continue
        seen.add(key)
        e = endpoints[key]
        if "capacity" in e:
            return True
        for st in _all_stages(e["stages"]):
            if "store" in st and "capacity" in st["store"]:
                return True
            for c in _calls(st):
                if "capacity" in c:
                    return True
                start.append((c["service"], c["endpoint"]))
    return False


def _unmodelled_limits(topo: dict, diagnosis: dict, modelled: set[tuple[str, str]]) -> list[WhatIf]:
    """Limits the diagnosis found that the twin has no capacity for: listed, not run. Not listed: a
    limit on spans that enclose a capacity the twin has (the same queue seen from its callers), and a
    store traced as a service of its own whose operation the twin's store of that name limits."""
    services = {s["name"] for s in topo["services"]}
    modelled_spans = {span for _, span in modelled}
    out, done = [], set()
    for p in diagnosis.get("populations", []):
        c = p["capacity"]
        key = (p["service"], p["operation"])
        if c["verdict"] != "limit" or key in modelled or key in done:
            continue
        if (key[0] not in services and key[1] in modelled_spans) or _encloses_capacity(topo, *key):
            continue
        done.add(key)
        servers = c["servers"]
        out.append(
            WhatIf(
                _id(CAPACITY, *key, "unmodelled"),
                CAPACITY,
                {"service": key[0], "span": key[1], "place": None},
                servers,
                min(2 * servers, MAX_CAPACITY),
                f"raise the limit of {servers} on {key[0]} '{key[1]}' to {min(2 * servers, MAX_CAPACITY)}",
                capacity_evidence(p, ""),
                unavailable=f"the twin has no capacity there: {NOT_CARRIED}",
            )
        )
    return out


def _unmodelled_fan_outs(topo: dict, diagnosis: dict) -> list[WhatIf]:
    """Bounded fan-outs the diagnosis found where the twin's endpoint has no group with a limit:
    listed, not run."""
    limited = {
        (svc["name"], ep.get("span", ep["name"]))
        for svc in topo["services"]
        for ep in svc["endpoints"]
        if any("group" in s and "max_in_flight" in s["group"] for s in ep["stages"])
    }
    out = []
    for f in diagnosis.get("bounded_fan_outs", []):
        parent = (f["parent_service"], f["parent_operation"])
        if parent in limited:
            continue
        n = min(int(f["calls_max"]), MAX_CAPACITY)
        out.append(
            WhatIf(
                _id(FAN_OUT, *parent, f["operation"], "unmodelled"),
                FAN_OUT,
                {"service": parent[0], "endpoint_span": parent[1], "stage": None},
                f["k"],
                n,
                f"launch the {f['service']} '{f['operation']}' calls of {parent[0]} '{parent[1]}' with at most {n} "
                f"in flight instead of {f['k']}",
                _site_evidence(f, "bounded_fan_out", "bounded"),
                unavailable=f"the twin has no fan-out limit there: {NOT_CARRIED}",
            )
        )
    return out


def _structure_whatifs(topo: dict, diagnosis: dict) -> list[WhatIf]:
    spans = _endpoint_spans(topo)
    out = []
    for svc in topo["services"]:
        for ep in svc["endpoints"]:
            service, ep_span = svc["name"], ep.get("span", ep["name"])
            stages = ep["stages"]
            i = 0
            while i < len(stages):
                s = stages[i]
                where = {"service": service, "endpoint": ep["name"], "stage": i}
                if "group" in s and "max_in_flight" in s["group"]:
                    calls = s["group"]["calls"]
                    callees = set().union(*(_callee_keys(c, service, spans) for c in calls))
                    f = _fan_out(diagnosis, service, ep_span, callees)
                    k = s["group"]["max_in_flight"]
                    n = min(max(len(calls), f["calls_max"] if f else 0), MAX_CAPACITY)
                    if n > k:
                        names = ", ".join(sorted({c["service"] for c in calls}))
                        out.append(
                            WhatIf(
                                _id(FAN_OUT, service, ep_span, i, n),
                                FAN_OUT,
                                where,
                                k,
                                n,
                                f"launch the {len(calls)} {names} calls of {service} '{ep_span}' with at most {n} in "
                                f"flight instead of {k}",
                                _site_evidence(f, "bounded_fan_out", "bounded"),
                            )
                        )
                if "store" in s and (s["store"].get("count") or 1) >= 2 and not s["store"].get("parallel"):
                    st = s["store"]
                    if st.get("system") != OWN_TIME_SYSTEM and "op" not in st:
                        ch = _chain(diagnosis, service, ep_span, {(service, st["span"]), (None, st["span"])})
                        out.append(
                            WhatIf(
                                _id(PARALLEL, service, ep_span, st["span"]),
                                PARALLEL,
                                where,
                                "sequential",
                                "parallel",
                                f"run the {st['count']} {_system_words(st)}'{st['span']}' operations of {service} "
                                f"'{ep_span}' in parallel instead of one after another (if they do not depend on "
                                "each other)",
                                _site_evidence(ch, "sequential_chain", "sequential"),
                            )
                        )
                if "call" in s:
                    j = i + 1
                    while j < len(stages) and "call" in stages[j] and _same_call(stages[j]["call"], s["call"]):
                        j += 1
                    if j - i >= 2:
                        c = s["call"]
                        ch = _chain(diagnosis, service, ep_span, _callee_keys(c, service, spans))
                        out.append(
                            WhatIf(
                                _id(PARALLEL, service, ep_span, c["span"], i),
                                PARALLEL,
                                {**where, "count": j - i},
                                "sequential",
                                "parallel",
                                f"run the {j - i} {c['service']} '{c['span']}' calls of {service} '{ep_span}' in "
                                "parallel instead of one after another (if they do not depend on each other)",
                                _site_evidence(ch, "sequential_chain", "sequential"),
                            )
                        )
                        i = j
                        continue
                i += 1
    return out


def _same_call(a: dict, b: dict) -> bool:
    return (a["service"], a["endpoint"], a.get("span")) == (b["service"], b["endpoint"], b.get("span"))


def _system_words(store: dict) -> str:
    system = store.get("system")
    return f"{system} " if system and system != "store" else ""


@dataclass
class _Candidate:
    median_us: float
    target: dict
    words: str
    population: dict | None = None


def _faster_candidates(topo: dict, diagnosis: dict, service: str) -> list[_Candidate]:
    """The stages of `service` that can be made faster: its stores (also those of other services
    whose spans the traces name under `service`: a database traced as a service of its own) and
    each endpoint's own work."""
    out = []
    for svc in topo["services"]:
        mine = svc["name"] == service
        for ep in svc["endpoints"]:
            ep_span = ep.get("span", ep["name"])
            own = 0.0
            for i, s in enumerate(ep["stages"]):
                if "cpu" in s:
                    own += dist_median_us(s["cpu"]) or 0.0
                elif "store" in s and s["store"].get("system") == OWN_TIME_SYSTEM:
                    own += dist_median_us(s["store"]["latency"]) or 0.0
                elif "store" in s and "op" not in s["store"]:
                    st = s["store"]
                    pop = _store_population(diagnosis, svc["name"], st["span"])
                    m = dist_median_us(st["latency"])
                    if m and (mine or (pop is not None and pop["service"] == service)):
                        out.append(
                            _Candidate(
                                m,
                                {"service": svc["name"], "endpoint": ep["name"], "stage": i},
                                f"{svc['name']} → {_system_words(st)}'{st['span']}'",
                                population=pop,
                            )
                        )
            if own > 0 and mine:
                out.append(
                    _Candidate(
                        own,
                        {"service": service, "endpoint": ep["name"], "own_time": True},
                        f"the own work of {service} '{ep_span}' (outside its calls and stores)",
                        population=_population(diagnosis, service, ep_span),
                    )
                )
    return out


def _tail_services(diagnosis: dict, topo: dict) -> tuple[list[tuple[str, dict | None]], str | None]:
    """Services in the order the slowest requests grow in them (growth > 0), with that growth; or
    every service of the twin when the diagnosis has no comparison (and why)."""
    growth: dict[str, dict] = {}
    for front in diagnosis.get("slow_vs_typical", []):
        for g in front["services"]:
            if g["growth_ns"] > 0 and g["growth_ns"] > growth.get(g["service"], {}).get("growth_ns", 0):
                growth[g["service"]] = {
                    **g,
                    "front": f"{front['service']}:{front['operation']}",
                    "slow_traces": front["slow_traces"],
                    "traces": front["traces"],
                }
    if growth:
        return [(s, g) for s, g in sorted(growth.items(), key=lambda kv: -kv[1]["growth_ns"])], None
    why = "the diagnosis has no slow-against-typical comparison (too few traces per front operation)"
    return [(s["name"], None) for s in topo["services"]], why


def _faster_whatifs(topo: dict, diagnosis: dict, percent: float) -> list[WhatIf]:
    factor = 1.0 - percent / 100.0
    services, no_tail = _tail_services(diagnosis, topo)
    out: list[WhatIf] = []
    for service, growth in services:
        cands = _faster_candidates(topo, diagnosis, service)
        if not cands:
            continue
        best = max(cands, key=lambda c: c.median_us)
        if best.target in [x.target for x in out]:  # the same stage through another service's growth
            continue
        frm, to = best.median_us, best.median_us * factor
        evidence = capacity_evidence(best.population, f"{service}'s stage")
        evidence["tail"] = (
            {
                k: growth[k]
                for k in (
                    "front",
                    "growth_ns",
                    "share_of_growth",
                    "slow_mean_ns",
                    "middle_mean_ns",
                    "slow_traces",
                    "traces",
                )
            }
            if growth is not None
            else {"unavailable": no_tail}
        )
        evidence["stage_median_us"] = frm
        out.append(
            WhatIf(
                _id(
                    FASTER,
                    best.target["service"],
                    best.target["endpoint"],
                    "own_time" if best.target.get("own_time") else best.target["stage"],
                    f"{percent:g}%",
                ),
                FASTER,
                best.target,
                frm,
                to,
                f"make {best.words} {percent:g} % faster (median {fmt_ns(frm * 1000)} → {fmt_ns(to * 1000)})",
                evidence,
                factor=factor,
            )
        )
        if len(out) >= MAX_FASTER:
            break
    return out


def online_cpus() -> tuple[int, list[int]]:
    """(online CPUs, the CPUs this process may run on — and so the twin's services), as every run
    records them (lab/machine.py `facts`)."""
    f = machine.facts()
    return int(f["online_cpus"] or 1), [int(c) for c in f["allowed_cpus"].split(",") if c]


def cores_whatif(topo: dict, cpus: tuple[int, list[int]] | None = None) -> WhatIf:
    online, allowed = cpus or online_cpus()
    pinned = {s["name"]: s["cpus"] for s in topo["services"] if s.get("cpus")}
    evidence = {
        "population": None,
        "confidence": None,
        "samples": None,
        "figures": {"online_cpus": online, "allowed_cpus": allowed, "pinned_services": pinned},
    }
    target = {"services": sorted(pinned)}
    if not pinned:
        return WhatIf(
            _id(CORES, "all"),
            CORES,
            target,
            len(allowed),
            None,
            "add cores",
            evidence,
            unavailable=f"the twin already runs on every CPU this machine lets it use ({len(allowed)} of "
            f"{online} online): a prediction with more cores needs a machine with more",
        )
    names = ", ".join(sorted(pinned))
    return WhatIf(
        _id(CORES, *sorted(pinned)),
        CORES,
        target,
        [pinned[n] for n in sorted(pinned)],
        f"{len(allowed)} CPUs",
        f"run {names} on all {len(allowed)} CPUs instead of " + "; ".join(f"{n}: {pinned[n]}" for n in sorted(pinned)),
        evidence,
    )


def whatifs(
    topo: dict,
    diagnosis: dict,
    *,
    faster_percent: float = DEFAULT_FASTER_PERCENT,
    cpus: tuple[int, list[int]] | None = None,
) -> list[WhatIf]:
    """Every what-if of this twin and diagnosis, those that cannot run included (with the reason)."""
    if not 0 < faster_percent < 100:
        raise ValueError(f"faster_percent {faster_percent} is outside (0, 100)")
    caps, modelled = _capacity_whatifs(topo, diagnosis)
    return [
        *caps,
        *_structure_whatifs(topo, diagnosis),
        *_faster_whatifs(topo, diagnosis, faster_percent),
        cores_whatif(topo, cpus),
        *_unmodelled_limits(topo, diagnosis, modelled),
        *_unmodelled_fan_outs(topo, diagnosis),
    ]
