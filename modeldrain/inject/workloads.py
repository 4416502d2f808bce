"""The Pod templates of one Kubernetes object, each given to pod_changes, and what the object adds.

A Pod is its own template; a Deployment, StatefulSet, DaemonSet, ReplicaSet or Job has one; a
LeaderWorkerSet has a leader's and a worker's (the workers' hooks follow the leader's
drain-sidecar, so it always gets the sidecar); a List holds any of them. With the sidecar, each
workload gets a NetworkPolicy of its own beside it, as deploy/kustomize/sidecar's and
leaderworkerset's do. Every other object is none of the injector's business and passes unchanged.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from modeldrain.inject import pieces
from modeldrain.inject.pod_changes import Injected, LeftAlone, Options, Refused, inject
from modeldrain.lint.pod_templates import LWS_KIND, TEMPLATE_KINDS

__all__ = ["NotKubernetes", "inject_object"]


@dataclass
class Result:
    """One object after injection: the new object (None when unchanged), the objects it adds, notes."""

    body: dict[str, Any] | None = None
    added: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class NotKubernetes(ValueError):
    """A document that is not a Kubernetes object: bad input."""


def inject_object(body: Any, where: str, options: Options, controller_namespace: str) -> Result:
    """The object with modeldrain added, on a copy; raises Refused or NotKubernetes."""
    if not isinstance(body, dict) or not isinstance(body.get("kind"), str) or not isinstance(body.get("apiVersion"), str):
        raise NotKubernetes(f"{where}: not a Kubernetes object (a mapping with apiVersion and kind)")
    new = copy.deepcopy(body)
    result = Result()
    if new["kind"] == "List" and isinstance(new.get("items"), list):
        changed = False
        for index, item in enumerate(list(new["items"])):
            inner = inject_object(item, f"{where} items[{index}]", options, controller_namespace)
            result.notes += inner.notes
            if inner.body is not None:
                new["items"][index] = inner.body
                new["items"].extend(inner.added)
                changed = True
        result.body = new if changed else None
        return result
    metadata: dict[str, Any] = new["metadata"] if isinstance(new.get("metadata"), dict) else {}
    name = str(metadata.get("name", "unnamed"))
    label = f"{where}: {new['kind']} {name}"
    spec: dict[str, Any] = new["spec"] if isinstance(new.get("spec"), dict) else {}
    if new["kind"] == "Pod":
        done = [_one(new, label, options, result)]
    elif new["kind"] in TEMPLATE_KINDS:
        done = [_one(spec.get("template"), label, options, result)]
    elif new["kind"] == LWS_KIND:
        done = _lws(spec, label, options, result)
    else:
        return result
    injected = [d for d in done if isinstance(d, Injected)]
    if not injected:
        return result
    result.body = new
    if options.sidecar_image:
        lws = new["kind"] == LWS_KIND
        result.added.append(pieces.network_policy(
            name, metadata.get("namespace"), _selector(new, name, lws), injected[0].port, controller_namespace, lws))
    return result


def _one(template: Any, label: str, options: Options, result: Result, **role: Any) -> Injected | LeftAlone:
    if not isinstance(template, dict):
        raise Refused(f"{label}: no Pod template (spec.template) to read")
    outcome = inject(template, label, options, **role)
    if isinstance(outcome, LeftAlone) and outcome.note:
        result.notes.append(outcome.note)
    return outcome


def _lws(spec: dict[str, Any], label: str, options: Options, result: Result) -> list[Injected | LeftAlone]:
    group = spec.get("leaderWorkerTemplate")
    if not isinstance(group, dict) or not isinstance(group.get("workerTemplate"), dict):
        raise Refused(f"{label}: no spec.leaderWorkerTemplate.workerTemplate to read")
    if not options.sidecar_image:
        raise Refused(f"{label}: a LeaderWorkerSet's workers follow their leader's drain-sidecar: give --sidecar "
                      "(and --sidecar-image)")
    if not isinstance(group.get("leaderTemplate"), dict):
        # LeaderWorkerSet makes the leader from the worker's template: one template, both roles.
        return [_one(group["workerTemplate"], f"{label} (leader and workers)", options, result, lws=True,
                     lws_worker=True)]
    leader = _one(group["leaderTemplate"], f"{label} (leader)", options, result, lws=True)
    return [leader, _one(group["workerTemplate"], f"{label} (workers)", options, result, lws=True, lws_worker=True,
                         annotate=False, leader=leader if isinstance(leader, Injected) else None)]


def _selector(body: dict[str, Any], name: str, lws: bool) -> dict[str, str]:
    """The Pods the workload makes: its own selector, else its template's labels."""
    if lws:
        return {pieces.LWS_NAME_LABEL: name}
    spec = body.get("spec") or {}
    match = (spec.get("selector") or {}).get("matchLabels") if isinstance(spec.get("selector"), dict) else None
    if isinstance(match, dict) and match:
        return {str(k): str(v) for k, v in match.items()}
    template = body if body["kind"] == "Pod" else spec.get("template") or {}
    labels = (template.get("metadata") or {}).get("labels") or {}
    return {str(k): str(v) for k, v in labels.items()}
