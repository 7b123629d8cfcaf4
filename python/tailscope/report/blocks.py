"""What a report is made of: sections of figures, tables and notes.

The report owns these types; studies build them (`Study.section`) and the
template (report.html.j2) renders them.
"""

from __future__ import annotations

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


@dataclass
class Section:
    id: str
    title: str
    intro: str
    blocks: list[Figure | Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # unavailable figures and why, warnings
