"""Deployment files (python/tailscope/deployment.py): the shipped files name every socialnet
service on the capstone's split; the engine JSON follows the contract of docs/lab-hosts.md;
every bad input is refused with the file and the key named."""

from __future__ import annotations

import pytest
import yaml

from conftest import REPO
from tailscope.lab import deployment

SOCIALNET = [s["name"] for s in yaml.safe_load((REPO / "topologies" / "socialnet.yaml").read_text())["services"]]
SPLIT = REPO / "deployments" / "socialnet-3-hosts.yaml"
SINGLE = REPO / "deployments" / "socialnet-1-host.yaml"
LAB = {"ts-h1": "198.18.0.2/24", "ts-h2": "198.18.0.3/24", "ts-h3": "198.18.0.4/24", "ts-h4": "198.18.0.5/24"}
ALL_CPUS = {0, 1, 2, 3}


def test_the_split_file_is_the_capstones_three_hosts():
    dep = deployment.load(SPLIT, SOCIALNET)
    by_host: dict[str, set[str]] = {}
    for s in dep.services.values():
        by_host.setdefault(str(s.host), set()).add(s.name)
    assert by_host["front"] == {"nginx-web-server"}
    assert by_host["logic"] == {
        "compose-post-service",
        "text-service",
        "user-service",
        "media-service",
        "unique-id-service",
        "url-shorten-service",
        "user-mention-service",
    }
    assert by_host["storage"] == set(SOCIALNET) - by_host["front"] - by_host["logic"]
    assert dep.load_hosts == ["load"] and dep.lab_hosts_needed() == 4
    assert {frozenset((lk.a, lk.b)) for lk in dep.links} == {
        frozenset(("front", "logic")),
        frozenset(("logic", "storage")),
    }


def test_the_single_host_file_places_every_service_on_one_host():
    dep = deployment.load(SINGLE, SOCIALNET)
    assert set(dep.services) == set(SOCIALNET)
    assert {s.host for s in dep.services.values()} == {"node"}
    assert dep.load_hosts == ["load"]


def test_engine_json_follows_the_contract():
    dep = deployment.with_host_cpus(deployment.load(SPLIT, SOCIALNET), {"front": (0,), "logic": (1,)})
    doc = deployment.engine_json(dep, SOCIALNET, LAB, allowed_cpus=ALL_CPUS)
    assert doc["name"] == "socialnet-3-hosts"
    # Only hosts that run services; the load host is the agents' business.
    assert doc["hosts"] == {
        "front": {"netns": "ts-h1", "address": "198.18.0.2", "cpus": "0"},
        "logic": {"netns": "ts-h2", "address": "198.18.0.3", "cpus": "1"},
        "storage": {"netns": "ts-h3", "address": "198.18.0.4"},
    }
    assert doc["services"]["nginx-web-server"] == {"host": "front", "port": 8080}
    assert doc["services"]["text-service"] == {"host": "logic"}
    assert list(doc["services"]) == SOCIALNET
    assert {"between": ["front", "logic"], "delay_us": 50, "jitter_us": 5} in doc["links"]
    # The capstone's storage node runs the real store servers; a file without `stores` says nothing.
    assert doc["stores"] == {"host": "storage"}
    single = deployment.engine_json(deployment.load(SINGLE, SOCIALNET), SOCIALNET, LAB, allowed_cpus=ALL_CPUS)
    assert "stores" not in single


def test_a_loopback_host_runs_in_this_namespace(tmp_path):
    f = tmp_path / "d.yaml"
    f.write_text("hosts: {local: {address: 127.0.0.1, cpus: '0-1'}}\nservices:\n  a: {host: local, pin: '1'}\n")
    doc = deployment.engine_json(deployment.load(f, ["a"]), ["a"], {}, allowed_cpus=ALL_CPUS)
    assert doc["hosts"] == {"local": {"netns": None, "address": "127.0.0.1", "cpus": "0-1"}}
    assert doc["services"] == {"a": {"host": "local", "cpus": "1"}}


