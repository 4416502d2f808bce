"""deploy/networkpolicy.yaml over every Pod deploy/ makes: the flows the manifests rely on pass,
and nothing else reaches a drain-sidecar (tests/deploy/flows.py says which, and why)."""

from __future__ import annotations

import pytest

from tests.deploy.flows import CONTROLLER, World, has_sidecar
from tests.deploy.manifests import SIDECAR_PORT, documents, pod_templates

DOCUMENTS = documents()
TEMPLATES = pod_templates(DOCUMENTS)
POLICIES = [d.body for d in DOCUMENTS if d.kind == "NetworkPolicy"]


@pytest.mark.parametrize("sidecar_named_ports", [True, False],
                         ids=["named-ports-in-sidecars", "named-ports-in-containers-only"])
def test_the_policies_admit_exactly_the_flows_the_manifests_rely_on(sidecar_named_ports):
    """Under a plugin that resolves a native sidecar's named port and one that does not (Calico
    before projectcalico/calico#8885 and others: the port is then named by number)."""
    world = World.of(TEMPLATES, POLICIES, sidecar_named_ports)
    assert world.must_pass() and world.must_not_pass()
    failures = world.failures()
    assert not failures, "\n".join(failures)


def test_a_leaderworkerset_worker_reaches_its_leaders_sidecar():
    """The flow issue 15 found refused: `--follow-leader` reads the leader's :8490/v1/work."""
    world = World.of(TEMPLATES, POLICIES)
    workers = [t for t in TEMPLATES if t.follows_a_leader]
    assert workers
    for worker in workers:
        leader_name = worker.injected_env["LWS_LEADER_ADDRESS"].split(".")[0]
        _, leader = world.pods[leader_name]
        _, follower = world.pods[worker.pod_name]
        verdict = world.cluster.allows(follower, leader, SIDECAR_PORT)
        assert verdict, verdict.why


def test_every_sidecar_pod_is_isolated_by_a_policy():
    """Without a selecting policy a sidecar is open to all: the label the policy selects is on it."""
    world = World.of(TEMPLATES, POLICIES)
    for template, pod in world.pods.values():
        if has_sidecar(template):
            assert world.cluster.selecting(pod, "Ingress"), template.source
            assert world.cluster.allows(CONTROLLER, pod, SIDECAR_PORT)


def test_the_shape_issue_15_found_is_caught():
    """The members' policy of before (every port among members but 8490) is refused here."""
    broken = [p for p in POLICIES if p["metadata"]["name"] != "llm-sglang-members"]
    broken.append({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "old"},
                   "spec": {"podSelector": {"matchLabels": {"leaderworkerset.sigs.k8s.io/name": "llm-sglang"}},
                            "policyTypes": ["Ingress"],
                            "ingress": [{"from": [{"podSelector": {"matchLabels": {
                                "leaderworkerset.sigs.k8s.io/name": "llm-sglang"}}}],
                                "ports": [{"port": 1, "endPort": 8489}, {"port": 8491, "endPort": 65535}]}]}})
    failures = World.of(TEMPLATES, broken).failures()
    assert any("llm-sglang-0-1 -> llm-sglang-0:8490" in f for f in failures), failures


def test_a_policy_that_opens_the_sidecar_wider_is_caught():
    """Every Pod of the namespace to 8490 (a podSelector: {} peer): the neighbour is admitted."""
    wide = [*POLICIES, {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "wide"},
                        "spec": {"podSelector": {"matchLabels": {"modeldrain.io/drain-sidecar": "true"}},
                                 "ingress": [{"from": [{"podSelector": {}}], "ports": [{"port": SIDECAR_PORT}]}]}}]
    failures = World.of(TEMPLATES, wide).failures()
    assert any(f.startswith("admitted, but must not pass: web-0 -> llm-vllm-0:8490") for f in failures), failures
    assert not any("router-0" in f for f in failures)  # another namespace: still refused
