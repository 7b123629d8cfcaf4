"""Lab hosts (`tailscope hosts`): namespaces on a bridge, built and removed without a
trace, idempotent, clean after a failure mid-`up`, and a TCP echo between two hosts.

The tests use their own prefix (`tst`) and subnet so they never touch a lab the
user has up (prefix `ts`). Root is needed for everything that changes the kernel;
those tests skip with the reason otherwise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from conftest import echo_server_in_lab_host, engine_path, needs_engine, needs_root
from tailscope.cli import main
from tailscope.lab import labhosts

# Lab namespaces (and their global list) are shared by the whole machine: these tests run
# alone, after the parallel part of `make test-python` (docs/testing.md).
pytestmark = pytest.mark.serial


ECHO = engine_path("tailscope-echo")
PREFIX = "tst"
SUBNET = "198.19.254.0/28"


def kernel_view() -> tuple[list[str], list[str]]:
    """Every namespace and every link, as `ip` lists them."""
    ns = sorted(
        n["name"]
        for n in json.loads(
            subprocess.run(["ip", "-j", "netns", "list"], capture_output=True, text=True, check=True).stdout or "[]"
        )
    )
    links = sorted(
        link["ifname"]
        for link in json.loads(
            subprocess.run(["ip", "-j", "link", "show"], capture_output=True, text=True, check=True).stdout
        )
    )
    return ns, links


@pytest.fixture
def lab(tmp_path, monkeypatch):
    """A config for the test lab; whatever the test made is removed afterwards, even on failure."""
    monkeypatch.setattr(labhosts, "STATE_DIR", tmp_path / "state")
    before = kernel_view()
    yield labhosts.validate(2, SUBNET, PREFIX)
    labhosts.down(PREFIX, stop_processes=True)
    assert kernel_view() == before


# ---- input checks (no root needed) ---------------------------------------------------------------


@pytest.mark.parametrize(
    "hosts, subnet, prefix, message",
    [
        (0, "198.18.0.0/24", "ts", "--hosts 0"),
        (65, "198.18.0.0/24", "ts", "--hosts 65"),
        (2, "192.0.2.0/24", "ts", "198.18.0.0/15"),
        (2, "198.20.0.0/24", "ts", "198.18.0.0/15"),
        (2, "198.18.0.1/24", "ts", "not an IPv4 network"),
        (2, "banana", "ts", "not an IPv4 network"),
        (4, "198.18.0.0/30", "ts", "2 usable addresses, 5 needed"),
        (2, "198.18.0.0/24", "TS-1", "--prefix"),
    ],
)
def test_bad_input_is_refused_with_the_input_named(hosts, subnet, prefix, message):
    with pytest.raises(labhosts.LabError, match=message) as e:
        labhosts.validate(hosts, subnet, prefix)
    assert e.value.exit_code == labhosts.EXIT_BAD_INPUT


def test_cli_bad_subnet_exits_2():
    r = CliRunner().invoke(main, ["hosts", "up", "--subnet", "203.0.113.0/24"])
    assert r.exit_code == 2 and "198.18.0.0/15" in r.output


def test_without_root_a_clear_message(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    r = CliRunner().invoke(main, ["hosts", "up", "--prefix", PREFIX, "--subnet", SUBNET])
    assert r.exit_code == labhosts.EXIT_NOT_PERMITTED
    assert "needs root" in r.output


def test_qdisc_probe_reports_each_shaper_and_refuses_an_unknown_one():
    checks = labhosts.qdisc_checks()
    assert [c.name for c in checks] == ["sch_netem", "sch_tbf", "sch_htb"]
    assert all(c.verdict in ("ok", "warn", "unavailable") for c in checks)
    if os.geteuid() == 0:
        available, detail = labhosts.probe_qdisc("no_such_qdisc_kind")
        assert available is False and "refused" in detail


# ---- the kernel side (root) ----------------------------------------------------------------------


@needs_root
def test_up_then_down_leaves_namespaces_and_links_exactly_as_before(lab):
    before = kernel_view()
    state = labhosts.up(lab)
    assert [h.name for h in state.hosts] == ["tst-h1", "tst-h2"]
    assert [h.address for h in state.hosts] == ["198.19.254.2/28", "198.19.254.3/28"]
    ns, links = kernel_view()
    assert set(ns) - set(before[0]) == {"tst-h1", "tst-h2"}
    assert set(links) - set(before[1]) == {"tst-br0", "tst-h1-br", "tst-h2-br"}
    # Each host: loopback up, no default route (the lab cannot reach any other network).
    for h in ("tst-h1", "tst-h2"):
        lo = json.loads(
            subprocess.run(
                ["ip", "-n", h, "-j", "link", "show", "lo"], capture_output=True, text=True, check=True
            ).stdout
        )[0]
        assert "UP" in lo["flags"]
        routes = subprocess.run(["ip", "-n", h, "route", "show", "default"], capture_output=True, text=True).stdout
        assert routes.strip() == ""
    removed = labhosts.down(PREFIX)
    assert set(removed) == {"tst-h1", "tst-h2", "tst-br0", "tst-h1-br", "tst-h2-br"}
    assert kernel_view() == before


@needs_root
def test_up_twice_is_a_no_op_and_another_shape_is_refused(lab):
    first = labhosts.up(lab)
    view = kernel_view()
    second = labhosts.up(lab)
    assert kernel_view() == view
    assert [h.address for h in second.hosts] == [h.address for h in first.hosts]
    with pytest.raises(labhosts.LabError, match="already up with 2 hosts") as e:
        labhosts.up(labhosts.validate(3, SUBNET, PREFIX))
    assert e.value.exit_code == labhosts.EXIT_REFUSED
    assert kernel_view() == view


@needs_root
def test_a_failure_mid_up_leaves_nothing(lab, monkeypatch):
    before = kernel_view()
    real_ip = labhosts._ip
    calls = {"n": 0}

    def failing_ip(*args, **kw):
        if args[:2] == ("addr", "add") and kw.get("netns") == "tst-h2":
            raise KeyboardInterrupt  # the user's Ctrl-C, half way through the second host
        calls["n"] += 1
        return real_ip(*args, **kw)

    monkeypatch.setattr(labhosts, "_ip", failing_ip)
    with pytest.raises(KeyboardInterrupt):
        labhosts.up(lab)
    monkeypatch.setattr(labhosts, "_ip", real_ip)
    assert calls["n"] > 5
    assert kernel_view() == before
    assert not lab.state_file.exists()


@needs_root
def test_a_lab_left_by_a_killed_up_is_cleaned_by_the_next_up(lab):
    # What a SIGKILL'd `up` leaves: the state file says "building", a namespace and the bridge exist.
    labhosts._write_state_file(lab, "building")
    subprocess.run(["ip", "link", "add", "tst-br0", "type", "bridge"], check=True)
    subprocess.run(["ip", "netns", "add", "tst-h1"], check=True)
    assert labhosts.state(PREFIX).status == "building"
    logs: list[str] = []
    state = labhosts.up(lab, log=logs.append)
    assert any("half-made" in m for m in logs)
    assert state.status == "up" and [h.address for h in state.hosts] == ["198.19.254.2/28", "198.19.254.3/28"]


@needs_root
def test_down_refuses_while_a_process_runs_inside_and_stop_ends_it(lab):
    labhosts.up(lab)
    sleeper = subprocess.Popen([*labhosts.exec_args("tst-h1"), "sleep", "60"])
    try:
        deadline = time.monotonic() + 10
        while not labhosts.state(PREFIX).hosts[0].pids and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.raises(labhosts.LabError, match="still running inside lab hosts") as e:
            labhosts.down(PREFIX)
        assert e.value.exit_code == labhosts.EXIT_REFUSED
        assert labhosts.state(PREFIX).status == "up"
        labhosts.down(PREFIX, stop_processes=True)
        assert sleeper.wait(timeout=10) != 0
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
            sleeper.wait()


CLIENT = """
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
s.sendall(b"tailscope-lab")
got = b""
while len(got) < 13:
    chunk = s.recv(64)
    if not chunk:
        break
    got += chunk
print(got.decode())
"""


@needs_root
@needs_engine("tailscope-echo")
def test_tcp_echo_between_two_lab_hosts(lab):
    state = labhosts.up(lab)
    h1_addr = state.hosts[0].address.split("/")[0]
    with echo_server_in_lab_host(ECHO, "tst-h1", h1_addr) as port:
        r = subprocess.run(
            [*labhosts.exec_args("tst-h2"), sys.executable, "-c", CLIENT, h1_addr, str(port)],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == "tailscope-lab"
