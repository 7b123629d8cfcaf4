"""`tailscope diagnose`: hidden capacities, bounded fan-outs and sequential chains from a user's traces;
with `--advise`, the what-ifs a user can make in their own code, ranked by twin runs."""

from __future__ import annotations

from pathlib import Path

import click

from tailscope.cli.common import (
    _fail,
    console,
    err_console,
    jaeger_fetch_options,
    json_out_option,
    max_traces_option,
    number,
    sampling_option,
    traced_model_option,
)

# The options that only mean something with --advise (name → its default with --advise).
ADVISE_DEFAULTS = {"objective_ms": 50.0, "duration_s": 3.0, "faster_percent": 50.0}


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
@click.option(
    "--advise",
    is_flag=True,
    help="Rank the what-ifs a user can make in their own code (a pool or connection pool raised or removed, a "
    "fan-out limit raised, a sequential chain run in parallel, one stage faster, cores) by running the twin "
    "of the traces with each: predicted p50/p99 at the recorded rate and at 2x, the highest rate meeting "
    "--objective-ms.",
)
@click.option(
    "--objective-ms",
    type=number(0.001, 600_000.0),
    default=None,
    help="With --advise: the p99 objective for the highest rate (ms; default 50).",
)
@traced_model_option("With --advise: the concurrency model the twin runs under.")
@click.option(
    "--duration-s",
    type=number(1.0, 3600.0),
    default=None,
    help="With --advise: measured time of each twin run (s; default 3).",
)
@click.option(
    "--faster-percent",
    type=number(1.0, 99.0),
    default=None,
    help="With --advise: how much faster the 'one stage faster' what-ifs make their stage (%; default 50).",
)
@click.option(
    "--topology",
    "topology_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="With --advise: the twin to change (e.g. written by `tailscope topology from-traces`); default: "
    "inferred from the traces by the same rules.",
)
@click.option(
    "--validation",
    "validation_paths",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="With --advise: a `tailscope twin validate` document of this twin (e.g. with --second-traces at "
    "another rate); a prediction at about a rate it validated is then validated, not extrapolated "
    "(repeatable).",
)
@json_out_option(
    "--json",
    "json_out",
    "Write the diagnosis document (tailscope.diagnosis/1) here; with --advise the advice document "
    "(tailscope.diagnosis.advice/1), which holds the diagnosis.",
)
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
    advise: bool,
    objective_ms: float | None,
    model: str,
    duration_s: float | None,
    faster_percent: float | None,
    topology_path: Path | None,
    validation_paths: tuple[Path, ...],
    json_out: Path | None,
) -> None:
    """Hidden capacities (pools, connection pools, locks) by queue inference, bounded fan-outs, sequential
    chains and the services that grow in the slowest requests, from trace FILES (Jaeger JSON, NDJSON,
    OTLP JSON) or a Jaeger query API (docs/diagnose.md); exit 1 when the traces cannot be read, 2 on
    usage errors. --advise ranks what-ifs by twin runs (docs/diagnose.md "Advice in the user's terms")."""
    import json
    import tempfile

    from tailscope.atomicfile import write_text_atomic
    from tailscope.cli.twin import _check_model, _progress, _require_traces, _twin_failures
    from tailscope.diagnose.client import read_request_log
    from tailscope.diagnose.diagnosis import diagnose as run_diagnose
    from tailscope.diagnose.diagnosis import document, lines
    from tailscope.lab.topology import TopologyError
    from tailscope.traces.spans import read_traces
    from tailscope.twin.commands import trace_inputs
    from tailscope.twin.infer import InferenceError

    _require_traces(files, jaeger_urls)
    given = {"objective_ms": objective_ms, "duration_s": duration_s, "faster_percent": faster_percent}
    if not advise:
        extra = [f"--{k.replace('_', '-')}" for k, v in given.items() if v is not None]
        extra += ["--topology"] * (topology_path is not None) + ["--validation"] * bool(validation_paths)
        if extra:
            _fail(f"{', '.join(extra)}: only with --advise")
    else:
        _check_model("--model", model)
    settings = {k: v if v is not None else ADVISE_DEFAULTS[k] for k, v in given.items()}
    with (
        tempfile.TemporaryDirectory(prefix="tailscope-jaeger-") as tmp,
        _twin_failures(
            (OSError, ValueError, InferenceError, TopologyError),
            engine_exit_1_is_input=True,
            interrupted="every twin was stopped, nothing written" if advise else None,
        ),
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
        if advise:
            from tailscope.twin.whatif_advice import advice_lines, advise_traces

            doc = advise_traces(
                traceset,
                doc,
                topology_path=topology_path,
                validations=[json.loads(p.read_text()) for p in validation_paths],
                diagnosed=result,
                sampling=sampling,
                model=model,
                objective_ms=settings["objective_ms"],
                duration_s=settings["duration_s"],
                faster_percent=settings["faster_percent"],
                progress=_progress,
            )
            for line in advice_lines(doc):
                console.print(line, markup=False, highlight=False)
    if json_out is not None:
        write_text_atomic(json_out, json.dumps(doc, indent=1, allow_nan=False) + "\n")
        console.print(f"written: {json_out}", markup=False)
