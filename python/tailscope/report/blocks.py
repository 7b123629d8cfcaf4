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


# How a reference result reads in this run. NOT_COMPARABLE when this run measured something, but not
# the reference's setup or load (the reason says which difference); UNAVAILABLE when it has no data.
HOLDS = "holds"
PARTLY = "partly holds"
DOES_NOT_HOLD = "does not hold"
NOT_COMPARABLE = "not comparable here"
UNAVAILABLE = "unavailable"
VERDICTS = (HOLDS, PARTLY, DOES_NOT_HOLD, NOT_COMPARABLE, UNAVAILABLE)


@dataclass(frozen=True)
class Source:
    """Where a reference result is stated: the document, its section or figure, and the words or
    numbers the check compares with, verbatim (fragments joined by " … "; a quotation in another
    language carries its translation)."""

    document: str  # e.g. "capstone report (Bandi, UCSC 2023)"
    where: str  # section / figure, e.g. "§3.1.5, Figure 9"
    quote: str  # verbatim from the document
    translation: str = ""  # English, when the quotation is not

    def __post_init__(self) -> None:
        if not (self.document and self.where and self.quote):
            raise ValueError("a reference source needs its document, its section or figure and a quotation")

    def text(self) -> str:
        """The source as the report prints it."""
        tr = f" ({self.translation})" if self.translation else ""
        return f"{self.document}, {self.where}: “{self.quote}”{tr}"


@dataclass(frozen=True)
class ReferenceCheck:
    """One result of a reference study beside what this run measured. `reported` is the
    reference's own result (a constant: what the paper or article says) and `source` where it says
    it, verbatim; `here` and `why` are computed by the study from the run's data, and `verdict` from
    them."""

    reference: str  # which result, e.g. "capstone Figure 9"
    reported: str  # what the reference reported
    here: str  # what this run measured (computed)
    verdict: str  # one of VERDICTS
    why: str  # the numbers the verdict rests on (computed); for NOT_COMPARABLE, the setup that differs
    source: Source  # the document, section or figure and the quotation `reported` rests on

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict '{self.verdict}' is not one of {', '.join(VERDICTS)}")
        if not isinstance(self.source, Source):
            raise TypeError(f"{self.reference}: a reference check needs its Source")

    def line(self) -> str:
        """The sentence the report prints: whether the shape holds here, and why."""
        if self.verdict in (UNAVAILABLE, NOT_COMPARABLE):
            return f"{self.reference}: {self.verdict}: {self.why}"
        return f"{self.reference}: the shape {self.verdict} here — {self.why}"


REFERENCE_COLUMNS = ["reference", "reported there", "here (this run)", "shape here", "source"]


def reference_table(checks: Sequence[ReferenceCheck], title: str = "Reference vs here") -> Table:
    """The reference results beside this run's, one row each, with the source each rests on (the
    document, section or figure and its words), and each verdict's reason as a line under the table
    (the table keeps to short cells; the reasons are sentences)."""
    return Table(
        title,
        list(REFERENCE_COLUMNS),
        [[c.reference, c.reported, c.here, c.verdict, c.source.text()] for c in checks],
        "Reported there: the reference's own result, quoted in the source column (absolute figures differ by "
        "machine; the shape is what is compared). Here and the verdict: computed from this run; points the "
        "study flagged (saturated, generator-limited) are left out or named as such; “not comparable here”: "
        "this run did not reproduce the reference's setup or load, and the line under the table says which.",
        numeric_from=len(REFERENCE_COLUMNS),
        wrap_columns=(1, 2, 4),
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
