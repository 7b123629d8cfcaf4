"""A twin whose stages carry `shared` (docs/twin.md "Correlated stage delays") runs end to end, and
two stages of one request in two services move together: the request's common factor is derived
from its trace id in each service. Behaviour only (rank correlations), no timing bound."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from conftest import needs_engine
from tailscope.traces.spans import Span
from tailscope.twin.validate import run_twin

pytestmark = needs_engine("tailscope-svc", "tailscope-load")


def topology(shared: float) -> dict:
    def read(span: str) -> dict:
        latency = {"kind": "lognormal", "median_us": 400, "sigma": 0.8, "shared": shared}
        return {"store": {"span": span, "system": "memcached", "latency": latency}}

    return {
        "name": "correlated",
        "call_timeout_ms": 2000,
        "front": {"service": "a", "path": "/x", "endpoint": "run"},
        "services": [
            {
                "name": "a",
                "endpoints": [
                    {"name": "run", "stages": [read("a_read"), {"call": {"service": "b", "endpoint": "get"}}]}
                ],
            },
            {"name": "b", "endpoints": [{"name": "get", "stages": [read("b_read")]}]},
        ],
    }


def durations(root: Span, name: str) -> list[int]:
    out, stack = [], [root]
    while stack:
        s = stack.pop()
        if s.operation == name:
            out.append(s.end_ns - s.start_ns)
        stack.extend(s.children)
    return out


@pytest.mark.parametrize("shared", [0.95, 0.0])
def test_stages_of_one_request_in_two_services_move_together(shared: float, tmp_path) -> None:
    run = run_twin(topology(shared), "coroutine", 150.0, duration_s=2.0, warmup_s=0.5, connections=8, workdir=tmp_path)
    pairs = [
        (a[0], b[0])
        for t in run.traces.traces
        if len(a := durations(t.root, "a_read")) == 1 and len(b := durations(t.root, "b_read")) == 1
    ]
    assert len(pairs) >= 150, f"{len(pairs)} traces with both reads"
    rho = float(spearmanr(np.array(pairs)[:, 0], np.array(pairs)[:, 1]).statistic)
    if shared:
        assert rho > 0.6, rho  # λ² = 0.9 in the normals, less the timers' own noise
    else:
        assert abs(rho) < 0.25, rho
