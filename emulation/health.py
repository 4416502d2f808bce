"""GET /health: 200 while the engine serves; SGLang answers 503 from SIGTERM on."""

from __future__ import annotations

from aiohttp import web

from emulation.runtime import EngineRuntime


def make_health_handler(runtime: EngineRuntime):
    async def health(_request: web.Request) -> web.Response:
        if runtime.health_ok:
            return web.Response(status=200)
        return web.Response(status=503, text="shutting down")

    return health
