"""Every Pod deploy/ makes starts in a real container runtime and drains when deleted as kubelet
deletes it: init containers, the hook installed or baked, its postStart guard, the native
sidecar ready with its token, the engine up; then the preStop hook, SIGTERM with the rest of the
grace, the sidecar last. A manifest that cannot start fails here.

The Pods run side by side (each in its own network namespace): most of a lifecycle is waiting
(the hook's 5 s route wait), so together they take about as long as one.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.deploy.manifests import PodTemplate, is_sidecar_image, pod_templates, prestop_command, prestop_http

from .kubelet import Deletion, Pod

pytestmark = [pytest.mark.containers, pytest.mark.timeout(900)]

TEMPLATES = pod_templates()


def lifecycle(podman, tokens, workdir, template: PodTemplate) -> tuple[Pod, Deletion | BaseException]:
    pod = Pod(podman, template, workdir, secrets=tokens)
    try:
        return pod, pod.start().delete()
    except BaseException as exc:  # reported with the Pod's name below, not lost in the pool
        return pod, exc


def start_delete_and_check(podman, tokens, workdir, template: PodTemplate) -> None:
    """One Pod of `template` started, deleted and held to `check`; removed whatever happened."""
    pod, outcome = lifecycle(podman, tokens, workdir, template)
    try:
        if isinstance(outcome, BaseException):
            raise outcome
        check(template, pod, outcome)
    finally:
        pod.remove()


def check(template: PodTemplate, pod: Pod, deletion: Deletion) -> None:
    containers = template.containers()
    assert pod.started == [c["name"] for c in containers]  # every container, in kubelet's order
    for container in template.spec["containers"]:
        if prestop_http(container):
            # The engine image holds no hook: the sidecar ran the drain and answered when done.
            hook = deletion.hooks[container["name"]]
            assert hook.code == 200, hook
            answer = json.loads(hook.stdout)
            assert (answer["outcome"], answer["exit_code"]) == ("idle", 0), answer
            assert answer["elapsed_s"] >= 5.0  # the route wait, from the request's arrival
            continue
        if not prestop_command(container):
            continue
        hook = deletion.hooks[container["name"]]
        started, finished = hook.events[0], hook.events[-1]
        assert started["event"] == "drain_started" and finished["event"] == "drain_finished", hook.stderr
        if template.follows_a_leader:
            # LWS's variables lead the worker's hook to its leader's sidecar. No Pod here can reach
            # another, and the cluster DNS (tests/containers/dns.py) knows no name: a leader that
            # never answered is unknown, not gone (issue 21), so the worker waits to its own
            # deadline and says so with its own outcome and exit code.
            assert "LeaderWorkerSet" in started["target_source"], started
            assert started["target"] == f"http://{template.injected_env['LWS_LEADER_ADDRESS']}:8490/v1/work"
            assert (hook.code, finished["outcome"]) == (12, "leader_unreachable"), finished
            assert "never answered" in finished["reason"], finished
            assert finished["elapsed_s"] >= started["deadline_s"] - 1, finished
        else:
            assert hook.code == 0, hook.stdout + hook.stderr
            assert started["target_source"] == "annotation"  # the downward-API file, as laid out
            # A hook that waits on another container's engine (a routing proxy's) may see that
            # engine already stopped by its own hook's return: gone, which ends the wait too.
            # An SGLang engine whose SIGTERM drains (its environment read, /health 200, node rank 0)
            # is handed its own drain at the route wait's end (docs/prestop.md, "Following SGLang's
            # own drain"); every other engine is read to idle.
            policy = [e["exit_policy"] for e in hook.events if "exit_policy" in e][-1:]  # the start's, or its change
            expected = ("engine_drains",) if policy == ["follow_engine_drain"] else ("idle", "engine_gone")
            assert finished["outcome"] in expected, finished
    for name, stop in deletion.stops.items():
        assert stop.exit_code in (0, 143), (name, stop)  # never 137: nothing needed SIGKILL
    engine_stops = [deletion.stops[c["name"]].ended_at for c in template.spec["containers"]]
    for container in containers:
        if is_sidecar_image(container["image"]):  # a native sidecar stops after the engine
            assert deletion.stops[container["name"]].started_at >= max(engine_stops)


def test_every_pod_starts_and_drains_when_deleted(podman, tokens, tmp_path):
    """All of deploy/'s Pods side by side; a failure names each Pod that did not make it, and why."""
    with ThreadPoolExecutor(max_workers=len(TEMPLATES)) as pool:
        futures = {t.pod_name: pool.submit(lifecycle, podman, tokens, tmp_path / t.pod_name, t) for t in TEMPLATES}
        results = {name: future.result() for name, future in futures.items()}
    failures = []
    try:
        for template in TEMPLATES:
            pod, outcome = results[template.pod_name]
            try:
                if isinstance(outcome, BaseException):
                    raise outcome
                check(template, pod, outcome)
            except AssertionError as exc:
                failures.append(f"{template.source}: {exc}")
    finally:
        for pod, _ in results.values():
            pod.remove()
    assert not failures, "\n\n".join(failures)
