"""`tailscope cluster`: bad input and a missing container engine are one clear line with
nothing left behind, and the private daemon's configuration keeps every network in the lab
range and iptables untouched. (The real run is tests/e2e/test_cluster.py, `make cluster-e2e`.)"""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import needs_engine
from tailscope.cli import main
from tailscope.lab import cluster, topology


@pytest.fixture
def root(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("TAILSCOPE_CLUSTER_DIR", str(tmp_path / "clusters"))
    return tmp_path / "clusters"


def test_the_private_daemon_stays_in_the_lab_range_and_leaves_iptables_alone(tmp_path):
    config = cluster.daemon_config(tmp_path)
    lab = ipaddress.ip_network("198.18.0.0/15")
    assert ipaddress.ip_interface(config["bip"]).network.subnet_of(lab)
    for pool in config["default-address-pools"]:
        assert ipaddress.ip_network(pool["base"]).subnet_of(lab)
    assert config["iptables"] is False and config["ip6tables"] is False and config["ip-masq"] is False
    assert config["ip-forward"] is False  # the host's net.ipv4.ip_forward stays as it is
    # Its own socket and roots: never the user's /var/run/docker.sock or /var/lib/docker.
    assert config["hosts"] == [f"unix://{tmp_path / 'docker.sock'}"]
    assert config["data-root"].startswith(str(tmp_path)) and config["exec-root"].startswith(str(tmp_path))


def test_down_of_an_unknown_prefix_is_a_clear_error(root):
    r = CliRunner().invoke(main, ["cluster", "down", "tscnope"])
    assert r.exit_code == 2 and "no cluster state here" in r.output


@needs_engine("tailscope-svc")
def test_a_bad_subnet_is_refused_before_anything_is_made(root):
    r = CliRunner().invoke(main, ["cluster", "up", "--topology", str(topology.SOCIALNET), "--subnet", "192.0.2.0/24"])
    assert r.exit_code == 2 and "inside the lab range" in r.output
    assert not root.exists() or not any(root.iterdir())


@needs_engine("tailscope-svc")
def test_without_dockerd_up_says_how_to_install_it_and_leaves_nothing(root, monkeypatch):
    real_which = cluster.shutil.which
    monkeypatch.setattr(cluster.shutil, "which", lambda name: None if name == "dockerd" else real_which(name))
    r = CliRunner().invoke(main, ["cluster", "up", "--topology", str(topology.SOCIALNET)])
    assert r.exit_code == 2, r.output
    said = " ".join(r.output.split())  # rich wraps long lines
    assert "dockerd not found" in said and "scripts/bootstrap --docker" in said, said
    assert not any(root.iterdir())  # the run's folder went with the failure


def test_the_null_device_check_tells_a_device_from_a_plain_file(tmp_path, monkeypatch):
    """The guard around mmdebstrap (it was seen to leave /dev/null a plain file): the machine's own
    /dev/null passes; a plain file in its place fails."""
    import os

    from tailscope.lab import cluster

    assert cluster.null_device_intact()
    plain = tmp_path / "null"
    plain.write_text("")
    real_stat = os.stat
    monkeypatch.setattr(cluster.os, "stat", lambda p, *a, **k: real_stat(plain if p == "/dev/null" else p, *a, **k))
    assert not cluster.null_device_intact()


def test_cluster_k8s_refuses_a_folder_without_manifests_before_anything_is_made(root, tmp_path):
    (tmp_path / "empty").mkdir()
    r = CliRunner().invoke(main, ["cluster", "k8s", str(tmp_path / "empty")])
    assert r.exit_code == 2 and "no manifests here" in " ".join(r.output.split()), r.output
    assert not root.exists() or not any(root.iterdir())


@needs_engine("tailscope-svc")
def test_cluster_k8s_without_dockerd_says_how_to_install_it_and_leaves_nothing(root, tmp_path, monkeypatch):
    out = tmp_path / "k8s"
    args = ["deploy", "k8s", "--topology", str(topology.SOCIALNET), "--out", str(out)]
    args += ["--pod-cidr", "198.19.132.0/24", "--service-cidr", "198.19.133.0/24"]
    assert CliRunner().invoke(main, args).exit_code == 0
    real_which = cluster.shutil.which
    monkeypatch.setattr(cluster.shutil, "which", lambda name: None if name == "dockerd" else real_which(name))
    r = CliRunner().invoke(main, ["cluster", "k8s", str(out)])
    assert r.exit_code == 2, r.output
    assert "dockerd not found" in " ".join(r.output.split())
    assert not any(root.iterdir())  # the run's folder went with the failure


@needs_engine("tailscope-svc")
@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d["hosts"]["front"].update(cpus="4095"), "hosts.front.cpus: CPU 4095 is not on this machine"),
        (lambda d: d["services"]["text-service"].pop("host"), "text-service is in no group"),
        (lambda d: d["hosts"].update(spare={}), "hosts.spare: the group is empty"),
    ],
)
def test_bad_groups_are_refused_before_any_daemon_starts(root, tmp_path, monkeypatch, edit, message):
    import yaml

    def no_daemon(*_a, **_k):
        raise AssertionError("a daemon was started for a deployment that should have been refused")

    monkeypatch.setattr(cluster, "engine_up", no_daemon)
    monkeypatch.setattr(cluster, "up", no_daemon)
    doc = yaml.safe_load((Path(__file__).resolve().parents[2] / "deployments" / "socialnet-3-hosts.yaml").read_text())
    edit(doc)
    (tmp_path / "d.yaml").write_text(yaml.safe_dump(doc))
    r = CliRunner().invoke(
        main, ["cluster", "up", "--topology", str(topology.SOCIALNET), "--deployment", str(tmp_path / "d.yaml")]
    )
    assert r.exit_code == 2, r.output
    assert message in " ".join(r.output.split()), r.output
    assert not root.exists() or not any(root.iterdir())
