"""The driver's allow-list (lab/allow_list.py): the cluster ranges `deploy k8s` declares. Pure:
nothing is dialled."""

from __future__ import annotations

import pytest

from tailscope.lab import allow_list, k8s


def test_a_real_clusters_default_ranges_are_accepted_as_a_policy():
    # The only private (RFC 1918) addresses in the tests, on purpose: kubeadm's service range with
    # flannel's pod range, and k3s's pair — the ranges a user's real cluster has. Accepting them is a
    # policy for the engines that run inside that cluster (their --allow-cidr); no test and no command
    # sends traffic there — the driver's own targets are check_base_url's (loopback, the lab subnet).
    assert k8s.check_cidrs("10.244.0.0/16", "10.96.0.0/12") == ("10.244.0.0/16", "10.96.0.0/12")
    assert k8s.check_cidrs("10.42.0.0/16", "10.43.0.0/16") == ("10.42.0.0/16", "10.43.0.0/16")
    with pytest.raises(ValueError, match="neither loopback nor in the lab subnet"):
        allow_list.check_base_url("http://10.96.0.1:443")
