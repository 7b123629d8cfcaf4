"""What a report is made of: sections of figures, tables and notes.

The report owns these types; studies build them (`Study.section`) and the
template (report.html.j2) renders them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class Figure:
    title: str
    svg: str
    caption: str  # what was measured and how: pinning, rate, samples
    finding: str  # one line computed from the data


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[str]]
    caption: str
    numeric_from: int = 1  # columns from this index on are right-aligned
    wrap_columns: tuple[int, ...] = ()  # long-text columns that may wrap
    # (row label, reading): prose about a row, shown under the table in a collapsed list so
    # that the table keeps to figures and stays one line per row.
    details: list[tuple[str, str]] = field(default_factory=list)
    details_title: str = "Reading of each row"  # the collapsed list's summary line
    # Lines computed from the data, shown under the table like a figure's finding (always visible).
    findings: list[str] = field(default_factory=list)


# How a reference result reads in this run. "unavailable" when the run has no data to judge it.
HOLDS = "holds"
PARTLY = "partly holds"
DOES_NOT_HOLD = "does not hold"
UNAVAILABLE = "unavailable"
VERDICTS = (HOLDS, PARTLY, DOES_NOT_HOLD, UNAVAILABLE)


@dataclass(frozen=True)
class ReferenceCheck:
    """One result of a reference study beside what this run measured. `reported` is the
    reference's own result (a constant: what the paper or article says); `here` and `why`
    are computed by the study from the run's data, and `verdict` from them."""

    reference: str  # which result, e.g. "capstone Figure 9"
    reported: str  # what the reference reported
    here: str  # what this run measured (computed)
    verdict: str  # one of VERDICTS
    why: str  # the numbers the verdict rests on (computed)

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict '{self.verdict}' is not one of {', '.join(VERDICTS)}")

    def line(self) -> str:
        """The sentence the report prints: whether the shape holds here, and why."""
        if self.verdict == UNAVAILABLE:
            return f"{self.reference}: unavailable: {self.why}"
        return f"{self.reference}: the shape {self.verdict} here — {self.why}"


REFERENCE_COLUMNS = ["reference", "reported there", "here (this run)", "shape here"]


def reference_table(checks: Sequence[ReferenceCheck], title: str = "Reference vs here") -> Table:
    """The reference results beside this run's, one row each, with each verdict's reason as a
    line under the table (the table keeps to short cells; the reasons are sentences)."""
    return Table(
        title,
        list(REFERENCE_COLUMNS),
        [[c.reference, c.reported, c.here, c.verdict] for c in checks],
        "Reported there: the reference's own result (absolute figures differ by machine; the shape is what is "
        "compared). Here and the verdict: computed from this run; points the study flagged (saturated, "
        "generator-limited) are left out or named as such.",
        numeric_from=len(REFERENCE_COLUMNS),
        wrap_columns=(1, 2),
        findings=[c.line() for c in checks],
    )


@dataclass
class Section:
    id: str
    title: str
    intro: str
    blocks: list[Figure | Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # unavailable figures and why, warnings
    references: list[ReferenceCheck] = field(default_factory=list)  # also listed in the report's overview

    def add_references(self, checks: Sequence[ReferenceCheck], title: str = "Reference vs here") -> None:
        """The section's reference-vs-here table, and the checks for the report's overview."""
        if checks:
            self.references += list(checks)
            self.blocks.append(reference_table(checks, title))
