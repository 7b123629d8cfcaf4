"""Lab hosts: network namespaces joined by one bridge, so a graph can be split over
"machines" with real Linux networking on one box (docs/lab-hosts.md).

Shape of a lab with prefix ``ts`` and N hosts::

    root namespace:  bridge ts-br0 (first address of the subnet)
                       ├── ts-h1-br ══ veth ══ eth0 in namespace ts-h1 (second address)
                       ├── ts-h2-br ══ veth ══ eth0 in namespace ts-h2 (third address)
                       └── …

Addresses come from 198.18.0.0/15 (RFC 2544's benchmarking range) and nothing else:
the namespaces get no default route, so a process inside a lab host can reach the
other lab hosts and its own loopback, never the outside network.

Every object carries the lab's prefix; ``down`` removes exactly the objects whose
names match the lab's patterns (``ts-hN`` namespaces, ``ts-hN-br`` links, ``ts-br0``)
and nothing else. ``up`` is a transaction: what it made is undone in reverse when a
step fails or the user interrupts it; a lab left half made by a killed process is
recognised by its state file (status "building") or by objects without a state file,
and ``up`` / ``down`` clean it.

iproute2 is driven through subprocess (``ip -json``) rather than netlink bindings:
the commands are the ones a user would type to inspect or repair the lab by hand.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tailscope.atomicfile import write_text_atomic
from tailscope.lab.allow_list import LAB_RANGE
from tailscope.lab.machine import OK, UNAVAILABLE, WARN, Check

DEFAULT_SUBNET = "198.18.0.0/24"
DEFAULT_PREFIX = "ts"
MAX_HOSTS = 64
STATE_DIR = Path(os.environ.get("TAILSCOPE_LAB_STATE_DIR", "/run/tailscope"))
IP_TIMEOUT_S = 20.0

# Exit codes of `tailscope hosts` (docs/lab-hosts.md).
EXIT_BAD_INPUT = 2
EXIT_REFUSED = 3
EXIT_NOT_PERMITTED = 4
EXIT_IP_FAILED = 1


class LabError(Exception):
    """A lab-host operation that could not be done; `exit_code` is the CLI's."""

    def __init__(self, message: str, exit_code: int = EXIT_IP_FAILED):
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class LabConfig:
    hosts: int = 2
    subnet: str = DEFAULT_SUBNET
    prefix: str = DEFAULT_PREFIX

    @property
    def network(self) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(self.subnet)

    @property
    def bridge(self) -> str:
        return f"{self.prefix}-br0"

    def namespace(self, i: int) -> str:
        return f"{self.prefix}-h{i}"

    def veth(self, i: int) -> str:
        return f"{self.prefix}-h{i}-br"

    def bridge_address(self) -> ipaddress.IPv4Address:
        return self.network.network_address + 1

    def host_address(self, i: int) -> ipaddress.IPv4Address:
        return self.network.network_address + 1 + i

    def namespace_pattern(self) -> re.Pattern[str]:
        return re.compile(rf"^{re.escape(self.prefix)}-h[0-9]+$")

    def link_pattern(self) -> re.Pattern[str]:
        return re.compile(rf"^(?:{re.escape(self.prefix)}-h[0-9]+-br|{re.escape(self.prefix)}-br0)$")

    @property
    def state_file(self) -> Path:
        return STATE_DIR / f"labhosts-{self.prefix}.json"


@dataclass
class LabHost:
    name: str
    address: str
    veth: str
    pids: list[int] = field(default_factory=list)


@dataclass
class LabState:
    """What the kernel holds for one prefix (not what a state file claims)."""

    config: LabConfig | None  # from the state file; None when there is none
    status: str  # "up", "building" (a crashed `up`), "absent", "stray" (objects, no state file)
    namespaces: list[str]
    links: list[str]
    hosts: list[LabHost]


