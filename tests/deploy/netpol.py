"""networking.k8s.io/v1 NetworkPolicy, evaluated: which connections a set of policies admits.

Nothing on this machine enforces NetworkPolicy, so deploy/'s policies are read by this model of
the documented semantics (kubernetes.io, "Network Policies", and the API reference):

- A policy selects Pods of its own namespace by `podSelector` ({} selects all). A Pod is
  isolated for a direction once any policy selecting it has that direction in `policyTypes`
  (absent: Ingress, plus Egress when the policy has an `egress` section); an isolated Pod takes
  only what the union of those policies' rules admits. Order never matters.
- A connection passes when the source's egress and the destination's ingress both admit it.
- A rule admits a peer and a port: `from`/`to` absent or empty means every peer, `ports` absent
  or empty every port. Peers: `podSelector` alone (Pods of the policy's namespace),
  `namespaceSelector` alone (every Pod of those namespaces), both in one peer (those Pods of
  those namespaces), `ipBlock` (a CIDR less its `except`s, matched on the peer's IP).
- A port: `protocol` (default TCP), `port` a number or a container port's name (looked up in the
  Pod the traffic goes to, for ingress and egress alike), `endPort` a range from a numbered
  port; no `port` means every port of the protocol.
- Exceptions: a Pod never blocks itself; traffic from the node a Pod runs on (kubelet's probes
  and httpGet hooks, host-network Pods on that node) is always admitted; host-network Pods are
  never selected by a policy's selectors, and count as their node's IP elsewhere.

ipBlock is matched on any peer's IP, Pods' included. The documentation leaves ipBlock on Pod
IPs to the plugin; matching them is the more permissive reading, so a flow "must not pass"
holds under every plugin. Named ports on native sidecars (init containers with
`restartPolicy: Always`) resolve here only with `sidecar_named_ports=True`: Kubernetes fixed
that in 2024 (kubernetes/kubernetes#125285) and plugins followed one by one.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

INGRESS, EGRESS = "Ingress", "Egress"
POLICY_TYPES = (INGRESS, EGRESS)
PROTOCOLS = ("TCP", "UDP", "SCTP")
DEFAULT_PROTOCOL = "TCP"  # NetworkPolicyPort.protocol's default
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set on every namespace by the API server
SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
MAX_PORT = 65535


class InvalidPolicy(ValueError):
    """A policy the API server would refuse: this model will not guess what it means."""


@dataclass(frozen=True)
class ContainerPort:
    number: int
    name: str = ""
    protocol: str = DEFAULT_PROTOCOL


@dataclass(frozen=True)
class Pod:
    name: str
    namespace: str
    labels: Mapping[str, str]
    ip: str
    node: str = "node-a"
    ports: tuple[ContainerPort, ...] = ()  # the regular containers'
    sidecar_ports: tuple[ContainerPort, ...] = ()  # native sidecars' (init containers, restartPolicy: Always)
    host_network: bool = False


@dataclass(frozen=True)
class Node:
    """A node's own traffic: kubelet (probes, httpGet hooks) and the host-network Pods on it."""

    name: str
    ip: str


@dataclass(frozen=True)
class External:
    """An address outside the cluster's Pods (a load balancer, a client, another network)."""

    ip: str


Endpoint = Pod | Node | External


