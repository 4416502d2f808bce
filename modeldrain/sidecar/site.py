"""The TCP listener under the aiohttp runner: a fair connection cap, and JSON errors for bad requests.

aiohttp has no connection limit of its own. At the cap, a new connection takes the place of the
oldest connection that is not running a request (idle keep-alive, or still sending its request
line slowly): whoever holds connections open without using them cannot lock the controller or
the kubelet's probes out, since every request without a token ends at once and only a request
in progress keeps its connection. Only when every connection is running a request does a new
one get a short JSON 503, closed before anything it sends is parsed, so a flood costs an accept
and a write each. A connection waiting on an admitted drain call does not count against the cap
(`exempt`): drain calls have their own bound (modeldrain/sidecar/drain_admission.py), so however many
wait, kubelet's own call and probes still find a connection. A request aiohttp cannot parse (line or header over its bound, not HTTP) never reaches
the app's middleware; its handler here answers it in the same JSON error shape as the routes.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any, Callable, cast

from aiohttp import web

from modeldrain.sidecar import errors
from modeldrain.sidecar.constants import SERVER_HEADER

__all__ = ["JsonErrorRequestHandler", "LimitedTCPSite"]

# A connection over the cap gets its 503, then this long to close its side before we close
# ours: enough for a client to read the answer, short enough that a flood holds few sockets.
OVERLOADED_DRAIN_S = 0.5

_OVERLOADED_BODY = errors.error_body(errors.TOO_MANY_CONNECTIONS, "connection limit reached; retry shortly").encode()
OVERLOADED_RESPONSE = (
    b"HTTP/1.1 503 Service Unavailable\r\n"
    b"Content-Type: application/json\r\n"
    b"Retry-After: 1\r\n"
    b"Connection: close\r\n"
    + f"Content-Length: {len(_OVERLOADED_BODY)}\r\n\r\n".encode()
    + _OVERLOADED_BODY
)


class _Overloaded(asyncio.Protocol):
    """Answers 503 and closes. What the client sends is drained unparsed, for a moment, so the
    close is a FIN after the answer rather than a reset that could destroy it."""

    def __init__(self, on_reject: Callable[[], None]) -> None:
        self._on_reject = on_reject
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._on_reject()
        stream = cast(asyncio.Transport, transport)  # uvloop's transport is one, not a subclass
        stream.write(OVERLOADED_RESPONSE)
        stream.write_eof()
        self._timer = asyncio.get_running_loop().call_later(OVERLOADED_DRAIN_S, stream.close)

    def data_received(self, data: bytes) -> None:
        pass  # never parsed: discarded so the socket closes cleanly

    def eof_received(self) -> bool:
        return False  # the client is done: close now

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()


class JsonErrorRequestHandler(web.RequestHandler):
    """aiohttp's per-connection protocol, answering unparseable requests with our JSON errors."""

    __slots__ = ("_on_error",)

    def __init__(self, manager: web.Server, *, on_error: Callable[[int], None], **kwargs: Any):
        super().__init__(manager, **kwargs)
        self._on_error = on_error

    def handle_error(self, request: web.BaseRequest, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        # Called for requests that failed to parse (and, defensively, for errors outside the
        # app's middleware). The input is never echoed back: the message names only the status.
        if request.writer.output_size > 0:
            raise ConnectionError("response already started; cannot send an error response")
        self._on_error(status)
        text = "malformed or oversized request" if status < 500 else "internal error"
        response = web.Response(status=status, text=errors.error_body(errors.code_for_status(status), text),
                                content_type="application/json")
        response.headers["Server"] = SERVER_HEADER
        response.force_close()
        return response


def oldest_idle(connections: list[web.RequestHandler]) -> web.RequestHandler | None:
    """The first connection (the server keeps them in arrival order) that runs no request now."""
    for handler in connections:
        if not handler._request_in_progress:  # aiohttp's own flag, set around each request's handler
            return handler
    return None


class LimitedTCPSite(web.BaseSite):
    def __init__(self, runner: web.BaseRunner, *, host: str, port: int, max_connections: int,
                 handler_kwargs: dict[str, Any], on_reject: Callable[[], None], on_evict: Callable[[], None],
                 on_error: Callable[[int], None], exempt: Callable[[], int] = lambda: 0, backlog: int = 128):
        super().__init__(runner, backlog=backlog)
        self._host = host or None  # None: every address, IPv4 and IPv6
        self._port = port
        self._max_connections = max_connections
        self._handler_kwargs = handler_kwargs
        self._on_reject = on_reject
        self._on_evict = on_evict
        self._on_error = on_error
        self._exempt = exempt  # connections held by admitted drain calls, each bounded on its own
        self._listener: asyncio.Server | None = None  # also BaseSite's _server, which stop() closes

    @property
    def name(self) -> str:
        return f"http://{self._host or '*'}:{self._port}"

    @property
    def addresses(self) -> list[tuple[str, int]]:
        """Where it listens, after start (port 0 resolved)."""
        assert self._listener is not None
        return [s.getsockname()[:2] for s in self._listener.sockets]

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None
        loop = asyncio.get_running_loop()
        limit = self._max_connections

        def protocol() -> asyncio.Protocol:
            if len(server.connections) - self._exempt() >= limit:
                idle = oldest_idle(server.connections)
                if idle is None:
                    return _Overloaded(self._on_reject)
                idle.force_close()  # its transport closes now; the server forgets it on connection_lost
                self._on_evict()
            return JsonErrorRequestHandler(server, loop=loop, on_error=self._on_error, **self._handler_kwargs)

        self._listener = await loop.create_server(
            protocol, self._host, self._port, backlog=self._backlog, reuse_address=True, family=socket.AF_UNSPEC,
        )
        self._server = self._listener
