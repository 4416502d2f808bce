"""The JSON body of GET /v1/work: one sample rendered with who answered. Pure.

Field meanings are documented in sidecar/openapi.json; the read's own fields come from
hook.outcome, so the controller sees the same outcome classes as the hook's log.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from hook.outcome import ReadOutcome
from sidecar.constants import SCHEMA_VERSION
from sidecar.member import Member
from sidecar.sampler import Sample


@dataclass(frozen=True)
class Identity:
    """What does not change between reads: this sidecar, its Pod, its engine target."""

    instance: str  # random per sidecar process: seq and incarnation restart with it
    version: str
    started_at_unix: float
    pod: str | None
    member: Member
    target_url: str


def iso_utc(unix_s: float) -> str:
    stamp = datetime.datetime.fromtimestamp(unix_s, datetime.timezone.utc)
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def work_envelope(identity: Identity, sample: Sample, terminating: bool) -> dict:
    read = sample.read
    return {
        "schema": SCHEMA_VERSION,
        "sidecar": {
            "instance": identity.instance,
            "version": identity.version,
            "started_at": iso_utc(identity.started_at_unix),
            "terminating": terminating,
        },
        "pod": identity.pod,
        "member": {
            "worker_index": identity.member.worker_index,
            "group_size": identity.member.group_size,
            "speaks_for_replica": identity.member.speaks_for_replica,
        },
        "engine": {
            "kind": read.kind.value if read.kind else None,
            "role": read.role.value if read.role else None,
            "target": identity.target_url,
            "process_start_time": read.process_start_time,
            "incarnation": sample.incarnation.value,
            "incarnation_evidence": (sample.incarnation.evidence.value
                                     if sample.incarnation.evidence else None),
            "incarnation_changed_at_seq": sample.incarnation.changed_at_seq,
        },
        "read": {
            "seq": sample.seq,
            "started_at": iso_utc(sample.started_at_unix),
            "duration_ms": round(read.duration_s * 1000, 3),
            "outcome": read.outcome.value,
            "verdict": read.outcome.verdict,
            "detail": read.detail,
            "http_status": read.http_status,
            "body_bytes": read.body_bytes,
        },
        "gauges": dict(read.gauges),
        "missing": list(read.missing),
        "complete": read.complete,
        "in_flight": read.in_flight,
        "idle": read.outcome is ReadOutcome.IDLE,
    }