@dataclass(frozen=True)
class Policy:
    namespace: str
    name: str
    spec: Mapping[str, Any]

    @staticmethod
    def of(body: Mapping[str, Any], namespace: str) -> "Policy":
        """A NetworkPolicy document; `namespace` where it names none (`kubectl apply -n`)."""
        if body.get("apiVersion") != "networking.k8s.io/v1" or body.get("kind") != "NetworkPolicy":
            raise InvalidPolicy(f"not a networking.k8s.io/v1 NetworkPolicy: {body.get('apiVersion')} {body.get('kind')}")
        metadata = body.get("metadata", {})
        policy = Policy(metadata.get("namespace", namespace), metadata["name"], body.get("spec", {}))
        policy.validate()
        return policy

    @property
    def types(self) -> tuple[str, ...]:
        declared = self.spec.get("policyTypes")
        if declared is not None:
            return tuple(declared)
        return (INGRESS, EGRESS) if "egress" in self.spec else (INGRESS,)

    def rules(self, direction: str) -> list[Mapping[str, Any]]:
        return list(self.spec.get("ingress" if direction == INGRESS else "egress") or [])

    def validate(self) -> None:
        where = f"NetworkPolicy {self.namespace}/{self.name}"
        for kind in self.types:
            if kind not in POLICY_TYPES:
                raise InvalidPolicy(f"{where}: policyTypes {kind!r} is neither Ingress nor Egress")
        _validate_selector(self.spec.get("podSelector", {}), f"{where}: podSelector")
        for direction, peers_key in ((INGRESS, "from"), (EGRESS, "to")):
            for i, rule in enumerate(self.rules(direction)):
                at = f"{where}: {direction.lower()}[{i}]"
                for peer in rule.get(peers_key) or []:
                    _validate_peer(peer, f"{at}.{peers_key}")
                for port in rule.get("ports") or []:
                    _validate_port(port, f"{at}.ports")


def _validate_selector(selector: Mapping[str, Any], where: str) -> None:
    unknown = set(selector) - {"matchLabels", "matchExpressions"}
    if unknown:
        raise InvalidPolicy(f"{where}: unknown selector fields {sorted(unknown)}")
    for expression in selector.get("matchExpressions") or []:
        operator, values = expression.get("operator"), expression.get("values") or []
        if operator not in SELECTOR_OPERATORS:
            raise InvalidPolicy(f"{where}: operator {operator!r} is not one of {SELECTOR_OPERATORS}")
        if operator in ("In", "NotIn") and not values:
            raise InvalidPolicy(f"{where}: {operator} needs values")
        if operator in ("Exists", "DoesNotExist") and values:
            raise InvalidPolicy(f"{where}: {operator} takes no values")


def _validate_peer(peer: Mapping[str, Any], where: str) -> None:
    selectors = {"podSelector", "namespaceSelector"} & set(peer)
    if "ipBlock" in peer:
        if selectors:
            raise InvalidPolicy(f"{where}: ipBlock cannot be combined with {sorted(selectors)}")
        block = peer["ipBlock"]
        try:
            cidr = ipaddress.ip_network(block["cidr"], strict=False)
            for excepted in block.get("except") or []:
                if not ipaddress.ip_network(excepted, strict=False).subnet_of(cidr):  # type: ignore[arg-type]
                    raise InvalidPolicy(f"{where}: except {excepted} is not inside {block['cidr']}")
        except (KeyError, ValueError, TypeError) as exc:
            if isinstance(exc, InvalidPolicy):
                raise
            raise InvalidPolicy(f"{where}: ipBlock {block!r}: {exc}") from None
    elif not selectors:
        raise InvalidPolicy(f"{where}: a peer names a podSelector, a namespaceSelector or an ipBlock")
    for key in selectors:
        _validate_selector(peer[key], f"{where}.{key}")


