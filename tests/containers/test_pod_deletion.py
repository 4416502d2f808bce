"""A Pod deleted under load, in a real container runtime, as kubelet deletes it.

deploy/pod-drain-sidecar.yaml's Pod, as written: the hook installed by its init container, the
engine image with no Python, no shell and no libc, drain-sidecar as a native sidecar reading
its token through fsGroup, every container uid 65534. A router sends completions; a controller
reads /v1/work from the sidecar with the token. Then the delete: the installed prestop exec'd in
the engine container, SIGTERM with the rest of the grace, the sidecar last. The router keeps
sending for ROUTER_LAG_S after the delete (it learns of the delete late, as from an
EndpointSlice), then stops.

Nothing may be cut; the hook returns once the engine is idle (not before the last request
ends, nor long after); the sidecar answers, with the token, through the whole drain.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Any

import pytest

from emulation.load import LoadGenerator, UniformDurations

from .conftest import template_named
from .kubelet import Pod
from .netns import call_in_netns, http_get

pytestmark = [pytest.mark.containers, pytest.mark.timeout(900)]

POD = "llm-vllm-sidecar"
ENGINE_PORT = 8000
SIDECAR_PORT = 8490
NOBODY = 65534
FS_GROUP = 2000
LOAD_BEFORE_DELETE_S = 2.0
ROUTER_LAG_S = 2.0
REQUESTS = UniformDurations(3.0, 8.0)  # many outlast the 5 s route wait: the hook sees them
READ_EVERY_S = 0.2
# Two idle reads 1 s apart, each read at most one poll interval after the engine went idle.
HOOK_RETURN_AFTER_LAST_REQUEST_MAX_S = 3.0


@dataclass
class Answer:
    at: float  # monotonic, when the request was sent
    status: int | None  # None: no HTTP answer
    body: dict[str, Any] | None
    error: str | None


class WorkReader(threading.Thread):
    """A controller polling GET /v1/work with the bearer token (run from inside the Pod)."""

    def __init__(self, token: str):
        super().__init__(name="work-reader", daemon=True)
        self.token = token
        self.answers: list[Answer] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            at = time.monotonic()
            try:
                status, raw = http_get(SIDECAR_PORT, "/v1/work", {"Authorization": f"Bearer {self.token}"})
                self.answers.append(Answer(at, status, json.loads(raw), None))
            except (OSError, ValueError) as exc:  # recorded: the test asserts when these may happen
                self.answers.append(Answer(at, None, None, f"{type(exc).__name__}: {exc}"))
            self.done.wait(READ_EVERY_S)


def status_of(pid: int, key: str) -> list[str]:
    with open(f"/proc/{pid}/status") as f:
        return next(line.split(":", 1)[1].split() for line in f if line.startswith(key + ":"))


def delete_under_load(podman, tokens, tmp_path) -> dict[str, Any]:
    """The whole scenario; the checks below read what happened."""
    pod = Pod(podman, template_named(POD), tmp_path, secrets=tokens)
    try:
        pod.start()
        token = tokens["drain-sidecar-token"]["token"]
        pids = {name: int(podman.output("inspect", "--format", "{{.State.Pid}}", pod.cname(name)))
                for name in ("engine", "drain-sidecar")}
        identity = {name: (status_of(pid, "Uid"), status_of(pid, "Groups")) for name, pid in pids.items()}
        unauthenticated = call_in_netns(pod.netns_path, lambda: http_get(SIDECAR_PORT, "/v1/work"))
        load = LoadGenerator(f"http://127.0.0.1:{ENGINE_PORT}", rate_per_s=3, durations=REQUESTS, seed=9)
        reader = WorkReader(token)
        # Threads started from inside the Pod's namespace live there too.

        def start_inside() -> None:
            load.start()
            reader.start()
        call_in_netns(pod.netns_path, start_inside)
        time.sleep(LOAD_BEFORE_DELETE_S)
        deleted_at = time.monotonic()
        result: dict[str, Any] = {}
        deleting = threading.Thread(target=lambda: result.update(deletion=pod.delete()), daemon=True)
        deleting.start()
        time.sleep(ROUTER_LAG_S)
        load.stop_sending()
        tally = load.wait(60)
        deleting.join(120)
        reader.done.set()
        reader.join(10)
        return {"pod": pod, "deletion": result["deletion"], "tally": tally, "answers": reader.answers,
               "deleted_at": deleted_at, "identity": identity, "unauthenticated": unauthenticated,
               "engine_log": pod.logs("engine"), "sidecar_log": pod.logs("drain-sidecar")}
    finally:
        pod.remove()


def check_every_container_runs_as_nobody_with_fs_groups_group(drained):
    for name, (uid, groups) in drained["identity"].items():
        assert uid == [str(NOBODY)] * 4, name
        assert str(FS_GROUP) in groups, name


def check_nothing_is_cut(drained):
    tally = drained["tally"]
    assert tally.completed >= 6, tally.summary()
    assert (tally.cut, tally.rejected, tally.refused, tally.other, tally.in_flight) == (0, 0, 0, 0, 0), \
        tally.summary()
    # Work was in flight when the delete came, and arrived after it (the router's lag).
    assert any(r.started_at < drained["deleted_at"] < r.ended_at for r in tally.records)
    assert any(r.started_at > drained["deleted_at"] for r in tally.records)


def check_the_hooks_timeline(drained):
    hook = drained["deletion"].hooks["engine"]
    assert hook.argv == ["/drain/prestop", "--grace", "30"]  # what the manifest says, as installed
    assert hook.code == 0, hook.stderr
    events = hook.events
    started, finished = events[0], events[-1]
    assert started["event"] == "drain_started" and started["grace_s"] == 30.0
    assert (started["target"], started["target_source"]) == (f"http://127.0.0.1:{ENGINE_PORT}/metrics", "annotation")
    assert (started["engine"], started["engine_source"]) == ("vllm", "cmdline")  # `vllm serve`, PID 1 of the engine
    assert any(e["event"] == "read_state" and e["outcome"] == "busy" and e["in_flight"] > 0 for e in events)
    assert finished["event"] == "drain_finished" and finished["outcome"] == "idle", finished
    assert finished["elapsed_s"] >= 5.0  # the route wait, whatever else happened
    last_request_end = drained["tally"].last_finished_at
    assert hook.ended_at >= last_request_end
    assert hook.ended_at - last_request_end <= HOOK_RETURN_AFTER_LAST_REQUEST_MAX_S
    # The last stdout line is drain_finished too: kubelet discards it, a human reads it.
    assert json.loads(hook.stdout.strip().splitlines()[-1])["event"] == "drain_finished"


def check_the_drain_is_in_the_engine_containers_log(drained):
    """prestop mirrors its lines to PID 1's stdout: `kubectl logs` shows the drain."""
    lines = [json.loads(line) for line in drained["engine_log"].splitlines() if line.startswith('{"ts"')]
    events = [line["event"] for line in lines if line.get("source") == "prestop"]
    assert events[0] == "drain_started" and events[-1] == "drain_finished", events


