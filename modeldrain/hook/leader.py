"""Following the leader: a worker Pod of a multi-Pod replica waits on its leader's drain-sidecar.

In a leader-served replica only the leader serves metrics (a vLLM --headless worker starts no
API server; an SGLang node of rank 1 or more serves a health stub), yet every worker holds
shards the leader's running requests need. So a worker's hook reads the leader's
`GET /v1/work` instead of its own engine, and returns when the leader reads idle twice (fresh
reads, whole gauge sets, the same sidecar and engine process), when the leader is gone (its
sidecar refuses, its name no longer resolves, or its own engine is gone), or at the worker's
deadline. Every answer becomes a `Read`, so the drain's rules are the same ones.

An answer counts only in a schema this hook reads (SIDECAR_SCHEMAS_READ; fields it does not use,
such as those a newer sidecar adds within the schema, are ignored) and when its fields agree with
each other as the sidecar writes them (hook.outcome.read_fields): anything else, a newer schema
included, is a leader that cannot say, never idle and never gone. A read made from such an answer
is marked `leader_answered`: only a leader that answered once can be "gone" later (hook.decision).

A worker's leader is one Pod: LeaderWorkerSet's worker StatefulSet is owned by the leader Pod,
so a new leader of the same name (another Pod UID) is never this worker's leader: its answer
says the old one is gone. Which leader this worker had, and that it answered, may come from
before the hook started (`KnownLeader`, what the worker's own drain-sidecar saw:
hook.leader_memory), since LeaderWorkerSet deletes the leader Pod before its workers.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass, replace
from typing import Any, Mapping

from modeldrain.hook.constants import (
    LWS_LEADER_ADDRESS_ENV,
    LWS_WORKER_INDEX_ENV,
    SIDECAR_PORT,
    SIDECAR_SCHEMA,
    SIDECAR_SCHEMAS_READ,
)
from modeldrain.hook.fetch import FetchError, fetch
from modeldrain.hook.flags import parse_port, parse_whole_number
from modeldrain.hook.outcome import Read, ReadOutcome
from modeldrain.hook.target import Target
from modeldrain.hook.token import TokenFileError, read_tokens

__all__ = [
    "KnownLeader", "LEADER_MEMORY_PATH", "LeaderConfig", "LeaderIdentity", "LeaderReader", "MAX_ANSWER_BYTES",
    "leader_from_env", "optional_field", "parse_leader_url", "typed_field",
]

WORK_PATH = "/v1/work"
# The worker's own drain-sidecar's memory of its leader (hook.leader_memory): answered without an engine read.
LEADER_MEMORY_PATH = "/v1/leader"
# One /v1/work answer is ~1 KB; a leader that sends megabytes is not a drain-sidecar.
MAX_ANSWER_BYTES = 256 * 1024

_SCHEMA_NUMBER = re.compile(r"^modeldrain\.sidecar/v([0-9]{1,6})$")
_NEWEST_READ = max(int(schema.rsplit("/v", 1)[1]) for schema in SIDECAR_SCHEMAS_READ)
_URL = re.compile(r"^http://(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)(?::(?P<port>[0-9]{1,5}))?(?P<path>/[!-~]*)?$")


@dataclass(frozen=True)
class LeaderConfig:
    target: Target
    token_file: str | None
    source: str  # "--follow-leader" or "LeaderWorkerSet"


def parse_leader_url(text: str, what: str = "--follow-leader", default_path: str = WORK_PATH) -> Target:
    """http://HOST[:PORT][/PATH]: a drain-sidecar (port 8490, path `default_path`, /v1/work, by default)."""
    match = _URL.match(text.strip())
    if not match:
        raise ValueError(f"{what} must be http://HOST[:PORT][/PATH], got {text!r}")
    if not match["host"].startswith("[") and not _is_dns_name(match["host"]):
        raise ValueError(f"{what} host must be a DNS name or an IP address (labels of 1 to 63 "
                         f"characters), got {text!r}")
    port = parse_port(match["port"], what=f"{what} port") if match["port"] else SIDECAR_PORT
    path = match["path"] if match["path"] and match["path"] != "/" else default_path
    return Target("http", port, path, host=match["host"].strip("[]"), source="leader")


