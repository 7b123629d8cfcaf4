"""Twins of a traced system: `tailscope topology`, `twin`, `advise`."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

import click
from rich.table import Table as RichTable
from rich.text import Text

from tailscope.atomicfile import write_text_atomic
from tailscope.cli.common import (
    JAEGER_FETCH_LIMIT,
    JAEGER_FETCH_LOOKBACK,
    _fail,
    console,
    cpu_fraction_option,
    distributions_option,
    err_console,
    jaeger_fetch_options,
    jaeger_urls_option,
    json_out_option,
    known_models,
    max_traces_option,
    number,
    sampling_option,
    traced_model_option,
    twin_duration_option,
    whole,
)
from tailscope.lab import lifetime


def _progress(message: str) -> None:
    err_console.print(message, markup=False)


def _require_traces(files: tuple[Path, ...], jaeger_urls: tuple[str, ...]) -> None:
    if not files and not jaeger_urls:
        _fail("give trace FILES or --jaeger URL")


def _check_model(flag: str, model: str) -> None:
    """Exit 2 naming `flag` unless `model` is one tailscope-svc runs."""
    known = known_models()
    if model not in known:
        _fail(f"{flag}: unknown model {model} (known: {', '.join(known)})")


def _fail_unmarked(e: Exception, exit_code: int) -> NoReturn:
    """The red `error:` line for messages that may hold brackets (paths, JSON): the message is
    plain text, never read as markup (with markup off for the whole line the prefix printed as
    the literal `[red]error:[/]`)."""
    err_console.print(Text.assemble(("error:", "red"), " ", str(e)), highlight=False)
    sys.exit(exit_code)


@contextmanager
def _twin_failures(
    input_errors: tuple[type[Exception], ...], *, engine_exit_1_is_input: bool, interrupted: str | None = None
) -> Iterator[None]:
    """How the twin commands end on an error: exit 1 when the traces or the topology cannot be used
    (`input_errors`; an engine that exited with 1 too where `engine_exit_1_is_input`), 2 for any
    other engine failure. With `interrupted`, SIGTERM and SIGHUP take Ctrl-C's path and an
    interrupt ends with `interrupted: <interrupted>`."""
    from tailscope.lab.engines import EngineError

    try:
        if interrupted is None:
            yield
        else:
            with lifetime.terminate_as_interrupt():
                yield
    except input_errors as e:
        _fail_unmarked(e, 1)
    except EngineError as e:
        _fail_unmarked(e, 1 if engine_exit_1_is_input and "exited with 1" in str(e) else 2)
    except KeyboardInterrupt as e:
        if interrupted is None:
            raise
        err_console.print(f"[yellow]interrupted: {interrupted}[/]")
        sys.exit(lifetime.interrupt_exit_code(e))


def _write_document(path: Path, doc: dict) -> None:
    import json

    write_text_atomic(path, json.dumps(doc, indent=1, allow_nan=False) + "\n")
    console.print(f"written: {path}", markup=False)


@click.group()
def topology() -> None:
    """Topologies: infer one from a user's traces."""


