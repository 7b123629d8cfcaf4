"""The socialnet section's tracing-cost table and notes (studies/socialnet/section.py), rendered from
synthetic load documents: a row per (model, sampling) with its own target and verdict, and a run
stored before the sampling was recorded (the best model's 100 % pairs only) rendered from a
temporary store. The values are tested in test_socialnet_analysis.py. No engines."""

from __future__ import annotations

from datetime import datetime

from test_socialnet_analysis import ONE_PERCENT_COST, _load_doc, _pairs, _sampled_pairs

from tailscope.report.blocks import Table
from tailscope.store import EngineDocument, RunRecord, Store
from tailscope.studies.socialnet import STUDY
from tailscope.studies.socialnet.analysis import summarize, tracing_costs
from tailscope.studies.socialnet.section import summary_notes, tracing_table

# Costs 0.2, 0.3, 0.4, 0.5, 0.6, 2.0 %: median 0.45 %, interval [0.2–2.0 %].
STRADDLING_HALF_PERCENT = [998, 997, 996, 995, 994, 980]


def _full_form_loads() -> list[dict]:
    return [
        *_sampled_pairs("std-async", 1.0, [990] * 6),  # 1 %: met at 100 %
        *_sampled_pairs("std-async", 0.01, STRADDLING_HALF_PERCENT),  # undecided at 1 %
        *_sampled_pairs("coroutine", 1.0, [970] * 6),  # 3 %: not met at 100 %
        *_sampled_pairs("coroutine", 0.01, ONE_PERCENT_COST),  # 1 %: not met at 1 %
    ]


def test_the_table_has_a_row_per_model_and_sampling_with_its_target_and_verdict():
    t = tracing_table(tracing_costs(_full_form_loads()))
    assert t.title == "Tracing cost (100 % sampling and 1 % sampling vs off)"
    col = {c: i for i, c in enumerate(t.columns)}
    assert list(col) == [
        "model",
        "sampling",
        "off /s",
        "on /s",
        "on ÷ off (median)",
        "cost [95 % interval]",
        "target",
        "verdict",
    ]
    assert [(r[col["model"]], r[col["sampling"]], r[col["target"]]) for r in t.rows] == [
        ("std-async", "100 %", "≤ 2 %"),
        ("std-async", "1 %", "≤ 0.5 %"),
        ("coroutine", "100 %", "≤ 2 %"),
        ("coroutine", "1 %", "≤ 0.5 %"),
    ]
    assert [r[col["verdict"]] for r in t.rows] == [
        "met",
        "undecided at this length: a run 961.0× as long (5\u2009766 pairs) would decide it",
        "not met",
        "not met",
    ]
    # A 1 % row's cost carries a decimal finer than its 0.5 % target.
    assert t.rows[1][col["cost [95 % interval]"]] == "0.45 % [0.20–2.00 %]"
    assert t.rows[2][col["cost [95 % interval]"]] == "3.0 % [3.0–3.0 %]"
    assert t.rows[1][col["on /s"]] == "998, 997, 996, 995, 994, 980"
    assert "6 alternated off/on pairs on fresh graphs" in t.caption
    assert "Targets: 2 % at 100 % sampling, 0.5 % at 1 %" in t.caption


def test_a_note_per_sampling_counts_the_verdicts_and_cites_the_highest_cost():
    notes = summary_notes(summarize(_full_form_loads(), {}))
    assert notes[-2:] == [
        "Target tracing at 100 % sampling ≤ 2 % throughput cost: met for 1, not met for 1 of 2 models; the highest, "
        "3.0 % on coroutine (not met; median of 6 alternated pairs, 95 % interval 3.0–3.0 %).",
        "Target tracing at 1 % sampling ≤ 0.5 % throughput cost: not met for 1, undecided at this length for 1 of 2 "
        "models; the highest, 1.00 % on coroutine (not met; median of 6 alternated pairs, 95 % interval 0.80–1.20 %).",
    ]


def test_rows_below_six_pairs_are_judged_by_the_median_and_say_why():
    t = tracing_table(tracing_costs(_pairs([990, 985, 980, 975])))  # the quick form: 4 pairs, 1.75 %
    assert len(t.rows) == 1
    assert t.rows[0][5:] == [
        "1.8 % [—]",
        "≤ 2 %",
        "met by the median (no interval: an interval of the median needs 6 alternated pairs, this run has 4)",
    ]
    assert "4 alternated off/on pairs" in t.caption and t.title == "Tracing cost (100 % sampling vs off)"


def test_a_run_stored_before_the_sampling_was_recorded_still_renders(tmp_path):
    # The old quick form: the best model's 100 % pairs, no trace_sample, point names without a sampling.
    old = [_load_doc("coroutine", "closed", 0, 3000, 60), _load_doc("coroutine", "rate", 1500, 1500, 12)]
    for off, on in [(3000, 2970), (3000, 2940), (3000, 2955), (3000, 2985)]:
        old += [_load_doc("coroutine", "tracing-off", 0, off, 50), _load_doc("coroutine", "tracing-on", 0, on, 50)]
    names = ["coroutine/closed", "coroutine/rate/1500"] + [
        f"coroutine/tracing/{side}/{i}" for i in range(4) for side in ("off", "on")
    ]
    docs = [EngineDocument("socialnet", "tailscope-load", d, n) for d, n in zip(old, names, strict=True)]
    now = datetime(2026, 1, 1, 12, 0, 0)
    with Store(tmp_path / "t.duckdb") as store:
        store.save_run(RunRecord("old", now, now, "quick", ["socialnet"], {}, "test", docs))
        sec = STUDY.section(store, "old")
    tables = [b for b in sec.blocks if isinstance(b, Table) and b.title.startswith("Tracing cost")]
    assert len(tables) == 1 and tables[0].title == "Tracing cost (100 % sampling vs off)"
    assert [r[:2] + r[6:7] for r in tables[0].rows] == [["coroutine", "100 %", "≤ 2 %"]]
    assert tables[0].rows[0][3] == "2\u2009970, 2\u2009940, 2\u2009955, 2\u2009985"
    # Costs 0.5, 1, 1.5, 2 %: median 1.25 %, judged by the median with 4 pairs.
    assert sec.notes[-1] == (
        "Target tracing at 100 % sampling ≤ 2 % throughput cost: measured 1.2 % on coroutine (met by the median of "
        "4 alternated pairs; no 95 % interval: an interval of the median needs 6 alternated pairs, this run has 4)."
    )
