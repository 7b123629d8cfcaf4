"""The Go-built lab tools (lab/tools.py, lab/hotrod.py): why a missing one is missing, and HotROD's
command line (every service on loopback, the fix flags range-checked)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tailscope.lab import hotrod, tools


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("TAILSCOPE_CACHE", str(tmp_path))
    d = tmp_path / f"jaeger-{tools.JAEGER_VERSION}"
    d.mkdir()
    return d


def test_a_built_tool_is_found(cache):
    exe = cache / "hotrod"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    assert tools.tool_path("hotrod") == exe


@pytest.mark.parametrize(
    ("stamp", "reason"),
    [
        (None, "not built yet"),
        ("skipped: no go", "no Go >= 1.23"),
        ("failed: build", "its build failed: build"),
    ],
)
def test_a_missing_tool_says_why(cache, stamp, reason):
    if stamp is not None:
        (cache / ".tailscope-jaeger").write_text(stamp + "\n")
    with pytest.raises(tools.ToolUnavailable, match=reason):
        tools.tool_path("jaeger")


def test_a_tool_that_is_not_executable_is_missing(cache):
    (cache / "jaeger").write_text("")
    with pytest.raises(tools.ToolUnavailable):
        tools.tool_path("jaeger")


def test_hotrod_binds_every_service_to_loopback():
    ports = {s: 1000 + i for i, s in enumerate(hotrod.SERVICES)}
    cmd = hotrod.command(Path("/x/hotrod"), ports, hotrod.HotrodFlags())
    for s in hotrod.SERVICES:
        i = cmd.index(f"--{s}-service-hostname")
        assert cmd[i + 1] == "127.0.0.1"
        assert cmd[cmd.index(f"--{s}-service-port") + 1] == str(ports[s])
    assert "0.0.0.0" not in cmd
    assert not {"-M", "-W", "-D"} & set(cmd)


def test_hotrod_fix_flags():
    f = hotrod.HotrodFlags(db_mutex_disabled=True, route_workers=10, db_delay_ms=150)
    assert f.args() == ["-M", "-W", "10", "-D", "150000us"]
    assert f.record()["route_workers"] == 10
    assert hotrod.HotrodFlags().record() == {
        "db_mutex_disabled": False,
        "route_workers": hotrod.DEFAULT_ROUTE_WORKERS,
        "db_delay_ms": hotrod.DEFAULT_DB_DELAY_MS,
        "args": [],
    }


@pytest.mark.parametrize(
    "kwargs", [{"route_workers": 0}, {"route_workers": 10_001}, {"db_delay_ms": -1}, {"db_delay_ms": 60_001}]
)
def test_hotrod_fix_flags_are_range_checked(kwargs):
    with pytest.raises(ValueError, match="is not in"):
        hotrod.HotrodFlags(**kwargs)


def test_a_failed_start_names_the_error_line_not_the_usage_text(tmp_path):
    log = tmp_path / "tool.log"
    log.write_text("starting\nError: listen tcp 127.0.0.1:5: bind: address already in use\nUsage:\n  tool all\n")
    reason = tools.log_reason(log)
    assert reason.startswith("Error: listen tcp 127.0.0.1:5: bind: address already in use")
    assert str(log) in reason
    log.write_text("just a line\n")
    assert tools.log_reason(log).startswith("just a line")
    assert tools.log_reason(tmp_path / "absent.log") == "no log"