@topology.command("from-traces")
@click.argument("files", nargs=-1, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@jaeger_fetch_options
@click.option(
    "-o", "--out", "out", type=click.Path(dir_okay=False, path_type=Path), required=True, help="Topology YAML to write."
)
@cpu_fraction_option(
    "Share of a span's own time that is CPU (the rest is waiting): auto = per endpoint, CPU where own time "
    "grows with the handlers in flight (docs/twin.md)."
)
@click.option(
    "--no-capacities",
    is_flag=True,
    help="Leave diagnose's capacities, fan-out limits and service times out (the twin without queues).",
)
@click.option(
    "--capacity-confidence",
    type=click.Choice(["low", "medium", "high"]),
    default="medium",
    show_default=True,
    help="Carry a capacity diagnose found only at this confidence or above.",
)
@distributions_option()
@click.option(
    "--no-correlation",
    is_flag=True,
    help="Draw every stage independently: leave out the measured within-request dependence of endpoint delays "
    "(docs/twin.md, Correlated stage delays).",
)
@click.option(
    "--deferred-gap-us",
    type=number(0.0, 1e6),
    default=20.0,
    show_default=True,
    help="A call starting within this many µs of its group's previous result being consumed is deferred.",
)
@click.option(
    "--min-traces",
    type=whole(1, 10**9),
    default=20,
    show_default=True,
    help="Endpoints seen in fewer traces are kept but flagged.",
)
@sampling_option("Fraction of requests that were traced (for the recorded rate).")
@max_traces_option("Read at most N traces (0 = all).")
@click.option("--name", default=None, help="The topology's name (default: the output file's stem).")
@click.option(
    "--calibrate",
    "calibrate_model",
    default=None,
    metavar="MODEL",
    help="Run the twin under MODEL and take off each stage what tailscope's runtime adds (docs/twin.md).",
)
@click.option(
    "--calibration-steps",
    type=whole(1, 5),
    default=2,
    show_default=True,
    help="Fixed-point steps of --calibrate: each replays the twin once more and corrects what still differs.",
)
def topology_from_traces(
    files: tuple[Path, ...],
    jaeger_urls: tuple[str, ...],
    jaeger_service: str | None,
    jaeger_limit: int,
    jaeger_lookback: str,
    out: Path,
    cpu_fraction: float | None,
    no_capacities: bool,
    capacity_confidence: str,
    distributions: str,
    no_correlation: bool,
    deferred_gap_us: float,
    min_traces: int,
    sampling: float,
    max_traces: int,
    name: str | None,
    calibrate_model: str | None,
    calibration_steps: int,
) -> None:
    """Infer a topology (services, endpoints, stages, distributions) from trace FILES; exit 1 when
    nothing can be inferred, 2 on usage errors."""
    import tempfile

    from tailscope.lab.topology import TopologyError
    from tailscope.twin.commands import from_traces, inference_lines, trace_inputs
    from tailscope.twin.infer import InferenceError, InferOptions

    _require_traces(files, jaeger_urls)
    if calibrate_model is not None:
        _check_model("--calibrate", calibrate_model)
    options = InferOptions(
        cpu_fraction,
        deferred_gap_us,
        min_traces,
        sampling,
        name or out.stem,
        capacities=not no_capacities,
        capacity_confidence=capacity_confidence,
        correlation=not no_correlation,
        distributions=distributions,
    )
    with (
        tempfile.TemporaryDirectory(prefix="tailscope-jaeger-") as tmp,
        _twin_failures((OSError, ValueError, InferenceError, TopologyError), engine_exit_1_is_input=True),
    ):
        inputs = trace_inputs(
            files, jaeger_urls, Path(tmp), service=jaeger_service, limit=jaeger_limit, lookback=jaeger_lookback
        )
        _, report, _ = from_traces(
            inputs,
            out,
            options,
            max_traces=max_traces,
            calibrate_model=calibrate_model,
            calibration_steps=calibration_steps,
            progress=_progress,
        )
    for line in inference_lines(report):
        console.print(line, markup=False, highlight=False)
    console.print(f"written: {out} and {out.name}.inference.json", markup=False)


@click.group()
def twin() -> None:
    """Run an inferred topology (a twin) and compare it with the traces it came from."""


@twin.command("validate")
@click.option(
    "--topology", "topology_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True
)
@click.option(
    "--traces",
    "trace_files",
    multiple=True,
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The original traces (repeatable).",
)
@click.option(
    "--second-traces",
    "second_files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A second recording at another rate (repeatable): the twin also runs at its rate and is compared with it.",
)
@traced_model_option("Concurrency model the traced system ran (tailscope-svc --model).")
@click.option(
    "--rate-per-s",
    type=number(0.1, 1e6),
    default=None,
    help="Offered rate (default: from the trace timestamps ÷ --sampling).",
)
@sampling_option("Fraction of requests that were traced.")
@twin_duration_option(5.0, "Measured time of the twin run.")
@json_out_option("--out", "out_path", "Also write the validation document (JSON) here.")
def twin_validate(
    topology_path: Path,
    trace_files: tuple[Path, ...],
    second_files: tuple[Path, ...],
    model: str,
    rate_per_s: float | None,
    sampling: float,
    duration_s: float,
    out_path: Path | None,
) -> None:
    """Run the twin under MODEL at the traces' rate (and at --second-traces' rate); compare p50/p90/p99
    and KS distance per service."""
    from tailscope.lab.topology import TopologyError
    from tailscope.twin.commands import VALIDATION_COLUMNS, queueing_lines, validation_rows, validation_verdict
    from tailscope.twin.validate import validate

    _check_model("--model", model)
    with _twin_failures(
        (TopologyError, ValueError), engine_exit_1_is_input=False, interrupted="the twin was stopped, nothing written"
    ):
        doc = validate(
            topology_path,
            list(trace_files),
            model,
            rate_per_s=rate_per_s,
            sampling=sampling,
            duration_s=duration_s,
            second_traces=list(second_files),
            progress=_progress,
        )
    second = doc["second_rate"]
    for title, part in ((f"twin of {topology_path.name} vs its traces", doc), ("at the second rate", second)):
        if part is None:
            continue
        t = RichTable(title=title)
        for col in VALIDATION_COLUMNS:
            t.add_column(col)
        for row in validation_rows(part):
            t.add_row(*row)
        console.print(t)
    console.print(validation_verdict(doc), markup=False, highlight=False)
    for line in queueing_lines(doc):
        console.print(line, markup=False, highlight=False)
    if second is not None:
        console.print(
            f"second rate ({second['rate_ratio_to_first']:.3g}× the first, not fitted to): "
            + validation_verdict(second),
            markup=False,
            highlight=False,
        )
    else:
        console.print(f"second rate: unavailable ({doc['second_rate_unavailable']})", markup=False, highlight=False)
    if out_path is not None:
        _write_document(out_path, doc)


@click.command()
@click.argument("files", nargs=-1, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@jaeger_urls_option()
@click.option(
    "--objective-ms",
    type=number(0.001, 600_000.0),
    default=50.0,
    show_default=True,
    help="p99 objective for the max rate (ms).",
)
@traced_model_option("Concurrency model the traced system ran (validated).")
@click.option(
    "--quick", is_flag=True, help="3 alternatives, rates × 1 and 4 (default: every alternative, rates × 1, 2, 4, 8)."
)
@json_out_option("--json", "json_out", "Write the advice document (tailscope.twin.advice/1) here.")
@cpu_fraction_option("Share of a span's own time that is CPU (varied ±50 % for the leader).")
@sampling_option("Fraction of requests that were traced (for the recorded rate).")
@twin_duration_option(3.0, "Measured time of each twin run.")
@distributions_option()
def advise(
    files: tuple[Path, ...],
    jaeger_urls: tuple[str, ...],
    objective_ms: float,
    model: str,
    quick: bool,
    json_out: Path | None,
    cpu_fraction: float | None,
    sampling: float,
    duration_s: float,
    distributions: str,
) -> None:
    """Infer the twin of trace FILES, validate it, run it under the alternatives (models, pool
    sizes, placements) and rank them; exit 1 when nothing can be inferred, 2 on usage errors."""
    import tempfile

    from tailscope.lab.topology import TopologyError
    from tailscope.traces.spans import read_traces
    from tailscope.twin.advise import advice_lines
    from tailscope.twin.advise import advise as run_advise
    from tailscope.twin.commands import trace_inputs
    from tailscope.twin.infer import InferenceError, InferOptions

    _require_traces(files, jaeger_urls)
    _check_model("--model", model)
    with (
        _twin_failures(
            (OSError, ValueError, InferenceError, TopologyError),
            engine_exit_1_is_input=True,
            interrupted="every twin was stopped, nothing written",
        ),
        tempfile.TemporaryDirectory(prefix="tailscope-jaeger-") as tmp,
    ):
        inputs = trace_inputs(
            files, jaeger_urls, Path(tmp), service=None, limit=JAEGER_FETCH_LIMIT, lookback=JAEGER_FETCH_LOOKBACK
        )
        doc = run_advise(
            read_traces(inputs),
            model,
            objective_ms=objective_ms,
            options=InferOptions(
                cpu_fraction=cpu_fraction, sampling=sampling, name="advise-twin", distributions=distributions
            ),
            duration_s=duration_s,
            quick=quick,
            progress=_progress,
        )
    for line in advice_lines(doc):
        console.print(line, markup=False, highlight=False)
    if json_out is not None:
        _write_document(json_out, doc)
