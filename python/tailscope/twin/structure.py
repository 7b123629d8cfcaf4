"""A topology's call structure in canonical form: what "the inferred topology matches
topologies/socialnet.yaml structurally" means (docs/twin.md).

Endpoints are identified by their server span names (an inferred endpoint's *name* comes from its
span, the hand-written one may differ: `compose_creator_with_userid` answers `compose_creator_server`);
calls by the endpoint they reach and their launch mode; a group by its calls in join order; a store
by its span and the structure of its miss path. Own-time stages (`cpu`, and the own-time waits of
an inferred topology) and distributions are not structure.
"""

from __future__ import annotations

OWN_TIME_SYSTEM = "own-time"


def _span_of(doc: dict) -> dict[tuple[str, str], str]:
    return {
        (s["name"], e["name"]): e.get("span", e["name"] + "_server")
        for s in doc["services"]
        for e in s.get("endpoints", [])
    }


def _stages(stages: list[dict], spans: dict[tuple[str, str], str], never_missed: frozenset[str] = frozenset()) -> tuple:
    out: list[tuple] = []
    for st in stages:
        if "call" in st:
            c = st["call"]
            out.append(("call", c["service"], spans[(c["service"], c["endpoint"])]))
        elif "group" in st:
            g = st["group"]
            by_name = {c.get("name", c["service"]): c for c in g["calls"]}
            order = g.get("join") or list(by_name)
            out.append(
                (
                    "group",
                    tuple(
                        (
                            by_name[n]["service"],
                            spans[(by_name[n]["service"], by_name[n]["endpoint"])],
                            by_name[n].get("launch", "async"),
                        )
                        for n in order
                    ),
                )
            )
        elif "store" in st:
            s = st["store"]
            if s.get("system") == OWN_TIME_SYSTEM:
                continue
            # A read that never missed in the traces cannot show its miss path: not compared.
            miss = (
                _stages(s["on_miss"], spans, never_missed)
                if s.get("on_miss") and s["span"] not in never_missed
                else None
            )
            out.append(("store", s["span"], miss))
    return tuple(out)


def structure_of(doc: dict, never_missed: frozenset[str] = frozenset()) -> dict[str, dict[str, tuple]]:
    """{service: {endpoint server span: stages}} (see the module docstring); the store reads named in
    `never_missed` without their miss path."""
    spans = _span_of(doc)
    return {
        s["name"]: {
            spans[(s["name"], e["name"])]: _stages(e.get("stages", []), spans, never_missed)
            for e in s.get("endpoints", [])
        }
        for s in doc["services"]
    }


def _calls(stages: list[dict]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for st in stages:
        if "call" in st:
            out.append((st["call"]["service"], st["call"]["endpoint"]))
        elif "group" in st:
            out += [(c["service"], c["endpoint"]) for c in st["group"]["calls"]]
    return out


def reachable_from_front(doc: dict) -> dict:
    """`doc` with only the endpoints (and services) a request to its front path can reach: traces
    of a run driven through one path cannot show the others (hotel's /recommendations, /user …)."""
    eps = {(s["name"], e["name"]): e for s in doc["services"] for e in s.get("endpoints", [])}
    seen: set[tuple[str, str]] = set()
    todo = [(doc["front"]["service"], doc["front"]["endpoint"])]
    while todo:
        k = todo.pop()
        if k in seen or k not in eps:
            continue
        seen.add(k)
        todo += _calls(eps[k].get("stages", []))
        for st in eps[k].get("stages", []):
            if "store" in st:
                todo += _calls(st["store"].get("on_miss") or [])
    services = []
    for s in doc["services"]:
        kept = [e for e in s.get("endpoints", []) if (s["name"], e["name"]) in seen]
        if kept:
            services.append({**s, "endpoints": kept})
    return {**doc, "services": services}


def differences(
    expected: dict, actual: dict, *, driven_only: bool = False, never_missed: frozenset[str] = frozenset()
) -> list[str]:
    """Human-readable differences between two structures (empty: they match). `driven_only`:
    compare only what a request to `expected`'s front path reaches. `never_missed`: store reads
    (span names) that hit in every traced request, so traces cannot show their miss path — it is
    left out of the comparison on both sides (the caller says so beside the result)."""
    if driven_only:
        expected = reachable_from_front(expected)
    a, b = structure_of(expected, never_missed), structure_of(actual, never_missed)
    out: list[str] = []
    for svc in sorted(set(a) | set(b)):
        if svc not in b:
            out.append(f"service {svc}: missing")
            continue
        if svc not in a:
            out.append(f"service {svc}: not expected")
            continue
        for ep in sorted(set(a[svc]) | set(b[svc])):
            if a[svc].get(ep) != b[svc].get(ep):
                out.append(f"{svc}:{ep}: expected {a[svc].get(ep)}, got {b[svc].get(ep)}")
    return out
