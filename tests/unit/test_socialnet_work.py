"""Issue 27, real work: how graph() passes `--work`, the socialnet study's comparison of each service's
CPU per call with real work and with the busy loops it replaced (analysis.work_comparison), and its
table. No engines: documents shaped as the engine writes them (docs/microservices.md, "The work stage")."""

from __future__ import annotations

import copy
from contextlib import contextmanager

import pytest

from tailscope.lab import graph as graph_mod
from tailscope.lab.engines import Server
from tailscope.studies.common import record_stores
from tailscope.studies.socialnet import analysis
from tailscope.studies.socialnet.section import work_table


def _fake_serve(ready: dict, seen: list):
    @contextmanager
    def serve(name, args, **_kw):
        seen.append(list(args))
        yield Server(proc=None, ready=copy.deepcopy(ready))  # type: ignore[arg-type]

    return serve


@pytest.mark.parametrize(
    ("work", "passed", "recorded"), [(None, [], "real"), ("simulated", ["--work", "simulated"], "simulated")]
)
def test_graph_passes_the_work_mode_and_the_ready_line_records_it(monkeypatch, tmp_path, work, passed, recorded):
    seen: list = []
    ready = {"listening": 1, "pids": {}} | ({"work": work} if work else {})  # an engine before --work prints none
    monkeypatch.setattr(graph_mod, "serve", _fake_serve(ready, seen))
    with graph_mod.graph(tmp_path / "t.json", "coroutine", tmp_path / "o.json", work=work) as (_, got):
        assert got["work"] == recorded
    args = seen[0]
    assert (args[args.index("--work") : args.index("--work") + 2] if "--work" in args else []) == passed


def _service(calls: int, work_cpu_ns: int | None, cpu_s: float, stages: int = 1) -> dict:
    s: dict = {"counters": {"requests": calls}, "cpu": {"user_s": cpu_s * 0.75, "sys_s": cpu_s * 0.25}}
    if work_cpu_ns is not None:
        s["work"] = {"mode": "?", "stages": stages * calls, "simulated_stages": 0, "cpu_ns": work_cpu_ns}
    return s


def _graph(mode: str, services: dict, cpu_s: float = 2.0, requests: int = 1000) -> dict:
    return {
        "work": {"mode": mode},
        "services": services,
        "totals": {"cpu_s": cpu_s, "front": {"requests": requests}},
    }


def test_each_service_with_a_work_stage_gets_real_and_busy_loop_cpu_per_call():
    real = _graph(
        "real",
        {
            "text-service": _service(1000, 60_000_000, 0.2),  # 60 µs of work per call
            "unique-id-service": _service(2000, 8_000_000, 0.05),  # 4 µs per call
            "user-service": _service(1000, 0, 0.01, stages=0),  # no work stage: not a row
        },
        cpu_s=2.4,
    )
    simulated = _graph(
        "simulated",
        {
            "text-service": _service(500, 12_500_000, 0.1),  # 25 µs per call
            "unique-id-service": _service(1000, 5_000_000, 0.02),  # 5 µs per call
            "user-service": _service(500, 0, 0.01, stages=0),
        },
        cpu_s=1.0,
        requests=500,
    )
    w = analysis.work_comparison(
        {"std-async/graph-closed": real, f"std-async/{analysis.WORK_SIMULATED_GRAPH}": simulated, "x/graph": {}}
    )
    assert w is not None and w.unavailable is None
    assert (w.model, w.real_mode, w.simulated_mode) == ("std-async", "real", "simulated")
    rows = {r.service: r for r in w.services}
    assert set(rows) == {"text-service", "unique-id-service"}
    text = rows["text-service"]
    assert text.real_work_ns == pytest.approx(60e3) and text.simulated_work_ns == pytest.approx(25e3)
    assert text.work_ratio == pytest.approx(2.4)
    assert text.real_process_ns == pytest.approx(200e3) and text.simulated_process_ns == pytest.approx(200e3)
    assert rows["unique-id-service"].work_ratio == pytest.approx(0.8)
    assert w.real_cpu_per_request_ns == pytest.approx(2.4e6) and w.simulated_cpu_per_request_ns == pytest.approx(2e6)

    table = work_table(w)
    by_service = {r[0]: r for r in table.rows}
    assert by_service["text-service"][1:] == ["60 µs", "25 µs", "2.4×", "200 µs", "200 µs"]
    assert table.columns[1:3] == ["work stages, real", "work stages, simulated"]
    assert by_service["every service, per front request"][4] == "2.4 ms"


def test_no_simulated_graph_means_no_comparison_and_missing_figures_say_why():
    assert analysis.work_comparison({"std-async/graph-closed": _graph("real", {})}) is None
    only_simulated = {f"coroutine/{analysis.WORK_SIMULATED_GRAPH}": _graph("simulated", {})}
    w = analysis.work_comparison(only_simulated)
    assert w is not None and w.services == () and w.unavailable == "no closed-loop graph of coroutine was stored"
    # An engine before work counters (no `work` object): its figures are None with the reason, never 0.
    old = _graph("real", {"text-service": _service(1000, None, 0.2)})
    del old["work"]
    new = _graph("simulated", {"text-service": _service(500, 12_500_000, 0.1)})
    w = analysis.work_comparison({"m/graph-closed": old, f"m/{analysis.WORK_SIMULATED_GRAPH}": new})
    assert w is not None and w.real_mode == "real (no mode recorded)"
    (row,) = w.services
    assert row.real_work_ns is None and row.work_ratio is None and row.simulated_work_ns == pytest.approx(25e3)
    assert row.unavailable and row.unavailable.startswith("real: the graph document has no work counters")
    assert work_table(w).rows[0][1].startswith("unavailable (real: the graph document has no work counters")
    # A service that served nothing has no per-call figure.
    idle = _graph("simulated", {"text-service": _service(0, 0, 0.0)})
    w = analysis.work_comparison({"m/graph-closed": new, f"m/{analysis.WORK_SIMULATED_GRAPH}": idle})
    assert w is not None and w.services[0].unavailable == "simulated: the service served no call"


def test_every_study_document_records_the_graphs_work_mode():
    # The ready line's mode (graph() sets it, "real" from an engine before --work) ...
    assert record_stores({"load": {}}, {"work": "simulated"})["work"] == {"mode": "simulated"}
    assert record_stores({"load": {}}, {})["work"] == {"mode": "real"}
    # ... unless the engine's document has its own.
    assert record_stores({"work": {"mode": "simulated"}}, {"work": "real"})["work"] == {"mode": "simulated"}
