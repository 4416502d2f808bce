"""The connections deploy/'s Pods rely on, and those nobody may make, judged under its policies.

The world: every Pod the manifests make (tests/deploy/manifests.py), in the namespace they are
applied to, beside the Pods that talk to them: the operator's controller (modeldrain-system),
a router and Prometheus (namespaces of their own), an unrelated Pod of the same namespace, a
member of another LeaderWorkerSet, a host-network agent on another node, an address outside the
cluster, and each Pod's own node (kubelet). Each Pod runs on a node of its own.

Must pass: the controller to every sidecar's port; every member of a LeaderWorkerSet to every
member's ports (a worker follows its leader's sidecar; SGLang's --dist-init-addr, NCCL); routers
and Prometheus to every engine's port; the node's kubelet to everything (probes, httpGet hooks).
Must not pass: anything else to a sidecar's port.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from tests.deploy.manifests import NAMESPACE, SIDECAR_PORT, PodTemplate, is_sidecar_image
from tests.deploy.netpol import Cluster, ContainerPort, Endpoint, External, Node, Pod, Policy

CONTROLLER_NAMESPACE = "modeldrain-system"  # deploy/networkpolicy.yaml's, to be replaced by yours
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
SCRAPE_PORT_ANNOTATION = "prometheus.io/port"

CONTROLLER = Pod("modeldrain-controller-0", CONTROLLER_NAMESPACE, {"app.kubernetes.io/name": "modeldrain-controller"},
                 "10.244.100.1", node="node-system")
ROUTER = Pod("router-0", "routing", {"app.kubernetes.io/name": "llm-router"}, "10.244.100.2", node="node-system")
PROMETHEUS = Pod("prometheus-0", "monitoring", {"app.kubernetes.io/name": "prometheus"}, "10.244.100.3",
                 node="node-system")
NEIGHBOUR = Pod("web-0", NAMESPACE, {"app.kubernetes.io/name": "web"}, "10.244.100.4", node="node-system")
OTHER_GROUP = Pod("other-lws-0", NAMESPACE, {LWS_NAME_LABEL: "other-lws", "modeldrain.io/drain-sidecar": "true"},
                  "10.244.100.5", node="node-system")
HOST_AGENT = Pod("node-agent-x", "kube-system", {"app": "node-agent"}, "192.168.0.250", node="node-system",
                 host_network=True)
OUTSIDE = External("203.0.113.7")
CLIENTS = (CONTROLLER, ROUTER, PROMETHEUS, NEIGHBOUR, OTHER_GROUP, HOST_AGENT)


@dataclass(frozen=True)
class Flow:
    source: Endpoint
    destination: Pod
    port: int
    why: str

    def __str__(self) -> str:
        source = getattr(self.source, "name", None) or self.source.ip
        return f"{source} -> {self.destination.name}:{self.port} ({self.why})"


def _ports(containers: Iterable[dict[str, Any]]) -> tuple[ContainerPort, ...]:
    return tuple(ContainerPort(p["containerPort"], p.get("name", ""), p.get("protocol", "TCP"))
                 for c in containers for p in c.get("ports", []))


def pod_of(template: PodTemplate, index: int) -> Pod:
    sidecars = [c for c in template.spec.get("initContainers", []) if c.get("restartPolicy") == "Always"]
    return Pod(template.pod_name, NAMESPACE, dict(template.labels), f"10.244.{index + 1}.10",
               node=f"node-{index + 1}", ports=_ports(template.spec["containers"]), sidecar_ports=_ports(sidecars))


def has_sidecar(template: PodTemplate) -> bool:
    return any(is_sidecar_image(c["image"]) for c in template.containers())


def engine_port(template: PodTemplate) -> int | None:
    """The engine's port as the Pod tells its scrapers (and the hook): the annotation."""
    port = template.annotations.get(SCRAPE_PORT_ANNOTATION)
    return int(port) if port else None


@dataclass(frozen=True)
class World:
    cluster: Cluster
    pods: dict[str, tuple[PodTemplate, Pod]]

    @staticmethod
    def of(templates: list[PodTemplate], policies: list[dict[str, Any]], sidecar_named_ports: bool = True) -> "World":
        pods = {t.pod_name: (t, pod_of(t, i)) for i, t in enumerate(templates)}
        cluster = Cluster(sidecar_named_ports=sidecar_named_ports)
        cluster.add(*CLIENTS, *(pod for _, pod in pods.values()), *(Policy.of(p, NAMESPACE) for p in policies))
        return World(cluster, pods)

    def must_pass(self) -> list[Flow]:
        flows: list[Flow] = []
        for template, pod in self.pods.values():
            own_node = Node(pod.node, pod.ip.replace("10.244.", "192.168.", 1))  # its node's address
            port = engine_port(template)
            if port is not None:
                flows += [Flow(ROUTER, pod, port, "a router sends work to the engine"),
                          Flow(PROMETHEUS, pod, port, "Prometheus scrapes the engine"),
                          Flow(own_node, pod, port, "kubelet's probes")]
            if has_sidecar(template):
                flows += [Flow(CONTROLLER, pod, SIDECAR_PORT, "the controller reads /v1/work"),
                          Flow(own_node, pod, SIDECAR_PORT, "kubelet's probes and httpGet /v1/drain")]
            group = template.labels.get(LWS_NAME_LABEL)
            for other_template, other in self.pods.values():
                if group is None or other is pod or other_template.labels.get(LWS_NAME_LABEL) != group:
                    continue
                for member_port in {p.number for p in pod.ports + pod.sidecar_ports} | _group_ports(template):
                    flows.append(Flow(other, pod, member_port, f"a member of LeaderWorkerSet {group}"))
        return flows

    def must_not_pass(self) -> list[Flow]:
        """Every source but the controller, the node and the Pod's own group, to every sidecar."""
        flows: list[Flow] = []
        for template, pod in self.pods.values():
            if not has_sidecar(template):
                continue
            group = template.labels.get(LWS_NAME_LABEL)
            sources: list[Endpoint] = [c for c in CLIENTS if c is not CONTROLLER]
            sources += [other for t, other in self.pods.values()
                        if other is not pod and (group is None or t.labels.get(LWS_NAME_LABEL) != group)]
            sources += [OUTSIDE, Node("node-elsewhere", "192.168.9.9")]
            flows += [Flow(s, pod, SIDECAR_PORT, "nobody else reaches the sidecar") for s in sources]
        return flows

    def failures(self) -> list[str]:
        out = []
        for flow in self.must_pass():
            verdict = self.cluster.allows(flow.source, flow.destination, flow.port)
            if not verdict:
                out.append(f"refused, but must pass: {flow}: {verdict.why}")
        for flow in self.must_not_pass():
            verdict = self.cluster.allows(flow.source, flow.destination, flow.port)
            if verdict:
                out.append(f"admitted, but must not pass: {flow}: {verdict.why}")
        return out


def _group_ports(template: PodTemplate) -> set[int]:
    """The ports an engine's own command opens to its group: SGLang's --dist-init-addr HOST:PORT."""
    ports = set()
    for container in template.spec["containers"]:
        argv = [*container.get("command", []), *container.get("args", [])]
        for flag, value in zip(argv, argv[1:]):
            if flag == "--dist-init-addr":
                ports.add(int(value.rsplit(":", 1)[1]))
    return ports
