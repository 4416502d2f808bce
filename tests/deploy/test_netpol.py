"""The NetworkPolicy evaluator (tests/deploy/netpol.py) against the Kubernetes documentation's
own examples ("Network Policies" on kubernetes.io) and what it says each one admits."""

from __future__ import annotations

import pytest
import yaml

from tests.deploy.netpol import Cluster, ContainerPort, External, InvalidPolicy, Node, Pod, Policy, selector_matches

# The documentation's first example, as it prints it.
TEST_NETWORK_POLICY = """
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: test-network-policy
  namespace: default
spec:
  podSelector:
    matchLabels:
      role: db
  policyTypes:
    - Ingress
    - Egress
  ingress:
    - from:
        - ipBlock:
            cidr: 172.17.0.0/16
            except:
              - 172.17.1.0/24
        - namespaceSelector:
            matchLabels:
              project: myproject
        - podSelector:
            matchLabels:
              role: frontend
      ports:
        - protocol: TCP
          port: 6379
  egress:
    - to:
        - ipBlock:
            cidr: 10.0.0.0/24
      ports:
        - protocol: TCP
          port: 5978
"""


def policy(text: str, namespace: str = "default") -> Policy:
    return Policy.of(yaml.safe_load(text), namespace)


def pod(name: str, namespace: str = "default", ip: str = "10.244.0.1", **labels: str) -> Pod:
    return Pod(name, namespace, labels, ip, node="node-b")


DB = pod("db", role="db", ip="10.244.1.10")
FRONTEND = pod("frontend", role="frontend", ip="10.244.1.11")
OTHER = pod("other", role="other", ip="10.244.1.12")
IN_MYPROJECT = pod("anything", namespace="myproject", ip="10.244.1.13")
ELSEWHERE = pod("frontend", namespace="elsewhere", role="frontend", ip="10.244.1.14")


@pytest.fixture
def documented() -> Cluster:
    cluster = Cluster(namespaces={"myproject": {"project": "myproject"}, "elsewhere": {}})
    return cluster.add(DB, FRONTEND, OTHER, IN_MYPROJECT, ELSEWHERE, policy(TEST_NETWORK_POLICY))


def test_the_documented_example_admits_its_three_sources_on_6379_only(documented):
    assert documented.allows(FRONTEND, DB, 6379)  # a Pod of default with role=frontend
    assert documented.allows(IN_MYPROJECT, DB, 6379)  # any Pod of a namespace labelled project=myproject
    assert documented.allows(External("172.17.0.5"), DB, 6379)  # 172.17.0.0-172.17.0.255
    assert documented.allows(External("172.17.2.5"), DB, 6379)  # and 172.17.2.0-172.17.255.255
    assert not documented.allows(External("172.17.1.5"), DB, 6379)  # the except
    assert not documented.allows(FRONTEND, DB, 6380)  # another port
    assert not documented.allows(FRONTEND, DB, 6379, "UDP")  # another protocol
    assert not documented.allows(OTHER, DB, 6379)  # role=other in default
    assert not documented.allows(ELSEWHERE, DB, 6379)  # a podSelector alone is the policy's namespace
    assert not documented.allows(External("192.0.2.1"), DB, 6379)


def test_the_documented_example_limits_the_db_egress_to_10_0_0_0_24_on_5978(documented):
    assert documented.allows(DB, External("10.0.0.7"), 5978)
    assert not documented.allows(DB, External("10.0.1.7"), 5978)
    assert not documented.allows(DB, External("10.0.0.7"), 5979)
    assert not documented.allows(DB, FRONTEND, 80)  # isolated for egress: Pods too
    assert documented.allows(FRONTEND, OTHER, 80)  # nothing selects either


def test_one_peer_with_both_selectors_is_and_two_peers_are_or():
    """The documentation's "Behavior of to and from selectors": user=alice's role=client Pods,
    against every Pod of user=alice's namespaces or role=client Pods of the policy's own."""
    both = """
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: and}
spec:
  podSelector: {matchLabels: {app: server}}
  ingress:
    - from:
        - namespaceSelector: {matchLabels: {user: alice}}
          podSelector: {matchLabels: {role: client}}
"""
    either = both.replace("name: and", "name: or").replace("          podSelector", "        - podSelector")
    server = pod("server", app="server", ip="10.244.2.1")
    alice_client = pod("c", namespace="alice", role="client", ip="10.244.2.2")
    alice_other = pod("o", namespace="alice", role="other", ip="10.244.2.3")
    local_client = pod("l", role="client", ip="10.244.2.4")
    namespaces = {"alice": {"user": "alice"}}
    anded = Cluster(namespaces=dict(namespaces)).add(server, alice_client, alice_other, local_client, policy(both))
    ored = Cluster(namespaces=dict(namespaces)).add(server, alice_client, alice_other, local_client, policy(either))
    assert anded.allows(alice_client, server, 80)
    assert not anded.allows(alice_other, server, 80) and not anded.allows(local_client, server, 80)
    assert ored.allows(alice_client, server, 80)
    assert ored.allows(alice_other, server, 80) and ored.allows(local_client, server, 80)


