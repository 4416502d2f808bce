"""The Pods a Kubernetes object makes, read from its parsed manifest (a dict): `prestop lint`'s input.

A Pod is itself; a Deployment, StatefulSet, DaemonSet, ReplicaSet or Job makes Pods from its
template; a LeaderWorkerSet makes a leader and workers, each with the variables its webhook
injects into every container (the hook of a worker reads LWS_WORKER_INDEX to follow its leader).
A `kubectl get -o json` List holds any of them. Standard library only: the hook's bundle carries it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

__all__ = ["DEFAULT_NAMESPACE", "LWS_KIND", "NotAManifest", "PodTemplate", "TEMPLATE_KINDS", "templates_of"]

# What a Pod without terminationGracePeriodSeconds gets (the Kubernetes API's default).
KUBERNETES_DEFAULT_GRACE_S = 30

# Objects whose spec.template is a Pod template.
TEMPLATE_KINDS = frozenset({"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"})
LWS_KIND = "LeaderWorkerSet"
# A namespace for the leader's address when the manifest names none (`kubectl apply -n` decides).
DEFAULT_NAMESPACE = "default"


@dataclass(frozen=True)
class PodTemplate:
    """A Pod as one object makes it, with what its controller adds."""

    source: str  # e.g. "deployment.yaml: Deployment llm-vllm"
    pod_name: str  # the name the first Pod made from it gets
    labels: dict[str, str]
    annotations: dict[str, str]
    spec: dict[str, Any]
    injected_env: dict[str, str] = field(default_factory=dict)  # added to every container (LWS)
    # A LeaderWorkerSet's leaderWorkerTemplate.restartPolicy as written (None: not written, or not an LWS).
    group_restart_policy: str | None = None

    @property
    def follows_a_leader(self) -> bool:
        """A LeaderWorkerSet worker: its hook waits on the leader's sidecar, not its own engine."""
        return self.injected_env.get("LWS_WORKER_INDEX", "0") != "0"

    @property
    def id(self) -> str:
        return self.pod_name

    def containers(self) -> list[dict[str, Any]]:
        return [*_dicts(self.spec.get("initContainers")), *_dicts(self.spec.get("containers"))]

    @property
    def grace_given(self) -> bool:
        return "terminationGracePeriodSeconds" in self.spec

    @property
    def grace_s(self) -> int:
        value = self.spec.get("terminationGracePeriodSeconds", KUBERNETES_DEFAULT_GRACE_S)
        return value if isinstance(value, int) and not isinstance(value, bool) else KUBERNETES_DEFAULT_GRACE_S


class NotAManifest(ValueError):
    """An object with no kind, or a Pod-making object without the fields that make its Pods."""


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _template(source: str, template: Any, pod_name: str, injected_env: dict[str, str] | None = None,
              injected_labels: dict[str, str] | None = None, group_restart_policy: Any = None) -> PodTemplate:
    if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
        raise NotAManifest(f"{source}: no Pod template (spec) to read")
    metadata = _mapping(template.get("metadata"))
    return PodTemplate(
        source=source,
        pod_name=pod_name,
        labels={**_mapping(metadata.get("labels")), **(injected_labels or {})},
        annotations=dict(_mapping(metadata.get("annotations"))),
        spec=template["spec"],
        injected_env=dict(injected_env or {}),
        group_restart_policy=None if group_restart_policy is None else str(group_restart_policy),
    )


def templates_of(body: Any, where: str) -> Iterator[PodTemplate]:
    """Every Pod one parsed object makes (none for an object that makes no Pods: a Service, a
    NetworkPolicy); `where` names the object's file for the templates' `source`."""
    if not isinstance(body, dict):
        raise NotAManifest(f"{where}: not a Kubernetes object (a JSON or YAML mapping)")
    kind = body.get("kind")
    if not isinstance(kind, str):
        raise NotAManifest(f"{where}: an object without a kind")
    if kind == "List":
        for index, item in enumerate(_dicts(body.get("items"))):
            yield from templates_of(item, f"{where} items[{index}]")
        return
    name = str(_mapping(body.get("metadata")).get("name", "unnamed"))
    source = f"{where}: {kind} {name}"
    spec = _mapping(body.get("spec"))
    if kind == "Pod":
        yield _template(source, body, name)
    elif kind == "PodTemplate":
        yield _template(source, body.get("template"), name)
    elif kind in TEMPLATE_KINDS:
        yield _template(source, spec.get("template"), f"{name}-0")
    elif kind == LWS_KIND:
        yield from _lws_templates(source, name, str(_mapping(body.get("metadata")).get("namespace") or DEFAULT_NAMESPACE),
                                  _mapping(spec.get("leaderWorkerTemplate")))


def _lws_templates(source: str, name: str, namespace: str, group: dict[str, Any]) -> Iterator[PodTemplate]:
    """A group's leader and first worker, with the variables and labels LeaderWorkerSet sets."""
    size = group.get("size", 1)
    size = size if isinstance(size, int) and not isinstance(size, bool) else 1
    worker = group.get("workerTemplate")
    leader = group.get("leaderTemplate", worker)
    env = {"LWS_LEADER_ADDRESS": f"{name}-0.{name}.{namespace}",  # <lws>-<group>.<subdomain>.<namespace>
           "LWS_GROUP_SIZE": str(size)}
    labels = {"leaderworkerset.sigs.k8s.io/name": name, "leaderworkerset.sigs.k8s.io/group-index": "0",
              "leaderworkerset.sigs.k8s.io/template-revision-hash": "5d8f6c7b9"}
    policy = group.get("restartPolicy")
    yield _template(f"{source} (leader)", leader, f"{name}-0", {**env, "LWS_WORKER_INDEX": "0"},
                    {**labels, "leaderworkerset.sigs.k8s.io/worker-index": "0"}, policy)
    if size > 1:
        yield _template(f"{source} (worker 1)", worker, f"{name}-0-1", {**env, "LWS_WORKER_INDEX": "1"},
                        {**labels, "leaderworkerset.sigs.k8s.io/worker-index": "1"}, policy)