def check_the_engine_stops_with_the_rest_of_the_grace(drained):
    deletion = drained["deletion"]
    hook, stop = deletion.hooks["engine"], deletion.stops["engine"]
    assert stop.grace_s == 30 - int(hook.ended_at - deletion.started_at)
    assert stop.started_at >= hook.ended_at
    assert stop.exit_code != 137 and stop.ended_at - stop.started_at < stop.grace_s  # not SIGKILLed


def check_the_sidecar_answers_through_the_drain(drained):
    answers, deletion = drained["answers"], drained["deletion"]
    hook, engine_stop = deletion.hooks["engine"], deletion.stops["engine"]
    sidecar_stop = deletion.stops["drain-sidecar"]
    assert drained["unauthenticated"][0] == 401
    # Every read until the sidecar was stopped got an answer, with the token.
    before_stop = [a for a in answers if a.at < sidecar_stop.started_at]
    assert before_stop and all(a.status == 200 for a in before_stop), [a.error for a in before_stop if a.error]
    reads = [a.body["read"] for a in before_stop]
    seqs = [r["seq"] for r in reads]
    assert seqs == sorted(seqs)
    draining = [a.body for a in before_stop if drained["deleted_at"] <= a.at < hook.ended_at]
    assert any(b["read"]["in_flight"] and b["read"]["in_flight"] > 0 for b in draining)
    # Between the hook's return and SIGTERM to the engine: idle, complete reads.
    idle = [a.body for a in before_stop if hook.ended_at <= a.at < engine_stop.started_at]
    assert all(b["read"]["idle"] and b["read"]["complete"] for b in idle)
    # Once the engine has gone, the sidecar still answers, and says so.
    after = [a.body for a in before_stop if a.at > engine_stop.ended_at]
    assert all(b["read"]["outcome"] == "refused" for b in after)
    assert all(not a.body["sidecar"]["terminating"] for a in before_stop)


def check_the_sidecar_stops_last_and_cleanly(drained):
    deletion = drained["deletion"]
    sidecar_stop = deletion.stops["drain-sidecar"]
    assert sidecar_stop.started_at >= deletion.stops["engine"].ended_at
    assert sidecar_stop.exit_code == 0
    events = [json.loads(line)["event"] for line in drained["sidecar_log"].splitlines() if line.startswith('{"ts"')]
    assert events[-2:] == ["stopping", "stopped"] and "sigterm" in events, events


CHECKS = [check_every_container_runs_as_nobody_with_fs_groups_group, check_nothing_is_cut, check_the_hooks_timeline,
          check_the_drain_is_in_the_engine_containers_log, check_the_engine_stops_with_the_rest_of_the_grace,
          check_the_sidecar_answers_through_the_drain, check_the_sidecar_stops_last_and_cleanly]


def test_a_pod_deleted_under_load_cuts_nothing_and_stays_readable(podman, tokens, tmp_path):
    """One deletion (~20 s), every property of it checked; a failure names the check."""
    drained = delete_under_load(podman, tokens, tmp_path)
    failures = []
    for check in CHECKS:
        try:
            check(drained)
        except AssertionError as exc:
            failures.append(f"{check.__name__}: {exc}")
    assert not failures, "\n\n".join(failures)
