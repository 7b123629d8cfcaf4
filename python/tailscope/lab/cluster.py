"""The graph in containers on this machine: a private Docker daemon, an image built
without a registry, and a Compose project whose every name carries a run-specific
prefix, so `down` removes exactly what `up` made (docs/deploy.md, "cluster").

* **Daemon.** Unless the user names one (`docker_host`), a private `dockerd` is started
  as a child process with its own socket, data and exec roots under the cluster folder,
  configured *before its first start* so that every container network is in the lab
  range (bip 198.19.250.1/24, pools from 198.19.0.0/17), and iptables and the host's
  ip_forward are never touched.
  It is stopped by its PID. A daemon the user configured is used as it is, never changed.
* **Image.** A base image from Debian packages (mmdebstrap, minbase plus the engines'
  runtime libraries), imported once and cached as a tar; the engines are a layer on top
  (`docker build` from the local base: no registry).
* **Graph.** compose.py's file, run with docker-compose under the prefix as project name.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import signal
import stat
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from tailscope.lab import compose as compose_file
from tailscope.lab import deployment as dep_mod
from tailscope.lab import tools
from tailscope.lab.engines import find_engine

# The engines' runtime libraries (ldd on the Release build, mapped with dpkg -S); tailscope-svc links the
# store clients (hiredis, libmemcached, libpq: docs/stores.md), whose own dependencies apt pulls in.
BASE_PACKAGES = ("libssl3", "libstdc++6", "liburing2", "zlib1g", "libhiredis0.14", "libmemcached11", "libpq5")
MIRRORS = (
    "deb http://deb.debian.org/debian bookworm main",
    "deb http://deb.debian.org/debian bookworm-updates main",
    "deb http://deb.debian.org/debian-security bookworm-security main",
)
PRIVATE_BRIDGE_IP = "198.19.250.1/24"
PRIVATE_POOL = {"base": "198.19.0.0/17", "size": 24}
DAEMON_START_S = 30.0
DAEMON_STOP_S = 20.0
STATE_FILE = "cluster.json"
# Containers and networks a run makes outside Compose (the Kubernetes pods on Docker, k8s_docker.py)
# carry this label with the run's prefix: `down` removes them by it, like Compose's project label.
RUN_LABEL = "io.tailscope.cluster"


class ClusterError(RuntimeError):
    """Docker cannot start or a step failed: one clear line for the user."""


def default_root() -> Path:
    # /var/tmp: the daemon's overlay2 needs a real file system (not tmpfs), and it outlives reboots.
    return Path(os.environ.get("TAILSCOPE_CLUSTER_DIR", "/var/tmp/tailscope-cluster"))


@dataclass
class ClusterState:
    prefix: str  # every container, network and image tag this run made carries it
    folder: str  # this run's folder: daemon roots, compose files, results
    docker_host: str
    daemon_pid: int | None  # set when this run started the daemon: `down` stops it
    image: str = ""
    tags: list[str] = field(default_factory=list)  # other names this run gave the image (`down` removes them)

    def save(self) -> None:
        (Path(self.folder) / STATE_FILE).write_text(json.dumps(asdict(self), indent=1))

    @staticmethod
    def load(folder: Path) -> ClusterState:
        try:
            return ClusterState(**json.loads((folder / STATE_FILE).read_text()))
        except (OSError, ValueError, TypeError) as e:
            raise ClusterError(f"{folder}: no cluster state here ({e})") from e

    def env(self) -> dict[str, str]:
        return {**os.environ, "DOCKER_HOST": self.docker_host}

    @property
    def compose_dir(self) -> Path:
        return Path(self.folder) / "compose"


def new_prefix() -> str:
    return f"tsc{secrets.token_hex(3)}"


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise ClusterError(f"{name} not found: install the container path with `scripts/bootstrap --docker`")
    return path


def docker(state: ClusterState, *args: str, timeout_s: float = 300, check: bool = True) -> subprocess.CompletedProcess:
    # Debian's client, beside its daemon: another docker on PATH may lack what this needs.
    client = "/usr/bin/docker" if Path("/usr/bin/docker").exists() else tool("docker")
    r = subprocess.run([client, *args], env=state.env(), capture_output=True, text=True, timeout=timeout_s)
    if check and r.returncode != 0:
        raise ClusterError(f"docker {' '.join(args[:3])}: {r.stderr.strip().splitlines()[-1:] or r.returncode}")
    return r


def daemon_config(folder: Path) -> dict:
    return {
        "data-root": str(folder / "data"),
        "exec-root": str(folder / "exec"),
        "pidfile": str(folder / "dockerd.pid"),
        "hosts": [f"unix://{folder / 'docker.sock'}"],
        "bip": PRIVATE_BRIDGE_IP,
        "default-address-pools": [PRIVATE_POOL],
        "iptables": False,
        "ip6tables": False,
        "ip-masq": False,
        # Containers on one bridge need no routing; left on, dockerd would set the host's
        # net.ipv4.ip_forward to 1 (it did, the first time this ran) and a query Docker's
        # embedded DNS forwards could be routed off the machine.
        "ip-forward": False,
        "ipv6": False,
    }


def start_private_daemon(state: ClusterState) -> None:
    dockerd = tool("dockerd")
    # A private daemon owns the default bridge `docker0` (the name cannot be changed together with
    # bip): one that exists belongs to another daemon, whose network must not be reconfigured.
    if Path("/sys/class/net/docker0").exists():
        raise ClusterError(
            "a docker0 bridge exists (another Docker daemon, or a private one still up): "
            "use that daemon with --docker-host, or `tailscope cluster down` the other run"
        )
    folder = Path(state.folder)
    (folder / "data").mkdir(parents=True, exist_ok=True)
    (folder / "exec").mkdir(parents=True, exist_ok=True)
    config = folder / "daemon.json"
    config.write_text(json.dumps(daemon_config(folder), indent=1))
    log = open(folder / "dockerd.log", "w")  # noqa: SIM115 - the daemon writes it for its whole life
    proc = subprocess.Popen(
        [dockerd, "--config-file", str(config)], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    log.close()
    state.daemon_pid = proc.pid
    state.docker_host = f"unix://{folder / 'docker.sock'}"
    state.save()  # from here on `down` can stop it, even if the rest of `up` fails
    deadline = time.monotonic() + DAEMON_START_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = (folder / "dockerd.log").read_text().strip().splitlines()[-3:]
            raise ClusterError(f"dockerd exited {proc.returncode} at start: {' | '.join(tail)}")
        if docker(state, "version", "--format", "{{.Server.Version}}", timeout_s=10, check=False).returncode == 0:
            return
        time.sleep(0.3)
    raise ClusterError(f"dockerd did not answer on {state.docker_host} within {DAEMON_START_S:.0f} s")


def stop_private_daemon(state: ClusterState) -> None:
    pid = state.daemon_pid
    if pid is None:
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pid = None
    deadline = time.monotonic() + DAEMON_STOP_S
    while pid is not None and time.monotonic() < deadline:
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                break
        except ChildProcessError:  # not our child (another `tailscope cluster` process started it)
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
        time.sleep(0.2)
    else:
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
    state.daemon_pid = None
    # dockerd leaves its default bridge behind; it made it (start_private_daemon checked that
    # none existed), so it goes too: the next private daemon starts from the same state.
    if Path("/sys/class/net/docker0").exists():
        subprocess.run(["ip", "link", "delete", "docker0"], capture_output=True, timeout=10)


def null_device_intact() -> bool:
    """/dev/null is still the character device 1:3. While mmdebstrap builds (as root, it prepares
    device nodes under its target) the host's /dev/null was seen replaced by a plain file three times
    here (the cause is not established; docs/deploy.md). Checked before and after each build, so
    a damaged machine is named at once instead of failing later in unrelated ways."""
    try:
        st = os.stat("/dev/null")
    except OSError:
        return False
    return stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) == 1 and os.minor(st.st_rdev) == 3


NULL_DEVICE_DAMAGED = (
    "/dev/null is not the null device (a plain file or missing){when}; restore it as root with "
    "`rm -f /dev/null && mknod -m 666 /dev/null c 1 3` (docs/deploy.md)"
)


def base_image(state: ClusterState, progress=print) -> str:
    key = hashlib.sha256(" ".join(BASE_PACKAGES + MIRRORS).encode()).hexdigest()[:12]
    tag = f"tailscope-base:{key}"
    if docker(state, "image", "inspect", tag, check=False).returncode == 0:
        return tag
    tar = tools.cache_dir() / f"rootfs-bookworm-{key}.tar"
    if not tar.exists():
        progress(f"building the base root file system with mmdebstrap (once, ~1 min) into {tar}")
        tar.parent.mkdir(parents=True, exist_ok=True)
        if not null_device_intact():
            raise ClusterError(NULL_DEVICE_DAMAGED.format(when=" before the image build"))
        tmp = tar.with_name(f"tmp-{os.getpid()}-{tar.name}")  # mmdebstrap picks its format by the .tar ending
        r = subprocess.run(
            [
                tool("mmdebstrap"),
                "--variant=minbase",
                f"--include={','.join(BASE_PACKAGES)}",
                '--customize-hook=rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/*',
                "bookworm",
                str(tmp),
                *MIRRORS,
            ],
            capture_output=True,
            text=True,
            timeout=900,
        )
        if not null_device_intact():
            tmp.unlink(missing_ok=True)
            raise ClusterError(NULL_DEVICE_DAMAGED.format(when=" after mmdebstrap ran"))
        if r.returncode != 0:
            tmp.unlink(missing_ok=True)
            raise ClusterError(f"mmdebstrap failed: {r.stderr.strip().splitlines()[-1:]}")
        tmp.replace(tar)
    docker(state, "import", str(tar), tag)
    return tag


def build_image(state: ClusterState, progress=print, jaeger: bool = False) -> str:
    """The engines as a layer on the base image; `jaeger`: the bootstrap's Jaeger binary too (it links
    only libc, which the base has), so one image runs the graph and its trace store."""
    base = base_image(state, progress)
    ctx = Path(state.folder) / "image"
    ctx.mkdir(parents=True, exist_ok=True)
    binaries = {"tailscope-svc": find_engine("tailscope-svc"), "tailscope-load": find_engine("tailscope-load")}
    if jaeger:
        try:
            binaries["jaeger"] = tools.tool_path("jaeger")
        except tools.ToolUnavailable as e:
            raise ClusterError(str(e)) from e
    for name, path in binaries.items():
        shutil.copy2(path, ctx / name)
    (ctx / "Dockerfile").write_text(f"FROM {base}\nCOPY {' '.join(binaries)} /usr/local/bin/\n")
    state.image = f"tailscope-lab:{state.prefix}"
    state.save()
    docker(state, "build", "-q", "-t", state.image, str(ctx))
    return state.image


def compose(state: ClusterState, *args: str, timeout_s: float = 600, check: bool = True):
    r = subprocess.run(
        [tool("docker-compose"), "-p", state.prefix, *args],
        cwd=state.compose_dir,
        env=state.env(),
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    if check and r.returncode != 0:
        raise ClusterError(f"docker-compose {' '.join(args[:2])}: {r.stderr.strip()[-400:]}")
    return r


def leftovers(state: ClusterState) -> list[str]:
    """Containers, networks and image tags carrying this run's prefix that still exist."""
    out: list[str] = []
    for label in _labels(state):
        r = docker(state, "ps", "-aq", "--filter", label, check=False)
        out += [f"container {c}" for c in r.stdout.split()]
        r = docker(state, "network", "ls", "-q", "--filter", label, check=False)
        out += [f"network {n}" for n in r.stdout.split()]
    for image in [state.image, *state.tags] if state.image else state.tags:
        if docker(state, "image", "inspect", image, check=False).returncode == 0:
            out.append(f"image {image}")
    return out


