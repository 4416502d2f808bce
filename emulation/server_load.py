"""vLLM's `GET /load` (`{"server_load": N}`), as vLLM 0.32 serves it.

vLLM counts a request on its generation routes from the moment its handler starts until the
response's last byte is out (`load_aware_call` in `entrypoints/serve/utils/api_utils.py`, a
BackgroundTask after the response), and only with `--enable-server-load-tracking`; without the
flag the route answers 0 forever. The count lives in each API server process's own app state, so
with `--api-server-count N` a `/load` answer is the count of whichever process accepted that
connection. Measured on vLLM 0.32 with `--api-server-count 2`, 8 requests running: `/load`
answered 0 in 39 of 40 reads (each on a new connection) and 8 once: the 8 were all in one process,
and the kernel handed nearly every `/load` connection to the other (docs/engines.md). The emulator
is one process: it deals each request to one of N counters in turn and answers every `/load` from
the first, so with N > 1 an answer sees only part of what runs (which process the kernel picks is
not emulated).
"""

from __future__ import annotations

import itertools
from typing import Awaitable, Callable

from aiohttp import web

LOAD_PATH = "/load"
# The routes of vLLM's that count (the emulator serves only the first).
COUNTED_PATHS = frozenset({"/v1/completions", "/v1/chat/completions", "/v1/responses", "/v1/embeddings"})

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ServerLoad:
    """Each emulated API server's count; `tracking` False answers 0 forever, as vLLM without the flag."""

    def __init__(self, tracking: bool, api_servers: int = 1) -> None:
        self.tracking = tracking
        self._counts = [0] * api_servers
        self._next_request = itertools.cycle(range(api_servers))

    def arrived(self) -> int:
        server = next(self._next_request)
        self._counts[server] += 1
        return server

    def left(self, server: int) -> None:
        self._counts[server] -= 1

    def answer(self) -> int:
        """What one GET /load says: one API server's count (the first's)."""
        return self._counts[0] if self.tracking else 0

    def total(self) -> int:
        return sum(self._counts)


def counting_middleware(load: ServerLoad):
    @web.middleware
    async def count(request: web.Request, handler: Handler) -> web.StreamResponse:
        if not load.tracking or request.path not in COUNTED_PATHS:
            return await handler(request)
        server = load.arrived()
        try:
            return await handler(request)
        finally:
            load.left(server)

    return count


def make_load_handler(load: ServerLoad) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        return web.json_response({"server_load": load.answer()})

    return handle
