"""A worker's memory of its leader: which leader Pod answered, and when it last did.

LeaderWorkerSet deletes a group's leader Pod before its workers (background propagation on a
rolling update and a scale-down): by a worker's preStop its leader's sidecar refuses, or its name
no longer resolves or names a new leader. The worker's hook alone then cannot tell a leader that
left from a wrong address. This sidecar runs for the Pod's whole life, so it reads the leader's
/v1/work as it goes (the hook's own reader and token rule) and remembers the first leader that
answered: its Pod UID and sidecar instance. A worker's leader is one Pod (the worker
StatefulSet is owned by it), so another UID answering later is a new leader of the same name and
is remembered as such, never in the old one's place. The hook asks at its start
(modeldrain/hook/leader_memory.py) with GET /v1/leader, answered from this memory alone; /v1/work
carries the same `leader` for people and controllers.

Kept in memory: a sidecar that restarts learns its leader again from the next answer.
"""

from __future__ import annotations

import asyncio
import time
from typing import Callable, TypedDict

from modeldrain.hook.events import EventLog, utc_timestamp
from modeldrain.hook.leader import LeaderConfig, LeaderIdentity, LeaderReader
from modeldrain.hook.outcome import Read
from modeldrain.sidecar.daemon_thread import run_in_daemon_thread

__all__ = ["LeaderFields", "LeaderWatch", "stop_watch"]

# Until the leader first answers, a read every 2 s: a worker starts with its leader, and a
# refused connection costs the leader nothing. Each answered read is one scrape of the leader's
# engine (shared with the controller's reads), so once known, one every 10 s: a Prometheus
# scrape's share, and "when it last answered" is never more than ~10 s old.
UNKNOWN_INTERVAL_S = 2.0
KNOWN_INTERVAL_S = 10.0
READ_TIMEOUT_S = 2.0


class LeaderFields(TypedDict):
    url: str
    known: bool
    uid: str | None
    name: str | None
    instance: str | None
    answers: int
    first_answered_at: str | None
    last_answered_at: str | None
    last_answered_age_s: float | None
    replaced_by_uid: str | None
    last_outcome: str | None
    last_detail: str


class LeaderWatch:
    """Reads the leader now and then; remembers the first leader Pod that answered."""

    def __init__(self, config: LeaderConfig, log: EventLog, *, clock: Callable[[], float] = time.monotonic):
        self.config = config
        self._log = log
        self._clock = clock
        self._reader = LeaderReader(config)
        self.leader: LeaderIdentity | None = None
        self.answers = 0
        self._first_at_unix: float | None = None
        self._last_at_unix: float | None = None
        self._last_at: float | None = None  # monotonic
        self.replaced_by: LeaderIdentity | None = None
        self._last_read: Read | None = None

    async def run(self) -> None:
        """Until cancelled (the sidecar's shutdown)."""
        while True:
            try:
                read = await run_in_daemon_thread(lambda: self._reader.read(READ_TIMEOUT_S), "leader-read")
            except Exception as exc:  # noqa: BLE001 - LeaderReader never raises; a bug here must not end the watch
                self._log.error("leader_read_failed", error=repr(exc))
            else:
                self.observe(read, self._reader.answered_by if read.leader_answered else None)
            await asyncio.sleep(KNOWN_INTERVAL_S if self.leader is not None else UNKNOWN_INTERVAL_S)

    def observe(self, read: Read, identity: LeaderIdentity | None) -> None:
        """One read of the leader; `identity`: who answered it, None when no trusted answer came."""
        self._last_read = read
        if identity is None:
            return
        if self.leader is None:
            self.leader = identity
            self._log.emit("leader_known", leader=self.config.target.url, uid=identity.uid, name=identity.name,
                           instance=identity.instance)
        elif self.leader.replaced_by(identity):
            if self.replaced_by != identity:
                self._log.warning("leader_replaced", leader=self.config.target.url, uid=self.leader.uid,
                                  new_uid=identity.uid, message="another leader Pod answers at this name: this "
                                  "worker's leader is gone (its group is being replaced)")
            self.replaced_by = identity
            return
        self.answers += 1
        self._last_at, self._last_at_unix = self._clock(), time.time()
        if self._first_at_unix is None:
            self._first_at_unix = self._last_at_unix

    def fields(self) -> LeaderFields:
        leader, read = self.leader, self._last_read
        return {
            "url": self.config.target.url,
            "known": leader is not None,
            "uid": leader.uid if leader else None,
            "name": leader.name if leader else None,
            "instance": leader.instance if leader else None,
            "answers": self.answers,
            "first_answered_at": utc_timestamp(self._first_at_unix) if self._first_at_unix is not None else None,
            "last_answered_at": utc_timestamp(self._last_at_unix) if self._last_at_unix is not None else None,
            "last_answered_age_s": round(self._clock() - self._last_at, 3) if self._last_at is not None else None,
            "replaced_by_uid": self.replaced_by.uid if self.replaced_by else None,
            "last_outcome": read.outcome.value if read else None,
            "last_detail": read.detail if read else "",
        }


async def stop_watch(task: asyncio.Task[None] | None) -> None:
    if task is None:
        return
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