def _validate_port(port: Mapping[str, Any], where: str) -> None:
    protocol = port.get("protocol", DEFAULT_PROTOCOL)
    if protocol not in PROTOCOLS:
        raise InvalidPolicy(f"{where}: protocol {protocol!r} is not one of {PROTOCOLS}")
    number, end = port.get("port"), port.get("endPort")
    if isinstance(number, int) and not 1 <= number <= MAX_PORT:
        raise InvalidPolicy(f"{where}: port {number} is out of range")
    if end is not None:
        if not isinstance(number, int):
            raise InvalidPolicy(f"{where}: endPort needs a numbered port, not {number!r}")
        if not number <= end <= MAX_PORT:
            raise InvalidPolicy(f"{where}: endPort {end} is below port {number} or out of range")


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector: every matchLabels pair and every matchExpression ({} matches all)."""
    if any(labels.get(key) != value for key, value in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    why: str

    def __bool__(self) -> bool:
        return self.allowed


@dataclass
class Cluster:
    """Namespaces (name -> labels), Pods, nodes and policies: the world a connection is judged in."""

    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)
    pods: list[Pod] = field(default_factory=list)
    policies: list[Policy] = field(default_factory=list)
    sidecar_named_ports: bool = True

    def namespace_labels(self, name: str) -> dict[str, str]:
        return {**self.namespaces.get(name, {}), NAMESPACE_NAME_LABEL: name}

    def add(self, *items: Pod | Policy) -> "Cluster":
        for item in items:
            if isinstance(item, Pod):
                self.namespaces.setdefault(item.namespace, {})
                self.pods.append(item)
            else:
                self.policies.append(item)
        return self

    def selecting(self, pod: Pod, direction: str) -> list[Policy]:
        if pod.host_network:
            return []
        return [p for p in self.policies if p.namespace == pod.namespace and direction in p.types
                and selector_matches(p.spec.get("podSelector", {}), pod.labels)]

    def allows(self, source: Endpoint, destination: Pod | External, port: int,
               protocol: str = DEFAULT_PROTOCOL) -> Verdict:
        """Does a new connection from `source` to `destination`'s `port` pass every policy?"""
        if source == destination:
            return Verdict(True, "a Pod never blocks itself")
        if isinstance(destination, Pod) and _on_node_of(source, destination):
            return Verdict(True, f"from {destination.node}, the destination's own node: never blocked")
        if isinstance(source, Pod):
            out = self._admits(source, destination, port, protocol, EGRESS)
            if not out:
                return out
        if isinstance(destination, Pod):
            return self._admits(destination, source, port, protocol, INGRESS)
        return Verdict(True, "no policy selects either end")

    def _admits(self, subject: Pod, peer: Endpoint, port: int, protocol: str, direction: str) -> Verdict:
        policies = self.selecting(subject, direction)
        if not policies:
            return Verdict(True, f"{subject.name} is not isolated for {direction.lower()}")
        target = subject if direction == INGRESS else peer  # named ports are the receiving Pod's
        for policy in policies:
            for i, rule in enumerate(policy.rules(direction)):
                peers = rule.get("from" if direction == INGRESS else "to") or []
                if peers and not any(self._peer_matches(p, peer, policy.namespace) for p in peers):
                    continue
                ports = rule.get("ports") or []
                if ports and not any(self._port_matches(p, target, port, protocol) for p in ports):
                    continue
                return Verdict(True, f"{policy.name} {direction.lower()}[{i}]")
        names = ", ".join(p.name for p in policies)
        return Verdict(False, f"{subject.name} is isolated for {direction.lower()} ({names}) and no rule admits it")

    def _peer_matches(self, peer: Mapping[str, Any], endpoint: Endpoint, policy_namespace: str) -> bool:
        if "ipBlock" in peer:
            address = ipaddress.ip_address(endpoint.ip)
            block = peer["ipBlock"]
            if address not in ipaddress.ip_network(block["cidr"], strict=False):
                return False
            return not any(address in ipaddress.ip_network(e, strict=False) for e in block.get("except") or [])
        if not isinstance(endpoint, Pod) or endpoint.host_network:
            return False  # selectors select Pods only; a host-network Pod is its node's IP
        if "namespaceSelector" in peer:
            if not selector_matches(peer["namespaceSelector"], self.namespace_labels(endpoint.namespace)):
                return False
        elif endpoint.namespace != policy_namespace:
            return False
        return selector_matches(peer.get("podSelector", {}), endpoint.labels)

    def _port_matches(self, rule_port: Mapping[str, Any], target: Endpoint, port: int, protocol: str) -> bool:
        if rule_port.get("protocol", DEFAULT_PROTOCOL) != protocol:
            return False
        number = rule_port.get("port")
        if number is None:
            return True
        if isinstance(number, str):
            return port in self.named_port(target, number, protocol)
        return number <= port <= rule_port.get("endPort", number)

    def named_port(self, target: Endpoint, name: str, protocol: str) -> set[int]:
        """The numbers a port name stands for in the Pod the traffic goes to (none outside Pods)."""
        if not isinstance(target, Pod):
            return set()
        declared: Iterable[ContainerPort] = target.ports + (target.sidecar_ports if self.sidecar_named_ports else ())
        return {p.number for p in declared if p.name == name and p.protocol == protocol}


def _on_node_of(source: Endpoint, destination: Pod) -> bool:
    if isinstance(source, Node):
        return source.name == destination.node
    return isinstance(source, Pod) and source.host_network and source.node == destination.node
