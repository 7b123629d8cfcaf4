"""tailscope-load's arguments as the studies use it: pacing and one HTTP run against a graph's front."""

from __future__ import annotations

# How the load generator paces when it has a core of its own (docs/load-generator.md,
# "Pacing"): "busy-poll" never sleeps, so no wake-up latency (tens of µs on a shared VM)
# lands in the send lag the self-check compares with the server's latency; "sleep" sleeps
# until --spin-us before each send (the engine's default). Recorded in every document
# (config.busy_poll, config.spin_us); chosen with the `load_pacing` option.
LOAD_PACINGS = ("busy-poll", "sleep")


def load_pacing(options: dict) -> str:
    """The pacing a study asked for (`load_pacing` option), busy-poll unless told otherwise."""
    pacing = str(options.get("load_pacing") or "busy-poll")
    if pacing not in LOAD_PACINGS:
        raise ValueError(f"load_pacing: '{pacing}' is not one of {', '.join(LOAD_PACINGS)}")
    return pacing


def load_pacing_args(pacing: str) -> list[str]:
    """tailscope-load flags for `pacing` (only for a generator pinned to cores the server does not use)."""
    return ["--busy-poll"] if pacing == "busy-poll" else []


def http_load_args(
    port: int,
    path: str,
    connections: int,
    rate_per_s: float,
    duration_s: float,
    warmup_s: float,
    *,
    timeout: str,
    cpus: list[int] | None = None,
) -> list[str]:
    """tailscope-load flags for one HTTP run against a graph's front (one load thread,
    keep-alive connections; rate 0 = closed loop). Errors are counted, not fatal: a
    study sweeping into overload reads them from the document."""
    args = ["-t", "1", "-c", str(connections), "-d", f"{duration_s:.3f}", "--warmup", f"{warmup_s:.3f}"]
    args += ["-R", f"{rate_per_s:.0f}", "--protocol", "http", "--port", str(port), "--path", path]
    args += ["--timeout", timeout, "--allow-errors"]
    if cpus:
        args += ["--cpus", ",".join(map(str, cpus))]
    return args
