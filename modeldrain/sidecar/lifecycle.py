"""After SIGTERM, keep answering until the engine's listener is gone, or a bound passes.

As a native sidecar (an init container with restartPolicy Always, Kubernetes >= 1.29) the
sidecar gets SIGTERM after its engine has exited: the first read is refused and it leaves at
once. As a classic container (< 1.29) it gets SIGTERM at the delete, while the engine still
drains for up to the grace: lingering lets the controller and peers keep reading the
draining replica. Either way the exit status is 0.
"""

from __future__ import annotations

import asyncio
import enum
import time
from typing import Callable

from modeldrain.hook.events import EventLog
from modeldrain.hook.outcome import ReadOutcome
from modeldrain.sidecar.coalescer import Coalescer
from modeldrain.sidecar.sampler import NumberedRead

__all__ = ["Lifecycle", "StopReason"]


class StopReason(enum.Enum):
    ENGINE_GONE = "engine_gone"  # its listener refused a connection
    LINGER_BOUND = "linger_bound"  # the engine still listened when the bound passed
    INTERRUPTED = "interrupted"  # SIGINT or SIGQUIT: someone at a terminal wants it to stop now


class Lifecycle:
    def __init__(self, coalescer: Coalescer[NumberedRead], log: EventLog, *, linger_max_s: float, poll_interval_s: float,
                 on_sigterm: Callable[[], None] = lambda: None):
        self._coalescer = coalescer
        self._on_sigterm = on_sigterm  # the Pod is being deleted (modeldrain/sidecar/drain_ledger.py)
        self._linger_max_s = linger_max_s
        self._poll_interval_s = poll_interval_s
        self._log = log
        self._stopped = asyncio.Event()
        self._reason: StopReason | None = None
        self._linger_task: asyncio.Task[None] | None = None
        self.terminating = False

    def on_sigterm(self) -> None:
        if self.terminating:
            return  # a second SIGTERM changes nothing: the linger is already bounded
        self.terminating = True
        self._log.emit("sigterm", linger_max_s=self._linger_max_s)
        self._on_sigterm()
        self._linger_task = asyncio.create_task(self._linger(), name="linger")

    def on_sigint(self) -> None:
        self._stop(StopReason.INTERRUPTED)

    async def wait(self) -> StopReason:
        await self._stopped.wait()
        assert self._reason is not None
        if self._linger_task is not None and not self._linger_task.done():
            self._linger_task.cancel()
        return self._reason

    def _stop(self, reason: StopReason) -> None:
        if self._reason is None:
            self._reason = reason
            self._stopped.set()

    async def _linger(self) -> None:
        started_at = time.monotonic()
        deadline_at = started_at + self._linger_max_s
        reads = 0
        while (remaining_s := deadline_at - time.monotonic()) > 0:
            try:
                numbered_read = await asyncio.wait_for(self._coalescer.fresh(), remaining_s)
            except TimeoutError:
                break
            except Exception as exc:  # a bug in the read path: say so, keep the bound
                self._log.error("linger_read_failed", error=repr(exc))
            else:
                reads += 1
                if numbered_read.read.outcome is ReadOutcome.REFUSED:
                    self._log.emit("engine_gone", after_s=round(time.monotonic() - started_at, 3),
                                   reads=reads, seq=numbered_read.seq)
                    self._stop(StopReason.ENGINE_GONE)
                    return
            await asyncio.sleep(max(0.0, min(self._poll_interval_s, deadline_at - time.monotonic())))
        self._log.emit("linger_bound", after_s=round(time.monotonic() - started_at, 3), reads=reads)
        self._stop(StopReason.LINGER_BOUND)