def leader_from_env(env: Mapping[str, str]) -> Target | None:
    """The leader's sidecar when this Pod is a LeaderWorkerSet worker (index > 0), else None."""
    index = env.get(LWS_WORKER_INDEX_ENV, "").strip()
    address = env.get(LWS_LEADER_ADDRESS_ENV, "").strip()
    if not index or not address or parse_whole_number(index, what=LWS_WORKER_INDEX_ENV) == 0:
        return None
    try:
        return parse_leader_url(f"http://{address}")
    except ValueError as exc:
        raise ValueError(f"{LWS_LEADER_ADDRESS_ENV} is unusable ({exc})") from None


def _is_dns_name(host: str) -> bool:
    """What a resolver accepts: at most 253 characters in labels of 1 to 63 (the IDNA codec
    refuses anything else with an error of its own, not a lookup failure)."""
    return len(host) <= 253 and all(1 <= len(label) <= 63 for label in host.removesuffix(".").split("."))


@dataclass(frozen=True)
class LeaderIdentity:
    """Who answered: the leader's Pod (its UID and name, where its sidecar names them) and its sidecar process."""

    uid: str | None
    name: str | None
    instance: str

    def replaced_by(self, other: "LeaderIdentity") -> bool:
        """Whether `other` is another Pod: both name their UID, and the UIDs differ. A sidecar that
        restarted in the same Pod (a new instance, the same UID) is the same leader."""
        return self.uid is not None and other.uid is not None and self.uid != other.uid


@dataclass(frozen=True)
class KnownLeader:
    """The leader as the worker's own drain-sidecar saw it answer before this hook started."""

    identity: LeaderIdentity
    last_answered_age_s: float  # when the hook asked
    answers: int

    def said(self) -> str:
        who = f"Pod UID {self.identity.uid}" if self.identity.uid else f"sidecar {self.identity.instance}"
        times = "once" if self.answers == 1 else f"{self.answers} times"
        return (f"{who} answered the worker's drain-sidecar {times}, the last "
                f"{self.last_answered_age_s:.1f} s before this hook asked")


@dataclass(frozen=True)
class _Seen:
    instance: str
    incarnation: int
    seq: int