def validate(hosts: int, subnet: str, prefix: str = DEFAULT_PREFIX) -> LabConfig:
    """Range-checks every user input; raises LabError(EXIT_BAD_INPUT) naming it."""
    if not re.fullmatch(r"[a-z]{1,4}", prefix):
        raise LabError(f"--prefix '{prefix}': 1 to 4 lower-case letters", EXIT_BAD_INPUT)
    if not 1 <= hosts <= MAX_HOSTS:
        raise LabError(f"--hosts {hosts}: must be in 1 … {MAX_HOSTS}", EXIT_BAD_INPUT)
    try:
        net = ipaddress.IPv4Network(subnet, strict=True)
    except ValueError as e:
        raise LabError(f"--subnet '{subnet}': not an IPv4 network in CIDR form ({e})", EXIT_BAD_INPUT) from e
    if not net.subnet_of(LAB_RANGE):
        raise LabError(
            f"--subnet {net}: lab hosts take addresses only from {LAB_RANGE} "
            "(RFC 2544's benchmarking range), so no lab packet can reach a real network",
            EXIT_BAD_INPUT,
        )
    usable = net.num_addresses - 2  # network and broadcast
    if usable < hosts + 1:  # + the bridge
        raise LabError(
            f"--subnet {net}: {usable} usable addresses, {hosts + 1} needed (bridge + {hosts} hosts)", EXIT_BAD_INPUT
        )
    return LabConfig(hosts=hosts, subnet=str(net), prefix=prefix)


def _ip(*args: str, netns: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    cmd = ["ip", *(["-n", netns] if netns else []), *args]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=IP_TIMEOUT_S)
    except FileNotFoundError as e:
        raise LabError("the `ip` command (iproute2) is not installed") from e
    except subprocess.TimeoutExpired as e:
        raise LabError(f"`{' '.join(cmd)}` did not finish within {IP_TIMEOUT_S:.0f} s") from e
    if check and p.returncode != 0:
        raise LabError(f"`{' '.join(cmd)}` failed: {p.stderr.strip() or f'exit {p.returncode}'}")
    return p


def _ip_json(*args: str, netns: str | None = None) -> list[dict]:
    out = _ip("-json", *args, netns=netns).stdout.strip()
    return json.loads(out) if out else []


def require_root() -> None:
    if os.geteuid() != 0:
        raise LabError(
            "tailscope hosts creates network namespaces, veth links and a bridge, which needs root "
            "(CAP_NET_ADMIN and CAP_SYS_ADMIN): run it as root, e.g. `sudo .venv/bin/tailscope hosts up`",
            EXIT_NOT_PERMITTED,
        )


def _all_namespaces() -> list[str]:
    return [n["name"] for n in _ip_json("netns", "list")]


def _all_links() -> list[str]:
    return [link["ifname"] for link in _ip_json("link", "show")]


def _read_state_file(config: LabConfig) -> tuple[LabConfig | None, str | None]:
    try:
        doc = json.loads(config.state_file.read_text())
        return LabConfig(hosts=doc["hosts"], subnet=doc["subnet"], prefix=doc["prefix"]), doc["status"]
    except FileNotFoundError:
        return None, None
    except (ValueError, KeyError, TypeError):
        return None, "damaged"


def _write_state_file(config: LabConfig, status: str) -> None:
    write_text_atomic(
        config.state_file,
        json.dumps({"hosts": config.hosts, "subnet": config.subnet, "prefix": config.prefix, "status": status}),
    )


def _pids_in(namespace: str) -> list[int]:
    p = _ip("netns", "pids", namespace, check=False)
    return sorted(int(x) for x in p.stdout.split() if x.isdigit())


def state(prefix: str = DEFAULT_PREFIX) -> LabState:
    """The lab of `prefix` as the kernel holds it."""
    probe = LabConfig(prefix=prefix)
    saved, status = _read_state_file(probe)
    namespaces = sorted((n for n in _all_namespaces() if probe.namespace_pattern().match(n)), key=_host_index)
    links = sorted(link for link in _all_links() if probe.link_pattern().match(link))
    hosts = []
    for ns in namespaces:
        address = ""
        for iface in _ip_json("addr", "show", "dev", "eth0", netns=ns) if _has_eth0(ns) else []:
            for a in iface.get("addr_info", []):
                if a.get("family") == "inet":
                    address = f"{a['local']}/{a['prefixlen']}"
        hosts.append(LabHost(name=ns, address=address, veth=f"{ns}-br", pids=_pids_in(ns)))
    if status is None:
        status = "stray" if (namespaces or links) else "absent"
    return LabState(config=saved, status=status, namespaces=namespaces, links=links, hosts=hosts)


