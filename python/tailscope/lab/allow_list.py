"""The allow-list every network target of the driver obeys: loopback or the lab subnet.

The engines enforce the same rule natively (native/net/allow_list.h); here it guards the
URLs the driver itself dials (Jaeger's query API, OTLP endpoints) and the load agents' target.
"""

from __future__ import annotations

import ipaddress
import urllib.parse

# RFC 2544's benchmarking range: the only non-loopback addresses the lab creates and reaches.
LAB_RANGE = ipaddress.IPv4Network("198.18.0.0/15")


def check_base_url(url: str, flag: str = "--jaeger") -> str:
    """http://HOST:PORT with HOST on loopback or the lab subnet (the project's only
    network targets); a Jaeger in a cluster is reached through
    `kubectl port-forward`. Returns the URL without a trailing slash."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"{flag} '{url}': expected http://HOST:PORT")
    try:
        port = parts.port
    except ValueError as e:
        raise ValueError(f"{flag} '{url}': {e}") from e
    if port is not None and not 1 <= port <= 65535:
        raise ValueError(f"{flag} '{url}': port must be in 1 … 65535")
    host = parts.hostname
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
