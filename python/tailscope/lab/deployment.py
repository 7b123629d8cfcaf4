"""Deployment files: which service runs on which host and CPUs (docs/lab-hosts.md).

One parser for every consumer: `tailscope deploy k8s` reads the host groups and CPU
requests; the `isolation` study (and a user running `tailscope-svc --all --deployment`)
needs the engine's JSON, where every host is a network namespace and an address.

The user-side file is YAML and names lab hosts (`lab_host: ts-h2`); `engine_json`
resolves them against the lab the kernel holds (`labhosts.state()`), so the JSON
carries the namespaces and addresses the engine enters and binds. A file is
checked whole before anything is resolved or written: an unknown host or service,
two services on one port of one host, a CPU list that does not parse, a delay out
of range — each error names the file and the key.

Two kinds of CPU field, because the two consumers pin differently:

- `hosts.H.cpus` and `services.S.pin` are CPU *lists* ("0", "0-3", "1,3"): the lab
  pins the host's (or the one service's) processes to them;
- `services.S.cpus` is a *count* of whole CPUs: the Kubernetes request (= limit)
  that lets the static CPU manager give the pod exclusive cores.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from tailscope.atomicfile import write_text_atomic
from tailscope.lab import yamlfile
from tailscope.lab.allow_list import LAB_RANGE

MAX_CPUS = 256  # whole CPUs a Kubernetes container may request here
MAX_CPU_ID = 4095
MAX_DELAY_US = 10_000_000  # one-way link delay, whole µs: the engine's range (docs/lab-hosts.md)
DEFAULT_MEMORY = "256Mi"
_QUANTITY = re.compile(r"^[0-9]+(Ki|Mi|Gi)$")
_CPU_LIST = re.compile(r"^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$")
_LAB_HOST = re.compile(r"^([a-z]{1,4})-h([0-9]+)$")
_HOST_KEYS = {"lab_host", "address", "cpus"}
_SERVICE_KEYS = {"host", "port", "cpus", "pin", "memory"}
_LINK_KEYS = {"between", "delay_us", "jitter_us"}


class DeploymentError(ValueError):
    """A deployment file that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class HostSpec:
    name: str
    lab_host: str | None = None  # a lab host's namespace (`tailscope hosts up`), e.g. ts-h2
    address: str | None = None  # only without lab_host: a loopback address in this namespace
    cpus: tuple[int, ...] = ()  # the CPUs the host's processes are pinned to; () = not pinned


@dataclass(frozen=True)
class ServiceSpec:
    name: str
    host: str | None = None
    port: int | None = None
    cpus: int = 1  # Kubernetes: whole CPUs requested (= limit)
    pin: tuple[int, ...] = ()  # lab: CPUs this service alone is pinned to (default: its host's)
    memory: str = DEFAULT_MEMORY


@dataclass(frozen=True)
class LinkSpec:
    a: str
    b: str
    delay_us: int  # one way, whole µs
    jitter_us: int = 0


@dataclass
class Deployment:
    path: Path
    name: str
    hosts: dict[str, HostSpec] = field(default_factory=dict)
    services: dict[str, ServiceSpec] = field(default_factory=dict)
    links: list[LinkSpec] = field(default_factory=list)
    load_hosts: list[str] = field(default_factory=list)  # hosts that run a load agent each
    # The host whose namespace and address run the real store servers (`stores: HOST`; None: the
    # graph's only host, and a graph on several hosts cannot run real stores — docs/stores.md).
    stores_host: str | None = None

    def lab_hosts_needed(self) -> int:
        """The `--hosts` a lab needs for this file: the highest lab host index it names."""
        return max((lab_host_index(h.lab_host) for h in self.hosts.values() if h.lab_host), default=0)

    def service_hosts(self) -> list[str]:
        """The hosts that run at least one service, in file order."""
        used = {s.host for s in self.services.values()}
        return [h for h in self.hosts if h in used]


def lab_host_index(name: str) -> int:
    m = _LAB_HOST.match(name)
    return int(m.group(2)) if m else 0


def format_cpu_list(cpus: tuple[int, ...] | list[int]) -> str:
    """(0, 1, 2, 5) -> "0-2,5": the kernel's cpulist form."""
    out: list[str] = []
    xs = sorted(set(cpus))
    i = 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        out.append(str(xs[i]) if i == j else f"{xs[i]}-{xs[j]}")
        i = j + 1
    return ",".join(out)