class LeaderReader:
    """Reads the leader's /v1/work; each answer becomes a Read the drain's rules apply to.

    The token file is re-read before every read. During a rotation the leader's node may refresh
    the Secret before or after this worker's (docs/layouts.md, "Rotating the token"), so a 401 is
    retried once, within the same read's time, with the other token this worker knows: the file's
    second line, or the token the file held before it changed. The one the leader last took is
    sent first.

    `known`: the leader the worker's own sidecar saw answer (None: only this reader's own answers
    count). The first identity known is this worker's leader; another Pod UID answering later is
    a new leader of the same name, and the old one is gone."""

    def __init__(self, config: LeaderConfig, known: KnownLeader | None = None):
        self._config = config
        self._known = known
        self._last: _Seen | None = None
        self._leader: LeaderIdentity | None = known.identity if known else None
        self.answered_by: LeaderIdentity | None = None  # the identity in the last trusted answer
        self._file_tokens: tuple[bytes, ...] = ()
        self._previous: tuple[bytes, ...] = ()  # what the file held before its last change
        self._accepted: bytes | None = None  # the token the leader last answered without a 401

    def read(self, timeout_s: float) -> Read:
        started_at = time.monotonic()
        try:
            read = self._read(timeout_s)
        except Exception as exc:  # noqa: BLE001 - a leader's answer is input: never a traceback
            read = Read(ReadOutcome.READER_ERROR, 0.0, 0.0, f"unexpected {type(exc).__name__}: {exc}"[:500])
        return replace(read, started_at=started_at, duration_s=time.monotonic() - started_at)

    def _read(self, timeout_s: float) -> Read:
        deadline_at = time.monotonic() + timeout_s
        candidates: list[bytes | None] = [None]
        if self._config.token_file:
            try:
                candidates = list(self._tokens())
            except TokenFileError as exc:
                return _leader_read(ReadOutcome.UNAVAILABLE, f"--leader-token-file: {exc}")
        try:
            for attempt, token in enumerate(candidates[:2]):  # the token, and one retry with the other
                headers = {} if token is None else {"Authorization": f"Bearer {token.decode('ascii')}"}
                try:
                    response = fetch(self._config.target, timeout_s=max(0.0, deadline_at - time.monotonic()),
                                     max_body_bytes=MAX_ANSWER_BYTES, accept="application/json", headers=headers)
                except FetchError as exc:
                    if exc.status == 401 and attempt + 1 < min(2, len(candidates)) and deadline_at > time.monotonic():
                        continue
                    raise
                self._accepted = token
                return self._judge(response.body, response.status)
        except FetchError as exc:
            if exc.outcome is ReadOutcome.REFUSED:
                known = f" ({self._known.said()})" if self._known is not None and self._last is None else ""
                return _leader_read(ReadOutcome.REFUSED, f"the leader's drain-sidecar: {exc.detail}{known}")
            if exc.outcome in (ReadOutcome.HTTP_ERROR, ReadOutcome.TLS_ERROR):
                # Its token, its limits, a wrong URL: wait (the worker's deadline bounds it), and say so.
                return _leader_read(ReadOutcome.UNAVAILABLE, f"the leader's drain-sidecar answered {exc.detail}",
                                    http_status=exc.status)
            return _leader_read(exc.outcome, f"leader: {exc.detail}", http_status=exc.status)
        raise AssertionError("unreachable: every attempt returns or raises")

    def _tokens(self) -> tuple[bytes, ...]:
        """The tokens to try, in order: the one the leader last took, the file's, the file's previous."""
        assert self._config.token_file is not None
        tokens = read_tokens(self._config.token_file)
        if tokens != self._file_tokens:
            if self._file_tokens:
                self._previous = tuple(t for t in self._file_tokens if t not in tokens)
            self._file_tokens = tokens
        known = (*tokens, *self._previous)
        first = (self._accepted,) if self._accepted in known else ()
        return tuple(dict.fromkeys((*first, *known)))  # in order, each once

    def _judge(self, body: bytes, status: int) -> Read:
        try:
            answer = _Answer.parse(body)
        except (ValueError, KeyError, TypeError) as exc:
            return _leader_read(ReadOutcome.UNPARSEABLE,
                                f"the leader's answer is not a {SIDECAR_SCHEMA} /v1/work answer: {exc}",
                                body_bytes=len(body), http_status=status)
        contradiction = answer.contradiction()
        if contradiction:
            return _leader_read(ReadOutcome.UNAVAILABLE, f"the leader's answer contradicts itself: {contradiction}",
                                body_bytes=len(body), http_status=status)
        seen = _Seen(answer.instance, answer.incarnation, answer.seq)
        last, self._last = self._last, seen
        identity = LeaderIdentity(answer.pod_uid, answer.pod_name, answer.instance)
        self.answered_by = identity
        leader = self._leader = self._leader or identity

        def judged(outcome: ReadOutcome, detail: str, in_flight: float | None = None) -> Read:
            return _leader_read(outcome, detail, in_flight=in_flight, http_status=status, body_bytes=len(body),
                                leader_answered=True)

        if leader.replaced_by(identity):
            return judged(ReadOutcome.REFUSED, f"another leader answers at {self._config.target.netloc} (Pod UID "
                          f"{identity.uid}, not {leader.uid}): this worker's leader Pod is gone")

        if answer.verdict == "unmeasurable":
            return judged(ReadOutcome.REFUSED, f"its engine reads {answer.outcome} ({answer.detail})")
        if last is not None and (last.instance, last.incarnation) != (seen.instance, seen.incarnation):
            return judged(ReadOutcome.INCOMPLETE, "the leader's sidecar or engine restarted since the last read")
        if last is not None and seen.seq <= last.seq:
            return judged(ReadOutcome.INCOMPLETE, f"not a fresh read of the leader (seq {seen.seq} again)")
        if answer.outcome == ReadOutcome.IDLE.value:
            return judged(ReadOutcome.IDLE, f"leader idle (seq {seen.seq})", in_flight=0.0)
        if answer.outcome == ReadOutcome.BUSY.value:
            assert answer.in_flight is not None  # contradiction() holds a busy answer to a count
            return judged(ReadOutcome.BUSY, f"leader: {answer.in_flight:g} in flight", in_flight=answer.in_flight)
        outcome = ReadOutcome(answer.outcome) if answer.outcome in _WAITING_OUTCOMES else ReadOutcome.INCOMPLETE
        return judged(outcome, f"leader: {answer.outcome} ({answer.detail})")


