"""The allow-list every network target of the driver obeys: loopback or the lab subnet.

The engines enforce the same rule natively (native/net/allow_list.h); here it guards the
URLs the driver itself dials (Jaeger's query API, OTLP endpoints) and the load agents' target.
"""

from __future__ import annotations

import ipaddress
import urllib.parse

# RFC 2544's benchmarking range: the only non-loopback addresses the lab creates and reaches.
LAB_RANGE = ipaddress.IPv4Network("198.18.0.0/15")

# Where a cluster's pod and service ranges sensibly live: RFC 1918, the shared address space some
# providers use for pods (RFC 6598), and the lab range (the Docker path, docs/deploy.md). A block
# elsewhere is public address space: declaring it would let the load reach someone else's machines.
# The private blocks are named here deliberately (a known hit of the private-address check): they are
# a policy for engines running *inside* a user's cluster, whose default ranges lie there (kubeadm's and
# flannel's in 10.0.0.0/8, docs/deploy.md); the driver itself never dials them (check_base_url).
CLUSTER_RANGES = tuple(
    ipaddress.IPv4Network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10")
) + (LAB_RANGE,)


def check_cluster_cidr(text: str, flag: str, *, widest: int, narrowest: int) -> ipaddress.IPv4Network:
    """A cluster's pod or service range, as the engines' --allow-cidr will declare it: an IPv4
    network address/prefix (host bits zero), /WIDEST … /NARROWEST, inside one of CLUSTER_RANGES.
    ValueError names FLAG and what is wrong."""
    try:
        net = ipaddress.ip_network(text.strip(), strict=True)
    except ValueError as e:
        raise ValueError(f"{flag} '{text}': not a network address/prefix such as 100.96.0.0/12 ({e})") from e
    if not isinstance(net, ipaddress.IPv4Network):
        raise ValueError(f"{flag} '{text}': IPv4 only (the pods bind their IPv4 pod address)")
    if not widest <= net.prefixlen <= narrowest:
        raise ValueError(f"{flag} '{text}': the prefix must be /{widest} … /{narrowest} (got /{net.prefixlen})")
    if not any(net.subnet_of(r) for r in CLUSTER_RANGES):
        raise ValueError(
            f"{flag} '{text}': a cluster range must lie inside "
            + ", ".join(str(r) for r in CLUSTER_RANGES)
            + " (private, shared or the lab range); anything else is not a cluster's (public, loopback, "
            "link-local or multicast address space)"
        )
    return net


def split_http_url(url: str, flag: str) -> tuple[str, int | None]:
    """The host and port (None: not given) of http://HOST[:PORT] — the one parser of every URL the
    driver dials or hands to an engine (check_base_url below, the manifests' OTLP endpoint in
    lab/k8s.py). Which hosts are admitted is the caller's decision. ValueError names FLAG: another
    scheme, no host, a port that is not a number in 1 … 65535."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"{flag} '{url}': expected http://HOST:PORT")
    try:
        port = parts.port  # raises for a port that is not a number or is beyond 65535
    except ValueError as e:
        raise ValueError(f"{flag} '{url}': {e}") from e
    if port is not None and not 1 <= port <= 65535:
        raise ValueError(f"{flag} '{url}': port must be in 1 … 65535")
    return parts.hostname, port


def check_base_url(url: str, flag: str = "--jaeger") -> str:
    """http://HOST:PORT with HOST on loopback or the lab subnet (the project's only
    network targets); a Jaeger in a cluster is reached through
    `kubectl port-forward`. Returns the URL without a trailing slash."""
    host, _port = split_http_url(url, flag)
    if host == "localhost":
        return url.rstrip("/")
    try:
        addr = ipaddress.ip_address(host)
    except ValueError as e:
        raise ValueError(
            f"{flag} '{url}': give the host as an IP address on loopback or the lab subnet {LAB_RANGE} "
            "(for a Jaeger in a cluster: kubectl port-forward, then http://127.0.0.1:16686)"
        ) from e
    if not (addr.is_loopback or (addr.version == 4 and addr in LAB_RANGE)):
        raise ValueError(
            f"{flag} '{url}': {addr} is neither loopback nor in the lab subnet {LAB_RANGE}; tailscope talks "
            "only to those (for a Jaeger in a cluster: kubectl port-forward, then http://127.0.0.1:16686)"
        )
    return url.rstrip("/")
