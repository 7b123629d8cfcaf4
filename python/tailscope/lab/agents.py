"""Load agents: several `tailscope-load` processes, each inside a lab host, driving one
target together (docs/isolation-study.md, "Load agents").

One generator on one core tops out, and wrk2 users report microbursts when one client
holds too many connections; the echo-server thesis drove its server from three
machines. The agents share the total rate and connections, start together (one
Unix time given to every agent as `--start-at`: namespaces share the realtime
clock, so their warm-up and measured windows line up), and stop together: each is
bounded by its duration, one that fails stops the rest, and an interrupt
(Ctrl-C, SIGTERM — lifetime.terminate_as_interrupt turns it into one) stops them
all before it propagates. Nothing outlives `run_agents`.

Their histograms are merged exactly: each agent writes an HdrHistogram log
(`--hlog`), and adding the interval histograms of every agent gives the histogram
of all requests, so the merged percentiles are those of one histogram that held
every value (tests/e2e/test_agents.py checks this). Per-agent figures are kept beside
the total.
"""

from __future__ import annotations

import collections
import json
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from tailscope.lab import labhosts, lifetime
from tailscope.lab.allow_list import check_base_url
from tailscope.lab.engines import EngineError, find_engine, kill_group, spawn
from tailscope.measure.hlog import HlogError, buckets, histogram_from_hlog, new_histogram
from tailscope.measure.intervals import LEVEL, quantile_ci_from_buckets
from tailscope.measure.measurement import measurement

LOAD = "tailscope-load"
ENGINE = "tailscope-load-agents"  # the merged document's engine name
RESULT_SCHEMA = "tailscope.result/1"
TAG = "latency_intended"
# Time for every agent to exec (`ip netns exec` + the engine's start-up) before the common
# start: generous, because a late agent would start inside the others' measured window.
START_LEAD_S = 0.8
START_LEAD_PER_AGENT_S = 0.2
MAX_AGENTS = 64
STOP_GRACE_S = 5.0
PERCENTILES = ("50", "90", "99", "99.9", "99.99")
MIN_TAIL_SAMPLES = 10  # docs/measurement.md: fewer beyond a percentile = low confidence
CDF_PERCENTILES = [float(p) for p in range(0, 100, 2)] + [99.0, 99.5, 99.9, 99.95, 99.99, 99.999, 100.0]


class AgentError(EngineError):
    """An agent failed or overran; every agent has been stopped when this is raised."""


@dataclass(frozen=True)
class Agent:
    name: str
    netns: str | None = None  # a lab host's namespace; None = this namespace
    cpus: frozenset[int] | None = None  # pinned before exec; None = not pinned


@dataclass
class AgentResult:
    agent: Agent
    connections: int
    rate_per_s: float
    document: dict
    hlog: Path

    @property
    def achieved_per_s(self) -> float:
        return float((self.document.get("load") or {}).get("achieved_per_s") or 0.0)

    @property
    def errors_total(self) -> int:
        return int((self.document.get("load") or {}).get("errors_total") or 0)

    @property
    def generator_limited(self) -> bool:
        return bool((self.document.get("load") or {}).get("generator_bottleneck"))

    def percentile_ns(self, key: str) -> float | None:
        m = measurement(self.document, TAG)
        return m.p_ns(key) if m else None

    @property
    def count(self) -> int:
        m = measurement(self.document, TAG)
        return m.count if m else 0


