"""The one reader: a read of the engine's /metrics becomes a `Read` value, never an exception.

The hook calls it once a second; the sidecar calls it for the controller. Both get the same
classification of the same gauges.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Callable

from modeldrain.hook import exposition
from modeldrain.hook.constants import KV_PRODUCER_HOLD_S
from modeldrain.hook.engine import EngineHint
from modeldrain.hook.fetch import FetchError, fetch
from modeldrain.hook.foreign_body import not_an_engine
from modeldrain.hook.freshness import Heartbeat, remembered, stale_zero
from modeldrain.hook.gauges import DEFAULT_METRICS_PATH, EngineKind, Role, gauge_set
from modeldrain.hook.kv_producer import ParkedSends
from modeldrain.hook.outcome import Read, ReadOutcome
from modeldrain.hook.release_trust import unset_refusal, untrusted
from modeldrain.hook.server_load import LOAD_PATH, MAX_LOAD_BODY_BYTES, ServerLoadError, parse_server_load
from modeldrain.hook.settings import ReadConfig
from modeldrain.hook.target import GUESSED, Target
from modeldrain.hook.work import measure

__all__ = ["EngineReader", "classify_body", "load_counts_every_request", "read_server_load", "read_work"]


def read_work(target: Target, hint: EngineHint, *, timeout_s: float, max_body_bytes: int) -> Read:
    """Read the engine once, bounded by timeout_s, and classify what came back. Never raises:
    whatever the reader did not foresee is a READER_ERROR read, which no rule takes for idle."""
    started_at = time.monotonic()
    try:
        return _not_taken_at_a_guess(target, _read(target, hint, started_at, timeout_s=timeout_s,
                                                   max_body_bytes=max_body_bytes))
    except Exception as exc:  # noqa: BLE001 - turned into an outcome the drain logs and waits on
        return Read(ReadOutcome.READER_ERROR, started_at, time.monotonic() - started_at,
                    f"unexpected {type(exc).__name__}: {exc}"[:500], kind=hint.kind, role=hint.role)


def _not_taken_at_a_guess(target: Target, read: Read) -> Read:
    """Where the engine's port is not known (Target.port_unknown), the port read is a guess: an
    idle answer there may be another program's, and a refusal or an error is not the engine
    saying nothing listens. Neither ends the drain: such a read is incomplete (busy)."""
    if not target.port_unknown or not (read.outcome.is_idle or read.outcome.ends_drain):
        return read
    return replace(read, outcome=ReadOutcome.INCOMPLETE,
                   detail=f"{read.outcome.value} on port {target.port}, which is a guess (the engine's port is "
                   f"not known): not the engine's answer; {read.detail}"[:500])


def _read(target: Target, hint: EngineHint, started_at: float, *, timeout_s: float, max_body_bytes: int) -> Read:
    # What is known before the body says more: the hint's engine and role.
    base = Read(ReadOutcome.INCOMPLETE, started_at, 0.0, kind=hint.kind, role=hint.role)
    try:
        response = fetch(target, timeout_s=timeout_s, max_body_bytes=max_body_bytes)
    except FetchError as exc:
        detail = exc.detail
        if exc.status == HTTP_NOT_FOUND and target.path == DEFAULT_METRICS_PATH and hint.kind is not EngineKind.VLLM:
            detail = f"{detail}: {_sglang_without_metrics(hint)}"
        read = replace(base, outcome=exc.outcome, detail=detail, http_status=exc.status)
    else:
        fetched = replace(base, http_status=response.status, body_bytes=len(response.body))
        read = classify_body(fetched, response.body, response.content_type, hint, deadline_at=started_at + timeout_s)
        if read.outcome is ReadOutcome.IDLE and read.kind is EngineKind.VLLM and hint.server_load_tracking:
            read = _with_server_load(read, target, hint.api_servers or 1, deadline_at=started_at + timeout_s)
    return replace(read, duration_s=time.monotonic() - started_at)


HTTP_NOT_FOUND = 404


def _sglang_without_metrics(hint: EngineHint) -> str:
    """Why a 404 on /metrics leaves nothing to measure: SGLang serves it only with --enable-metrics."""
    rule = "SGLang serves /metrics only when started with --enable-metrics (off by default)"
    if hint.kind is EngineKind.SGLANG:
        return f"{rule}: nothing can be measured; add --enable-metrics to the engine's command"
    return f"nothing can be measured here; if the engine is SGLang, {rule}: add it to the engine's command"


def _with_server_load(read: Read, target: Target, api_servers: int, *, deadline_at: float) -> Read:
    """An idle vLLM read stays idle only if /load also says 0 (modeldrain/hook/server_load.py); a /load that
    cannot be read is doubt, and doubt is never idle. With several API servers the answer is one
    process's count: a count above 0 is busy, a 0 says nothing of the others (the gauges' idle read
    and its confirming read decide, as without the flag)."""
    try:
        _, load = read_server_load(target, timeout_s=max(0.0, deadline_at - time.monotonic()))
    except FetchError as exc:
        return replace(read, outcome=ReadOutcome.INCOMPLETE, detail=f"the gauges read zero, but {LOAD_PATH}: {exc.detail}")
    except ServerLoadError as exc:
        return replace(read, outcome=ReadOutcome.INCOMPLETE, detail=f"the gauges read zero, but {exc}")
    if load > 0:
        return replace(read, outcome=ReadOutcome.BUSY, in_flight=load,
                       detail=f"the gauges read zero, but {LOAD_PATH} counts {load:g} in the API server")
    if api_servers > 1:
        return replace(read, detail=f"{read.detail}; {LOAD_PATH} reads 0 in one of {api_servers} API servers "
                       "(each counts only its own requests: no word on the others)")
    return replace(read, detail=f"{read.detail}; {LOAD_PATH} reads 0", counted_from_arrival=True)


def read_server_load(target: Target, *, timeout_s: float) -> tuple[int, float]:
    """vLLM's /load on the engine's host and port: the HTTP status and the count; raises FetchError
    or ServerLoadError."""
    response = fetch(replace(target, path=LOAD_PATH), timeout_s=timeout_s, max_body_bytes=MAX_LOAD_BODY_BYTES,
                     accept="application/json")
    return response.status, parse_server_load(response.body)


def load_counts_every_request(hint: EngineHint) -> bool:
    """Whether /load counts every request of the engine from its arrival: vLLM with
    --enable-server-load-tracking and one API server (modeldrain/hook/server_load.py)."""
    return hint.kind is EngineKind.VLLM and hint.server_load_tracking and (hint.api_servers or 1) == 1


def classify_body(fetched: Read, body: bytes, content_type: str, hint: EngineHint, *, deadline_at: float) -> Read:
    """What a body says, by deadline_at: the read's fields, its outcome and the words for it."""
    try:
        parsed = exposition.parse(body, content_type, deadline_at=deadline_at)
        read = _classify(fetched, parsed, hint)
        if read.outcome is ReadOutcome.IDLE:
            # Idle only when the whole body, fully parsed, says so too.
            parsed = exposition.parse_whole(body, content_type, deadline_at=deadline_at)
            read = _classify(fetched, parsed, hint)
    except exposition.ParseTimeout as exc:
        return replace(fetched, outcome=ReadOutcome.TIMEOUT, detail=str(exc))
    except exposition.ExpositionError as exc:
        read = replace(fetched, outcome=ReadOutcome.UNPARSEABLE, detail=str(exc))
    if not read.gauges and read.outcome in (ReadOutcome.INCOMPLETE, ReadOutcome.UNPARSEABLE):
        foreign = not_an_engine(body)
        if foreign is not None:  # a misplaced probe: say what was read, not only what is missing
            read = replace(read, detail=f"{foreign}; {read.detail}")
    return read