@pytest.mark.parametrize("text, ingress, egress", [
    # default-deny-ingress
    ("podSelector: {}\npolicyTypes: [Ingress]", False, True),
    # allow-all-ingress
    ("podSelector: {}\ningress: [{}]\npolicyTypes: [Ingress]", True, True),
    # default-deny-egress
    ("podSelector: {}\npolicyTypes: [Egress]", True, False),
    # allow-all-egress
    ("podSelector: {}\negress: [{}]\npolicyTypes: [Egress]", True, True),
    # default-deny-all
    ("podSelector: {}\npolicyTypes: [Ingress, Egress]", False, False),
    # no policyTypes: Ingress always, Egress because an egress section is there
    ("podSelector: {}\negress: [{}]", False, True),
    ("podSelector: {}\negress: []", False, False),
], ids=["deny-ingress", "allow-all-ingress", "deny-egress", "allow-all-egress", "deny-all",
        "types-from-egress-rules", "types-from-empty-egress"])
def test_the_documented_defaults(text, ingress, egress):
    spec = yaml.safe_load(text)
    body = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "p"}, "spec": spec}
    inside, outside = pod("a", ip="10.244.3.1"), pod("b", namespace="other", ip="10.244.3.2")
    cluster = Cluster().add(inside, outside, Policy.of(body, "default"))
    assert bool(cluster.allows(outside, inside, 80)) is ingress
    assert bool(cluster.allows(inside, outside, 80)) is egress


def test_policies_add_up():
    deny = Policy.of({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "deny"},
                      "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}}, "default")
    web = Policy.of({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "web"},
                     "spec": {"podSelector": {"matchLabels": {"app": "web"}}, "ingress": [{"ports": [{"port": 80}]}]}},
                    "default")
    web_pod, db_pod, client = (pod("web", app="web", ip="10.244.4.1"), pod("db", app="db", ip="10.244.4.2"),
                               pod("client", namespace="x", ip="10.244.4.3"))
    cluster = Cluster().add(web_pod, db_pod, client, deny, web)
    assert cluster.allows(client, web_pod, 80)  # the union: deny adds nothing, web admits 80
    assert not cluster.allows(client, web_pod, 81)
    assert not cluster.allows(client, db_pod, 80)  # only deny selects it


def test_a_port_range_is_inclusive():
    """The documentation's multi-port-egress: TCP 32000 to 32768 toward 10.0.0.0/24."""
    text = """
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: multi-port-egress, namespace: default}
spec:
  podSelector: {matchLabels: {role: db}}
  policyTypes: [Egress]
  egress:
    - to: [{ipBlock: {cidr: 10.0.0.0/24}}]
      ports: [{protocol: TCP, port: 32000, endPort: 32768}]
"""
    cluster = Cluster().add(DB, policy(text))
    allowed = [p for p in (31999, 32000, 32400, 32768, 32769) if cluster.allows(DB, External("10.0.0.1"), p)]
    assert allowed == [32000, 32400, 32768]


def test_a_namespace_by_its_name_and_by_expressions():
    """kubernetes.io/metadata.name is on every namespace; matchExpressions In/NotIn/Exists/DoesNotExist."""
    labels = {"tier": "web", "env": "prod"}
    assert selector_matches({}, labels)
    assert selector_matches({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["web", "api"]}]}, labels)
    assert not selector_matches({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["web"]}]}, labels)
    assert selector_matches({"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["a"]}]}, labels)
    assert selector_matches({"matchExpressions": [{"key": "env", "operator": "Exists"}]}, labels)
    assert not selector_matches({"matchExpressions": [{"key": "env", "operator": "DoesNotExist"}]}, labels)
    assert not selector_matches({"matchLabels": {"tier": "web"},
                                 "matchExpressions": [{"key": "team", "operator": "Exists"}]}, labels)
    by_name = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "p"},
               "spec": {"podSelector": {}, "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {
                   "kubernetes.io/metadata.name": "monitoring"}}}]}]}}
    target, prometheus, stranger = (pod("t", ip="10.244.5.1"), pod("p", namespace="monitoring", ip="10.244.5.2"),
                                    pod("s", namespace="other", ip="10.244.5.3"))
    cluster = Cluster().add(target, prometheus, stranger, Policy.of(by_name, "default"))
    assert cluster.allows(prometheus, target, 9090) and not cluster.allows(stranger, target, 9090)