def _labels(state: ClusterState) -> tuple[str, str]:
    """The filters that find what this run made: Compose's project label and RUN_LABEL."""
    return (f"label=com.docker.compose.project={state.prefix}", f"label={RUN_LABEL}={state.prefix}")


def down(state: ClusterState) -> list[str]:
    """Removes what this run made; returns what could not be removed ([] = clean)."""
    # No daemon yet (up failed before one answered): nothing to ask, and never the default socket.
    daemon_up = bool(state.docker_host) and docker(state, "version", timeout_s=10, check=False).returncode == 0
    if daemon_up:
        if state.compose_dir.is_dir():
            compose(state, "--profile", "load", "down", "--remove-orphans", "--timeout", "20", check=False)
        for label in _labels(state):
            for c in docker(state, "ps", "-aq", "--filter", label, check=False).stdout.split():
                docker(state, "rm", "-f", c, check=False)
        for label in _labels(state):
            for n in docker(state, "network", "ls", "-q", "--filter", label, check=False).stdout.split():
                docker(state, "network", "rm", n, check=False)
        for tag in state.tags:
            docker(state, "rmi", tag, check=False)
        if state.image:
            docker(state, "rmi", state.image, check=False)
        left = leftovers(state)
    else:
        left = []
    if state.daemon_pid is not None:
        stop_private_daemon(state)
        for sub in ("data", "exec"):
            shutil.rmtree(Path(state.folder) / sub, ignore_errors=True)
        left = [x for x in (f"{sub}/" for sub in ("data", "exec")) if (Path(state.folder) / x).exists()]
    state.save()
    return left


