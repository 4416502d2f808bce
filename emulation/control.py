"""The control API tests drive the emulator with: switch misbehaviour, read stats. Loopback only.

POST /control/misbehave {"mode": MODE, ...params} -> 200 {"mode": MODE} (400 with a reason)
GET  /control/stats -> {completed, aborted, running, waiting, metrics_reads, incarnation, start_time, ...}
"""

from __future__ import annotations

import ipaddress
import json

from aiohttp import web

from emulation.lifecycle import Lifecycle
from emulation.misbehaviour import LISTENER_ACTIONS, BadMisbehaviour, Misbehaviour, parse_setting
from emulation.runtime import EngineRuntime


def _from_loopback(request: web.Request) -> bool:
    remote = request.remote
    if remote is None:
        return False
    try:
        return ipaddress.ip_address(remote.split("%")[0]).is_loopback
    except ValueError:
        return False


def _forbidden() -> web.Response:
    return web.json_response({"error": "the control API answers loopback clients only"}, status=403)


def make_misbehave_handler(runtime: EngineRuntime, lifecycle: Lifecycle):
    async def misbehave(request: web.Request) -> web.Response:
        if not _from_loopback(request):
            return _forbidden()
        try:
            setting = parse_setting(await request.json())
        except json.JSONDecodeError as exc:
            return web.json_response({"error": f"body is not JSON: {exc}"}, status=400)
        except BadMisbehaviour as exc:
            return web.json_response({"error": str(exc)}, status=400)
        runtime.setting = setting
        if setting.mode in LISTENER_ACTIONS:
            # Closed before the answer, so a caller that connects again once answered is refused
            # rather than caught in the closing listener's backlog (and reset).
            lifecycle.close_listener()
        # Answer before the rest: restart drops every connection, this one included; written out
        # now, the answer still reaches the caller.
        response = web.json_response({"mode": setting.mode.value})
        await response.prepare(request)
        await response.write_eof()
        if setting.mode is Misbehaviour.REFUSE:
            lifecycle.spawn(lifecycle.refuse(setting))
        elif setting.mode is Misbehaviour.RESTART:
            lifecycle.spawn(lifecycle.restart(setting))
        return response

    return misbehave


def make_stats_handler(runtime: EngineRuntime):
    async def stats(request: web.Request) -> web.Response:
        if not _from_loopback(request):
            return _forbidden()
        return web.json_response(runtime.stats())

    return stats