def _has_eth0(ns: str) -> bool:
    return _ip("link", "show", "dev", "eth0", netns=ns, check=False).returncode == 0


def _host_index(ns: str) -> int:
    return int(ns.rsplit("-h", 1)[1])


def _routes_overlapping(net: ipaddress.IPv4Network, own_bridge: str) -> list[str]:
    out = []
    for r in _ip_json("-4", "route", "show"):
        dst = r.get("dst", "")
        if dst == "default" or r.get("dev") == own_bridge:
            continue
        try:
            other = ipaddress.IPv4Network(dst if "/" in dst else f"{dst}/32", strict=False)
        except ValueError:
            continue
        if other.overlaps(net):
            out.append(f"{dst} dev {r.get('dev', '?')}")
    return out


def up(config: LabConfig, log: Callable[[str], None] = lambda _m: None) -> LabState:
    """Creates the lab, or confirms it is already there with this shape."""
    require_root()
    current = state(config.prefix)
    if current.status == "up" and current.config == config and _complete(current, config):
        log(f"lab {config.prefix} is already up: {config.hosts} hosts on {config.subnet}")
        return current
    if current.status == "up":
        have = current.config
        shape = f"{have.hosts} hosts on {have.subnet}" if have else "an unknown shape"
        raise LabError(
            f"a lab with prefix {config.prefix} is already up with {shape}; "
            f"run `tailscope hosts down{'' if config.prefix == DEFAULT_PREFIX else ' --prefix ' + config.prefix}` "
            f"first to build {config.hosts} hosts on {config.subnet}",
            EXIT_REFUSED,
        )
    if current.status != "absent":
        log(f"cleaning a half-made lab {config.prefix} (status {current.status}) left by an interrupted `up`")
        down(config.prefix, log=log)
    overlaps = _routes_overlapping(config.network, config.bridge)
    if overlaps:
        raise LabError(
            f"--subnet {config.subnet} overlaps routes this machine already has ({'; '.join(overlaps)}); "
            "choose another part of 198.18.0.0/15",
            EXIT_REFUSED,
        )
    _write_state_file(config, "building")
    undo: list[Callable[[], object]] = []
    try:
        _ip("link", "add", config.bridge, "type", "bridge")
        undo.append(functools.partial(_ip, "link", "del", config.bridge, check=False))
        _ip("addr", "add", f"{config.bridge_address()}/{config.network.prefixlen}", "dev", config.bridge)
        _ip("link", "set", config.bridge, "up")
        for i in range(1, config.hosts + 1):
            ns, veth = config.namespace(i), config.veth(i)
            _ip("netns", "add", ns)
            undo.append(functools.partial(_ip, "netns", "del", ns, check=False))
            # The namespace end is created inside the namespace and named eth0 there, as on a real host.
            _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
            undo.append(functools.partial(_ip, "link", "del", veth, check=False))
            _ip("link", "set", veth, "master", config.bridge)
            _ip("link", "set", veth, "up")
            _ip("link", "set", "lo", "up", netns=ns)
            _ip("addr", "add", f"{config.host_address(i)}/{config.network.prefixlen}", "dev", "eth0", netns=ns)
            _ip("link", "set", "eth0", "up", netns=ns)
            log(f"{ns}: {config.host_address(i)}")
    except BaseException:
        # Interrupts included: a Ctrl-C mid-`up` must not leave half a lab behind.
        for step in reversed(undo):
            step()
        config.state_file.unlink(missing_ok=True)
        raise
    _write_state_file(config, "up")
    return state(config.prefix)


def _complete(current: LabState, config: LabConfig) -> bool:
    want_ns = [config.namespace(i) for i in range(1, config.hosts + 1)]
    want_links = sorted([config.bridge, *(config.veth(i) for i in range(1, config.hosts + 1))])
    addresses = [h.address for h in current.hosts]
    want_addresses = [f"{config.host_address(i)}/{config.network.prefixlen}" for i in range(1, config.hosts + 1)]
    return current.namespaces == want_ns and current.links == want_links and addresses == want_addresses


