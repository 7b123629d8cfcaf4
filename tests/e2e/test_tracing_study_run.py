"""The tracing study end to end, tiny: one model, one pair per sampling, on real engines — the
sampling switch reaches a running graph and the report carries the tracing-cost table."""

from __future__ import annotations

from conftest import BUILD, needs_engine, run_study_alone


@needs_engine("tailscope-svc", "tailscope-load")
def test_tiny_tracing_run_stores_a_pair_per_sampling_and_reports_the_table(tmp_path, monkeypatch):
    monkeypatch.setenv("TAILSCOPE_BUILD_DIR", str(BUILD))
    from tailscope.store import Store
    from tailscope.studies.registry import study_by_name
    from tailscope.studies.socialnet.analysis import tracing_costs
    from tailscope.studies.socialnet.tracing import SWITCH_SIGNAL

    results = tmp_path / "results"
    run_id, report, _ = run_study_alone(
        study_by_name("tracing"),
        results,
        {"tracing_models": ["coroutine"], "tracing_pairs": 1, "scale": 0.15, "stores": "simulated"},
    )
    with Store(results / "tailscope.duckdb", read_only=True) as store:
        docs = [d.document for d in store.documents(run_id, "tracing")]
    assert {d["socialnet_point"]["tracing_switch"] for d in docs} == {SWITCH_SIGNAL}
    rows = tracing_costs(docs)
    assert [(r.model, r.sample, r.pairs) for r in rows] == [("coroutine", 1.0, 1), ("coroutine", 0.01, 1)]
    assert all(r.on_per_s[0] > 0 and r.off_per_s[0] > 0 for r in rows)
    html = report.read_text()
    assert "Tracing cost (100 % sampling and 1 % sampling vs off)" in html and "on one graph per row" in html
