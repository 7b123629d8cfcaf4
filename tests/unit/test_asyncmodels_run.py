"""The `async` study's plan (studies/asyncmodels/run.py): which arguments each engine gets in the
quick and full forms, with the run's options. No engines are started."""

from __future__ import annotations

from pathlib import Path

from tailscope.studies.asyncmodels.run import engine_progress, plan
from tailscope.studies.base import RunContext


def _ctx(form: str, seen: list | None = None, **options) -> RunContext:
    return RunContext(form, Path("/art"), lambda what, f: (seen if seen is not None else []).append((what, f)), options)


def test_quick_plan():
    p = plan(_ctx("quick"))
    assert p.baseline_args == [
        "--only",
        "condvar_handoff,spin_handoff,thread_create",
        "--placement",
        "pinned",
        "--artifacts",
        "/art/async/baseline",
    ]
    assert p.bench_args == ["--artifacts", "/art/async", "--quick"] and p.timeout_s == 600


def test_full_plan_with_scale_and_cpus():
    p = plan(_ctx("full", scale=500, cpus="2,3"))
    assert p.baseline_args[-5:] == ["--full", "--scale", "500.0", "--cpus", "2,3"]
    # The benchmark's scale is clamped to what it accepts (0.01 … 100).
    assert p.bench_args == ["--artifacts", "/art/async", "--scale", "100.0", "--cpus", "2,3"]
    assert p.timeout_s == 3600
    assert plan(_ctx("quick", scale=0.001)).bench_args[-2:] == ["--scale", "0.01"]


def test_engine_progress_maps_onto_its_share_of_the_bar():
    seen: list = []
    on_progress = engine_progress(_ctx("quick", seen), "references", 0.0, 0.1)
    on_progress({"phase": "spin", "fraction_done": 0.5})
    on_progress({})
    assert seen == [("async: references spin", 0.05), ("async: references ", 0.0)]
