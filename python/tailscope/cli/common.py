"""What every command shares: the consoles, the option types, how a command fails."""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path
from typing import NoReturn

import click
import duckdb
from rich.console import Console

from tailscope.lab import machine
from tailscope.lab.stores import DEFAULT_STORE_MODE, STORE_MODES
from tailscope.runner import default_results_dir
from tailscope.store import StoreError


class Number(click.FloatRange):
    """The one option type for a real number a user types: finite (nan and inf are refused: a NaN
    passes every comparison, so a plain range check lets it through) and inside [lo, hi]. Click's
    message names the option."""

    name = "number"

    def convert(self, value, param, ctx):
        if isinstance(value, str) and value.strip().lower().lstrip("+-") in ("nan", "inf", "infinity"):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        v = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(v):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return super().convert(v, param, ctx)


def number(lo: float, hi: float, *, lo_open: bool = False) -> Number:
    """A finite real in [lo, hi] (or (lo, hi] with lo_open)."""
    return Number(lo, hi, min_open=lo_open)


def whole(lo: int, hi: int) -> click.IntRange:
    """A whole number in [lo, hi] (click's int parsing refuses nan, inf, 1e3 and 0x10)."""
    return click.IntRange(lo, hi)


console = Console()
err_console = Console(stderr=True)

VERDICT_STYLE = {machine.OK: "green", machine.WARN: "yellow", machine.UNAVAILABLE: "red"}

objective_option = click.option(
    "--objective-ms",
    type=number(0.001, 3_600_000.0),
    default=None,
    help="p99 objective of the thread-count study's recommendation (default 50 ms).",
)

load_pacing_option = click.option(
    "--load-pacing",
    type=click.Choice(["busy-poll", "sleep"]),
    default=None,
    help="How tailscope-load paces on its own core in the echo study: busy-poll (default; no wake-up "
    "latency in the send lag) or sleep (until --spin-us before each send). Recorded in every document.",
)

load_io_option = click.option(
    "--load-io",
    type=click.Choice(["by-connections", "epoll", "uring"]),
    default=None,
    help="How tailscope-load moves bytes in the echo study: by-connections (default; its io_uring path "
    "from 100 connections up, where epoll's send+recv per echo made the generator the limit, epoll below), "
    "or one path for every point. Recorded in every document.",
)

# The model the deployment files (k8s, compose, cluster) run. Fixed choices, not the engine's list
# (svc_models()): writing manifests needs no local build. tests/engines/test_engine_contract.py holds
# the engine's list to these same five names.
DEPLOY_MODELS = ("std-async", "std-thread", "pool-blocking", "pool-callback", "coroutine")
deploy_model_option = click.option("--model", default="coroutine", show_default=True, type=click.Choice(DEPLOY_MODELS))

stores_option = click.option(
    "--stores",
    type=click.Choice(STORE_MODES),
    default=DEFAULT_STORE_MODE,
    show_default=True,
    help="The microservice graphs' stores: real (memcached, redis-server and PostgreSQL started per graph run; "
    "an error naming the Debian package when one is missing), simulated (timed waits), or auto (real when the "
    "three servers are installed, else simulated, saying why). Recorded in every document and report section.",
)

results_option = click.option(
    "--results",
    "results_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Results folder (default: ./results or $TAILSCOPE_RESULTS).",
)


