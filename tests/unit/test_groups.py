"""A deployment's host groups as CPU sets (lab/groups.py): the plan of the split's groups from this
machine's cores — shared and said so on 2 cores — the file's own CPUs kept, and the bad input that
stops a run before any container starts: a CPU the machine lacks, a service in no group, an empty
group."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conftest import needs_engine
from tailscope.lab import deployment, groups, topology

REPO = Path(__file__).resolve().parents[2]
SPLIT = REPO / "deployments" / "socialnet-3-hosts.yaml"
SERVICES = [
    "nginx-web-server",
    "compose-post-service",
    "text-service",
    "user-service",
    "media-service",
    "unique-id-service",
    "url-shorten-service",
    "user-mention-service",
    "post-storage-service",
    "user-timeline-service",
    "home-timeline-service",
    "social-graph-service",
]


def test_the_split_on_two_cores_shares_one_and_says_so():
    plan = groups.plan_groups(deployment.load(SPLIT, SERVICES), SERVICES, cores=[(0,), (1,)], allowed_cpus={0, 1})
    assert plan.cpus == {"front": (0,), "logic": (1,), "storage": (0,)}
    assert plan.planned == ("front", "logic", "storage") and plan.load_cpus == ()
    assert plan.shared == [("front", "storage", [0])]
    # The placed deployment carries the CPUs: the Compose file's cpusets come from it.
    assert plan.deployment.hosts["logic"].cpus == (1,)
    assert plan.record()["shared"] == [{"groups": ["front", "storage"], "cpus": [0]}]
    assert plan.text() == (
        "groups: front on CPU 0, logic on CPU 1, storage on CPU 0 (2 core(s) here; front and storage share "
        "CPU 0); load: not pinned"
    )


def test_enough_cores_give_each_group_and_the_load_their_own():
    cores = [(0, 4), (1, 5), (2, 6), (3, 7)]
    plan = groups.plan_groups(deployment.load(SPLIT, SERVICES), SERVICES, cores=cores, allowed_cpus=set(range(8)))
    assert plan.cpus == {"front": (0, 4), "logic": (1, 5), "storage": (2, 6)}
    assert plan.load_cpus == (3, 7) and plan.shared == []
    assert "no two groups share a CPU" in plan.text()


def _split(tmp_path: Path, edit) -> deployment.Deployment:
    doc = yaml.safe_load(SPLIT.read_text())
    edit(doc)
    path = tmp_path / "split.yaml"
    path.write_text(yaml.safe_dump(doc))
    return deployment.load(path, SERVICES)


def test_cpus_the_file_gives_are_kept_and_the_rest_planned(tmp_path):
    dep = _split(tmp_path, lambda d: d["hosts"]["front"].update(cpus="1"))
    plan = groups.plan_groups(dep, SERVICES, cores=[(0,), (1,)], allowed_cpus={0, 1})
    assert plan.cpus["front"] == (1,) and plan.planned == ("logic", "storage")
    # The planned two on the core no group of the file holds (they share it: 2 cores, 3 groups).
    assert plan.cpus["logic"] == (0,) and plan.cpus["storage"] == (0,) and plan.load_cpus == ()


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d["hosts"]["front"].update(cpus="0-7"), "hosts.front.cpus: CPU 2 is not on this machine"),
        (lambda d: d["services"]["text-service"].pop("host"), "services: text-service is in no group"),
        (lambda d: d["services"].pop("user-service"), "services: user-service is in no group"),
        (lambda d: d["hosts"].update(spare={}), "hosts.spare: the group is empty"),
        (lambda d: d["services"]["text-service"].update(pin="3"), "services.text-service.pin: CPU 3 is not on"),
    ],
)
def test_bad_groups_are_refused_naming_the_file_and_the_key(tmp_path, edit, message):
    dep = _split(tmp_path, edit)
    with pytest.raises(deployment.DeploymentError, match=message) as e:
        groups.plan_groups(dep, SERVICES, cores=[(0,), (1,)], allowed_cpus={0, 1})
    assert str(tmp_path / "split.yaml") in str(e.value)
    if "CPU" in message:
        assert "(the CPUs this process may use: 0-1)" in str(e.value)


@needs_engine("tailscope-svc")  # topology validation runs tailscope-svc
def test_the_topology_services_are_the_ones_these_tests_place():
    assert sorted(topology.services(topology.load(topology.SOCIALNET))) == sorted(SERVICES)
