"""The tracing study end to end, tiny: one model, two pairs per sampling inside one switched run each,
on real engines — the load generator's schedule starts on --start-at, the sampling switch reaches the
running graph on its slot boundaries, every side is read (requests and CPU), and the report carries
the tracing-cost table."""

from __future__ import annotations

from conftest import BUILD, needs_engine, run_study_alone


@needs_engine("tailscope-svc", "tailscope-load")
def test_tiny_tracing_run_switches_inside_one_run_per_sampling_and_reports_the_table(tmp_path, monkeypatch):
    monkeypatch.setenv("TAILSCOPE_BUILD_DIR", str(BUILD))
    from tailscope.store import Store
    from tailscope.studies.registry import study_by_name
    from tailscope.studies.socialnet.analysis import tracing_costs
    from tailscope.studies.socialnet.tracing import PLAN, SWITCH_SLOTS

    results = tmp_path / "results"
    run_id, report, _ = run_study_alone(
        study_by_name("tracing"),
        results,
        {"tracing_models": ["coroutine"], "tracing_pairs": 2, "scale": 0.15, "stores": "simulated"},
    )
    with Store(results / "tailscope.duckdb", read_only=True) as store:
        docs = [d.document for d in store.documents(run_id, "tracing")]
    assert len(docs) == 2 and {d["socialnet_point"]["tracing_switch"] for d in docs} == {SWITCH_SLOTS}
    for d in docs:
        sides = d["socialnet_point"]["tracing_sides"]
        assert [(s["pair"], s["on"]) for s in sides] == [(0, False), (0, True), (1, True), (1, False)]
        # Every side was read: requests from its slots, the services' CPU from their clocks. A side whose
        # switcher woke late is dropped, saying by how much (how late is the machine's, not asserted).
        assert all(s["requests"] > 0 and s["services_cpu_s"] > 0 for s in sides), sides
        assert all(s["skew_ms"] <= PLAN.max_skew_s * 1e3 or "off its slot boundary" in s["dropped"] for s in sides)
        assert d["config"]["start_late_s"] == 0  # 64 connections on loopback open well within the lead
    rows = tracing_costs(docs)
    assert [(r.model, r.sample) for r in rows] == [("coroutine", 1.0), ("coroutine", 0.01)]
    assert all(1 <= r.pairs <= 2 for r in rows)
    assert all(r.switched and r.cpu_cost is not None and all(x > 0 for x in r.on_per_s + r.off_per_s) for r in rows)
    html = report.read_text()
    assert "Tracing cost (100 % sampling and 1 % sampling vs off)" in html and "ONE closed-loop run per row" in html
