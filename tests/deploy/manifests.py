"""deploy/ as the tests read it: every document, and every Pod its objects make.

The Pods are read by the product's own reader (modeldrain/lint/pod_templates.py, `prestop lint`'s), and
held to the product's rules (modeldrain/lint/manifest_rules.py): a user's manifests are checked as ours are.

The static checks (tests/deploy/test_manifests.py) and the container runtime
(tests/containers/) both read the manifests through here, so the Pods the runtime starts
are the ones deploy/ describes, not copies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from modeldrain.lint.pod_templates import DEFAULT_NAMESPACE, PodTemplate, templates_of
from tests.conftest import REPO

DEPLOY = REPO / "deploy"
NAMESPACE = DEFAULT_NAMESPACE  # the manifests name none: `kubectl apply -n NS` decides

# The product's images, as the manifests name them.
PRESTOP_IMAGE_REPO = "localhost/modeldrain/prestop"
SIDECAR_IMAGE_REPO = "localhost/modeldrain/drain-sidecar"
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


def pod_templates(docs: list[Document] | None = None) -> list[PodTemplate]:
    """Every Pod deploy/ makes, read by the product's own reader (`prestop lint`'s): a Pod itself;
    a Deployment's first Pod; an LWS group's leader and first worker, with the variables
    LeaderWorkerSet's webhook injects into every container."""
    return [template for document in (docs if docs is not None else documents())
            for template in templates_of(document.body, document.path.name)]


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
