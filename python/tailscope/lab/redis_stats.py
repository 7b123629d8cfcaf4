"""What the graph's Redis held and evicted during a run: its memory against its cap, evicted and
expired keys, hits and misses.

The lab's Redis runs with `--maxmemory` (64 MiB unless the topology says otherwise) and
`allkeys-lru` (docs/stores.md): a soak that appends to timelines at a constant rate fills it, and
from then on every write evicts keys — among them the social graph's `followers:` sets, whose next
read misses and goes to the document store. Read at each interval's edges (`redis-cli INFO`, Debian's
redis-tools, installed with the server), these counters say when the cap was reached and what it
cost. Every failure gives None with the reason, never zeros.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

READ_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class RedisMark:
    used_memory_bytes: int
    maxmemory_bytes: int  # 0: no cap
    evicted_keys: int
    expired_keys: int
    keyspace_hits: int
    keyspace_misses: int
    keys: int  # in db0


@dataclass(frozen=True)
class RedisActivity:
    used_memory_bytes: int  # at the end
    maxmemory_bytes: int
    evicted_keys: int
    keyspace_hits: int
    keyspace_misses: int
    keys: int  # at the end


def parse_info(text: str) -> RedisMark:
    """A RedisMark from `INFO` output (`key:value` lines); ValueError naming a missing field."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition(":")
        if sep:
            fields[key] = value
    keys = 0
    if "db0" in fields:  # db0:keys=123,expires=0,avg_ttl=0
        parts = dict(p.split("=", 1) for p in fields["db0"].split(",") if "=" in p)
        keys = int(parts.get("keys", "0"))
    try:
        return RedisMark(
            int(fields["used_memory"]),
            int(fields["maxmemory"]),
            int(fields["evicted_keys"]),
            int(fields["expired_keys"]),
            int(fields["keyspace_hits"]),
            int(fields["keyspace_misses"]),
            keys,
        )
    except KeyError as e:
        raise ValueError(f"INFO has no {e.args[0]} field") from e


def read_mark(address: str) -> tuple[RedisMark | None, str]:
    """The counters now, or (None, why)."""
    cli = shutil.which("redis-cli")
    if cli is None:
        return None, "redis-cli not found (install the Debian package redis-tools)"
    host, _, port = address.rpartition(":")
    try:
        r = subprocess.run(
            [cli, "-h", host.strip("[]"), "-p", port, "INFO", "everything"],
            capture_output=True,
            text=True,
            timeout=READ_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"redis-cli failed: {e}"
    if r.returncode != 0 or "used_memory:" not in r.stdout:
        return None, f"redis-cli exited {r.returncode}: {(r.stderr or r.stdout).strip()[:200]}"
    try:
        return parse_info(r.stdout), ""
    except ValueError as e:
        return None, f"unexpected INFO output ({e})"


def activity(before: RedisMark, after: RedisMark) -> RedisActivity:
    return RedisActivity(
        after.used_memory_bytes,
        after.maxmemory_bytes,
        after.evicted_keys - before.evicted_keys,
        after.keyspace_hits - before.keyspace_hits,
        after.keyspace_misses - before.keyspace_misses,
        after.keys,
    )