def shares(total: int, k: int) -> list[int]:
    """`total` split over k agents as evenly as whole numbers allow (the first get the remainder)."""
    return [total // k + (1 if i < total % k else 0) for i in range(k)]


def check_target(host: str, port: int) -> None:
    """The allow-list every connect of the project obeys: loopback or the lab subnet
    (lab.allow_list, the check OTLP and Jaeger URLs go through)."""
    check_base_url(f"http://{host}:{port}", "load agents' target")


def run_agents(
    agents: list[Agent],
    *,
    host: str,
    port: int,
    connections: int,
    rate_per_s: float,
    duration_s: float,
    warmup_s: float,
    args: list[str],
    artifacts_dir: Path,
    timeout_s: float = 60.0,
) -> tuple[list[AgentResult], dict]:
    """Runs the agents together; returns each agent's result and the merged document.

    `args`: the tailscope-load flags every agent shares (protocol, path, --timeout,
    --allow-errors ...), without -c, -R, -d, --warmup, --host, --port, --hlog, --out,
    --start-at, which this function sets. `timeout_s`: how long past its measured
    window an agent may take to finish before every agent is killed."""
    if not 1 <= len(agents) <= MAX_AGENTS:
        raise ValueError(f"load agents: {len(agents)} agents; 1 … {MAX_AGENTS} allowed")
    if connections < len(agents):
        raise ValueError(f"load agents: {connections} connections cannot be shared by {len(agents)} agents")
    if not (rate_per_s == 0 or rate_per_s >= len(agents)):
        raise ValueError(f"load agents: a rate of {rate_per_s:g}/s cannot be shared by {len(agents)} agents")
    check_target(host, port)
    exe = str(find_engine(LOAD))
    artifacts_dir = Path(artifacts_dir)
    artifacts_dir.mkdir(parents=True, exist_ok=True)
    conns = shares(connections, len(agents))
    rates = [rate_per_s * c / connections for c in conns]  # rate follows the connections' share
    start_at = time.time() + START_LEAD_S + START_LEAD_PER_AGENT_S * len(agents)
    deadline = time.monotonic() + (start_at - time.time()) + warmup_s + duration_s + timeout_s
    procs: list[subprocess.Popen] = []
    tails: list[tuple[collections.deque[str], threading.Thread]] = []
    with tempfile.TemporaryDirectory(prefix=lifetime.owned_name("tailscope-agents-") + "-") as tmp:
        outs = [Path(tmp) / f"agent-{i}.json" for i in range(len(agents))]
        hlogs = [artifacts_dir / f"agent-{i}-{_slug(a.name)}.hlog" for i, a in enumerate(agents)]
        try:
            for i, a in enumerate(agents):
                cmd = [
                    *(labhosts.exec_args(a.netns) if a.netns else []),
                    exe,
                    *args,
                    "--host",
                    host,
                    "--port",
                    str(port),
                    "-c",
                    str(conns[i]),
                    "-R",
                    f"{rates[i]:.3f}" if rates[i] else "0",
                    "-d",
                    f"{duration_s:.3f}",
                    "--warmup",
                    f"{warmup_s:.3f}",
                    "--start-at",
                    f"{start_at:.6f}",
                    "--hlog",
                    str(hlogs[i]),
                    "--out",
                    str(outs[i]),
                ]
                proc = spawn(
                    cmd, cpus=set(a.cpus) if a.cpus else None, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
                )
                procs.append(proc)
                tails.append(_drain(proc))
            _wait_all(agents, procs, tails, deadline)
        finally:
            _stop_all(procs)
        results = []
        for i, a in enumerate(agents):
            try:
                doc = json.loads(outs[i].read_text())
            except (OSError, ValueError) as e:
                raise AgentError(f"load agent {a.name}: no result document ({e})") from e
            results.append(AgentResult(a, conns[i], rates[i], doc, hlogs[i]))
    return results, merged_document(results, host=host, port=port, duration_s=duration_s, warmup_s=warmup_s)


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)[:40]


def _drain(proc: subprocess.Popen) -> tuple[collections.deque[str], threading.Thread]:
    """Keeps the last stderr lines of an agent (read in a thread, so a full pipe never blocks it)."""
    tail: collections.deque[str] = collections.deque(maxlen=50)

    def run() -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            tail.append(raw.decode("utf-8", "replace").rstrip("\n"))

    reader = threading.Thread(target=run, daemon=True)
    reader.start()
    return tail, reader


def _wait_all(
    agents: list[Agent],
    procs: list[subprocess.Popen],
    tails: list[tuple[collections.deque[str], threading.Thread]],
    deadline: float,
) -> None:
    """Returns when every agent exited 0; raises (the caller stops the rest) when one failed or time ran out."""
    while True:
        codes = [p.poll() for p in procs]
        for a, rc, (tail, reader) in zip(agents, codes, tails, strict=True):
            if rc is not None and rc != 0:
                reader.join(timeout=2.0)  # the exited agent's last words are still in the pipe
                message = " | ".join(ln for ln in list(tail)[-5:] if not ln.startswith("{")) or "no message"
                raise AgentError(f"load agent {a.name} exited with {rc}: {message}; the other agents were stopped")
        if all(rc == 0 for rc in codes):
            return
        if time.monotonic() > deadline:
            running = [a.name for a, rc in zip(agents, codes, strict=True) if rc is None]
            raise AgentError(f"load agents {', '.join(running)} overran their time limit and were stopped")
        time.sleep(0.05)