def _classify(fetched: Read, parsed: exposition.Exposition, hint: EngineHint) -> Read:
    """What the parsed samples say: the read's fields, its outcome and the words for it."""
    kind = hint.kind or parsed.kind
    read = replace(fetched, kind=kind, process_start_time=parsed.process_start_time,
                   restart_counters=parsed.restart_counters, heartbeat=parsed.heartbeat(kind) if kind else None)
    if kind is None:
        return replace(read, outcome=ReadOutcome.INCOMPLETE, detail="no vllm: or sglang: work metrics: engine unknown")
    expected = gauge_set(kind, hint.role or parsed.sglang_role or Role.UNIFIED)
    measured = measure(parsed, expected)
    read = replace(read, role=expected.role, gauges=measured.gauges, missing=measured.missing)
    if measured.invalid:
        return replace(read, outcome=ReadOutcome.INVALID_VALUE,
                       detail="negative, NaN or infinite value in " + ", ".join(measured.invalid))
    unset_words = ""
    if measured.unset:
        refusal = unset_refusal(kind, parsed, measured)
        if refusal is not None:
            return replace(read, outcome=ReadOutcome.INCOMPLETE, in_flight=None,
                           missing=measured.missing + measured.unset, detail=refusal)
        measured = replace(measured, gauges={**measured.gauges, **dict.fromkeys(measured.unset, 0.0)}, unset=())
        unset_words = ("; never served in prometheus multiprocess mode: declared with no series yet, "
                       "read as 0")
        read = replace(read, gauges=measured.gauges)
    # Nothing of the set present measures nothing: no in-flight count, not a zero.
    in_flight = measured.in_flight if measured.gauges else None
    read = replace(read, in_flight=in_flight)
    if measured.missing:
        return replace(read, outcome=ReadOutcome.INCOMPLETE, detail="missing " + ", ".join(measured.missing))
    if in_flight == 0:
        distrust = untrusted(kind, hint, parsed)
        if distrust is not None:
            return replace(read, outcome=ReadOutcome.INCOMPLETE, detail=f"every work gauge reads zero, but {distrust}")
        return replace(read, outcome=ReadOutcome.IDLE,
                       detail="every work gauge reads zero (the whole body parsed)" + unset_words)
    return replace(read, outcome=ReadOutcome.BUSY, detail=f"{in_flight:g} in flight")


