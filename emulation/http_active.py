"""SGLang's `sglang:http_requests_active`: the requests inside each route's handler, per route and method.

SGLang 0.5.23's HTTP middleware (observability/http_request_metrics.py) adds 1 to the series of a
request's route (`endpoint`: the route's path template, or the raw path where no route matches)
and method when the request arrives, and takes it away once its handler has sent the response's
last byte; a series, once it has been, stays (at 0). So the `/metrics` series counts the scrape
that reads it. The emulator counts the same way, from arrival; its own control routes are not
SGLang's and are not counted.
"""

from __future__ import annotations

from typing import Awaitable, Callable

from aiohttp import web

# The emulator's test controls (GET /control/stats, POST /control/misbehave): no SGLang route.
CONTROL_PREFIX = "/control/"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class HttpActive:
    """Requests in a handler now, by (endpoint, method); every key seen stays, as a series does."""

    def __init__(self) -> None:
        self._active: dict[tuple[str, str], int] = {}

    def arrived(self, key: tuple[str, str]) -> None:
        self._active[key] = self._active.get(key, 0) + 1

    def left(self, key: tuple[str, str]) -> None:
        self._active[key] -= 1

    def snapshot(self) -> dict[tuple[str, str], int]:
        return dict(self._active)


def route_of(request: web.Request) -> str:
    """The route's path template, as SGLang labels it; the raw path where no route matched."""
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else request.path


def counting_middleware(active: HttpActive):
    @web.middleware
    async def count(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path.startswith(CONTROL_PREFIX):
            return await handler(request)
        key = (route_of(request), request.method)
        active.arrived(key)
        try:
            return await handler(request)
        finally:
            active.left(key)

    return count
