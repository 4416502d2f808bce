"""The JSON body of GET /v1/work: one numbered read rendered with who answered. Pure.

Field meanings, and what a controller must check in each, are documented in modeldrain/sidecar/openapi.json
and docs/controller.md; the read's own fields come from hook.outcome, so the controller sees the
same outcome classes as the hook's log.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NotRequired, TypedDict

from modeldrain.hook.constants import SIDECAR_SCHEMA
from modeldrain.hook.events import utc_timestamp
from modeldrain.hook.outcome import ReadFields, read_fields
from modeldrain.sidecar.command import EngineCommand
from modeldrain.sidecar.drain_ledger import Draining
from modeldrain.sidecar.leader_watch import LeaderFields
from modeldrain.sidecar.member import Member, PodIdentity
from modeldrain.sidecar.sampler import NumberedRead

__all__ = ["Identity", "SCHEMA_VERSION", "work_answer"]

# Every response's `schema`: a client checks it before trusting the field layout. Bump the
# version on any change a client could misread; adding an optional field is not one.
# v2: the Pod named by namespace, name and UID; the engine's own command; the read's monotonic
# start and its idle run; null listed in every nullable enum.
# Named once in the shared core (modeldrain/hook/constants.py), since a worker's hook checks it too.
SCHEMA_VERSION = SIDECAR_SCHEMA
# connections.recent_data is no longer measured: always null, kept for v2 readers (the reference
# client reads it as optional) and dropped in the next schema, with recent_window_s, which keeps
# the window it was measured over.
RECENT_WINDOW_S = 2.0


@dataclass(frozen=True)
class Identity:
    """What does not change between reads: this sidecar, its Pod, its engine target."""

    instance: str  # random per sidecar process: seq and incarnation restart with it
    version: str
    started_at_unix: float
    pod: PodIdentity
    member: Member


class DrainingFields(TypedDict):
    since: str
    since_monotonic_s: float
    via: str


class SidecarFields(TypedDict):
    instance: str
    version: str
    started_at: str
    terminating: bool
    draining: DrainingFields | None


class PodFields(TypedDict):
    namespace: str | None
    name: str | None
    uid: str | None


class MemberFields(TypedDict):
    worker_index: int
    group_size: int
    configuration: str | None
    speaks_for_replica: bool


class CommandFields(TypedDict):
    source: str
    disaggregated: bool | None
    evidence: list[str]


class EngineFields(TypedDict):
    target: str
    command: CommandFields
    process_start_time: float | None
    incarnation: int
    incarnation_evidence: str | None
    incarnation_changed_at_seq: int | None


class NumberedReadFields(ReadFields):
    seq: int
    started_at: str
    started_monotonic_s: float
    idle_run_since_seq: int | None


class ConnectionFields(TypedDict):
    ports: list[int]
    established: int | None
    recent_data: None
    recent_window_s: float
    free_since_seq: int | None
    scanned_monotonic_s: float
    duration_ms: float
    detail: str


class WorkAnswer(TypedDict):
    schema: str
    sidecar: SidecarFields
    pod: PodFields
    member: MemberFields
    engine: EngineFields
    read: NumberedReadFields
    connections: NotRequired[ConnectionFields]
    leader: NotRequired[LeaderFields]


def work_answer(identity: Identity, numbered_read: NumberedRead, *, command: EngineCommand, terminating: bool,
                leader: LeaderFields | None = None, draining: Draining | None = None) -> WorkAnswer:
    read = numbered_read.read
    incarnation = numbered_read.incarnation
    answer: WorkAnswer = {
        "schema": SCHEMA_VERSION,
        "sidecar": {
            "instance": identity.instance,
            "version": identity.version,
            "started_at": utc_timestamp(identity.started_at_unix),
            "terminating": terminating,
            # Added within v2 (a reader that does not know it ignores it): the Pod's deletion reached
            # this sidecar, from the engine's hook or a /v1/drain call, before its own SIGTERM.
            "draining": None if draining is None else {
                "since": utc_timestamp(draining.since_unix),
                "since_monotonic_s": round(draining.since_monotonic_s, 6),
                "via": draining.via.value,
            },
        },
        "pod": {"namespace": identity.pod.namespace, "name": identity.pod.name, "uid": identity.pod.uid},
        "member": {
            "worker_index": identity.member.worker_index,
            "group_size": identity.member.group_size,
            "configuration": identity.member.configuration,
            "speaks_for_replica": identity.member.speaks_for_replica,
        },
        "engine": {
            "target": numbered_read.target_url,
            "command": {
                "source": command.source.value,
                "disaggregated": command.disaggregated,
                "evidence": list(command.evidence),
            },
            "process_start_time": read.process_start_time,
            "incarnation": incarnation.value,
            "incarnation_evidence": incarnation.evidence.value if incarnation.evidence else None,
            "incarnation_changed_at_seq": incarnation.changed_at_seq,
        },
        "read": {
            "seq": numbered_read.seq,
            "started_at": utc_timestamp(numbered_read.started_at_unix),
            # The reader's own monotonic start (hook.outcome.Read.started_at): the 1 s rule's clock.
            "started_monotonic_s": round(read.started_at, 6),
            "idle_run_since_seq": numbered_read.idle_run_since_seq,
            **read_fields(read),
        },
    }
    if numbered_read.connections is not None:
        count = numbered_read.connections
        answer["connections"] = {
            "ports": list(count.ports),
            "established": count.established,
            "recent_data": None,
            "recent_window_s": RECENT_WINDOW_S,
            "free_since_seq": numbered_read.connections_free_since_seq,
            "scanned_monotonic_s": count.scanned_monotonic_s,
            "duration_ms": count.duration_ms,
            "detail": count.detail,
        }
    if leader is not None:
        answer["leader"] = leader
    return answer
