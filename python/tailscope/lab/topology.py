"""Microservice topologies: load a YAML (or JSON) topology, validate it, and
write the JSON the `tailscope-svc` engine reads (`--topology FILE.json`).

There is one validator: the engine's (native/svc/topology.cc). `validate`
sends the document to `tailscope-svc --check-topology -` and raises its
error verbatim, so Python and the engine cannot disagree about what a valid
topology is (they did: a second validator here accepted NaN, "ten" and most
out-of-range values the engine rejects). Why not one JSON Schema read by
both sides: the rules that matter most — calls naming existing services and
endpoints, no call cycles, join orders naming every call once — are not
expressible in JSON Schema, so a second hand-written half would remain on
each side. The price is that validating needs the built engine
(`make build`); without it `validate` raises EngineError saying so.

What only this module checks is the YAML → JSON conversion itself: a value
JSON cannot carry (`.nan`, `.inf`, a date, a non-string key) is an error
naming its place, never written as invalid JSON (`NaN`) for the engine to
trip over.

    python -m tailscope.lab.topology topologies/socialnet.yaml -o /tmp/socialnet.json
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

import yaml

from tailscope.atomicfile import write_text_atomic
from tailscope.lab import yamlfile
from tailscope.lab.engines import REPO_ROOT, EngineError, find_engine

SOCIALNET = REPO_ROOT / "topologies" / "socialnet.yaml"
CHECK_TIMEOUT_S = 60  # the engine parses one small document; a hang is a bug, not a slow machine
# tailscope-svc's exit code for a topology it rejects (docs/microservices.md).
INVALID_EXIT = 1


class TopologyError(ValueError):
    """A topology file is malformed; the message names the file and the place."""


def _check_json_value(value: object, where: str) -> None:
    """Raises TopologyError at the first value JSON cannot represent."""
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise TopologyError(f"{where}: key {k!r} is not a string")
            _check_json_value(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_json_value(v, f"{where}[{i}]")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise TopologyError(f"{where}: {value} is not a finite number")
    elif value is not None and not isinstance(value, (str, int, bool)):
        raise TopologyError(f"{where}: a {type(value).__name__} ({value!r}) has no JSON form")


def validate(doc: object, origin: str = "topology") -> dict:
    """Validates with the engine's validator; returns the document as the
    engine normalised it (the JSON it will read). Raises TopologyError with
    the engine's message, EngineError if tailscope-svc is not built or fails."""
    _check_json_value(doc, origin)
    svc = find_engine("tailscope-svc")
    try:
        r = subprocess.run(
            [str(svc), "--check-topology", "-", "--origin", origin],
            input=json.dumps(doc, allow_nan=False),
            capture_output=True,
            text=True,
            timeout=CHECK_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as e:
        raise EngineError(f"{svc} --check-topology did not answer within {CHECK_TIMEOUT_S} s") from e
    if r.returncode == INVALID_EXIT:
        message = r.stderr.strip()
        raise TopologyError(message.removeprefix("tailscope-svc: "))
    if r.returncode != 0:
        raise EngineError(f"{svc} --check-topology exited {r.returncode}: {r.stderr.strip()}")
    return json.loads(r.stdout)


def load(path: str | Path) -> dict:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise TopologyError(f"{path}: cannot read ({e.strerror})") from e
    try:
        doc = json.loads(text) if path.suffix == ".json" else yamlfile.safe_load(text)
    except (yaml.YAMLError, json.JSONDecodeError) as e:
        raise TopologyError(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {e}") from e
    return validate(doc, str(path))


def services(doc: dict) -> list[str]:
    return [s["name"] for s in doc["services"]]


def write_json(doc: dict, out: str | Path) -> Path:
    """Writes the engine's JSON atomically (temp file + rename)."""
    # allow_nan=False: never the non-JSON NaN the engine would refuse.
    return write_text_atomic(Path(out), json.dumps(doc, indent=1, allow_nan=False))


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
        return INVALID_EXIT
    except EngineError as e:  # no engine to validate with: nothing is written
        print(f"error: {e}", file=sys.stderr)
        return 2
    if a.out:
        write_json(doc, a.out)
    else:
        json.dump(doc, sys.stdout, indent=1)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
