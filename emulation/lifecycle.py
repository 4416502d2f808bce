"""Process-level acts of the emulated engine: close or reopen its listener, drop its work, restart, exit.

The SIGTERM policies and the control API's listener misbehaviours are sequences of these acts.
"""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web

from emulation import constants
from emulation.connections import close_all_but, drop_all
from emulation.listener import Listener
from emulation.misbehaviour import MisbehaviourSetting
from emulation.runtime import EngineRuntime, ServingState
from emulation.scheduler import Outcome

log = logging.getLogger(__name__)


class Lifecycle:
    """Built before the HTTP server (its handlers need it), attached to the server once it exists."""

    def __init__(self, runtime: EngineRuntime):
        self._runtime = runtime
        self._listener: Listener | None = None
        self._server: web.Server | None = None
        self._exit_code: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._background: set[asyncio.Task] = set()

    def attach(self, listener: Listener, server: web.Server) -> None:
        self._listener = listener
        self._server = server

    @property
    def listener(self) -> Listener:
        if self._listener is None:
            raise RuntimeError("Lifecycle used before attach()")
        return self._listener

    @property
    def server(self) -> web.Server:
        if self._server is None:
            raise RuntimeError("Lifecycle used before attach()")
        return self._server

    # --- exit ------------------------------------------------------------------------------------

    def request_exit(self, code: int) -> None:
        if not self._exit_code.done():
            self._exit_code.set_result(code)

    async def wait_exit(self) -> int:
        return await self._exit_code

    def spawn(self, coroutine) -> None:
        """Run a lifecycle sequence in the background, keeping a reference and logging failures."""
        task = asyncio.get_running_loop().create_task(coroutine)
        self._background.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("lifecycle task failed", exc_info=task.exception())
            self.request_exit(1)

    # --- listener and work -----------------------------------------------------------------------

    def close_listener(self) -> None:
        if self.listener.is_open:
            self.listener.close()
            log.info("listener on port %d closed", self.listener.port)

    async def open_listener(self) -> None:
        await self.listener.open()
        log.info("listening on port %d", self.listener.port)

    def abort_in_flight(self) -> int:
        """vLLM's abort: every request in flight ends with no response; its handler then holds its
        connection open (completions.linger) until the client goes."""
        aborted = self._runtime.scheduler.end_all(Outcome.ABORTED)
        log.info("aborted %d requests in flight: their clients are left waiting", aborted)
        return aborted

    def close_idle_connections(self) -> int:
        """Every connection but the lingering ones: keep-alive connections waiting for a request."""
        closed = close_all_but(self.server, self._runtime.lingering)
        log.info("closed %d idle connections", closed)
        return closed

    def drop_everything(self) -> int:
        """Every request in flight ends with no response; every connection closes."""
        dropped = self._runtime.scheduler.end_all(Outcome.ABORTED)
        connections = drop_all(self.server)
        log.info("dropped %d requests in flight, closed %d connections", dropped, connections)
        return dropped

    # --- listener misbehaviour -------------------------------------------------------------------

    async def refuse(self, setting: MisbehaviourSetting) -> None:
        """Connections refused, for down_s or for good; established connections carry on."""
        self.close_listener()
        if setting.down_s is None:
            return
        await asyncio.sleep(setting.down_s)
        if self._runtime.state is ServingState.SERVING or self._runtime.state is ServingState.DRAINING:
            self._runtime.setting = MisbehaviourSetting()
            await self.open_listener()

    async def restart(self, setting: MisbehaviourSetting) -> None:
        """The process dies (its work with it) and a fresh one listens again after down_s."""
        self.close_listener()
        self.drop_everything()
        self._runtime.restart()
        down_s = constants.RESTART_DOWN_S if setting.down_s is None else setting.down_s
        await asyncio.sleep(down_s)
        self._runtime.setting = MisbehaviourSetting()
        self._runtime.state = ServingState.SERVING
        self._runtime.health_ok = True
        self._runtime.rejects_new_work = False
        await self.open_listener()
        log.info("restarted as incarnation %d", self._runtime.incarnation.number)
