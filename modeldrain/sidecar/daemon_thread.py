"""Blocking work off the event loop, on a daemon thread: it can never hold the process's exit.

concurrent.futures' worker threads are joined when the interpreter exits, so a read still
parsing, or a token file on a volume that hangs, would keep the sidecar alive past its linger
bound after SIGTERM. Each call here runs on a thread of its own that the exit does not wait for;
what it computes is handed back to the loop. Reads run one at a time (the coalescer), at most
ten a second. A token check runs for every /v1/* request (concurrent ones share one), ~0.27 ms
each with the thread against ~6 us for the stat alone: the price of a token volume that hangs
never holding the loop.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Callable, TypeVar

__all__ = ["run_in_daemon_thread"]

T = TypeVar("T")


async def run_in_daemon_thread(fn: Callable[[], T], name: str) -> T:
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle_result(result: T) -> None:
        if not future.done():
            future.set_result(result)

    def settle_error(exc: BaseException) -> None:
        if not future.done():
            future.set_exception(exc)

    def run() -> None:
        try:
            result = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine, which decides
            _call_soon(loop, settle_error, exc)
        else:
            _call_soon(loop, settle_result, result)

    threading.Thread(target=run, name=name, daemon=True).start()
    return await future


def _call_soon(loop: asyncio.AbstractEventLoop, callback: Callable[[T], None], value: T) -> None:
    try:
        loop.call_soon_threadsafe(callback, value)
    except RuntimeError:
        pass  # the loop closed while the thread ran (the sidecar is exiting): nobody waits for it