def test_a_study_moves_a_file_onto_its_own_lab():
    dep = deployment.with_lab_prefix(deployment.load(SPLIT, SOCIALNET), "tsi")
    assert [h.lab_host for h in dep.hosts.values()] == ["tsi-h1", "tsi-h2", "tsi-h3", "tsi-h4"]


def test_cpu_lists_parse_and_print_in_the_kernels_form():
    assert deployment.parse_cpu_list("0-2,5,7-8", "x") == (0, 1, 2, 5, 7, 8)
    assert deployment.format_cpu_list([8, 7, 5, 2, 1, 0]) == "0-2,5,7-8"


BASE = "hosts:\n  a: {lab_host: ts-h1}\n  b: {lab_host: ts-h2}\n"


@pytest.mark.parametrize(
    "text, message",
    [
        (BASE + "services:\n  x: {host: c}\n", "services.x.host: unknown host 'c'"),
        (BASE + "services:\n  nope: {host: a}\n", "services.nope: the topology has no service 'nope'"),
        (
            BASE + "services:\n  x: {host: a, port: 9000}\n  y: {host: a, port: 9000}\n",
            "services.y.port: x already listens on port 9000 of host 'a'",
        ),
        (BASE + "services:\n  x: {host: a, port: 70000}\n", "services.x.port: 70000 must be a whole number"),
        ("hosts:\n  a: {lab_host: ts-h1, cpus: '0-'}\n", "hosts.a.cpus: '0-' is not a CPU list"),
        ("hosts:\n  a: {lab_host: ts-h1, cpus: '3-1'}\n", "hosts.a.cpus: range 3-1 runs backwards"),
        ("hosts:\n  a: {lab_host: ts-h1, cpus: '9999'}\n", "hosts.a.cpus: CPU 9999 is beyond 4095"),
        (
            "hosts:\n  a: {lab_host: ts-h1, cpus: '0'}\nservices:\n  x: {host: a, pin: '1'}\n",
            "services.x.pin: CPUs 1 are not all among host 'a''s CPUs 0",
        ),
        (BASE + "services:\n  x: {cpus: 1.5}\n", "services.x.cpus: 1.5 must be a whole number of CPUs"),
        (
            BASE + "links:\n  - {between: [a, b], delay_us: -1}\n",
            "links[0].delay_us: -1 must be a whole number in 0 … 10 000 000",
        ),
        (BASE + "links:\n  - {between: [a, b], delay_us: 20000000}\n", "links[0].delay_us: 20000000 must be"),
        (BASE + "links:\n  - {between: [a, b], delay_us: 2.5}\n", "links[0].delay_us: 2.5 must be a whole number"),
        (
            BASE + "links:\n  - {between: [a, b], delay_us: 10, jitter_us: 20}\n",
            "links[0].jitter_us: 20 exceeds delay_us 10",
        ),
        (BASE + "links:\n  - {between: [a, z], delay_us: 10}\n", "links[0].between: unknown host 'z'"),
        (BASE + "links:\n  - {between: [a, a], delay_us: 10}\n", "links[0].between: expected two different hosts"),
        (BASE + "links:\n  - {between: [a, b]}\n", "links[0].delay_us: missing"),
        (
            BASE + "links:\n  - {between: [a, b], delay_us: 1}\n  - {between: [b, a], delay_us: 2}\n",
            "links[1].between: the link b – a is given twice",
        ),
        ("hosts:\n  a: {lab_host: eth0}\n", "hosts.a.lab_host: 'eth0' is not a lab host name"),
        ("hosts:\n  a: {lab_host: ts-h1}\n  b: {lab_host: ts-h1}\n", "hosts.b.lab_host: ts-h1 is already host 'a'"),
        ("hosts:\n  a: {address: 192.0.2.1}\n", "hosts.a.address: 192.0.2.1 is not loopback"),
        ("hosts:\n  a: {lab_host: ts-h1, speed: fast}\n", "hosts.a: unknown key 'speed'"),
        (BASE + "load: {hosts: [q]}\n", "load.hosts: unknown host 'q'"),
        (BASE + "services:\n  x: {host: a}\nstores: q\n", "stores: unknown host 'q'"),
        (BASE + "services:\n  x: {host: a}\nstores: b\n", "stores: host 'b' runs no service of the graph"),
        ("hosts: [a, b]\n", "'hosts' and 'services' must be mappings"),
        ("{{{", "not valid YAML"),
    ],
)
def test_bad_files_are_refused_naming_the_file_and_the_key(tmp_path, text, message):
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(deployment.DeploymentError) as e:
        deployment.load(f, ["x", "y"])
    assert str(e.value).startswith(f"{f}:")
    assert message in str(e.value)