def remove(state: ClusterState) -> list[str]:
    """`down`, and the run's folder too when nothing was left (what `tailscope cluster down` does)."""
    left = down(state)
    if not left:
        shutil.rmtree(state.folder, ignore_errors=True)
    return left


def unavailable_reason() -> str | None:
    """Why a private daemon cannot start here (None: it can): what `up` would fail on first."""
    if os.geteuid() != 0:
        return "needs root to start a Docker daemon"
    for name in ("dockerd", "docker-compose", "mmdebstrap"):
        if shutil.which(name) is None:
            return f"{name} not installed (scripts/bootstrap --docker installs the container path)"
    if Path("/sys/class/net/docker0").exists():
        return "a docker0 bridge exists: another Docker daemon runs here (use it with --docker-host)"
    return None


def _undo(state: ClusterState, e: BaseException) -> None:
    """Removes what a failed step made (nothing half made), then re-raises: a ClusterError saying
    what was removed for the failures tailscope expects, anything else (an interrupt) as it is."""
    left = remove(state)
    if not isinstance(e, (ClusterError, compose_file.DeployError, OSError, subprocess.TimeoutExpired)):
        raise e
    raise ClusterError(
        f"{e}" + (f" (could not remove: {', '.join(left)})" if left else " (everything it made was removed)")
    ) from e