class EngineReader:
    """The reader bound to its configuration. When the target refuses, the other places the engine
    can be are read in the same read's time, in order (ReadConfig.alternates: the other loopback
    address and the engine's own --host, then its own --port); a read is refused only when every
    one refuses. The first place that answers is read from then on, and the move is said once.

    A refusal on a port the hook had to guess (Target.source "default": no flag, no annotation, no
    argv and no listener named it) is no engine's answer: it is `incomplete`, said once, never
    "nothing listens", which would end the drain at once.

    The container's other engines (ReadConfig.others) are read after an idle read, or one that would
    end the drain, in what is left of the same read's time: such a read stands only when every other
    engine reads idle too (or, having answered before, now refuses: it has exited).

    It remembers the scheduler heartbeat of its latest read (modeldrain/hook/freshness.py): an idle read
    whose heartbeat has not moved since is `stale`, never idle. A vLLM KV producer's idle read stands
    only KV_PRODUCER_HOLD_S after the last read that showed work (modeldrain/hook/kv_producer.py):
    `incomplete` before. One reader, read in order.

    With `load_first` (the drain's own reader), after a busy read of an engine whose /load counts
    every request (load_counts_every_request), a read asks /load first: a count above 0 is that
    read's answer, busy, without a scrape (0.7 ms of the API server's CPU against 11.6 ms: hook.constants,
    LOAD_BUSY_POLL_INTERVAL_S); a 0, or a /load that cannot be read, is no answer, and the full read
    follows. Such a read carries no body, so the heartbeat and a KV producer's memory skip it (a KV
    producer's zero is held KV_PRODUCER_HOLD_S anyway: it is never asked this way)."""

    def __init__(self, config: ReadConfig, on_switch: Callable[[str], object] = lambda message: None, *,
                 load_first: bool = False):
        self._config = config
        self._on_switch = on_switch
        self.target = config.target
        self._places = (config.target, *config.alternates)
        self._heartbeat: Heartbeat | None = None
        producer = config.hint.kv_producer
        self._sends = ParkedSends(producer, KV_PRODUCER_HOLD_S) if producer is not None else None
        self._guess_said = False
        self.answered = False  # some read of it got an HTTP answer
        self._others = tuple(EngineReader(other, on_switch) for other in config.others)
        self._load_first = load_first and load_counts_every_request(config.hint) and producer is None
        self._busy = False  # the latest read was busy

    def read(self, timeout_s: float) -> Read:
        read = self._read_asking_load_first(timeout_s)
        self._busy = read.outcome is ReadOutcome.BUSY
        return read

    def _read_asking_load_first(self, timeout_s: float) -> Read:
        deadline_at = time.monotonic() + timeout_s
        if self._load_first and self._busy:
            counted = self._load_alone(timeout_s)
            if counted is not None:
                return counted
            timeout_s = max(0.0, deadline_at - time.monotonic())
        read = self._read_one(timeout_s)
        if not (read.outcome.is_idle or read.outcome.ends_drain):
            return read
        for other in self._others:
            left_s = deadline_at - time.monotonic()
            if left_s <= 0:
                return replace(read, outcome=ReadOutcome.TIMEOUT,
                               detail=f"no time left to read the container's other engine on {other.target.netloc}")
            answered_before = other.answered
            theirs = other.read(left_s)
            if theirs.outcome.is_idle or (theirs.outcome is ReadOutcome.REFUSED and answered_before):
                continue
            if theirs.outcome.ends_drain:  # never answered: unknown, not "nothing to measure" for this one
                theirs = replace(theirs, outcome=ReadOutcome.INCOMPLETE)
            return replace(theirs, detail=f"the container's other engine on {other.target.netloc}: {theirs.detail}"[:500],
                           started_at=read.started_at, duration_s=time.monotonic() - read.started_at)
        return read

    def _load_alone(self, timeout_s: float) -> Read | None:
        """The busy read /load gives alone, or None when it counts 0 or cannot be read."""
        started_at = time.monotonic()
        try:
            status, load = read_server_load(self.target, timeout_s=timeout_s)
        except (FetchError, ServerLoadError):
            return None
        self.answered = True
        if load <= 0:
            return None
        hint = self._config.hint
        return Read(ReadOutcome.BUSY, started_at, time.monotonic() - started_at,
                    f"{LOAD_PATH} counts {load:g} in the API server (asked first while busy: no scrape needed)",
                    in_flight=load, kind=hint.kind, role=hint.role, http_status=status, counted_from_arrival=True)

    def _read_one(self, timeout_s: float) -> Read:
        read = self._read_places(timeout_s)
        self.answered = self.answered or read.http_status is not None
        stale = stale_zero(self._heartbeat, read)
        self._heartbeat = remembered(self._heartbeat, read)
        if stale is not None:
            read = replace(read, outcome=ReadOutcome.STALE, detail=stale)
        parked = self._sends.observe(read) if self._sends is not None else None
        return read if parked is None else replace(read, outcome=ReadOutcome.INCOMPLETE, detail=parked[:500])

    def _read_places(self, timeout_s: float) -> Read:
        read = self._read_every_place(timeout_s)
        if (read.outcome is not ReadOutcome.REFUSED or self.answered or self.target.source != GUESSED
                or self._config.hint.uds is not None):  # on a Unix socket: its own word that no port serves
            return read
        why = (f"{read.detail}; but port {self.target.port} was guessed (the engine's default: no --port, no "
               f"annotation, no engine flag or listener named it), so a refusal there is not the engine's answer: "
               "waiting, never taken for nothing listening")
        if not self._guess_said:
            self._guess_said = True
            self._on_switch(why)
        return replace(read, outcome=ReadOutcome.INCOMPLETE, detail=why[:500])

    def _read_every_place(self, timeout_s: float) -> Read:
        c = self._config
        deadline_at = time.monotonic() + timeout_s
        first = read_work(self.target, c.hint, timeout_s=timeout_s, max_body_bytes=c.max_body_bytes)
        if first.outcome is not ReadOutcome.REFUSED:
            return first
        refused = [self.target]
        for place in self._places:
            if place == self.target:
                continue
            left_s = deadline_at - time.monotonic()
            if left_s <= 0:
                break
            read = read_work(place, c.hint, timeout_s=left_s, max_body_bytes=c.max_body_bytes)
            if read.outcome is ReadOutcome.REFUSED:
                refused.append(place)
                continue
            if read.http_status is not None:  # it answers: the engine is there
                self._move(place)
            return read
        if len(refused) == 1:
            return first
        where = ", ".join(place.netloc for place in refused)
        return replace(first, detail=f"connection refused on every place the engine can be: {where}"[:500],
                       duration_s=time.monotonic() - first.started_at)

    def _move(self, place: Target) -> None:
        was, self.target = self.target, place
        if place.port != was.port:
            self._on_switch(f"{was.netloc} refused, but the engine's own --port {place.port} answers: reading "
                            f"{place.url} from now on; the Pod's scrape annotations (or --port) are wrong")
        else:
            self._on_switch(f"{was.netloc} refused, but the engine answers on {place.netloc} (where its --host "
                            f"puts it): reading {place.url} from now on")
