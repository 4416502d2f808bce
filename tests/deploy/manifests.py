"""deploy/ as the tests read it: every document, and every Pod its objects make.

The static checks (tests/deploy/test_manifests.py) and the container runtime
(tests/containers/) both read the manifests through here, so the Pods the runtime starts
are the ones deploy/ describes, not copies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import REPO

DEPLOY = REPO / "deploy"
NAMESPACE = "default"  # the manifests name none: `kubectl apply -n NS` decides

# The product's images, as the manifests name them.
PRESTOP_IMAGE_REPO = "modeldrain/prestop"
SIDECAR_IMAGE_REPO = "modeldrain/drain-sidecar"
SIDECAR_PORT = 8490  # drain-sidecar's default port (docs/sidecar-api.md), as the manifests give it


@dataclass(frozen=True)
class Document:
    path: Path
    index: int
    body: dict[str, Any]

    @property
    def id(self) -> str:
        return f"{self.path.name}[{self.index}]"

    @property
    def kind(self) -> str:
        return self.body["kind"]

    @property
    def name(self) -> str:
        return self.body["metadata"]["name"]


@dataclass(frozen=True)
class PodTemplate:
    """A Pod as one of deploy/'s objects makes it, with what its controller adds."""

    source: str  # e.g. "deployment.yaml: Deployment llm-vllm"
    pod_name: str  # the name the first Pod made from it gets
    labels: dict[str, str]
    annotations: dict[str, str]
    spec: dict[str, Any]
    injected_env: dict[str, str] = field(default_factory=dict)  # added to every container (LWS)

    @property
    def follows_a_leader(self) -> bool:
        """A LeaderWorkerSet worker: its hook waits on the leader's sidecar, not its own engine."""
        return self.injected_env.get("LWS_WORKER_INDEX", "0") != "0"

    @property
    def id(self) -> str:
        return self.pod_name

    def containers(self) -> list[dict[str, Any]]:
        return [*self.spec.get("initContainers", []), *self.spec["containers"]]

    @property
    def grace_s(self) -> int:
        return int(self.spec.get("terminationGracePeriodSeconds", 30))


def manifests() -> list[Path]:
    return sorted(DEPLOY.glob("*.yaml"))


def documents() -> list[Document]:
    out = []
    for path in manifests():
        with open(path, encoding="utf-8") as f:
            for index, body in enumerate(yaml.safe_load_all(f)):
                if body is not None:
                    out.append(Document(path, index, body))
    return out


def _template(document: Document, template: dict[str, Any], pod_name: str,
              injected_env: dict[str, str] | None = None, what: str = "",
              injected_labels: dict[str, str] | None = None) -> PodTemplate:
    metadata = template.get("metadata", {})
    return PodTemplate(
        source=f"{document.path.name}: {document.kind} {document.name}{what}",
        pod_name=pod_name,
        labels={**metadata.get("labels", {}), **(injected_labels or {})},
        annotations=dict(metadata.get("annotations", {})),
        spec=template["spec"],
        injected_env=dict(injected_env or {}),
    )


def pod_templates(docs: list[Document] | None = None) -> list[PodTemplate]:
    """Every Pod deploy/ makes: a Pod itself; a Deployment's first Pod; an LWS group's leader and
    first worker, with the variables LeaderWorkerSet's webhook injects into every container."""
    out = []
    for document in docs if docs is not None else documents():
        body = document.body
        if document.kind == "Pod":
            out.append(_template(document, body, document.name))
        elif document.kind in ("Deployment", "StatefulSet", "DaemonSet"):
            out.append(_template(document, body["spec"]["template"], f"{document.name}-0"))
        elif document.kind == "LeaderWorkerSet":
            group = body["spec"]["leaderWorkerTemplate"]
            size = int(group.get("size", 1))
            name = document.name
            leader_address = f"{name}-0.{name}.{NAMESPACE}"  # <lws>-<group>.<subdomain>.<namespace>
            worker = group["workerTemplate"]
            leader = group.get("leaderTemplate", worker)
            env = {"LWS_LEADER_ADDRESS": leader_address, "LWS_GROUP_SIZE": str(size)}
            # The labels LeaderWorkerSet's controller puts on every member (lws.sigs.k8s.io).
            labels = {"leaderworkerset.sigs.k8s.io/name": name, "leaderworkerset.sigs.k8s.io/group-index": "0",
                      "leaderworkerset.sigs.k8s.io/template-revision-hash": "5d8f6c7b9"}
            out.append(_template(document, leader, f"{name}-0", {**env, "LWS_WORKER_INDEX": "0"}, " (leader)",
                                 {**labels, "leaderworkerset.sigs.k8s.io/worker-index": "0"}))
            if size > 1:
                out.append(_template(document, worker, f"{name}-0-1", {**env, "LWS_WORKER_INDEX": "1"},
                                     " (worker 1)", {**labels, "leaderworkerset.sigs.k8s.io/worker-index": "1"}))
    return out


def images_built_in_deploy() -> dict[str, Path]:
    """Image name -> the deploy/*.Dockerfile that builds it (from its `docker build ... -t NAME`)."""
    built = {}
    for dockerfile in sorted(DEPLOY.glob("*.Dockerfile")):
        match = re.search(r"docker build .*?-t\s+(\S+)", dockerfile.read_text(), re.S)
        assert match, f"{dockerfile.name} does not say which image it builds (`docker build ... -t NAME`)"
        built[match.group(1)] = dockerfile
    return built


def prestop_command(container: dict[str, Any]) -> list[str]:
    return container.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])


def prestop_http(container: dict[str, Any]) -> dict[str, Any]:
    """A preStop httpGet (drain-sidecar's /v1/drain), or {}."""
    return container.get("lifecycle", {}).get("preStop", {}).get("httpGet", {})


def poststart_command(container: dict[str, Any]) -> list[str]:
    return container.get("lifecycle", {}).get("postStart", {}).get("exec", {}).get("command", [])


def is_sidecar_image(image: str) -> bool:
    return image.split(":")[0] == SIDECAR_IMAGE_REPO


def is_hook_install(container: dict[str, Any]) -> bool:
    return container["image"].split(":")[0] == PRESTOP_IMAGE_REPO and container.get("args", [])[:1] == ["install"]
