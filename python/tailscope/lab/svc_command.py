"""The `tailscope-svc` command line of one service in a container, written once
for every deployment target: the Kubernetes manifests (k8s.py) and the Compose
file (compose.py) run the same image with the same arguments, so what runs
under `docker-compose` is what a cluster runs."""

from __future__ import annotations

CONFIG_DIR = "/etc/tailscope"
TOPOLOGY_IN_CONTAINER = f"{CONFIG_DIR}/topology.json"


def svc_args(
    service: str,
    *,
    model: str,
    port: int,
    trace_sample: float | str,
    otlp_endpoint: str | None,
    ports: dict[str, int] | None = None,
    peers: dict[str, str] | None = None,
    bind: str | None = None,
    allow_cidrs: list[str] | tuple[str, ...] = (),
    out: str | None = None,
) -> list[str]:
    """Arguments after `tailscope-svc` for SERVICE. Peers are given either as
    `ports` (every peer on 127.0.0.1) or as `peers` (NAME -> HOST:PORT, HOST a DNS
    name the container's resolver answers: the engine resolves it at start and on
    every reconnect and checks it against the allow-list, which `allow_cidrs`
    extends)."""
    args = ["--topology", TOPOLOGY_IN_CONTAINER, "--service", service, "--model", model, "--port", str(port)]
    if bind:
        args += ["--bind", bind]
    if ports:
        args += ["--ports", ",".join(f"{n}={p}" for n, p in ports.items())]
    if peers:
        args += ["--peers", ",".join(f"{n}={a}" for n, a in peers.items())]
    for block in allow_cidrs:
        args += ["--allow-cidr", block]
    if otlp_endpoint:
        args += ["--trace-sample", str(trace_sample), "--otlp-endpoint", otlp_endpoint]
    if out:
        args += ["--out", out]
    return args
