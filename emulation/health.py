"""GET /health: 200 while the engine serves; SGLang answers 503 from SIGTERM on.

SGLang 0.5.23's /health generates one token by default (SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION)
and answers 200 only after a 1 s sleep once its scheduler has answered: never in under a second.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from emulation import constants
from emulation.engine_config import EngineKind
from emulation.runtime import EngineRuntime


def make_health_handler(runtime: EngineRuntime):
    async def health(_request: web.Request) -> web.Response:
        if runtime.health_ok and runtime.config.kind is EngineKind.SGLANG:
            await asyncio.sleep(constants.SGLANG_HEALTH_GENERATE_S)
        if runtime.health_ok:
            return web.Response(status=200)
        return web.Response(status=503, text="shutting down")

    return health
