"""Study `diagnose` end to end: `tailscope bench diagnose` in a tiny form against the real HotROD and
Jaeger (skipped with the reason when the bootstrap could not build them), and the study's skip path
(no HotROD: one plan document with the reason, a section that says it)."""

from __future__ import annotations

from click.testing import CliRunner

from conftest import needs_engine, needs_go_tools
from tailscope.cli import main
from tailscope.diagnose.diagnosis import SCHEMA
from tailscope.runner import DB_NAME
from tailscope.store import Store
from tailscope.studies.diagnose import STUDY, analysis


def stored(results):
    with Store(results / DB_NAME, read_only=True) as store:
        run_id = store.latest_run_id()
        return store.documents(run_id, "diagnose"), STUDY.section(store, run_id)


def test_without_hotrod_the_study_stores_its_reason_and_the_section_says_it(tmp_path, monkeypatch):
    monkeypatch.setenv("TAILSCOPE_CACHE", str(tmp_path / "empty-cache"))
    r = CliRunner().invoke(main, ["bench", "diagnose", "--results", str(tmp_path / "results")])
    assert r.exit_code == 0, r.output
    docs, section = stored(tmp_path / "results")
    assert [(d.engine, d.point) for d in docs] == [(analysis.PLAN_ENGINE, "plan")]
    assert "not built yet" in docs[0].document["skipped"]
    assert len(section.notes) == 1 and section.notes[0].startswith("Not measured: jaeger")
    assert section.blocks == []


@needs_go_tools()
@needs_engine("tailscope-load", "tailscope-critpath")
def test_the_tiny_form_measures_hotrod_at_two_rates_and_diagnoses_each(tmp_path):
    r = CliRunner().invoke(main, ["bench", "diagnose", "--scale", "0.1", "--results", str(tmp_path / "results")])
    assert r.exit_code == 0, r.output
    docs, section = stored(tmp_path / "results")
    by_engine: dict[str, list] = {}
    for d in docs:
        by_engine.setdefault(d.engine, []).append(d)
    (plan,) = by_engine[analysis.PLAN_ENGINE]
    assert plan.document["skipped"] is None
    assert plan.document["rates_per_s"] == [1.0, 2.0]
    baselines = sorted(d.point for d in by_engine[analysis.LOAD_ENGINE] if d.document["hotrod"]["kind"] == "baseline")
    assert baselines == ["baseline@1/s", "baseline@2/s"]
    diagnoses = by_engine[analysis.DIAGNOSIS_ENGINE]
    assert sorted(d.point for d in diagnoses) == ["diagnosis@1/s", "diagnosis@2/s"]
    for d in diagnoses:
        assert d.document["schema"] == SCHEMA and d.document["traces"] > 0
        client = d.document["client"]
        assert client["joined"] == client["requests"] > 0 and client["untraced"] == 0
    for d in by_engine[analysis.LOAD_ENGINE]:
        assert d.document["hotrod"]["missing_trace_ids"] == 0
    # Every fix the plan lists was measured or says why; every fix has a stored prediction, with both
    # figures from a sped-up twin run, or none and the reason (a tiny run's twin may lack the limit).
    v = analysis.analyse(docs)
    assert len(v.fixes) == len(plan.document["fixes"])
    predictions = {d.point for d in by_engine[analysis.PREDICTION_ENGINE]}
    for f in v.fixes:
        assert f.measured is not None or f.unavailable
        assert f"prediction {f.fix['point']}" in predictions
        p = f.prediction
        if p.unavailable:
            assert p.p50_ns is None and p.p99_ns is None and f.predicted_over_measured_p99 is None
        else:
            assert p.p50_ns and p.p99_ns and p.requests > 0 and p.speed_up >= 1 and p.whatif
    # The unchanged twin ran at each baseline's rate: its error where fitted and where not.
    assert sorted((e.rate_per_s, e.fitted) for e in v.twin_errors) == [(1.0, False), (2.0, True)]
    assert [b.title for b in section.blocks][0].startswith("HotROD at its defaults")
