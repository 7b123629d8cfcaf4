"""The driver's allow-list (lab/allow_list.py): the one http://HOST:PORT parser, the targets it admits
(loopback and the lab subnet), the manifests' OTLP endpoint built on it (lab/k8s.py), and the cluster
ranges `deploy k8s` declares. Pure: nothing is dialled."""

from __future__ import annotations

import pytest

from tailscope.lab import allow_list, k8s


@pytest.mark.parametrize(
    "url, host, port",
    [
        ("http://127.0.0.1:16686", "127.0.0.1", 16686),
        ("http://198.19.0.5:4318/", "198.19.0.5", 4318),
        ("http://LOCALHOST", "localhost", None),  # no port: the scheme's default; the host as urllib lowers it
        ("http://otel.observability.svc.cluster.local:1", "otel.observability.svc.cluster.local", 1),
    ],
)
def test_the_parser_splits_host_and_port_and_admits_any_host(url, host, port):
    assert allow_list.split_http_url(url, "--x") == (host, port)


@pytest.mark.parametrize(
    "url, message",
    [
        ("https://127.0.0.1:16686", "--x 'https://127.0.0.1:16686': expected http://HOST:PORT"),
        ("127.0.0.1:16686", "--x '127.0.0.1:16686': expected http://HOST:PORT"),
        ("http://:16686", "--x 'http://:16686': expected http://HOST:PORT"),
        ("http://127.0.0.1:0", "--x 'http://127.0.0.1:0': port must be in 1 … 65535"),
        ("http://127.0.0.1:70000", "--x 'http://127.0.0.1:70000': Port out of range"),
        ("http://127.0.0.1:abc", "--x 'http://127.0.0.1:abc': Port could not be cast"),
    ],
)
def test_the_parser_refuses_naming_the_flag_and_the_url(url, message):
    with pytest.raises(ValueError, match="^" + message.replace(".", r"\.").replace("?", r"\?")):
        allow_list.split_http_url(url, "--x")


def test_a_base_url_is_loopback_or_the_lab_subnet():
    assert allow_list.check_base_url("http://127.0.0.1:16686/") == "http://127.0.0.1:16686"
    assert allow_list.check_base_url("http://localhost:16686") == "http://localhost:16686"
    assert allow_list.check_base_url("http://198.19.255.1:16686") == "http://198.19.255.1:16686"
    # 192.0.2.0/24 is TEST-NET-1: an address outside both, refused before anything connects.
    with pytest.raises(ValueError, match="192.0.2.1 is neither loopback nor in the lab subnet 198.18.0.0/15"):
        allow_list.check_base_url("http://192.0.2.1:16686", "--jaeger")
    with pytest.raises(ValueError, match="--jaeger 'http://jaeger:16686': give the host as an IP address"):
        allow_list.check_base_url("http://jaeger:16686")
    with pytest.raises(ValueError, match="port must be in 1 … 65535"):  # the shared parser's refusal
        allow_list.check_base_url("http://127.0.0.1:0")


def test_the_manifests_otlp_endpoint_is_a_lab_address_or_a_service_name():
    assert k8s.check_otlp_endpoint("http://198.19.0.5:4318/", "lab") == "http://198.19.0.5:4318"
    svc = "http://otel.observability.svc.cluster.local:4318"
    assert k8s.check_otlp_endpoint(svc, "lab") == svc
    with pytest.raises(k8s.DeployError, match="a Service name is NAME.NAMESPACE.svc.cluster.local"):
        k8s.check_otlp_endpoint("http://a.b.c.svc.cluster.local:4318", "lab")
    # A Service's port goes through the same parser as an address's (it was checked separately before).
    with pytest.raises(k8s.DeployError, match="port must be in 1 … 65535"):
        k8s.check_otlp_endpoint("http://otel.observability.svc.cluster.local:0", "lab")
    # Anything else names both accepted forms.
    for url, reason in [
        ("http://192.0.2.5:4318", "neither loopback nor in the lab subnet"),
        ("https://198.19.0.5:4318", "expected http://HOST:PORT"),
    ]:
        with pytest.raises(k8s.DeployError, match=reason) as e:
            k8s.check_otlp_endpoint(url, "lab")
        assert "(or a Service: http://NAME.lab.svc.cluster.local:PORT)" in str(e.value)


def test_a_real_clusters_default_ranges_are_accepted_as_a_policy():
    # The only private (RFC 1918) addresses in the tests, on purpose: kubeadm's service range with
    # flannel's pod range, and k3s's pair — the ranges a user's real cluster has. Accepting them is a
    # policy for the engines that run inside that cluster (their --allow-cidr); no test and no command
    # sends traffic there — the driver's own targets are check_base_url's (loopback, the lab subnet).
    assert k8s.check_cidrs("10.244.0.0/16", "10.96.0.0/12") == ("10.244.0.0/16", "10.96.0.0/12")
    assert k8s.check_cidrs("10.42.0.0/16", "10.43.0.0/16") == ("10.42.0.0/16", "10.43.0.0/16")
    with pytest.raises(ValueError, match="neither loopback nor in the lab subnet"):
        allow_list.check_base_url("http://10.96.0.1:443")