def _check_cpus(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """--cpus CLIENT,SERVER: two CPU numbers this process may run on."""
    if value is None:
        return None
    parts = value.split(",")
    allowed = os.sched_getaffinity(0)
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise click.BadParameter(f"'{value}' is not CLIENT,SERVER (two CPU numbers, e.g. 0,1)")
    bad = [int(p) for p in parts if int(p) not in allowed]
    if bad:
        raise click.BadParameter(f"CPU {bad[0]} is not one this process may use (allowed: {sorted(allowed)})")
    return value


def stacked(*options):
    """One decorator applying several click options, first one first in --help."""

    def apply(f):
        for option in reversed(options):
            f = option(f)
        return f

    return apply


# The options of every command that runs studies (`run`, `bench STUDY`): one definition, so the
# commands cannot drift apart.
wait_for_store_option = click.option(
    "--wait-for-store",
    "wait_for_store_s",
    type=number(0.0, 86400.0),
    default=0.0,
    show_default=True,
    help="When another program holds the results database at the end of the run, wait this many seconds "
    "for it; then the run is stored in a database of its own in its run folder (nothing is lost).",
)

study_run_options = stacked(
    click.option("--full", is_flag=True, help="Long form of every study (quick form by default)."),
    click.option(
        "--cpus",
        default=None,
        callback=_check_cpus,
        help="CLIENT,SERVER cpus for pinned measurements (default: first,last).",
    ),
    click.option(
        "--scale",
        type=number(0.001, 1000.0),
        default=None,
        help="Multiply every sample count (e.g. 0.05 for a smoke run; figures get noisier).",
    ),
    objective_option,
    load_pacing_option,
    load_io_option,
    stores_option,
    results_option,
    wait_for_store_option,
)


def sampling_option(help_text: str):
    """--sampling: the fraction of requests that were traced (a rate read from traces is divided by it)."""
    return click.option("--sampling", type=number(1e-6, 1.0), default=1.0, show_default=True, help=help_text)


def jaeger_urls_option():
    """--jaeger URL (repeatable): read traces from a Jaeger query API as well as from files."""
    return click.option(
        "--jaeger",
        "jaeger_urls",
        multiple=True,
        metavar="URL",
        help="Also read traces from a Jaeger query API (repeatable).",
    )


class AutoOrNumber(Number):
    """`auto` (None: decided from the data) or a finite number in the range."""

    name = "auto|number"

    def convert(self, value, param, ctx):
        if value is None or (isinstance(value, str) and value.strip().lower() == "auto"):
            return None
        return super().convert(value, param, ctx)


def distributions_option():
    """--distributions: how the inference turns a stage's durations into its distribution (twin/fit.py)."""
    return click.option(
        "--distributions",
        type=click.Choice(["parametric", "empirical"]),
        default="parametric",
        show_default=True,
        help="parametric: the kind (constant, uniform, exponential, lognormal) that fits each stage best; "
        "empirical: each stage's observed quantiles, tail included (docs/twin.md).",
    )


def cpu_fraction_option(help_text: str):
    """--cpu-fraction: the share of a span's own time that is CPU; `auto` decides it per endpoint
    from the traces (twin/cpusplit.py), a number 0…1 overrides it everywhere."""
    return click.option(
        "--cpu-fraction", type=AutoOrNumber(0.0, 1.0), default="auto", show_default=True, help=help_text
    )


def twin_duration_option(default_s: float, help_text: str):
    """--duration-s of a twin run."""
    return click.option("--duration-s", type=number(1.0, 3600.0), default=default_s, show_default=True, help=help_text)


def max_traces_option(help_text: str):
    return click.option("--max-traces", type=whole(0, 100_000_000), default=0, help=help_text)


# What `--jaeger URL` fetches for the twin commands: every service's traces, this many per service,
# from this far back. `topology from-traces` can change them (jaeger_fetch_options); `advise` uses them.
JAEGER_FETCH_LIMIT = 1000
JAEGER_FETCH_LOOKBACK = "1h"

jaeger_fetch_options = stacked(
    jaeger_urls_option(),
    click.option(
        "--jaeger-service", default=None, help="Only this service's traces from --jaeger (default: every service)."
    ),
    click.option(
        "--jaeger-limit",
        type=whole(1, 100_000),
        default=JAEGER_FETCH_LIMIT,
        show_default=True,
        help="Traces per service from --jaeger.",
    ),
    click.option(
        "--jaeger-lookback",
        default=JAEGER_FETCH_LOOKBACK,
        show_default=True,
        help="How far back --jaeger looks (Jaeger's lookback).",
    ),
)


def traced_model_option(help_text: str):
    """--model: the concurrency model the traced system ran (checked by _check_model)."""
    return click.option("--model", default="std-async", show_default=True, help=help_text)


def json_out_option(name: str, dest: str, help_text: str):
    """A file to write a result document (JSON) to, besides what is printed."""
    return click.option(name, dest, type=click.Path(dir_okay=False, path_type=Path), default=None, help=help_text)


def _results(results_dir: Path | None) -> Path:
    return results_dir or default_results_dir()


def _fail(message: object, exit_code: int = 2) -> NoReturn:
    """One red `error:` line on stderr, then exit (2 unless told)."""
    err_console.print(f"[red]error:[/] {message}")
    sys.exit(exit_code)


def _store_failure(e: Exception) -> NoReturn:
    """Exit 2 with one clear line; a DuckDB error that got past the open-time
    check (store.check_database) still names the database instead of a traceback."""
    if isinstance(e, duckdb.Error):
        e = StoreError(
            f"the results database could not be read: {str(e).strip().splitlines()[0]} "
            "(move tailscope.duckdb aside to start a new one)"
        )
    _fail(e)


def known_models() -> tuple[str, ...]:
    """tailscope-svc's model names (the engine's own list), or exit 2 saying why they are unknown."""
    from tailscope.lab.engines import EngineError
    from tailscope.lab.graph import svc_models

    try:
        return svc_models()
    except EngineError as e:
        _fail(e)
