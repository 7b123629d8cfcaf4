"""The self-contained HTML report of one run (regenerated from the store)."""

from __future__ import annotations

import html
from datetime import datetime
from pathlib import Path

import jinja2

from tailscope.atomicfile import write_text_atomic
from tailscope.report.blocks import (
    DOES_NOT_HOLD,
    HOLDS,
    NOT_COMPARABLE,
    PARTLY,
    UNAVAILABLE,
    Figure,
    ReferenceCheck,
    Section,
    Source,
    Table,
    reference_table,
)
from tailscope.units import fmt_count

__all__ = [
    "Figure",
    "ReferenceCheck",
    "Section",
    "Source",
    "Table",
    "machine_rows",
    "reference_overview",
    "render_report",
    "report_sections",
]

_HERE = Path(__file__).parent


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(_HERE)),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
    )
    env.tests["figure"] = lambda b: isinstance(b, Figure)
    env.tests["table"] = lambda b: isinstance(b, Table)
    return env


def machine_rows(machine: dict) -> list[tuple[str, str]]:
    mem = machine.get("mem_total_bytes")
    rl = machine.get("rlimit_nofile") or ["?", "?"]
    return [
        ("CPU", str(machine.get("cpu_model", "unknown"))),
        ("cores", f"{machine.get('online_cpus')} online, allowed {machine.get('allowed_cpus')}"),
        ("kernel", str(machine.get("kernel"))),
        ("governor", str(machine.get("governor"))),
        ("memory", f"{mem / 2**30:.1f} GiB" if isinstance(mem, (int, float)) else "unknown"),
        ("open files", f"soft {rl[0]}, hard {rl[1]}"),
        ("perf counters", str(machine.get("perf", "not checked"))),
        ("io_uring", str(machine.get("io_uring", "not checked"))),
        ("host", str(machine.get("hostname"))),
    ]


def report_sections(study_sections: list[Section], failed: list[tuple[str, str]]) -> list[Section]:
    """The page's sections: the reference overview first (when any section compared with a
    reference), the studies' own sections, then the studies that failed (name, reason)."""
    sections = list(study_sections)
    overview = reference_overview(sections)
    if overview is not None:
        sections.insert(0, overview)
    if failed:
        sec = Section(
            "failures",
            "Studies that did not complete",
            "These studies failed in this run; their figures are absent, not zero.",
        )
        sec.notes = [f"{name}: {html.escape(reason)}" for name, reason in failed]
        sections.append(sec)
    return sections


def reference_overview(sections: list[Section]) -> Section | None:
    """Every reference result the sections compared with this run, in one table at the top of the
    report (each section keeps its own table beside its figures); None when no section has one."""
    checks = [(s, c) for s in sections for c in s.references]
    if not checks:
        return None
    counts = {v: sum(1 for _, c in checks if c.verdict == v) for v in (HOLDS, PARTLY, DOES_NOT_HOLD, NOT_COMPARABLE)}
    unavailable = sum(1 for _, c in checks if c.verdict == UNAVAILABLE)
    summary = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    sec = Section(
        "references",
        "Reference results: does each shape hold here?",
        "The reference studies' central results beside this run's, as computed in each section below "
        f"({len(checks)} compared: {summary or 'none judged'}"
        + (f"; {unavailable} unavailable" if unavailable else "")
        + "). Each row quotes its source (document, section or figure); “not comparable here” names the part "
        "of the reference's setup or load this run did not reproduce.",
    )
    table = reference_table([c for _, c in checks], "Reference results beside this run")
    table.columns.insert(1, "section")
    for row, (s, _) in zip(table.rows, checks, strict=True):
        row.insert(1, s.id)  # the anchor of the section that shows it (#id)
    table.numeric_from += 1
    table.wrap_columns = tuple(i + 1 for i in table.wrap_columns)
    sec.blocks.append(table)
    return sec


def render_report(run: dict, sections: list[Section], out_path: Path) -> Path:
    """Renders one run's report (its record from the store, its sections) to out_path, atomically."""
    run_id = run["run_id"]
    started: datetime = run["started_at"]
    finished: datetime = run["finished_at"]
    css = (_HERE / "report.css").read_text()
    text = (
        _env()
        .get_template("report.html.j2")
        .render(
            run=run,
            run_id=run_id,
            started=started.strftime("%Y-%m-%d %H:%M:%S UTC"),
            duration_s=(finished - started).total_seconds(),
            study_wall=[(name, f"{seconds:.0f} s") for name, seconds in run.get("study_wall_s", {}).items()],
            machine=machine_rows(run["machine"]),
            sections=sections,
            css=css,
            fmt_count=fmt_count,
        )
    )
    return write_text_atomic(Path(out_path), text)