def down(
    prefix: str = DEFAULT_PREFIX, *, stop_processes: bool = False, log: Callable[[str], None] = lambda _m: None
) -> list[str]:
    """Removes every object of the lab `prefix`; returns their names.

    Processes still running inside a lab host are refused (EXIT_REFUSED) unless
    `stop_processes`: then they get SIGTERM, and SIGKILL after 3 s.
    """
    require_root()
    current = state(prefix)
    busy = {h.name: h.pids for h in current.hosts if h.pids}
    if busy and not stop_processes:
        listing = "; ".join(f"{ns}: pids {', '.join(map(str, p))}" for ns, p in busy.items())
        raise LabError(
            f"processes are still running inside lab hosts ({listing}); stop them, "
            "or run `tailscope hosts down --stop` to terminate them first",
            EXIT_REFUSED,
        )
    if busy:
        _terminate([p for pids in busy.values() for p in pids], log)
    removed = []
    for ns in current.namespaces:
        # Deleting the namespace destroys its eth0, which destroys the veth's root end too.
        _ip("netns", "del", ns)
        removed.append(ns)
    # A deleted namespace takes its veth's root end along, but asynchronously: a link
    # listed a moment ago may vanish before we delete it, so only a link that is still
    # there after a failed delete is an error.
    for link in current.links:
        if _ip("link", "del", link, check=False).returncode != 0 and link in _all_links():
            _ip("link", "del", link)
        removed.append(link)
    deadline = time.monotonic() + 5.0
    while any(LabConfig(prefix=prefix).link_pattern().match(x) for x in _all_links()):
        if time.monotonic() > deadline:
            raise LabError(f"lab links of {prefix} still exist 5 s after `down` removed them")
        time.sleep(0.02)
    LabConfig(prefix=prefix).state_file.unlink(missing_ok=True)
    for name in removed:
        log(f"removed {name}")
    return removed


def _terminate(pids: list[int], log: Callable[[str], None]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
            log(f"sent SIGTERM to {pid}")
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
            log(f"sent SIGKILL to {pid} (still running 3 s after SIGTERM)")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def exec_args(namespace: str) -> list[str]:
    """argv prefix that runs a command inside lab host `namespace`."""
    return ["ip", "netns", "exec", namespace]


# The qdiscs lab links use: netem for delay and jitter, tbf for a bandwidth limit,
# htb to give each destination host its own class.
QDISC_PROBES = {
    "sch_netem": "netem delay 1ms",
    "sch_tbf": "tbf rate 1mbit burst 32kbit latency 400ms",
    "sch_htb": "htb",
}


def probe_qdisc(spec: str) -> tuple[bool | None, str]:
    """Asks the kernel: attaches the qdisc to loopback inside a throw-away network
    namespace (`unshare -n`: it disappears with the process, nothing to clean).
    Returns (available, detail); available None when the probe itself could not run."""
    try:
        p = subprocess.run(
            ["unshare", "-n", "sh", "-c", f"tc qdisc add dev lo root {spec}"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except FileNotFoundError as e:
        return None, f"cannot probe: {e.filename} is not installed"
    except subprocess.TimeoutExpired:
        return None, "cannot probe: `tc qdisc add` did not finish within 10 s"
    if p.returncode == 0:
        return True, "tc qdisc add succeeded in a scratch namespace"
    err = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}"
    if "unshare" in err and ("Operation not permitted" in err or "permission" in err.lower()):
        return None, f"cannot probe without root: {err}"
    return False, f"the kernel refused it: {err}"


def qdisc_checks() -> list:
    """`tailscope doctor` lines: which link shapers this kernel offers."""
    use = {
        "sch_netem": "link delay/jitter by tc netem (otherwise the RPC transport's delay shim)",
        "sch_tbf": "bandwidth limits on lab links",
        "sch_htb": "per-destination link classes",
    }
    out = []
    for name, spec in QDISC_PROBES.items():
        available, detail = probe_qdisc(spec)
        if available:
            out.append(Check(name, OK, "available", use[name]))
        elif available is None:
            out.append(Check(name, WARN, "unknown", detail))
        else:
            out.append(Check(name, UNAVAILABLE, detail, use[name]))
    return out
