"""What the worker's own drain-sidecar remembers of its leader, asked once at the drain's start.

LeaderWorkerSet deletes the leader Pod first (a rolling update, a scale-down), and only once the
leader Pod object is gone does the garbage collector delete the workers. By a worker's preStop
its leader's sidecar refuses or its name no longer resolves, and the hook itself never saw the
leader answer: alone it cannot tell a leader that left from a wrong address. The worker's own
drain-sidecar runs for the Pod's whole life and reads the leader as it goes
(modeldrain/sidecar/leader_watch.py); its /v1/work answer carries `leader`: the leader's Pod UID
and sidecar instance, and how long ago it last answered; its `GET /v1/leader` answers that from
memory, with no engine read in the way. A leader known there, and refusing now, is gone; one
never known stays unknown (`leader_unreachable`).

Trusted only as the leader's own answers are: the one schema, the same leader URL, the fields of
their types. Anything else is no memory, said in words, and the hook behaves as before.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from modeldrain.hook.constants import SIDECAR_SCHEMA
from modeldrain.hook.fetch import FetchError, fetch
from modeldrain.hook.leader import (
    MAX_ANSWER_BYTES,
    KnownLeader,
    LeaderConfig,
    LeaderIdentity,
    optional_field,
    typed_field,
)
from modeldrain.hook.target import Target
from modeldrain.hook.token import TokenFileError, read_token

__all__ = ["parse_memory", "recall_leader"]


@dataclass(frozen=True)
class Recall:
    """The leader the worker's sidecar knows, or None and why not."""

    known: KnownLeader | None
    detail: str


def recall_leader(own: Target, leader: LeaderConfig, timeout_s: float) -> Recall:
    """GET the worker's own drain-sidecar's /v1/leader (with the leader's token: one Secret for
    both in the shipped manifests) and read its `leader`. Never raises."""
    headers = {}
    try:
        if leader.token_file:
            headers["Authorization"] = f"Bearer {read_token(leader.token_file).decode('ascii')}"
        response = fetch(own, timeout_s=timeout_s, max_body_bytes=MAX_ANSWER_BYTES, accept="application/json",
                         headers=headers)
        return parse_memory(response.body, leader.target)
    except TokenFileError as exc:
        return Recall(None, f"--leader-token-file: {exc}")
    except FetchError as exc:
        return Recall(None, f"the worker's own drain-sidecar at {own.netloc}: {exc.detail}")
    except Exception as exc:  # noqa: BLE001 - its answer is input: never a traceback
        return Recall(None, f"unexpected {type(exc).__name__}: {exc}"[:300])


def parse_memory(body: bytes, leader: Target) -> Recall:
    """The `leader` object of a /v1/leader (or /v1/work) answer, for the leader this hook follows."""
    try:
        data = json.loads(body)
        if not isinstance(data, dict) or data.get("schema") != SIDECAR_SCHEMA:
            return Recall(None, f"the worker's drain-sidecar answered in another schema, not {SIDECAR_SCHEMA}")
        memory: Any = data.get("leader")
        if memory is None:
            return Recall(None, "the worker's drain-sidecar follows no leader (an older release, or "
                          "--follow-leader none there)")
        if not isinstance(memory, dict):
            raise TypeError("leader is not an object")
        url = typed_field(memory["url"], str)
        if url != leader.url:
            return Recall(None, f"the worker's drain-sidecar follows {url[:200]}, this hook {leader.url}")
        if not typed_field(memory["known"], bool):
            return Recall(None, f"the worker's drain-sidecar never had an answer from {url} "
                          f"(last: {str(memory.get('last_detail', ''))[:200]})")
        age = memory["last_answered_age_s"]
        if isinstance(age, bool) or not isinstance(age, (int, float)) or not math.isfinite(age) or age < 0:
            raise TypeError(f"last_answered_age_s {age!r}")
        answers = typed_field(memory["answers"], int)
        if answers < 1:
            raise ValueError(f"known with {answers} answers")
        identity = LeaderIdentity(optional_field(memory["uid"], str), optional_field(memory["name"], str),
                                  typed_field(memory["instance"], str))
    except (ValueError, KeyError, TypeError) as exc:
        return Recall(None, f"the worker's drain-sidecar's `leader` is not one this hook reads: {exc}"[:300])
    known = KnownLeader(identity, float(age), answers)
    return Recall(known, known.said())
