"""What the init-container and sidecar layouts add to a Pod, as `modeldrain inject` writes them.

The same pieces deploy/kustomize/hook/pieces.yaml and deploy/kustomize/sidecar-pieces/pieces.yaml
hold for the kustomize components (tests/inject/ holds the two to each other), made fresh for each
Pod template so no two templates share an object. Only the images differ: the injector names the
ones it is given (`--image`, `--sidecar-image`), never a default of its own.
"""

from __future__ import annotations

from typing import Any

from modeldrain.hook.annotations import DEFAULT_ANNOTATIONS_FILE, PORT_ANNOTATION
from modeldrain.hook.constants import SIDECAR_PORT

__all__ = [
    "DRAIN_DIR", "DRAIN_VOLUME", "HOOK", "HOOK_TMPDIR", "INSTALL_CONTAINER", "LWS_NAME_LABEL", "PODINFO_DIR",
    "PODINFO_VOLUME", "SIDECAR_CONTAINER", "SIDECAR_LABEL", "SIDECAR_TMP_VOLUME", "TOKEN_FILE", "TOKEN_VOLUME",
    "hook_mounts", "hook_volumes", "install_container", "network_policy", "prestop_command", "scrape_annotations",
    "sidecar_container", "sidecar_volumes", "token_mount",
]

INSTALL_CONTAINER = "install-prestop"
SIDECAR_CONTAINER = "drain-sidecar"
DRAIN_VOLUME = "drain"
DRAIN_DIR = "/drain"
HOOK = f"{DRAIN_DIR}/prestop"
HOOK_TMPDIR = f"{DRAIN_DIR}/tmp"  # made by `prestop install DIR`
PODINFO_VOLUME = "podinfo"
PODINFO_DIR = DEFAULT_ANNOTATIONS_FILE.rsplit("/", 1)[0]
SIDECAR_TMP_VOLUME = "sidecar-tmp"
TOKEN_VOLUME = "token"
TOKEN_SECRET = "drain-sidecar-token"
TOKEN_DIR = "/var/run/secrets/drain-sidecar"
TOKEN_FILE = f"{TOKEN_DIR}/token"
SIDECAR_LABEL = "modeldrain.io/drain-sidecar"
SCRAPE_ANNOTATIONS = {"prometheus.io/scrape": "true", "prometheus.io/path": "/metrics"}
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
_RESTRICTED = {
    "runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534, "readOnlyRootFilesystem": True,
    "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
}


def install_container(image: str) -> dict[str, Any]:
    """The init container that copies the static prestop into the drain volume."""
    return {
        "name": INSTALL_CONTAINER,
        "image": image,
        "args": ["install", DRAIN_DIR],
        "env": [{"name": "TMPDIR", "value": DRAIN_DIR}],  # the root is read-only: unpack into the volume
        "securityContext": _restricted(),
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
        "volumeMounts": [{"name": DRAIN_VOLUME, "mountPath": DRAIN_DIR}],
    }


def hook_volumes() -> list[dict[str, Any]]:
    return [
        # 11 MB executable + ~27 MB per running hook (and the engine's temporary files where TMPDIR is here).
        {"name": DRAIN_VOLUME, "emptyDir": {"sizeLimit": "1Gi"}},
        {"name": PODINFO_VOLUME, "downwardAPI": {"items": [
            {"path": DEFAULT_ANNOTATIONS_FILE.rsplit("/", 1)[1], "fieldRef": {"fieldPath": "metadata.annotations"}}]}},
    ]


def hook_mounts() -> list[dict[str, Any]]:
    return [{"name": DRAIN_VOLUME, "mountPath": DRAIN_DIR},
            {"name": PODINFO_VOLUME, "mountPath": PODINFO_DIR, "readOnly": True}]


def prestop_command(grace: int, follows_leader: bool) -> list[str]:
    command = [HOOK, "--grace", str(grace)]
    return command + ["--leader-token-file", TOKEN_FILE] if follows_leader else command


def sidecar_container(image: str, grace: int, engine: str, lws: bool) -> dict[str, Any]:
    """drain-sidecar as a native sidecar (Kubernetes >= 1.29), as deploy/kustomize/sidecar-pieces has it."""
    env = [{"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}
           for name, path in (("POD_NAMESPACE", "metadata.namespace"), ("POD_NAME", "metadata.name"),
                              ("POD_UID", "metadata.uid"))]
    if lws:  # the members of one replica were made from one template revision
        env.append({"name": "MEMBER_CONFIGURATION", "valueFrom": {"fieldRef": {
            "fieldPath": "metadata.labels['leaderworkerset.sigs.k8s.io/template-revision-hash']"}}})
    return {
        "name": SIDECAR_CONTAINER,
        "image": image,
        "restartPolicy": "Always",
        "args": [f"--token-file={TOKEN_FILE}", f"--linger-max={grace}", f"--engine={engine}"],
        "env": env,
        "ports": [{"containerPort": SIDECAR_PORT, "name": "http-drain"}],
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": "http-drain"}, "periodSeconds": 5},
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http-drain"}, "periodSeconds": 10},
        "securityContext": _restricted(),
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
        "volumeMounts": [{"name": SIDECAR_TMP_VOLUME, "mountPath": "/tmp"},
                         {"name": PODINFO_VOLUME, "mountPath": PODINFO_DIR, "readOnly": True},
                         token_mount()],
    }


def sidecar_volumes() -> list[dict[str, Any]]:
    # 0444, not deploy/'s 0440 with an fsGroup: an fsGroup on a Pod you already run would make
    # kubelet re-own every volume it mounts (a model cache's PVC: recursively, at every start).
    return [{"name": SIDECAR_TMP_VOLUME, "emptyDir": {"sizeLimit": "256Mi"}},
            {"name": TOKEN_VOLUME, "secret": {"secretName": TOKEN_SECRET, "defaultMode": 0o444}}]


def token_mount() -> dict[str, Any]:
    return {"name": TOKEN_VOLUME, "mountPath": TOKEN_DIR, "readOnly": True}


def network_policy(name: str, namespace: str | None, selector: dict[str, str], engine_port: int,
                   controller_namespace: str, lws: bool) -> dict[str, Any]:
    """Who reaches drain-sidecar: the controller's namespace on 8490, anyone on the engine's port,
    and (a LeaderWorkerSet) its own members on every port."""
    metadata: dict[str, Any] = {"name": f"{name}-drain-sidecar"}
    if namespace:
        metadata["namespace"] = namespace
    ingress: list[dict[str, Any]] = [
        {"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": controller_namespace}}}],
         "ports": [{"port": SIDECAR_PORT, "protocol": "TCP"}]},
        {"ports": [{"port": engine_port, "protocol": "TCP"}]},
    ]
    if lws:
        ingress.append({"from": [{"podSelector": {"matchLabels": dict(selector)}}]})
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": metadata,
            "spec": {"podSelector": {"matchLabels": dict(selector)}, "policyTypes": ["Ingress"], "ingress": ingress}}


def scrape_annotations(port: int) -> dict[str, str]:
    return {**SCRAPE_ANNOTATIONS, PORT_ANNOTATION: str(port)}


def _restricted() -> dict[str, Any]:
    return {**_RESTRICTED, "capabilities": {"drop": ["ALL"]}}