def test_a_named_port_is_the_receiving_pods():
    """A port name stands for the number the destination Pod declares under it, per Pod; a Pod
    without it is not admitted; a native sidecar's name only where the plugin resolves it."""
    spec = {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{"ports": [{"port": "http"}]}]}
    body = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "p"}, "spec": spec}
    vllm = Pod("vllm", "default", {}, "10.244.6.1", ports=(ContainerPort(8000, "http"),))
    sglang = Pod("sglang", "default", {}, "10.244.6.2", ports=(ContainerPort(30000, "http"),))
    unnamed = Pod("unnamed", "default", {}, "10.244.6.3", ports=(ContainerPort(8000),))
    in_sidecar = Pod("sidecar", "default", {}, "10.244.6.4", sidecar_ports=(ContainerPort(8000, "http"),))
    client = pod("client", namespace="x", ip="10.244.6.5")
    cluster = Cluster().add(vllm, sglang, unnamed, in_sidecar, client, Policy.of(body, "default"))
    assert cluster.allows(client, vllm, 8000) and not cluster.allows(client, vllm, 30000)
    assert cluster.allows(client, sglang, 30000) and not cluster.allows(client, sglang, 8000)
    assert not cluster.allows(client, unnamed, 8000)
    assert cluster.allows(client, in_sidecar, 8000)
    cluster.sidecar_named_ports = False
    assert not cluster.allows(client, in_sidecar, 8000)


def test_a_pod_and_its_own_node_are_never_blocked():
    deny = Policy.of({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "deny"},
                      "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}}, "default")
    target = Pod("t", "default", {}, "10.244.7.1", node="node-a")
    same_node_host = Pod("agent", "kube-system", {}, "192.168.0.1", node="node-a", host_network=True)
    other_node_host = Pod("agent", "kube-system", {}, "192.168.0.2", node="node-b", host_network=True)
    cluster = Cluster().add(target, same_node_host, other_node_host, deny)
    assert cluster.allows(target, target, 80)
    assert cluster.allows(Node("node-a", "192.168.0.1"), target, 80)  # kubelet's probes and hooks
    assert cluster.allows(same_node_host, target, 80)
    assert not cluster.allows(Node("node-b", "192.168.0.2"), target, 80)
    assert not cluster.allows(other_node_host, target, 80)  # its node's IP, which nothing admits


def test_a_host_network_pod_is_its_nodes_ip_to_selectors():
    spec = {"podSelector": {}, "ingress": [{"from": [{"namespaceSelector": {}}]}]}
    body = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "p"}, "spec": spec}
    target = Pod("t", "default", {}, "10.244.8.1", node="node-a")
    host = Pod("agent", "kube-system", {}, "192.168.0.2", node="node-b", host_network=True)
    ipblock = {**spec, "ingress": [{"from": [{"ipBlock": {"cidr": "192.168.0.0/24"}}]}]}
    assert not Cluster().add(target, host, Policy.of(body, "default")).allows(host, target, 80)
    assert Cluster().add(target, host, Policy.of({**body, "spec": ipblock}, "default")).allows(host, target, 80)


@pytest.mark.parametrize("spec, message", [
    ({"podSelector": {}, "policyTypes": ["Inbound"]}, "neither Ingress nor Egress"),
    ({"podSelector": {}, "ingress": [{"from": [{}]}]}, "a peer names"),
    ({"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8"}, "podSelector": {}}]}]},
     "cannot be combined"),
    ({"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["11.0.0.0/8"]}}]}]},
     "not inside"),
    ({"podSelector": {}, "ingress": [{"ports": [{"port": "http", "endPort": 90}]}]}, "numbered port"),
    ({"podSelector": {}, "ingress": [{"ports": [{"port": 90, "endPort": 80}]}]}, "below port"),
    ({"podSelector": {}, "ingress": [{"ports": [{"port": 80, "protocol": "ICMP"}]}]}, "protocol"),
    ({"podSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}, "needs values"),
])
def test_what_the_api_server_would_refuse_is_refused_by_name(spec, message):
    body = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "bad"}, "spec": spec}
    with pytest.raises(InvalidPolicy, match=message):
        Policy.of(body, "default")
