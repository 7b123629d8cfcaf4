"""tailscope-svc end to end: the socialnet compose-post graph (12 processes on
loopback) under every concurrency model, its span tree, and its faults.

Skipped when the engine is not built (build/release/bin, or $TAILSCOPE_BUILD_DIR/bin). The study's
analysis (documents → values) is tested without engines in tests/unit/test_socialnet_analysis.py.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import engine_path, needs_engine, svc_models
from tailscope.lab import topology
from tailscope.lab.engines import serve
from tailscope.lab.graph import PATH as FRONT_PATH

SVC = engine_path("tailscope-svc")
MODELS = svc_models()


@pytest.fixture(scope="module")
def topo_json(tmp_path_factory) -> Path:
    return topology.to_engine_json(topology.SOCIALNET, tmp_path_factory.mktemp("topo") / "socialnet.json")


@contextmanager
def running_graph(topo: Path, model: str, tmp: Path, *extra: str):
    """Starts `tailscope-svc --all`; yields (ready line, path of the result document, process)."""
    out = tmp / f"result-{model}.json"
    with serve(
        "tailscope-svc",
        ["--topology", str(topo), "--all", "--model", model, "--port", "0", "--out", str(out), *extra],
        stop_timeout_s=30.0,
    ) as srv:
        yield srv.ready, out, srv.proc
    assert srv.proc.returncode != -signal.SIGKILL, "tailscope-svc --all did not stop within 30 s of SIGTERM"


def compose(conn: http.client.HTTPConnection) -> int:
    conn.request("POST", FRONT_PATH, body="text=hello @alice http://example.com")
    resp = conn.getresponse()
    resp.read()
    return resp.status


def front(ready: dict, timeout_s: float = 5.0) -> http.client.HTTPConnection:
    return http.client.HTTPConnection("127.0.0.1", ready["listening"], timeout=timeout_s)


# ---- topology (tailscope-svc --check-topology validates it) -------------------------------------


@needs_engine("tailscope-svc")
def test_socialnet_topology_has_twelve_services_and_deathstarbench_spans():
    doc = topology.load(topology.SOCIALNET)
    assert len(topology.services(doc)) == 12
    text = json.dumps(doc)
    for span in (
        "compose_post_server",
        "compose_text_client",
        "compose_creator_client",
        "compose_media_client",
        "compose_unique_id_client",
        "store_post_client",
        "write_user_timeline_client",
        "write_home_timeline_client",
        "compose_urls_client",
        "compose_user_mentions_client",
        "get_followers_client",
        "url_mongo_insert_client",
    ):
        assert f'"{span}"' in text, span


@pytest.mark.parametrize(
    "mutate, message",
    [
        (
            lambda d: d["services"][1]["endpoints"][0]["stages"][1]["group"]["calls"][0].update(service="nope"),
            "unknown service 'nope'",
        ),
        (
            lambda d: d["services"][1]["endpoints"][0]["stages"][1]["group"]["calls"][0].update(endpoint="nope"),
            "has no endpoint 'nope'",
        ),
        (
            lambda d: d["services"][10]["endpoints"][0]["stages"].append(
                {"call": {"service": "compose-post-service", "endpoint": "compose_post"}}
            ),
            "call cycle",
        ),
    ],
)
@needs_engine("tailscope-svc")
def test_topology_errors_are_clear(mutate, message, tmp_path):
    doc = topology.load(topology.SOCIALNET)
    mutate(doc)
    with pytest.raises(topology.TopologyError, match=message):
        topology.validate(doc, "t")
    # The engine says the same thing when it starts the graph.
    bad = topology.write_json(doc, tmp_path / "bad.json")
    r = subprocess.run([str(SVC), "--topology", str(bad), "--all"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and message.split("'")[0] in r.stderr, r.stderr


# ---- end to end ---------------------------------------------------------------------------------


@needs_engine("tailscope-svc")
@pytest.mark.parametrize("model", MODELS)
def test_each_model_serves_light_load(model, topo_json, tmp_path):
    with running_graph(topo_json, model, tmp_path) as (ready, out, proc):
        conn = front(ready)
        statuses = [compose(conn) for _ in range(30)]
        conn.close()
        assert statuses == [200] * 30
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    doc = json.loads(out.read_text())
    assert doc["schema"] == "tailscope.result/1"
    assert len(doc["services"]) == 12
    assert doc["totals"]["front"]["ok"] == 30
    assert doc["services"]["social-graph-service"]["counters"]["requests"] == 30
    # Every process switched at least once serving 30 requests; the decomposition divides this total.
    assert doc["totals"]["ctx_switches"] > 0
    assert all(s["model"] == model for s in doc["services"].values())


# The services whose busy loop is real work in socialnet.yaml (docs/microservices.md, "Real work").
WORK_SERVICES = {
    "text-service",
    "url-shorten-service",
    "unique-id-service",
    "compose-post-service",
    "post-storage-service",
}


@needs_engine("tailscope-svc")
def test_socialnet_and_hotel_keep_the_busy_loop_beside_each_work_stage():
    def work_stages(doc: dict) -> dict[str, list[dict]]:
        return {
            s["name"]: [st["work"] for e in s["endpoints"] for st in e["stages"] if "work" in st]
            for s in doc["services"]
            if any("work" in st for e in s["endpoints"] for st in e["stages"])
        }

    social = work_stages(topology.load(topology.SOCIALNET))  # loading validates through the engine
    assert set(social) == WORK_SERVICES
    assert {w["kind"] for ws in social.values() for w in ws} == {"text", "url_hash", "unique_id", "post_serde"}
    hotel = work_stages(topology.load(topology.REPO_ROOT / "topologies" / "hotel.yaml"))
    assert set(hotel) == {"rate", "profile"}
    assert all("simulated_cpu" in w for ws in [*social.values(), *hotel.values()] for w in ws)


@needs_engine("tailscope-svc")
@pytest.mark.parametrize("work", ["real", "simulated"])
def test_the_work_mode_runs_real_work_or_the_busy_loops_and_is_recorded(work, topo_json, tmp_path):
    with running_graph(topo_json, "coroutine", tmp_path, "--work", work) as (ready, out, proc):
        assert ready["work"] == work
        conn = front(ready)
        assert [compose(conn) for _ in range(20)] == [200] * 20
        conn.close()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    doc = json.loads(out.read_text())
    assert doc["work"] == {"mode": work}
    for name, s in doc["services"].items():
        w = s["work"]
        assert w["mode"] == work, name
        if name in WORK_SERVICES:
            assert w["stages"] == s["counters"]["requests"] > 0, name  # one work stage per call
            assert w["simulated_stages"] == (w["stages"] if work == "simulated" else 0), name
            assert w["cpu_ns"] > 0, name
        else:
            assert w["stages"] == 0 and w["cpu_ns"] == 0, name


@needs_engine("tailscope-svc")
def test_an_unknown_work_mode_is_refused_naming_the_flag(topo_json):
    r = subprocess.run(
        [str(SVC), "--topology", str(topo_json), "--all", "--work", "busy"], capture_output=True, text=True, timeout=30
    )
    assert r.returncode != 0 and "--work" in r.stderr, r.stderr


@needs_engine("tailscope-svc")
def test_span_tree_of_one_request_matches_the_topology(topo_json, tmp_path):
    traces = tmp_path / "traces"
    with running_graph(topo_json, "std-async", tmp_path, "--trace-sample", "1", "--traces", str(traces)) as (
        ready,
        out,
        proc,
    ):
        conn = front(ready)
        assert compose(conn) == 200
        conn.close()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    jaeger = json.loads((traces / "traces.jaeger.json").read_text())
    assert len(jaeger["data"]) == 1
    trace = jaeger["data"][0]
    services = {p["serviceName"] for p in trace["processes"].values()}
    assert len(services) == 12
    otlp = json.loads((traces / "traces.otlp.json").read_text())
    assert len(otlp["resourceSpans"]) == 12
    # The lossless span files carry the probe stamps (Unix ns).
    spans = [json.loads(line) for f in (traces / "parts").glob("*.spans.jsonl") for line in f.read_text().splitlines()]
    by_op = {s["operation"]: s for s in spans}
    by_id = {s["span_id"]: s for s in spans}

    def parent(op: str) -> str:
        return by_id[by_op[op]["parent_span_id"]]["operation"]

    assert by_op["/wrk2-api/post/compose"]["parent_span_id"] == ""
    assert parent("compose_post_server") == "compose_post_client"
    for client in (
        "compose_text_client",
        "compose_creator_client",
        "compose_media_client",
        "compose_unique_id_client",
        "store_post_client",
        "write_user_timeline_client",
        "write_home_timeline_client",
    ):
        assert parent(client) == "compose_post_server", client
    assert parent("compose_urls_client") == "compose_text_server"
    assert parent("compose_user_mentions_client") == "compose_text_server"
    assert parent("url_mongo_insert_client") == "compose_urls_server"
    assert parent("get_followers_client") == "write_home_timeline_server"
    probe = {op: by_op[op]["probe"] for op in by_op if "probe" in by_op[op]}
    phase1 = ["compose_unique_id_client", "compose_creator_client", "compose_media_client", "compose_text_client"]
    # Phase 1 in parallel: all four launched before the first join.
    assert max(probe[o]["trigger_async_fn"] for o in phase1) <= min(probe[o]["request_val"] for o in phase1)
    # Joined in the order unique-id, user, media, text.
    for a, b in zip(phase1, phase1[1:]):
        assert probe[a]["val_received"] <= probe[b]["request_val"], (a, b)
    # Phase 2: store-post async; the two timelines deferred, run one after the other when requested.
    utl, htl, sp = probe["write_user_timeline_client"], probe["write_home_timeline_client"], probe["store_post_client"]
    assert utl["deferred"] and htl["deferred"] and not sp["deferred"]
    assert sp["val_received"] <= utl["request_val"] <= utl["fn_start"]
    assert utl["val_received"] <= htl["request_val"] <= htl["fn_start"]
    assert max(probe[o]["val_received"] for o in phase1) <= sp["trigger_async_fn"]


@needs_engine("tailscope-svc")
def test_killed_downstream_gives_5xx_then_recovers(topo_json, tmp_path):
    with running_graph(topo_json, "pool-callback", tmp_path, "--timeout-ms", "300", "--restart-ms", "1500") as (
        ready,
        out,
        proc,
    ):
        conn = front(ready)
        assert compose(conn) == 200
        os.kill(ready["pids"]["text-service"], signal.SIGKILL)
        time.sleep(0.1)
        # A hang would end in the client's 5 s socket timeout (an exception), not in a status.
        status = compose(conn)
        assert status >= 500
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if compose(conn) == 200:
                break
            time.sleep(0.1)
        else:
            pytest.fail("the graph did not recover after text-service was restarted")
        conn.close()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    doc = json.loads(out.read_text())
    assert [r["service"] for r in doc["totals"]["restarts"]] == ["text-service"]
    assert doc["totals"]["front"]["errors"] >= 1
    # The caller of the dead service saw the failure as a failed call (error or timeout), not as nothing.
    caller = doc["services"]["compose-post-service"]["counters"]
    assert caller["errors"] + caller["timeouts"] >= 1, caller


@needs_engine("tailscope-svc")
def test_malformed_frames_close_the_connection_and_are_counted(topo_json, tmp_path):
    with running_graph(topo_json, "coroutine", tmp_path) as (ready, out, proc):
        port = ready["ports"]["user-service"]
        for junk in (b"GET / HTTP/1.1\r\n\r\n", b"\x00\x00\x00\x30XX" + b"\x00" * 44, b"\xff\xff\xff\xff"):
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(junk)
                assert s.recv(1) == b""  # closed by the service
        conn = front(ready)
        assert compose(conn) == 200  # the service still serves everyone else
        conn.close()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    doc = json.loads(out.read_text())
    assert doc["services"]["user-service"]["counters"]["malformed_frames"] == 3


@needs_engine("tailscope-svc")
def test_starved_pool_blocking_reports_timeouts_and_never_hangs(topo_json, tmp_path):
    with running_graph(
        topo_json, "pool-blocking", tmp_path, "--workers", "1", "--queue", "2", "--timeout-ms", "200"
    ) as (ready, out, proc):
        statuses: list[int] = []
        lock = threading.Lock()

        def client() -> None:
            conn = front(ready, timeout_s=10)
            for _ in range(4):
                st = compose(conn)
                with lock:
                    statuses.append(st)
            conn.close()

        threads = [threading.Thread(target=client) for _ in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not any(t.is_alive() for t in threads), "a client hung"
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert len(statuses) == 48
    failed = sum(1 for s in statuses if s >= 500)
    assert failed > 0
    doc = json.loads(out.read_text())
    # Every request got an answer, and every failed answer is accounted for by the front.
    assert doc["totals"]["front"]["ok"] + doc["totals"]["front"]["errors"] == 48, doc["totals"]["front"]
    assert doc["totals"]["front"]["errors"] == failed
    reported = sum(s["counters"]["timeouts"] + s["counters"]["rejections"] for s in doc["services"].values())
    assert reported > 0


# ---- the HTTP front's answers to bad requests ----------------------------------------------------


def _reply_until_close(port: int, request: bytes) -> bytes:
    """Sends one request and reads until the server closes (the socket timeout only guards a hang)."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(request)
        reply = b""
        while chunk := s.recv(4096):
            reply += chunk
        return reply


