"""`tailscope diagnose`: hidden capacities, bounded fan-outs and sequential chains from a user's traces."""

from __future__ import annotations

from pathlib import Path

import click

from tailscope.cli.common import (
    console,
    err_console,
    jaeger_fetch_options,
    json_out_option,
    max_traces_option,
    number,
    sampling_option,
)


@click.command()
@click.argument("files", nargs=-1, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@jaeger_fetch_options
@sampling_option("Fraction of requests that were traced: concurrency and capacities are scaled by 1/sampling.")
@click.option(
    "--launch-gap-us",
    type=number(0.0, 1e9),
    default=1000.0,
    show_default=True,
    help="Sibling calls starting within this many µs are launched together; a call starting within it after "
    "a sibling ended waited for that slot (bounded fan-out).",
)
@click.option(
    "--requests",
    "requests_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="A request log (tailscope-load --traceparent --request-log): join each request's client latency to its "
    "trace and report the part no span covers.",
)
@max_traces_option("Read at most N traces (0 = all).")
@json_out_option("--json", "json_out", "Write the diagnosis document (tailscope.diagnosis/1) here.")
def diagnose(
    files: tuple[Path, ...],
    jaeger_urls: tuple[str, ...],
    jaeger_service: str | None,
    jaeger_limit: int,
    jaeger_lookback: str,
    sampling: float,
    launch_gap_us: float,
    max_traces: int,
    requests_path: Path | None,
    json_out: Path | None,
) -> None:
    """Hidden capacities (pools, connection pools, locks) by queue inference, bounded fan-outs, sequential
    chains and the services that grow in the slowest requests, from trace FILES (Jaeger JSON, NDJSON,
    OTLP JSON) or a Jaeger query API (docs/diagnose.md); exit 1 when the traces cannot be read, 2 on
    usage errors."""
    import json
    import tempfile

    from tailscope.atomicfile import write_text_atomic
    from tailscope.cli.twin import _require_traces, _twin_failures
    from tailscope.diagnose.client import read_request_log
    from tailscope.diagnose.diagnosis import diagnose as run_diagnose
    from tailscope.diagnose.diagnosis import document, lines
    from tailscope.traces.spans import read_traces
    from tailscope.twin.commands import trace_inputs

    _require_traces(files, jaeger_urls)
    with (
        tempfile.TemporaryDirectory(prefix="tailscope-jaeger-") as tmp,
        _twin_failures((OSError, ValueError), engine_exit_1_is_input=True),
    ):
        inputs = trace_inputs(
            files, jaeger_urls, Path(tmp), service=jaeger_service, limit=jaeger_limit, lookback=jaeger_lookback
        )
        err_console.print(f"reading {len(inputs)} trace files", markup=False)
        traceset = read_traces(inputs, max_traces=max_traces)
        requests = read_request_log(requests_path) if requests_path is not None else None
        result = run_diagnose(traceset, sampling=sampling, launch_gap_ns=int(launch_gap_us * 1000), requests=requests)
        doc = document(result, [str(f) for f in files] + [f"jaeger:{u}" for u in jaeger_urls])
    for line in lines(result):
        console.print(line, markup=False, highlight=False)
    if json_out is not None:
        write_text_atomic(json_out, json.dumps(doc, indent=1, allow_nan=False) + "\n")
        console.print(f"written: {json_out}", markup=False)