def _new_state(docker_host: str | None) -> ClusterState:
    prefix = new_prefix()
    folder = default_root() / prefix
    folder.mkdir(parents=True)
    state = ClusterState(prefix=prefix, folder=str(folder), docker_host=docker_host or "", daemon_pid=None)
    state.save()
    return state


def engine_up(docker_host: str | None = None, progress=print, jaeger: bool = False) -> ClusterState:
    """A daemon that answers (a private one unless docker_host names one) with the image built
    (`jaeger`: with the Jaeger binary): graphs started with `up(..., engine=this)` share both;
    `remove(this)` stops what it started."""
    state = _new_state(docker_host)
    try:
        if docker_host:
            if docker(state, "version", timeout_s=10, check=False).returncode != 0:
                raise ClusterError(f"--docker-host {docker_host}: no Docker daemon answers there")
        else:
            progress(f"starting a private Docker daemon in {state.folder}")
            start_private_daemon(state)
        progress("building the image")
        build_image(state, progress=progress, jaeger=jaeger)
    except BaseException as e:  # an interrupt too: no daemon left behind
        _undo(state, e)
    return state


def up(
    doc: dict,
    plan: dep_mod.Deployment | None,
    options: compose_file.ComposeOptions,
    docker_host: str | None = None,
    cpus: list[int] | None = None,
    progress=print,
    engine: ClusterState | None = None,
) -> ClusterState:
    """Starts the graph DOC in containers under a new prefix: on `engine`'s daemon and image when
    given (its `down` then leaves both to the engine's), else on a daemon and image of its own
    (engine_up). `options.image` is set to the image used. On any failure everything this call made
    is removed (nothing half made) and ClusterError says why."""
    if engine is None:
        state = engine_up(docker_host, progress, jaeger=options.jaeger)
    else:
        state = _new_state(engine.docker_host)
    try:
        options.image = (engine or state).image
        spec = compose_file.compose(doc, plan, options, cpus=cpus)
        compose_file.write(doc, spec, state.compose_dir)
        compose(state, "up", "-d")
    except BaseException as e:  # an interrupt too
        _undo(state, e)
    return state


