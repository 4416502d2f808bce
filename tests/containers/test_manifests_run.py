"""Every Pod deploy/ makes starts in a real container runtime and drains when deleted as kubelet
deletes it: init containers, the hook installed or baked, its postStart guard, the native
sidecar ready with its token, the engine up; then the preStop hook, SIGTERM with the rest of the
grace, the sidecar last. A manifest that cannot start fails here.

The Pods run side by side (each in its own network namespace): most of a lifecycle is waiting
(the hook's 5 s route wait), so together they take about as long as one.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Iterator

import pytest

from tests.deploy.manifests import PodTemplate, is_sidecar_image, pod_templates, prestop_command

from .kubelet import Deletion, Pod

pytestmark = [pytest.mark.containers, pytest.mark.xdist_group("containers"), pytest.mark.timeout(900)]

TEMPLATES = pod_templates()


@pytest.fixture(scope="module")
def lifecycles(podman, tokens, tmp_path_factory) -> Iterator[dict[str, tuple[Pod, Deletion | BaseException]]]:
    def lifecycle(template: PodTemplate) -> tuple[Pod, Deletion | BaseException]:
        pod = Pod(podman, template, tmp_path_factory.mktemp(template.pod_name), secrets=tokens)
        try:
            return pod, pod.start().delete()
        except BaseException as exc:  # reported by the test of this Pod, not lost in the pool
            return pod, exc

    with ThreadPoolExecutor(max_workers=len(TEMPLATES)) as pool:
        results = dict(zip([t.pod_name for t in TEMPLATES], pool.map(lifecycle, TEMPLATES)))
    yield results
    for pod, _ in results.values():
        pod.remove()


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda t: t.id)
def test_the_pod_starts_and_drains_when_deleted(lifecycles, template):
    pod, outcome = lifecycles[template.pod_name]
    if isinstance(outcome, BaseException):
        raise outcome
    deletion = outcome
    containers = template.containers()
    assert pod.started == [c["name"] for c in containers]  # every container, in kubelet's order
    for container in template.spec["containers"]:
        if not prestop_command(container):
            continue
        hook = deletion.hooks[container["name"]]
        assert hook.code == 0, hook.stdout + hook.stderr
        assert hook.events[0]["event"] == "drain_started"
        assert hook.events[-1]["event"] == "drain_finished" and hook.events[-1]["outcome"] == "idle"
        assert hook.events[0]["target_source"] == "annotation"  # the downward-API file, as laid out
    for name, stop in deletion.stops.items():
        assert stop.exit_code in (0, 143), (name, stop)  # never 137: nothing needed SIGKILL
    sidecars = [c["name"] for c in containers if is_sidecar_image(c["image"])]
    engine_stops = [deletion.stops[c["name"]].ended_at for c in template.spec["containers"]]
    for name in sidecars:  # a native sidecar stops after the engine
        assert deletion.stops[name].started_at >= max(engine_stops)