def parse_cpu_list(text: object, where: str) -> tuple[int, ...]:
    """A CPU list in the kernel's cpulist syntax ("0", "0-3", "1,3-4"), ids 0 … 4095."""
    s = str(text).strip() if isinstance(text, (str, int)) and not isinstance(text, bool) else None
    if s is None or not _CPU_LIST.match(s):
        raise DeploymentError(f'{where}: {text!r} is not a CPU list like "0", "0-3" or "1,3"')
    cpus: set[int] = set()
    for part in s.split(","):
        lo, _, hi = part.partition("-")
        a, b = int(lo), int(hi or lo)
        if a > b:
            raise DeploymentError(f"{where}: range {part} runs backwards")
        if b > MAX_CPU_ID:
            raise DeploymentError(f"{where}: CPU {b} is beyond {MAX_CPU_ID}")
        cpus.update(range(a, b + 1))
    return tuple(sorted(cpus))


def _mapping(value: object, where: str, what: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise DeploymentError(f"{where}: expected a mapping ({what})")
    return value


def _unknown_keys(spec: dict, allowed: set[str], where: str) -> None:
    extra = sorted(set(map(str, spec)) - allowed)
    if extra:
        raise DeploymentError(f"{where}: unknown key '{extra[0]}' (allowed: {', '.join(sorted(allowed))})")


def _whole(value: object, where: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        hi_text = f"{hi:,}".replace(",", " ")
        raise DeploymentError(f"{where}: {value!r} must be a whole number in {lo} … {hi_text}")
    return value


def load(path: str | Path, topology_services: list[str] | None = None) -> Deployment:
    """Parses and checks a deployment file. With `topology_services`, every service the
    file names must be one of them (a file may leave services out; `engine_json` needs all)."""
    path = Path(path)
    try:
        doc = yamlfile.safe_load(path.read_text())
    except OSError as e:
        raise DeploymentError(f"{path}: cannot read ({e.strerror})") from e
    except yaml.YAMLError as e:
        raise DeploymentError(f"{path}: not valid YAML: {e}") from e
    return parse(doc, path, topology_services)


def parse(doc: object, path: Path, topology_services: list[str] | None = None) -> Deployment:
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise DeploymentError(f"{path}: expected a mapping with 'hosts' and 'services'")
    _unknown_keys(doc, {"name", "hosts", "services", "links", "load", "stores"}, str(path))
    hosts_doc, services_doc = doc.get("hosts") or {}, doc.get("services") or {}
    if not isinstance(hosts_doc, dict) or not isinstance(services_doc, dict):
        raise DeploymentError(f"{path}: 'hosts' and 'services' must be mappings")
    dep = Deployment(path=path, name=str(doc.get("name", path.stem)))
    lab_hosts: dict[str, str] = {}
    for name, spec in hosts_doc.items():
        where = f"{path}: hosts.{name}"
        spec = _mapping(spec, where, "lab_host, address, cpus")
        _unknown_keys(spec, _HOST_KEYS, where)
        lab_host, address = spec.get("lab_host"), spec.get("address")
        if lab_host is not None:
            if not isinstance(lab_host, str) or not _LAB_HOST.match(lab_host):
                raise DeploymentError(f"{where}.lab_host: {lab_host!r} is not a lab host name like ts-h1")
            if lab_host in lab_hosts:
                raise DeploymentError(
                    f"{where}.lab_host: {lab_host} is already host '{lab_hosts[lab_host]}' (one entry per lab host)"
                )
            lab_hosts[lab_host] = str(name)
            if address is not None:
                raise DeploymentError(f"{where}: give lab_host or address, not both (a lab host has its own address)")
        if address is not None:
            try:
                addr = ipaddress.ip_address(str(address))
            except ValueError as e:
                raise DeploymentError(f"{where}.address: {address!r} is not an IP address") from e
            if not addr.is_loopback:
                raise DeploymentError(
                    f"{where}.address: {addr} is not loopback; a host outside this namespace is a lab host "
                    "(lab_host: ts-hN), whose address the lab assigns"
                )
        cpus = parse_cpu_list(spec["cpus"], f"{where}.cpus") if spec.get("cpus") is not None else ()
        dep.hosts[str(name)] = HostSpec(str(name), lab_host, None if address is None else str(address), cpus)
    ports: dict[tuple[str, int], str] = {}
    for name, spec in services_doc.items():
        name = str(name)
        where = f"{path}: services.{name}"
        if topology_services is not None and name not in topology_services:
            raise DeploymentError(
                f"{where}: the topology has no service '{name}' (it has: {', '.join(topology_services)})"
            )
        spec = _mapping(spec, where, "host, port, cpus, pin, memory")
        _unknown_keys(spec, _SERVICE_KEYS, where)
        host = spec.get("host")
        if host is not None and host not in dep.hosts:
            raise DeploymentError(f"{where}.host: unknown host '{host}' (hosts: {', '.join(dep.hosts) or 'none'})")
        port = spec.get("port")
        if port is not None:
            if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
                raise DeploymentError(f"{where}.port: {port!r} must be a whole number in 1 … 65535")
            if host is None:
                raise DeploymentError(f"{where}.port: a port needs a host (which host's port {port}?)")
            if (host, port) in ports:
                raise DeploymentError(
                    f"{where}.port: {ports[(host, port)]} already listens on port {port} of host '{host}'"
                )
            ports[(host, port)] = name
        cpus = spec.get("cpus", 1)
        if isinstance(cpus, bool) or not isinstance(cpus, int) or not 1 <= cpus <= MAX_CPUS:
            raise DeploymentError(
                f"{where}.cpus: {cpus!r} must be a whole number of CPUs in 1 … {MAX_CPUS} "
                "(the static CPU manager pins only integer requests; a CPU list goes in 'pin')"
            )
        pin = parse_cpu_list(spec["pin"], f"{where}.pin") if spec.get("pin") is not None else ()
        if pin and host is not None and dep.hosts[host].cpus and not set(pin) <= set(dep.hosts[host].cpus):
            raise DeploymentError(
                f"{where}.pin: CPUs {format_cpu_list(pin)} are not all among host '{host}''s "
                f"CPUs {format_cpu_list(dep.hosts[host].cpus)}"
            )
        memory = str(spec.get("memory", DEFAULT_MEMORY))
        if not _QUANTITY.match(memory):
            raise DeploymentError(f"{where}.memory: '{memory}' must be a quantity like 256Mi or 1Gi")
        dep.services[name] = ServiceSpec(name, host, port, cpus, pin, memory)
    links = doc.get("links") or []
    if not isinstance(links, list):
        raise DeploymentError(f"{path}: links: expected a list of {{between: [A, B], delay_us, jitter_us}}")
    pairs: set[frozenset[str]] = set()
    for i, spec in enumerate(links):
        where = f"{path}: links[{i}]"
        spec = _mapping(spec, where, "between, delay_us, jitter_us")
        _unknown_keys(spec, _LINK_KEYS, where)
        between = spec.get("between")
        if not isinstance(between, list) or len(between) != 2 or between[0] == between[1]:
            raise DeploymentError(f"{where}.between: expected two different hosts, e.g. [front, logic]")
        for h in between:
            if h not in dep.hosts:
                raise DeploymentError(f"{where}.between: unknown host '{h}' (hosts: {', '.join(dep.hosts) or 'none'})")
        pair = frozenset(map(str, between))
        if pair in pairs:
            raise DeploymentError(f"{where}.between: the link {between[0]} – {between[1]} is given twice")
        pairs.add(pair)
        if "delay_us" not in spec:
            raise DeploymentError(f"{where}.delay_us: missing (the one-way delay in µs, 0 … {MAX_DELAY_US})")
        delay = _whole(spec["delay_us"], f"{where}.delay_us", 0, MAX_DELAY_US)
        jitter = _whole(spec.get("jitter_us", 0), f"{where}.jitter_us", 0, MAX_DELAY_US)
        if jitter > delay:
            raise DeploymentError(f"{where}.jitter_us: {jitter} exceeds delay_us {delay} (the engine's rule)")
        dep.links.append(LinkSpec(str(between[0]), str(between[1]), delay, jitter))
    load_doc = _mapping(doc.get("load"), f"{path}: load", "hosts: [HOST, ...]")
    _unknown_keys(load_doc, {"hosts"}, f"{path}: load")
    load_hosts = load_doc.get("hosts") or []
    if not isinstance(load_hosts, list):
        raise DeploymentError(f"{path}: load.hosts: expected a list of hosts")
    for h in load_hosts:
        if h not in dep.hosts:
            raise DeploymentError(f"{path}: load.hosts: unknown host '{h}' (hosts: {', '.join(dep.hosts) or 'none'})")
    dep.load_hosts = [str(h) for h in load_hosts]
    stores = doc.get("stores")
    if stores is not None:
        if stores not in dep.hosts:
            raise DeploymentError(
                f"{path}: stores: unknown host {stores!r} (hosts: {', '.join(dep.hosts) or 'none'}): name the host "
                "that runs the real store servers"
            )
        if stores not in dep.service_hosts():
            raise DeploymentError(
                f"{path}: stores: host '{stores}' runs no service of the graph; the store servers run on a host of "
                f"the graph ({', '.join(dep.service_hosts()) or 'none'})"
            )
        dep.stores_host = str(stores)
    return dep


def with_lab_prefix(dep: Deployment, prefix: str) -> Deployment:
    """The same deployment on the lab of `prefix`: lab host X-hN becomes PREFIX-hN. The
    isolation study runs a file on a lab of its own, so it never touches one a user has up."""
    hosts = {
        n: replace(h, lab_host=f"{prefix}-h{lab_host_index(h.lab_host)}") if h.lab_host else h
        for n, h in dep.hosts.items()
    }
    return replace(dep, hosts=hosts)


def with_host_cpus(dep: Deployment, cpus: dict[str, tuple[int, ...]]) -> Deployment:
    """The same deployment with these hosts pinned to these CPUs (a study's placement)."""
    hosts = {n: replace(h, cpus=cpus.get(n, h.cpus)) for n, h in dep.hosts.items()}
    return replace(dep, hosts=hosts)


def host_addresses(dep: Deployment, lab_hosts: dict[str, str]) -> dict[str, tuple[str | None, str]]:
    """host -> (namespace or None, address). `lab_hosts`: namespace -> address as the
    lab holds it (`{h.name: h.address for h in labhosts.state(prefix).hosts}`)."""
    out: dict[str, tuple[str | None, str]] = {}
    for name, h in dep.hosts.items():
        where = f"{dep.path}: hosts.{name}"
        if h.lab_host:
            address = (lab_hosts.get(h.lab_host) or "").split("/")[0]
            if not address:
                prefix = h.lab_host.split("-h", 1)[0]
                raise DeploymentError(
                    f"{where}.lab_host: lab host {h.lab_host} is not up (run `sudo tailscope hosts up --hosts "
                    f"{dep.lab_hosts_needed()}{'' if prefix == 'ts' else ' --prefix ' + prefix}`)"
                )
            addr = ipaddress.ip_address(address)
            # The lab only hands out such addresses; checked anyway, as every connect target is.
            if addr.version != 4 or addr not in LAB_RANGE:
                raise DeploymentError(f"{where}.lab_host: {h.lab_host} has address {addr}, outside {LAB_RANGE}")
            out[name] = (h.lab_host, str(addr))
        elif h.address:
            out[name] = (None, h.address)
        else:
            raise DeploymentError(f"{where}: give lab_host (a lab host's name) or address (loopback) to run here")
    return out


def engine_json(
    dep: Deployment, topology_services: list[str], lab_hosts: dict[str, str], allowed_cpus: set[int] | None = None
) -> dict:
    """The document `tailscope-svc --all --deployment FILE.json` reads (docs/lab-hosts.md)."""
    missing = [s for s in topology_services if s not in dep.services or dep.services[s].host is None]
    if missing:
        raise DeploymentError(
            f"{dep.path}: services: every service of the topology needs a host; missing: {', '.join(missing)}"
        )
    unknown = [s for s in dep.services if s not in topology_services]
    if unknown:
        raise DeploymentError(f"{dep.path}: services.{unknown[0]}: the topology has no service '{unknown[0]}'")
    allowed = set(os.sched_getaffinity(0)) if allowed_cpus is None else allowed_cpus
    for where, cpus in [(f"hosts.{n}.cpus", h.cpus) for n, h in dep.hosts.items()] + [
        (f"services.{n}.pin", s.pin) for n, s in dep.services.items()
    ]:
        outside = sorted(set(cpus) - allowed)
        if outside:
            raise DeploymentError(
                f"{dep.path}: {where}: CPU {outside[0]} is not one this process may use "
                f"({format_cpu_list(sorted(allowed))})"
            )
    used = set(dep.service_hosts())
    addresses = host_addresses(replace(dep, hosts={n: h for n, h in dep.hosts.items() if n in used}), lab_hosts)
    hosts: dict[str, dict] = {}
    for name in dep.service_hosts():
        netns, address = addresses[name]
        hosts[name] = {"netns": netns, "address": address}
        if dep.hosts[name].cpus:
            hosts[name]["cpus"] = format_cpu_list(dep.hosts[name].cpus)
    services: dict[str, dict] = {}
    for name in topology_services:
        s = dep.services[name]
        services[name] = {"host": s.host}
        if s.port is not None:
            services[name]["port"] = s.port
        if s.pin:
            services[name]["cpus"] = format_cpu_list(s.pin)
    links = [
        {"between": [lk.a, lk.b], "delay_us": lk.delay_us, "jitter_us": lk.jitter_us}
        for lk in dep.links
        if lk.a in used and lk.b in used
    ]
    doc = {"name": dep.name, "hosts": hosts, "links": links, "services": services}
    if dep.stores_host is not None:
        doc["stores"] = {"host": dep.stores_host}
    return doc


def write_engine_json(doc: dict, out: str | Path) -> Path:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out, json.dumps(doc, indent=1, allow_nan=False))
    return out
