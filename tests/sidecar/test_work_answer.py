"""The /v1/work body, built from one numbered read: who answered, which engine process, what the read said."""

import json

from modeldrain.hook.gauges import EngineKind, Role
from modeldrain.hook.outcome import Read, ReadOutcome, read_fields
from modeldrain.sidecar.command import CommandSource, EngineCommand
from modeldrain.sidecar.member import Member, PodIdentity
from modeldrain.sidecar.sampler import Evidence, Incarnation, NumberedRead
from modeldrain.sidecar.work_answer import SCHEMA_VERSION, Identity, work_answer

IDENTITY = Identity(instance="0" * 32, version="0.1.0", started_at_unix=0.0,
                    pod=PodIdentity("team-a", "replica-0-abc", "6f1c-uid"),
                    member=Member(1, 2, "env", "rev-1"))
UNIFIED = EngineCommand(CommandSource.FLAG, False, ())


def numbered_read(read: Read, seq: int = 7, incarnation: Incarnation = Incarnation(0, None, None),
                  idle_run_since_seq: int | None = None) -> NumberedRead:
    return NumberedRead(seq=seq, started_at_unix=1764489600.25, read=read, incarnation=incarnation,
                        target_url="http://127.0.0.1:8000/metrics", idle_run_since_seq=idle_run_since_seq)


def test_the_read_is_the_one_rendering_plus_seq_start_and_idle_run():
    read = Read(ReadOutcome.IDLE, 1234.5678901, 0.004, "every work gauge reads zero",
                gauges={"vllm:num_requests_running": 0.0, "vllm:num_requests_waiting": 0.0}, in_flight=0.0,
                kind=EngineKind.VLLM, role=Role.UNIFIED, process_start_time=1.7e9, http_status=200, body_bytes=1)
    body = work_answer(IDENTITY, numbered_read(read, idle_run_since_seq=5), command=UNIFIED, terminating=False)
    assert body["read"] == {"seq": 7, "started_at": "2025-11-30T08:00:00.250Z", "started_monotonic_s": 1234.56789,
                            "idle_run_since_seq": 5, **read_fields(read)}
    assert body["schema"] == SCHEMA_VERSION == "modeldrain.sidecar/v2"
    assert body["pod"] == {"namespace": "team-a", "name": "replica-0-abc", "uid": "6f1c-uid"}
    assert body["sidecar"] == {"instance": "0" * 32, "version": "0.1.0", "started_at": "1970-01-01T00:00:00.000Z",
                               "terminating": False, "draining": None}
    assert body["member"] == {"worker_index": 1, "group_size": 2, "configuration": "rev-1",
                              "speaks_for_replica": False}
    assert body["engine"] == {"target": "http://127.0.0.1:8000/metrics",
                              "command": {"source": "flag", "disaggregated": False, "evidence": []},
                              "process_start_time": 1.7e9, "incarnation": 0, "incarnation_evidence": None,
                              "incarnation_changed_at_seq": None}
    json.dumps(body)


def test_incarnation_evidence_command_and_terminating():
    read = Read(ReadOutcome.REFUSED, 1.0, 0.001, "connection refused")
    command = EngineCommand(CommandSource.CMDLINE, True, ("cmdline: --disaggregation-mode=decode",))
    body = work_answer(IDENTITY, numbered_read(read, 9, Incarnation(2, Evidence.LISTENER_RETURNED, 8)),
                         command=command, terminating=True)
    assert body["sidecar"]["terminating"] is True
    assert body["engine"]["incarnation"] == 2
    assert body["engine"]["incarnation_evidence"] == "listener_returned"
    assert body["engine"]["incarnation_changed_at_seq"] == 8
    assert body["engine"]["command"] == {"source": "cmdline", "disaggregated": True,
                                         "evidence": ["cmdline: --disaggregation-mode=decode"]}
    assert body["read"]["verdict"] == "unmeasurable" and body["read"]["engine"] is None
    assert body["read"]["idle_run_since_seq"] is None