def _stop_all(procs: list[subprocess.Popen]) -> None:
    """SIGTERM to every agent still running (it writes its partial document), SIGKILL after a grace."""
    for p in procs:
        if p.poll() is None:
            kill_group(p, signal.SIGTERM)
    end = time.monotonic() + STOP_GRACE_S
    for p in procs:
        try:
            p.wait(timeout=max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        kill_group(p)  # whatever is left, and anything the agent forked
        p.wait()


# ---- merging -------------------------------------------------------------------------------------


def merge_hlogs(paths: list[Path], tag: str = TAG):
    """One histogram holding every interval tagged `tag` of every log."""
    total = new_histogram()
    for p in paths:
        total.add(histogram_from_hlog(p, tag))
    return total


def latency_summary(h) -> dict:
    """A result/1 latency summary of an HdrHistogram, in core/latency_summary.cc's form."""
    n = int(h.get_total_count())
    if n == 0:
        return {"unit": "ns", "count": 0, "unavailable": "no samples recorded"}
    tail = {p: n * (100.0 - float(p)) / 100.0 for p in PERCENTILES}
    return {
        "unit": "ns",
        "count": n,
        "min": int(h.get_min_value()),
        "mean": float(h.get_mean_value()),
        "stddev": float(h.get_stddev()),
        "max": int(h.get_max_value()),
        "percentiles": {p: int(h.get_value_at_percentile(float(p))) for p in PERCENTILES},
        "tail_samples": tail,
        "low_confidence": [p for p in PERCENTILES if tail[p] < MIN_TAIL_SAMPLES],
        **_percentile_intervals(h),
    }


def _percentile_intervals(h) -> dict:
    """The summary's `percentile_ci` keys (docs/formats.md), as the engines compute them."""
    rows = buckets(h)
    found = {p: quantile_ci_from_buckets(rows, float(p) / 100) for p in PERCENTILES}
    return {
        "percentile_ci": {
            p: [int(i.lo_ns), int(i.hi_ns)] for p, i in found.items() if i.lo_ns is not None and i.hi_ns is not None
        },
        "percentile_ci_level": LEVEL,
        "percentile_ci_unavailable": {p: i.unavailable for p, i in found.items() if not i.available},
    }


def cdf_points(h) -> list[list[float]]:
    if h.get_total_count() == 0:
        return []
    return [[float(h.get_value_at_percentile(p)), p] for p in CDF_PERCENTILES]


def merged_document(results: list[AgentResult], *, host: str, port: int, duration_s: float, warmup_s: float) -> dict:
    """A tailscope.result/1 document for the agents together: the merged latency histogram
    (`latency_intended`, variant `merged`), summed rates and errors, and each agent's own figures."""
    h = new_histogram()
    unavailable = []
    for r in results:
        try:
            h.add(histogram_from_hlog(r.hlog, TAG))
        except (OSError, HlogError) as e:  # an agent that completed no request wrote no interval
            unavailable.append({"name": TAG, "variant": r.agent.name, "reason": f"agent {r.agent.name}: {e}"})
    first = results[0].document
    total_achieved = sum(r.achieved_per_s for r in results)
    return {
        "schema": RESULT_SCHEMA,
        "engine": ENGINE,
        "engine_version": first.get("engine_version"),
        "machine": first.get("machine") or {},
        "config": {
            "agents": len(results),
            "host": host,
            "port": port,
            "connections": sum(r.connections for r in results),
            "rate_per_s": sum(r.rate_per_s for r in results),
            "duration_s": duration_s,
            "warmup_s": warmup_s,
            "start_at_s": (first.get("config") or {}).get("start_at_s"),
        },
        "measurements": [
            {
                "name": TAG,
                "variant": "merged",
                "description": f"every agent's interval histograms added ({len(results)} agents)",
                "latency": latency_summary(h),
                "cdf": cdf_points(h),
            }
        ],
        "unavailable": unavailable,
        "load": {
            "achieved_per_s": total_achieved,
            "errors_total": sum(r.errors_total for r in results),
            "generator_bottleneck": any(r.generator_limited for r in results),
        },
        "agents": [
            {
                "name": r.agent.name,
                "netns": r.agent.netns,
                "cpus": sorted(r.agent.cpus) if r.agent.cpus else None,
                "connections": r.connections,
                "rate_per_s": r.rate_per_s,
                "achieved_per_s": r.achieved_per_s,
                "count": r.count,
                "p50_ns": r.percentile_ns("50"),
                "p99_ns": r.percentile_ns("99"),
                "errors_total": r.errors_total,
                "generator_limited": r.generator_limited,
                "start_late_s": (r.document.get("config") or {}).get("start_late_s"),
                "hlog": str(r.hlog),
            }
            for r in results
        ],
    }


def percentile_ns(doc: dict, key: str) -> float | None:
    """A percentile of the merged latency, or None (e.g. no request completed)."""
    m = measurement(doc, TAG, "merged")
    return m.p_ns(key) if m else None


__all__ = ["Agent", "AgentError", "AgentResult", "merge_hlogs", "merged_document", "run_agents", "shares"]
