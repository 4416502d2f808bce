"""Every caller gets a read that started after it asked; concurrent callers share one.

The controller must read idle twice before it deletes, so an answer must never be a read
that began before the question: a cached "idle" from before a request arrived proves
nothing. And a storm of questions must not become a storm of scrapes. So at most one read
is in flight; a caller that arrives while one is running waits for it to end and takes the
*next* read, which every caller arriving meanwhile shares.

A pending batch is taken by the runner at the instant its read starts: everyone in the
batch asked before that instant, so the read is fresh for all of them.

Back-to-back reads still cost the engine one scrape after another, so consecutive reads start
at least `min_interval_s` apart; callers arriving in that gap join the batch that waits.
"""

from __future__ import annotations

import asyncio
import time
from typing import Awaitable, Callable, Generic, TypeVar

__all__ = ["Coalescer"]

T = TypeVar("T")


class Coalescer(Generic[T]):
    """Runs `read(seq)` on demand, one at a time; `seq` counts reads from 1, strictly increasing."""

    def __init__(self, read: Callable[[int], Awaitable[T]], min_interval_s: float = 0.0):
        self._read = read
        self._min_interval_s = min_interval_s
        self._last_started_at = -float("inf")  # monotonic
        self._seq = 0
        self._pending: asyncio.Future[T] | None = None  # the batch waiting for the next read
        self._runner: asyncio.Task[None] | None = None
        self._in_flight = False

    @property
    def reads_started(self) -> int:
        return self._seq

    @property
    def in_flight(self) -> bool:
        return self._in_flight

    async def fresh(self) -> T:
        """A read that starts no earlier than this call; shared with every concurrent caller."""
        if self._pending is None:
            self._pending = asyncio.get_running_loop().create_future()
        batch = self._pending
        if self._runner is None:
            self._runner = asyncio.create_task(self._run(), name="engine-reads")
        # Shielded: one caller going away (a client disconnect) must not cancel the others' read.
        return await asyncio.shield(batch)

    async def _run(self) -> None:
        try:
            while self._pending is not None:
                wait_s = self._last_started_at + self._min_interval_s - time.monotonic()
                if wait_s > 0:
                    await asyncio.sleep(wait_s)
                batch, self._pending = self._pending, None  # taken now: the read starts now
                self._last_started_at = time.monotonic()
                self._seq += 1
                self._in_flight = True
                try:
                    result = await self._read(self._seq)
                except asyncio.CancelledError:
                    batch.cancel()
                    raise
                except Exception as exc:  # a bug in the read path: every waiter sees it, not a hang
                    batch.set_exception(exc)
                    # Retrieved here so asyncio does not warn when every waiter has gone away.
                    batch.exception()
                else:
                    batch.set_result(result)
                finally:
                    self._in_flight = False
        finally:
            self._runner = None
            if self._pending is not None and not self._pending.done():
                self._pending.cancel()  # runner cancelled (shutdown): nobody will read for them
                self._pending = None

    async def close(self) -> None:
        """Stop reading; callers still waiting are cancelled."""
        runner = self._runner
        if runner is not None:
            runner.cancel()
            try:
                await runner
            except asyncio.CancelledError:
                pass  # the cancellation we asked for