def test_engine_json_needs_every_service_placed_and_its_lab_hosts_up(tmp_path):
    f = tmp_path / "d.yaml"
    f.write_text(BASE + "services:\n  x: {host: a}\n")
    dep = deployment.load(f, ["x", "y"])
    with pytest.raises(deployment.DeploymentError, match="every service of the topology needs a host; missing: y"):
        deployment.engine_json(dep, ["x", "y"], LAB, allowed_cpus=ALL_CPUS)
    with pytest.raises(deployment.DeploymentError, match=r"hosts.a.lab_host: lab host ts-h1 is not up"):
        deployment.engine_json(dep, ["x"], {}, allowed_cpus=ALL_CPUS)


def test_engine_json_refuses_cpus_this_process_may_not_use(tmp_path):
    f = tmp_path / "d.yaml"
    f.write_text("hosts:\n  a: {lab_host: ts-h1, cpus: '7'}\nservices:\n  x: {host: a}\n")
    with pytest.raises(deployment.DeploymentError, match="hosts.a.cpus: CPU 7 is not one this process may use"):
        deployment.engine_json(deployment.load(f, ["x"]), ["x"], LAB, allowed_cpus={0, 1})


def test_engine_json_is_written_whole(tmp_path):
    dep = deployment.load(SPLIT, SOCIALNET)
    out = deployment.write_engine_json(
        deployment.engine_json(dep, SOCIALNET, LAB, allowed_cpus=ALL_CPUS), tmp_path / "d.json"
    )
    assert yaml.safe_load(out.read_text())["services"]["social-graph-service"] == {"host": "storage"}
    assert [p.name for p in tmp_path.iterdir()] == ["d.json"]


def test_yaml_numbers_are_read_the_yaml_1_2_way():
    """PyYAML (YAML 1.1) reads `1e9` as a string; a user's `cpu: 1e9` must reach the range check as
    the number it is, so the message is about its size, not about a string."""
    from tailscope.lab.yamlfile import safe_load

    doc = safe_load("a: 1e9\nb: -2E-3\nc: .5e3\nd: 1.5\ne: 10\nf: '1e9'\ng: 1e\n")
    assert doc == {"a": 1e9, "b": -0.002, "c": 500.0, "d": 1.5, "e": 10, "f": "1e9", "g": "1e"}


def test_yaml_refuses_a_key_given_twice():
    """A mapping that names a key twice (hotel.yaml once had `op: find, …, op: find` in one line) is an
    error naming the key and its line, not the last value kept silently; nested and flow forms alike."""
    from tailscope.lab.yamlfile import safe_load

    with pytest.raises(yaml.YAMLError, match=r"found the key 'op' twice"):
        safe_load("store: {op: find, key: a, op: get}\n")
    with pytest.raises(yaml.YAMLError, match=r"line 3"):
        safe_load("a:\n  b: 1\n  b: 2\n")
    assert safe_load("a: {op: find}\nb: {op: find}\n") == {"a": {"op": "find"}, "b": {"op": "find"}}
