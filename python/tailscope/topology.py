"""Microservice topologies: load a YAML (or JSON) topology, validate it, and
write the JSON the `tailscope-svc` engine reads (`--topology FILE.json`).

The engine validates again (the JSON is the contract, docs/microservices.md);
checking here gives the same clear errors before any process starts:
unknown service, missing endpoint, call cycle, malformed stage.

    python -m tailscope.topology topologies/socialnet.yaml -o /tmp/socialnet.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
SOCIALNET = REPO_ROOT / "topologies" / "socialnet.yaml"
STAGE_KINDS = ("cpu", "call", "group", "store", "work")


class TopologyError(ValueError):
    """A topology file is malformed; the message names the file and the place."""


def _calls(stages: list, where: str):
    if not isinstance(stages, list):
        raise TopologyError(f"{where}: stages are a list")
    for i, st in enumerate(stages):
        here = f"{where}[{i}]"
        if not isinstance(st, dict) or len(st) != 1 or next(iter(st)) not in STAGE_KINDS:
            raise TopologyError(f"{here}: a stage is a mapping with exactly one key of {', '.join(STAGE_KINDS)}")
        kind, body = next(iter(st.items()))
        if kind == "call":
            yield here, body
        elif kind == "group":
            if not isinstance(body, dict) or not isinstance(body.get("calls"), list) or not body["calls"]:
                raise TopologyError(f"{here}: a group needs a non-empty list 'calls'")
            names = [c.get("name", c.get("service")) for c in body["calls"] if isinstance(c, dict)]
            join = body.get("join", names)
            if sorted(map(str, join)) != sorted(map(str, names)):
                raise TopologyError(f"{here}: join must name every call of the group once (calls: {names}, join: {join})")
            for j, c in enumerate(body["calls"]):
                yield f"{here}.calls[{j}]", c
        elif kind == "store" and isinstance(body, dict) and "on_miss" in body:
            yield from _calls(body["on_miss"], f"{here}.on_miss")


def validate(doc: dict, origin: str = "topology") -> dict:
    """Checks services, endpoints, calls and cycles; returns doc unchanged."""
    if not isinstance(doc, dict) or not isinstance(doc.get("services"), list) or not doc["services"]:
        raise TopologyError(f"{origin}: needs a non-empty list 'services'")
    endpoints: dict[str, dict[str, list]] = {}
    for i, s in enumerate(doc["services"]):
        if not isinstance(s, dict) or not isinstance(s.get("name"), str):
            raise TopologyError(f"{origin}: services[{i}] needs a 'name'")
        if s["name"] in endpoints:
            raise TopologyError(f"{origin}: service '{s['name']}' defined twice")
        eps = s.get("endpoints")
        if not isinstance(eps, list) or not eps:
            raise TopologyError(f"{origin}: service '{s['name']}' needs a non-empty list 'endpoints'")
        endpoints[s["name"]] = {e["name"]: e.get("stages", []) for e in eps if isinstance(e, dict) and "name" in e}
    graph: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for sname, eps in endpoints.items():
        for ename, stages in eps.items():
            edges = []
            for where, call in _calls(stages, f"{origin}: service '{sname}' endpoint '{ename}'"):
                if not isinstance(call, dict):
                    raise TopologyError(f"{where}: a call is a mapping")
                callee, ep = call.get("service"), call.get("endpoint")
                if callee not in endpoints:
                    raise TopologyError(f"{where}: unknown service '{callee}'")
                if ep not in endpoints[callee]:
                    raise TopologyError(f"{where}: service '{callee}' has no endpoint '{ep}'")
                edges.append((callee, ep))
            graph[(sname, ename)] = edges
    state: dict[tuple[str, str], int] = {}

    def visit(node: tuple[str, str], path: list) -> None:
        if state.get(node) == 2:
            return
        if state.get(node) == 1:
            cycle = path[path.index(node):] + [node]
            raise TopologyError(f"{origin}: call cycle: " + " → ".join(f"{s}.{e}" for s, e in cycle))
        state[node] = 1
        for nxt in graph[node]:
            visit(nxt, path + [node])
        state[node] = 2

    for node in graph:
        visit(node, [])
    front = doc.get("front")
    if front is not None:
        if not isinstance(front, dict) or front.get("service") not in endpoints:
            raise TopologyError(f"{origin}: front names unknown service {front.get('service') if isinstance(front, dict) else front!r}")
        if front.get("endpoint") not in endpoints[front["service"]]:
            raise TopologyError(f"{origin}: front: service '{front['service']}' has no endpoint '{front.get('endpoint')}'")
    return doc


def load(path: str | Path) -> dict:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise TopologyError(f"{path}: cannot read ({e.strerror})") from e
    try:
        doc = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (yaml.YAMLError, json.JSONDecodeError) as e:
        raise TopologyError(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {e}") from e
    return validate(doc, str(path))


def services(doc: dict) -> list[str]:
    return [s["name"] for s in doc["services"]]


def write_json(doc: dict, out: str | Path) -> Path:
    """Writes the engine's JSON atomically (temp file + rename)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=out.name, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, out)
    return out


def to_engine_json(path: str | Path, out: str | Path) -> Path:
    return write_json(load(path), out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="validate a topology and convert it to the engine's JSON")
    ap.add_argument("topology", nargs="?", default=str(SOCIALNET))
    ap.add_argument("-o", "--out", help="JSON output file (default: stdout)")
    a = ap.parse_args(argv)
    try:
        doc = load(a.topology)
    except TopologyError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if a.out:
        write_json(doc, a.out)
    else:
        json.dump(doc, sys.stdout, indent=1)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
