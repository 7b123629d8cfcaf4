"""Fortio, the echo thesis's load client, drives tailscope's TCP echo servers
(RFC 862, `fortio load ... tcp://`): zero errors, and a rate within an order of
magnitude of tailscope-load's against the same server.

Fortio comes from scripts/bootstrap (`go install fortio.org/fortio@<pinned>`
into .venv/bin) when Go is present. Without it the test skips, saying why. In
CI (TAILSCOPE_REQUIRE_FIXTURES=1) a missing Fortio fails when Go is present —
then the bootstrap step that should have built it is broken, which is what CI
is for — and skips when Go is absent, where the bootstrap skips by design."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, echo_server, run_load

REQUESTS = 3000
CONNECTIONS = 4


def _go_present() -> bool:
    return bool(shutil.which("go")) or Path("/usr/local/go/bin/go").exists()


def _fortio() -> Path:
    local = REPO / ".venv" / "bin" / "fortio"
    found = local if local.exists() else (Path(p) if (p := shutil.which("fortio")) else None)
    if found is not None:
        return found
    if not _go_present():
        pytest.skip("Fortio not installed: no Go toolchain, so scripts/bootstrap skipped it")
    reason = f"Fortio not found at {local} or on PATH although Go is present (run scripts/bootstrap)"
    if os.environ.get("TAILSCOPE_REQUIRE_FIXTURES") == "1":
        pytest.fail(reason + "; required here (TAILSCOPE_REQUIRE_FIXTURES=1)", pytrace=False)
    pytest.skip(reason)


@pytest.mark.serial  # compares two measured rates: run alone (docs/testing.md)
@pytest.mark.parametrize("model", ["poll", "io-uring"])
def test_fortio_tcp_echo_has_no_errors_and_a_rate_like_ours(model, tmp_path):
    fortio = _fortio()
    with echo_server(model) as (port, _):
        out = tmp_path / "fortio.json"
        r = subprocess.run(
            [
                str(fortio),
                "load",
                "-qps",
                "0",
                "-payload-size",
                "64",
                "-n",
                str(REQUESTS),
                "-c",
                str(CONNECTIONS),
                "-json",
                str(out),
                f"tcp://127.0.0.1:{port}",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, r.stderr[-2000:]
        result = json.loads(out.read_text())
        codes = result["RetCodes"]
        assert sum(codes.values()) == REQUESTS, codes
        assert codes.get("OK", 0) == REQUESTS, f"Fortio saw errors against {model}: {codes}"
        assert result["BytesReceived"] == result["BytesSent"] > 0
        fortio_per_s = float(result["ActualQPS"])

        rc, doc, err = run_load(
            port, "-c", str(CONNECTIONS), "-d", "1s", "--warmup", "0.2s", "-R", "0", "--payload-bytes", "64"
        )
    assert rc == 0, err
    assert doc is not None
    ours_per_s = float(doc["load"]["achieved_per_s"])
    assert fortio_per_s > 0 and ours_per_s > 0
    ratio = fortio_per_s / ours_per_s
    assert 0.1 <= ratio <= 10, f"Fortio {fortio_per_s:.0f}/s vs tailscope-load {ours_per_s:.0f}/s ({ratio:.2f}x)"