def run_load(state: ClusterState) -> None:
    """Drives the running graph with the load container (its rate and duration are the Compose file's)."""
    # --no-deps: the graph is up; docker-compose would otherwise (re)start what the load depends on.
    compose(state, "--profile", "load", "run", "--rm", "--no-deps", "load", timeout_s=86400 + 600)


def spec(state: ClusterState) -> dict:
    """The run's Compose file."""
    return dict(yaml.safe_load((state.compose_dir / "docker-compose.yml").read_text()))


# Reads a Jaeger's traces: (its query URL, the service whose traces, the folder to write them to) ->
# a summary. The caller's (traces/ sits above lab/ in the driver's layers): traces.jaeger.fetch_into.
TraceFetch = Callable[[str, str, Path], dict]


def collect(state: ClusterState, results: Path, traces: TraceFetch | None = None) -> Path:
    """Stops every service so each writes its result document, and copies the documents to
    RESULTS/cluster-PREFIX. With a Jaeger container and `traces`: the services stop first (each
    sends its last spans as it stops), then `traces` reads Jaeger's into the same folder
    (traces.jaeger.json, traces.summary.json), then Jaeger stops. The containers stay (stopped)
    until `down`."""
    out = Path(results) / f"cluster-{state.prefix}"
    out.mkdir(parents=True, exist_ok=True)
    s = spec(state)
    url = compose_file.jaeger_query_url(s)
    if url and traces is not None:
        graph = [n for n in s["services"] if n not in (compose_file.JAEGER, "load")]
        compose(state, "stop", "--timeout", "20", *graph)  # SIGTERM: each service writes its document
        doc = json.loads((state.compose_dir / "topology.json").read_text())
        summary = traces(url, str((doc.get("front") or {}).get("service") or ""), out)
        (out / "traces.summary.json").write_text(json.dumps(summary, indent=1))
    compose(state, "stop", "--timeout", "20")
    shutil.copytree(state.compose_dir / "results", out, dirs_exist_ok=True)
    return out


def drive(state: ClusterState, results: Path, traces: TraceFetch | None = None) -> Path:
    """run_load, then collect."""
    run_load(state)
    return collect(state, results, traces)


def service_pids(state: ClusterState) -> dict[str, int]:
    """Compose service → the host PID of its container's main process (the engine: the image's
    entrypoint), for /proc sampling from the host like a native process."""
    ids = compose(state, "ps", "-q").stdout.split()
    out: dict[str, int] = {}
    for cid in ids:
        fmt = '{{index .Config.Labels "com.docker.compose.service"}} {{.State.Pid}}'
        name, _, pid = docker(state, "inspect", "-f", fmt, cid).stdout.strip().partition(" ")
        if pid.isdigit() and int(pid) > 0:
            out[name] = int(pid)
    return out


def ping(state: ClusterState, address: str, port: int, calls: int, warmup_calls: int) -> dict:
    """The engine's own transport ping (`tailscope-svc --ping`, one call in flight) from a one-shot
    container on the graph's network to the service at ADDRESS (its static address in the lab
    subnet): what one call costs through the container network, beside the same ping on loopback
    natively. Returns its result document (the server's CPU is unavailable: another PID namespace)."""
    r = compose(
        state,
        "--profile",
        "load",
        "run",
        "--rm",
        "-T",
        "--no-deps",
        "--entrypoint",
        "tailscope-svc",
        "load",
        "--ping",
        str(port),
        "--ping-host",
        address,
        "--ping-calls",
        str(calls),
        "--ping-warmup",
        str(warmup_calls),
        timeout_s=600,
    )
    try:
        return json.loads(r.stdout[r.stdout.index("{") :])
    except ValueError as e:
        raise ClusterError(f"ping through the container network printed no result document: {r.stdout[-200:]}") from e
