"""A worker's memory of its leader: the first leader Pod that answered, never replaced by another."""

from __future__ import annotations

from modeldrain.hook.events import EventLog
from modeldrain.hook.leader import LeaderConfig, LeaderIdentity, parse_leader_url
from modeldrain.hook.outcome import Read, ReadOutcome
from modeldrain.sidecar.leader_watch import LeaderWatch


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def watch() -> tuple[LeaderWatch, Clock]:
    clock = Clock()
    config = LeaderConfig(parse_leader_url("http://llm-0.llm.team-a"), None, "test")
    return LeaderWatch(config, EventLog("drain-sidecar"), clock=clock), clock


def read(outcome=ReadOutcome.IDLE, detail="leader idle") -> Read:
    return Read(outcome, 0.0, 0.0, detail, leader_answered=outcome is not ReadOutcome.REFUSED)


OLD = LeaderIdentity("uid-1", "llm-0", "a" * 32)
NEW = LeaderIdentity("uid-2", "llm-0", "b" * 32)


def test_unknown_until_the_leader_answers():
    w, _ = watch()
    w.observe(read(ReadOutcome.REFUSED, "connection refused"), None)
    fields = w.fields()
    assert fields["known"] is False and fields["uid"] is None and fields["answers"] == 0
    assert fields["last_outcome"] == "refused" and fields["last_answered_age_s"] is None


def test_the_first_leader_is_remembered_and_a_new_one_never_takes_its_place():
    w, clock = watch()
    w.observe(read(), OLD)
    clock.now += 10
    w.observe(read(), LeaderIdentity("uid-1", "llm-0", "c" * 32))  # its sidecar restarted: the same Pod
    clock.now += 4
    w.observe(read(ReadOutcome.REFUSED, "another leader answers"), NEW)
    fields = w.fields()
    assert (fields["known"], fields["uid"], fields["instance"]) == (True, "uid-1", "a" * 32)
    assert fields["answers"] == 2 and fields["last_answered_age_s"] == 4.0
    assert fields["replaced_by_uid"] == "uid-2" and fields["url"] == "http://llm-0.llm.team-a:8490/v1/work"


def test_a_workers_answer_carries_its_leader_within_the_contract():
    """Real processes: a leader sidecar and a worker's, the worker's answer checked against openapi.json."""
    import time

    from emulation.engine_process import EngineProcess

    from .contract import assert_work
    from .sidecar_process import SidecarProcess

    with EngineProcess("--kind", "vllm") as engine, \
            SidecarProcess("--port", str(engine.port), "--engine", "vllm",
                           env={"POD_NAME": "llm-0", "POD_NAMESPACE": "team-a", "POD_UID": "uid-1"}) as leader, \
            SidecarProcess("--port", "1", "--follow-leader", leader.base_url) as worker:
        unknown = assert_work(worker.work())["leader"]
        deadline_at = time.monotonic() + 15
        while not (memory := assert_work(worker.work())["leader"])["known"] and time.monotonic() < deadline_at:
            time.sleep(0.2)
    assert unknown["url"] == f"{leader.base_url}/v1/work"
    assert memory["known"] and memory["uid"] == "uid-1" and memory["name"] == "llm-0" and memory["answers"] >= 1
    assert any(e["event"] == "leader_known" and e["uid"] == "uid-1" for e in worker.events())


def test_the_leader_route_answers_from_memory_and_only_on_a_worker():
    from .contract import SCHEMAS, violations
    from .sidecar_process import SidecarProcess

    assert SCHEMAS["LeaderAnswer"]["properties"]["leader"] == SCHEMAS["Work"]["properties"]["leader"]
    with SidecarProcess("--port", "1", "--follow-leader", "http://127.0.0.1:1") as worker, \
            SidecarProcess("--port", "1") as single:
        status, body = worker.get_json("/v1/leader")
        lone_status, lone = single.get_json("/v1/leader")
    assert status == 200 and not violations("LeaderAnswer", body), body
    assert body["leader"]["url"] == "http://127.0.0.1:1/v1/work" and body["leader"]["known"] is False
    assert lone_status == 404 and lone["error"] == "not_found" and "follows no leader" in lone["message"]
