"""Per-service placement and counters in `tailscope-svc --all`: every thread
of every service — including threads std::async creates after start — runs
within its placement, the document records what /proc showed, the counters
section is there (values, or unavailable with the reason), and bad
placements are refused before anything starts.

Skipped when the engine is not built (build/release/bin, or $TAILSCOPE_BUILD_DIR/bin).
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import threading
from pathlib import Path

import pytest

from conftest import assert_refused_before_start, engine_path, needs_engine
from tailscope.lab import topology
from tailscope.lab.engines import serve
from tailscope.lab.graph import PATH as FRONT_PATH

SVC = engine_path("tailscope-svc")
ALLOWED = sorted(os.sched_getaffinity(0))
CALLER = "compose-post-service"  # fans out with std::async under the std-async model

pytestmark = needs_engine("tailscope-svc")


@pytest.fixture(scope="module")
def topo_json(tmp_path_factory) -> Path:
    return topology.to_engine_json(topology.SOCIALNET, tmp_path_factory.mktemp("topo") / "socialnet.json")


def thread_affinities(pid: int) -> dict[str, str]:
    """tid -> Cpus_allowed_list for every thread of `pid` alive now."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            status = (task / "status").read_text()
        except OSError:
            continue  # the thread ended between listing and reading
        for line in status.splitlines():
            if line.startswith("Cpus_allowed_list:"):
                out[task.name] = line.split(":", 1)[1].strip()
    return out


def test_every_thread_of_every_service_stays_in_its_placement(topo_json: Path, tmp_path: Path) -> None:
    cpu = str(ALLOWED[-1])
    out = tmp_path / "result.json"
    with serve(
        "tailscope-svc",
        ["--topology", str(topo_json), "--all", "--model", "std-async", "--port", "0", "--out", str(out),
         "--placement", f"{CALLER}={cpu}"],
        stop_timeout_s=30.0,
    ) as srv:  # fmt: skip
        pids = srv.ready["pids"]
        before = set(thread_affinities(pids[CALLER]))
        stop = threading.Event()

        def drive() -> None:
            conn = http.client.HTTPConnection("127.0.0.1", srv.ready["listening"], timeout=10)
            for _ in range(400):
                if stop.is_set():
                    break
                conn.request("POST", FRONT_PATH, body="text=hello @alice http://example.com")
                conn.getresponse().read()

        load = threading.Thread(target=drive)
        load.start()
        seen: dict[str, str] = {}
        others: dict[str, str] = {}
        try:
            while load.is_alive():
                seen.update(thread_affinities(pids[CALLER]))
                for name, pid in pids.items():
                    if name != CALLER:
                        others.update({f"{name}/{t}": a for t, a in thread_affinities(pid).items()})
        finally:
            stop.set()
            load.join()
    later = set(seen) - before
    assert later, "no thread was created after start: the std::async path was not exercised"
    assert set(seen.values()) == {cpu}, f"threads outside CPU {cpu}: {seen}"
    # Services without a placement keep the whole allowed set.
    assert others, "no thread of the services without a placement was seen"
    assert all(a == _cpu_list(ALLOWED) for a in others.values()), others
    doc = json.loads(out.read_text())
    placed = doc["services"][CALLER]["placement"]
    assert placed["requested_cpus"] == cpu
    assert placed["mechanism"] == "affinity"
    assert placed["applied_cpus"] == [cpu]
    assert placed["all_threads_within"] is True
    assert placed["threads"] >= len(before) + 1
    free = doc["services"]["user-service"]["placement"]
    assert free["requested_cpus"] is None and free["reason"]
    counters = doc["services"][CALLER]["counters"]
    assert counters["mode"] == "process"
    assert counters["requests"] > 0  # the service's own request counters are still there
    clock = counters["events"]["task_clock_ns"]
    assert clock["value"] > 0 and clock["time_running_ns"] > 0
    for name in ("cycles", "instructions"):
        e = counters["events"][name]
        assert e["value"] is None and e["reason"] or e["value"] > 0
    ipc = counters["derived"]["ipc"]
    assert ipc is None and counters["derived"]["reasons"]["ipc"] or ipc > 0


def _cpu_list(cpus: list[int]) -> str:
    """The kernel's compact form ("0-1", "0,2") for a sorted list."""
    parts, start = [], cpus[0]
    for a, b in zip(cpus, cpus[1:] + [None]):
        if b != a + 1:
            parts.append(str(start) if start == a else f"{start}-{a}")
            start = b
    return ",".join(parts)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--placement", f"{CALLER}=1000"], "CPU 1000 is not one this process may use"),
        (["--placement", f"{CALLER}=4095"], "'4095' is not a CPU number"),
        (["--placement", f"{CALLER}="], "leaves the service with no CPU: refused"),
        (["--placement", "no-such-service=0"], "the topology has no service 'no-such-service'"),
        (["--placement", f"{CALLER}=0", "--placement", f"{CALLER}=0"], "placed twice"),
        (["--placement-mechanism", "docker"], "--placement-mechanism: 'docker'"),
        (["--counters", "perf"], "--counters: 'perf'"),
    ],
)
def test_bad_placements_are_refused_before_any_process_starts(
    topo_json: Path, tmp_path: Path, extra: list[str], message: str
) -> None:
    out = tmp_path / "r.json"
    r = subprocess.run(
        [str(SVC), "--topology", str(topo_json), "--all", "--duration", "1", "--out", str(out), *extra],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert_refused_before_start(r, message, out)


def test_cgroup_mechanism_is_used_or_clearly_unavailable(topo_json: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    r = subprocess.run(
        [str(SVC), "--topology", str(topo_json), "--all", "--duration", "1", "--out", str(out),
         "--placement-mechanism", "cgroup", "--placement", f"{CALLER}={ALLOWED[-1]}"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    if r.returncode == 0:
        placed = json.loads(out.read_text())["services"][CALLER]["placement"]
        assert placed["mechanism"] == "cgroup" and placed["all_threads_within"] is True
    else:
        assert "cgroup v2 cpusets are unavailable here" in r.stderr
        assert not out.exists()
