"""Trace timelines (the capstone's Figure 6, what Jaeger UI shows): a Gantt
chart of one trace's spans, one lane group per service, the critical path
highlighted, RPC scheduling and join delays shaded, fan-out launches and
joins marked.

Input: a line of `tailscope-critpath --timeline-trace ID --artifacts DIR`'s
`DIR/timelines.ndjson` ({"analysis": per-trace result, "spans": [...]}).
Output: a standalone SVG (no script), written by hand here because its only
parts are rectangles, lines and text and the report inlines it as is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from html import escape
from pathlib import Path

import duckdb

from tailscope.atomicfile import write_text_atomic
from tailscope.units import fmt_ns

ROW_PX = 16
BAR_PX = 10
LABEL_PX = 230
CHART_PX = 760
TOP_PX = 46
BOTTOM_PX = 40
SERVICE_COLOURS = ("#4C72B0", "#55A868", "#8172B2", "#CCB974", "#64B5CD", "#8C8C8C", "#DA8BC3", "#937860")
PATH_COLOUR = "#C44E52"
DELAY_COLOUR = "#F2A541"


@dataclass
class TimelineTrace:
    trace_id: str
    end_to_end_ns: int
    spans: list[dict]  # span_id, parent_span_id, service, operation, kind, start_ns, end_ns, depth
    on_path: set[str]  # span ids with time on the critical path
    sections: list[dict]  # span_id, start_ns, end_ns (the path, tiling the root)
    rpc: list[dict]  # client_span_id, server_span_id, scheduling_ns, join_ns, rule
    stagger: list[dict]  # parent_span_id, client_span_id, stagger_ns
    label: str = ""  # why this trace was chosen ("median", "p99", "--trace")
    delay_on_path_ns: int | None = None  # the engine's scheduling + join delay on the critical path; None: no pair


def read_timelines(path: Path) -> list[TimelineTrace]:
    """Every trace in a timelines.ndjson file."""
    out = []
    with open(path) as f:
        for line in f:
            if line.strip():
                out.append(parse_timeline(json.loads(line)))
    return out


def parse_timeline(obj: dict) -> TimelineTrace:
    a = obj["analysis"]
    delays = a.get("delays", {})
    return TimelineTrace(
        trace_id=a["trace_id"],
        end_to_end_ns=int(a.get("end_to_end_ns") or 0),
        spans=list(obj.get("spans", [])),
        on_path={s["span_id"] for s in a.get("spans_on_path", [])},
        sections=list(a.get("sections", [])),
        rpc=list(delays.get("rpc", [])),
        stagger=list(delays.get("launch_stagger", [])),
        delay_on_path_ns=None if delays.get("on_path_ns") is None else int(delays["on_path_ns"]),
    )


# The default traces to draw, in the order the report shows them.
LABEL_ORDER = (("median", 50), ("p99", 99))


def label_rank(label: str) -> int:
    """Where a chosen trace goes in the report: median first, then p99, then --trace ids."""
    first = label.split(" and ")[0]
    return next((i for i, (name, _) in enumerate(LABEL_ORDER) if name == first), len(LABEL_ORDER))


def choose_traces(index: Path, wanted: list[str]) -> list[tuple[str, str]]:
    """(trace id, label) to draw: the ids asked for, else the median and the
    p99 trace by end-to-end duration (nearest rank; equal durations by trace
    id) of the analyzed traces in the engine's `trace_index.ndjson`.

    DuckDB reads the index: a day of traces is millions of lines, which
    Python's json would hold as millions of dicts; it sorts them in C++."""
    if wanted:
        return [(t, "--trace") for t in wanted]
    if not index.exists() or index.stat().st_size == 0:
        return []
    done = (
        "SELECT trace_id, end_to_end_ns FROM read_json(?, format = 'newline_delimited', "
        "columns = {'trace_id': 'VARCHAR', 'analyzed': 'BOOLEAN', 'end_to_end_ns': 'BIGINT'}) "
        "WHERE analyzed AND end_to_end_ns IS NOT NULL"
    )
    with duckdb.connect() as con:
        row = con.execute(f"SELECT count(*) FROM ({done})", [str(index)]).fetchone()
        n = int(row[0]) if row else 0
        if not n:
            return []
        ranks = {label: max(1, (n * percent + 99) // 100) for label, percent in LABEL_ORDER}  # ceil(n p / 100)
        by_rank = dict(
            con.execute(
                f"SELECT r, trace_id FROM (SELECT trace_id, row_number() OVER (ORDER BY end_to_end_ns, trace_id) "
                f"AS r FROM ({done})) WHERE r IN ({', '.join('?' * len(ranks))})",
                [str(index), *ranks.values()],
            ).fetchall()
        )
    picks: list[tuple[str, str]] = []
    for label, _ in LABEL_ORDER:
        tid = by_rank[ranks[label]]
        if tid in [p[0] for p in picks]:
            picks = [(p[0], p[1] + f" and {label}") if p[0] == tid else p for p in picks]
        else:
            picks.append((tid, label))
    return picks


def _ordered_rows(t: TimelineTrace) -> list[tuple[str, list[dict]]]:
    """Services in order of first start; inside each, spans in tree preorder
    (the engine's order), as Jaeger UI lists them."""
    by_service: dict[str, list[dict]] = {}
    for s in t.spans:
        by_service.setdefault(s["service"], []).append(s)
    return sorted(by_service.items(), key=lambda kv: min(s["start_ns"] for s in kv[1]))


def render_svg(t: TimelineTrace) -> str:
    """The timeline of one trace as a standalone SVG document."""
    if not t.spans:
        raise ValueError(f"trace {t.trace_id}: no spans to draw (the trace was not analyzed)")
    t0 = min(s["start_ns"] for s in t.spans)
    t1 = max(s["end_ns"] for s in t.spans)
    span_ns = max(1, t1 - t0)

    def x(ns: int) -> float:
        return LABEL_PX + (ns - t0) * CHART_PX / span_ns

    groups = _ordered_rows(t)
    n_rows = sum(len(spans) for _, spans in groups) + len(groups)
    height = TOP_PX + n_rows * ROW_PX + BOTTOM_PX
    width = LABEL_PX + CHART_PX + 20
    out: list[str] = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="10">',
        f"<title>trace {escape(t.trace_id)}{' (' + escape(t.label) + ')' if t.label else ''}: "
        f"{len(t.spans)} spans, end to end {escape(fmt_ns(t.end_to_end_ns))}</title>",
        f'<text x="4" y="14" font-size="12" font-weight="bold">trace {escape(t.trace_id)}'
        f"{' — ' + escape(t.label) if t.label else ''}: end to end {escape(fmt_ns(t.end_to_end_ns))}, "
        f"{len(t.spans)} spans, {len(t.on_path)} on the critical path</text>",
    ]
    # Legend.
    legend = [
        (PATH_COLOUR, "critical path"),
        (DELAY_COLOUR, "scheduling / join delay"),
        ("#000", "▼ launch, ▲ join"),
    ]
    lx = 4.0
    for colour, text in legend:
        out.append(f'<rect x="{lx:.1f}" y="22" width="10" height="8" fill="{colour}" opacity="0.8"/>')
        out.append(f'<text x="{lx + 14:.1f}" y="30">{escape(text)}</text>')
        lx += 24 + 6.5 * len(text)
    # Time axis: five ticks.
    axis_y = TOP_PX - 4
    for k in range(6):
        ns = t0 + span_ns * k // 5
        out.append(
            f'<line x1="{x(ns):.1f}" y1="{axis_y}" x2="{x(ns):.1f}" y2="{height - BOTTOM_PX + 4}" stroke="#ddd"/>'
        )
        out.append(
            f'<text x="{x(ns):.1f}" y="{height - BOTTOM_PX + 16}" text-anchor="middle">{escape(fmt_ns(ns - t0))}</text>'
        )
    row_of: dict[str, int] = {}
    row = 0
    for g, (service, spans) in enumerate(groups):
        y: float = TOP_PX + row * ROW_PX
        out.append(
            f'<text x="4" y="{y + 11}" font-weight="bold" fill="{SERVICE_COLOURS[g % len(SERVICE_COLOURS)]}">'
            f"{escape(service)}</text>"
        )
        row += 1
        for s in spans:
            row_of[s["span_id"]] = row
            row += 1
    # Delays first (under the bars): the client span's time before its server
    # started and after it ended, shaded on the client's row.
    for pair in t.rpc:
        client = next((s for s in t.spans if s["span_id"] == pair["client_span_id"]), None)
        if client is None or client["span_id"] not in row_of:
            continue
        y = TOP_PX + row_of[client["span_id"]] * ROW_PX + (ROW_PX - BAR_PX) / 2 - 2
        for start, length, what in (
            (client["start_ns"], pair["scheduling_ns"], "scheduling"),
            (client["end_ns"] - pair["join_ns"], pair["join_ns"], "join"),
        ):
            if length > 0:
                out.append(
                    f'<rect class="delay {what}" x="{x(start):.2f}" y="{y:.1f}" '
                    f'width="{max(0.5, length * CHART_PX / span_ns):.2f}" height="{BAR_PX + 4}" '
                    f'fill="{DELAY_COLOUR}" opacity="0.55"><title>{what} delay {escape(fmt_ns(length))} '
                    f"({escape(pair.get('rule', ''))})</title></rect>"
                )
    for g, (service, spans) in enumerate(groups):
        colour = SERVICE_COLOURS[g % len(SERVICE_COLOURS)]
        for s in spans:
            y = TOP_PX + row_of[s["span_id"]] * ROW_PX + (ROW_PX - BAR_PX) / 2
            on_path = s["span_id"] in t.on_path
            name = f"{s['operation']}"
            dur = s["end_ns"] - s["start_ns"]
            out.append(
                f'<text x="{12 + 8 * min(int(s.get("depth", 0)), 8)}" y="{y + BAR_PX - 1:.1f}" '
                f'fill="#333">{escape(name[:34])}</text>'
            )
            stroke = f' stroke="{PATH_COLOUR}" stroke-width="2"' if on_path else ""
            out.append(
                f'<rect class="span{" critical" if on_path else ""}" data-span-id="{escape(s["span_id"])}" '
                f'x="{x(s["start_ns"]):.2f}" y="{y:.1f}" width="{max(0.5, dur * CHART_PX / span_ns):.2f}" '
                f'height="{BAR_PX}" fill="{colour}"{stroke}><title>{escape(service)}: {escape(name)} '
                f"{escape(fmt_ns(dur))}{' (on the critical path)' if on_path else ''}</title></rect>"
            )
    # The critical path's sections as a red band over each span's row.
    for sec in t.sections:
        sec_row = row_of.get(sec["span_id"])
        if sec_row is None or sec["end_ns"] <= sec["start_ns"]:
            continue
        y = TOP_PX + sec_row * ROW_PX + (ROW_PX + BAR_PX) / 2 + 1
        out.append(
            f'<rect class="path-section" x="{x(sec["start_ns"]):.2f}" y="{y:.1f}" '
            f'width="{max(0.5, (sec["end_ns"] - sec["start_ns"]) * CHART_PX / span_ns):.2f}" height="2" '
            f'fill="{PATH_COLOUR}"/>'
        )
    # Launch (▼ at the client's start) and join (▲ at its end) points of every RPC.
    for rpc in t.rpc:
        client = next((s for s in t.spans if s["span_id"] == rpc["client_span_id"]), None)
        if client is None:
            continue
        y = TOP_PX + row_of[client["span_id"]] * ROW_PX
        cx, jx = x(client["start_ns"]), x(client["end_ns"])
        out.append(f'<path class="launch" d="M{cx - 3:.1f},{y:.1f} h6 l-3,4 z" fill="#000"/>')
        out.append(f'<path class="join" d="M{jx - 3:.1f},{y + ROW_PX:.1f} h6 l-3,-4 z" fill="#000"/>')
    out.append("</svg>")
    return "\n".join(out)


def write_svgs(traces: list[TimelineTrace], out_dir: Path) -> list[Path]:
    """One SVG per trace, written atomically (temp file, then rename)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for t in traces:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in t.trace_id)[:80] or "trace"
        path = out_dir / f"timeline-{safe}.svg"
        write_text_atomic(path, render_svg(t))
        paths.append(path)
    return paths