@needs_engine("tailscope-svc")
@pytest.mark.parametrize("model", ["std-thread", "pool-callback"])  # both server shapes
@pytest.mark.parametrize(
    "request_bytes, status",
    [
        (b"\x01\x02 garbage\r\n\r\n", 400),
        (b"POST /wrk2-api/post/compose HTTP/1.1\nHost: front\n\n", 400),  # bare LF
        (b"POST /wrk2-api/post/compose HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 501),
    ],
)
def test_http_front_answers_bad_requests_with_a_status_line_and_closes(
    model, request_bytes, status, topo_json, tmp_path
):
    with running_graph(topo_json, model, tmp_path) as (ready, out, proc):
        reply = _reply_until_close(ready["listening"], request_bytes)
        assert reply.startswith(f"HTTP/1.1 {status} ".encode()), reply
        assert b"\r\nConnection: close\r\n" in reply
        conn = front(ready)
        assert compose(conn) == 200  # everyone else is still served
        conn.close()


@needs_engine("tailscope-svc")
def test_blocking_pools_close_connections_a_burst_left_idle(topo_json, tmp_path):
    """std-thread's client pools grow to a burst's concurrency; with --pool-idle-s they shrink
    back once those connections idle, instead of keeping the high-water mark (make soak saw a
    +30 % fd 'growth' that was one burst's pools)."""
    from tailscope.studies.soak import sample_process

    with running_graph(topo_json, "std-thread", tmp_path, "--pool-idle-s", "0.3") as (ready, out, proc):
        pid = int(ready["pids"]["compose-post-service"])
        # Settle first: connections the graph's start-up opened close once idle (at a pool's next
        # borrow), so a base read at once could sit above the burst's high-water mark.
        for _ in range(2):
            conn = front(ready)
            assert compose(conn) == 200
            conn.close()
            time.sleep(0.6)
        conn = front(ready)
        assert compose(conn) == 200  # the pools close what idled through the sleeps above
        conn.close()
        base = sample_process("compose-post", pid).fds
        barrier = threading.Barrier(12)
        statuses: list[int] = []

        def burst() -> None:
            conn = front(ready, timeout_s=20)
            barrier.wait()
            statuses.append(compose(conn))
            conn.close()

        callers = [threading.Thread(target=burst) for _ in range(12)]
        for t in callers:
            t.start()
        for t in callers:
            t.join()
        assert statuses == [200] * 12
        high = sample_process("compose-post", pid).fds
        time.sleep(1.0)  # every pooled connection is now idle for longer than 0.3 s
        conn = front(ready)
        assert compose(conn) == 200  # each pool it calls closes its expired connections
        conn.close()
        low = sample_process("compose-post", pid).fds
        assert base is not None and high is not None and low is not None
        assert high > base, "the burst opened no extra pooled connection"
        assert low < high, f"pools kept the burst's connections: {base} → {high} → {low} fds"
    config = json.loads(out.read_text())["config"]
    assert config["pool_idle_s"] == 0.3


@needs_engine("tailscope-svc")
def test_ping_reads_the_services_cpu_in_nanoseconds(topo_json, tmp_path):
    """CPU per RPC from the service's POSIX CPU-time clock, not /proc's 10 ms ticks (a few
    thousand pings of ~8 µs each were off by tens of percent)."""
    with running_graph(topo_json, "coroutine", tmp_path) as (ready, out, proc):
        port, pid = ready["ports"]["unique-id-service"], ready["pids"]["unique-id-service"]
        r = subprocess.run(
            [str(SVC), "--ping", str(port), "--ping-pid", str(pid), "--ping-calls", "300", "--ping-warmup", "20"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert r.returncode == 0, r.stderr
    p = json.loads(r.stdout)["ping"]
    assert p["ok"] == 300
    assert p["server_cpu_clock"] == "posix_cpu_clock"
    assert p["server_cpu_s"] > 0 and p["cpu_per_call_ns"] > p["client_cpu_per_call_ns"]