_WAITING_OUTCOMES = {o.value for o in ReadOutcome if not o.ends_drain and o is not ReadOutcome.IDLE}


def _leader_read(outcome: ReadOutcome, detail: str, *, in_flight: float | None = None, http_status: int | None = None,
                 body_bytes: int = 0, leader_answered: bool = False) -> Read:
    """What one read of the leader says, as a `Read`; LeaderReader.read sets its start and duration."""
    return Read(outcome, 0.0, 0.0, detail[:500], in_flight=in_flight, http_status=http_status, body_bytes=body_bytes,
                leader_answered=leader_answered)


@dataclass(frozen=True)
class _Answer:
    """The fields of a /v1/work answer the worker acts on, checked for type."""

    instance: str
    pod_uid: str | None
    pod_name: str | None
    incarnation: int
    seq: int
    outcome: str
    verdict: str
    detail: str
    complete: bool
    idle: bool
    in_flight: float | None

    @classmethod
    def parse(cls, body: bytes) -> "_Answer":
        data = json.loads(body)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        if data.get("schema") not in SIDECAR_SCHEMAS_READ:
            raise ValueError(_unknown_schema(data.get("schema")))
        read: Any = data["read"]
        in_flight = read["in_flight"]
        if in_flight is not None and (isinstance(in_flight, bool) or not isinstance(in_flight, (int, float))):
            raise TypeError(f"in_flight {in_flight!r} is not a number or null")
        pod: Any = data.get("pod") or {}  # optional: a sidecar without the downward API's names
        if not isinstance(pod, dict):
            raise TypeError(f"pod {str(pod)[:40]!r} is not an object")
        return cls(
            instance=typed_field(data["sidecar"]["instance"], str),
            pod_uid=optional_field(pod.get("uid"), str),
            pod_name=optional_field(pod.get("name"), str),
            incarnation=typed_field(data["engine"]["incarnation"], int),
            seq=typed_field(read["seq"], int),
            outcome=typed_field(read["outcome"], str),
            verdict=typed_field(read["verdict"], str),
            detail=str(read.get("detail", ""))[:200],
            complete=typed_field(read["complete"], bool),
            idle=typed_field(read["idle"], bool),
            in_flight=None if in_flight is None else float(in_flight),
        )

    def contradiction(self) -> str:
        """Where the fields disagree with each other as the sidecar writes them (read_fields); "" if nowhere."""
        try:
            outcome = ReadOutcome(self.outcome)
        except ValueError:
            return f"outcome {self.outcome[:40]!r} is none the hook knows"
        expected = {"verdict": outcome.verdict, "complete": outcome in (ReadOutcome.IDLE, ReadOutcome.BUSY),
                    "idle": outcome is ReadOutcome.IDLE}
        for name, value in expected.items():
            if getattr(self, name) != value:
                return f"outcome {outcome.value} with {name} {getattr(self, name)!r}"
        in_flight = self.in_flight
        if in_flight is not None and (not math.isfinite(in_flight) or in_flight < 0):
            return f"in_flight {in_flight!r}"
        if outcome is ReadOutcome.IDLE and in_flight != 0:
            return f"outcome idle with in_flight {in_flight!r}"
        if outcome is ReadOutcome.BUSY and (in_flight is None or in_flight <= 0):
            return f"outcome busy with in_flight {in_flight!r}"
        if self.seq < 0 or self.incarnation < 0:
            return f"seq {self.seq} or incarnation {self.incarnation} below zero"
        return ""


def _unknown_schema(schema: Any) -> str:
    """Why an answer's schema is none this hook reads, and which image to upgrade when it is newer."""
    said, window = repr(str(schema))[:80], ", ".join(SIDECAR_SCHEMAS_READ)
    number = _SCHEMA_NUMBER.match(schema) if isinstance(schema, str) else None
    if number and int(number[1]) > _NEWEST_READ:
        return f"schema {said} is newer than this hook reads ({window}): upgrade the engine image's hook"
    return f"schema {said}, not {window}"


def optional_field(value: Any, kind: type) -> Any:
    """An answer's field that may be null, else of `kind`; raises TypeError."""
    return None if value is None else typed_field(value, kind)


def typed_field(value: Any, kind: type) -> Any:
    """An answer's field of `kind` (a JSON true or false is no int); raises TypeError."""
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise TypeError(f"{value!r} is not a {kind.__name__}")
    return value
