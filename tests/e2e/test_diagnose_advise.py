"""`tailscope diagnose --advise` end to end (docs/diagnose.md "Advice in the user's terms"): Jaeger JSON
through the engine's reader, the diagnosis, the inferred twin checked by the engine's validator, the
what-ifs, their ranking and the document — with the twin runs fabricated (tailscope.twin.ladder.run_twin
replaced), so no graph runs and nothing is timed; and an interrupted advice writes nothing."""

from __future__ import annotations

import json

from click.testing import CliRunner
from test_diagnose_command import locked_requests
from test_twin import jaeger, write

from conftest import needs_engine
from tailscope.cli import main
from tailscope.traces.spans import TraceSet
from tailscope.twin import ladder as ladder_mod
from tailscope.twin.validate import TwinRun

pytestmark = needs_engine("tailscope-critpath", "tailscope-svc")


def fabricated(monkeypatch, runs: list, *, interrupt_after: int | None = None):
    def run_twin(topo, model, rate, **_):
        runs.append((model, rate))
        if interrupt_after is not None and len(runs) > interrupt_after:
            raise KeyboardInterrupt
        load = {
            "load": {"requested_per_s": rate, "achieved_per_s": rate, "errors_total": 0},
            "measurements": [
                {"name": "latency_intended", "latency": {"count": 300, "percentiles": {"50": 2e6, "99": 9e6}}}
            ],
        }
        return TwinRun(TraceSet([], [], {}, 0), load, {}, rate, 1.0)

    monkeypatch.setattr(ladder_mod, "run_twin", run_twin)


def test_advise_writes_the_advice_document_with_the_diagnosis(tmp_path, monkeypatch):
    path = write(tmp_path, jaeger(locked_requests(300, seed=2)))
    out = tmp_path / "advice.json"
    runs: list = []
    fabricated(monkeypatch, runs)
    r = CliRunner().invoke(
        main, ["diagnose", str(path), "--advise", "--duration-s", "1", "--faster-percent", "25", "--json", str(out)]
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    assert doc["schema"] == "tailscope.diagnosis.advice/1"
    assert doc["diagnosis"]["schema"] == "tailscope.diagnosis/1"
    assert doc["faster_percent"] == 25 and doc["objective_ms"] == 50
    assert {m for m, _ in runs} == {"std-async"}
    # The lock the diagnosis found: raised and removed where the inferred twin carries it, else listed as
    # not modelled with the reason — never dropped.
    runnable = [x for x in doc["ranked"] if x["kind"] == "capacity"]
    limits = [x for x in doc["not_run"] if x["kind"] == "capacity"]
    assert all("no capacity there" in x["unavailable"] for x in limits)
    assert "db:query_server" in {x["evidence"]["population"] for x in runnable + limits}
    assert all(x["to"] in (2, "removed") for x in runnable)
    (cores,) = [x for x in doc["not_run"] if x["kind"] == "cores"]
    assert "every CPU" in cores["unavailable"]
    faster = [x for x in doc["ranked"] if x["kind"] == "faster"]
    assert faster and all("25 % faster" in x["sentence"] for x in faster)
    # The twin's traces were empty: the validation at the recorded rate is unavailable, with why.
    assert doc["validation"]["recorded_rate"]["max_ratio_error"] is None
    assert doc["validation"]["recorded_rate"]["unavailable"]
    assert "advice: twin of 300 traces under std-async" in r.output
    assert "baseline (no change): at " in r.output


def test_interrupted_advice_stops_and_writes_nothing(tmp_path, monkeypatch):
    path = write(tmp_path, jaeger(locked_requests(300, seed=3)))
    out = tmp_path / "advice.json"
    fabricated(monkeypatch, [], interrupt_after=2)
    r = CliRunner().invoke(main, ["diagnose", str(path), "--advise", "--duration-s", "1", "--json", str(out)])
    assert r.exit_code != 0
    assert "interrupted: every twin was stopped, nothing written" in r.output
    assert not out.exists()


def test_a_validation_document_of_another_kind_is_refused(tmp_path, monkeypatch):
    path = write(tmp_path, jaeger(locked_requests(100, seed=4)))
    v = tmp_path / "v.json"
    v.write_text(json.dumps({"schema": "tailscope.diagnosis/1"}))
    fabricated(monkeypatch, [])
    r = CliRunner().invoke(main, ["diagnose", str(path), "--advise", "--validation", str(v)])
    assert r.exit_code == 1 and "tailscope.twin.validation/1 document is needed" in r.output
