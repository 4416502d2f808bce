"""GET /metrics, healthy or misbehaving as the current setting says; and the redirect's decoy.

Every GET counts as an engine read (GET /control/stats `metrics_reads`), whatever it answers.
"""

from __future__ import annotations

import asyncio
import logging
from email.utils import formatdate

from aiohttp import web

from emulation.connections import drop
from emulation.misbehaviour import Misbehaviour, MisbehaviourSetting
from emulation.runtime import EngineRuntime

log = logging.getLogger(__name__)

GARBAGE_BODY = b"<html><body><h1>502 Bad Gateway</h1>upstream sent garbage</body></html>\n"
_MB = 1024 * 1024
_DRIPPING = frozenset({Misbehaviour.DRIP, Misbehaviour.SLOW_HEADERS})


def _accept(request: web.Request) -> str:
    """Every Accept header, joined, as prometheus_client's ASGI app reads them."""
    return ",".join(request.headers.getall("Accept", []))


def _healthy_response(runtime: EngineRuntime, request: web.Request, setting: MisbehaviourSetting,
                      fill_to_bytes: int = 0, may_gzip: bool = True) -> web.Response:
    accept_encoding = ",".join(request.headers.getall("Accept-Encoding", [])) if may_gzip else ""
    names = request.query.getall("name[]", [])
    body = runtime.render_metrics(_accept(request), accept_encoding, setting, fill_to_bytes,
                                  frozenset(names) if names else None)
    headers = {"Content-Type": body.content_type}
    if body.content_encoding:
        headers["Content-Encoding"] = body.content_encoding
    return web.Response(body=body.data, headers=headers)


async def _wait_forever(request: web.Request) -> web.StreamResponse:
    """hang: the request was read; no byte of an answer ever comes (until the client leaves)."""
    await asyncio.Event().wait()
    return drop(request)  # not reached: the wait ends only by cancellation


def _body_bytes(response: web.Response) -> bytes:
    """The rendered exposition: the metrics handler always builds its response from bytes."""
    body = response.body
    assert isinstance(body, (bytes, bytearray)), type(body)
    return bytes(body)


async def _drip_body(request: web.Request, response: web.Response, interval_s: float) -> web.StreamResponse:
    """drip: status and headers now, then the body one byte per interval."""
    body = _body_bytes(response)
    stream = web.StreamResponse(status=response.status, headers=response.headers)
    stream.content_length = len(body)
    await stream.prepare(request)
    index = 0
    try:
        for index in range(len(body)):
            await stream.write(body[index:index + 1])
            await asyncio.sleep(interval_s)
        await stream.write_eof()
    except ConnectionError as exc:
        log.info("reader left during drip after %d bytes: %s", index, exc)
    return stream


async def _drip_everything(request: web.Request, response: web.Response, interval_s: float) -> web.StreamResponse:
    """slow-headers: the status line and headers drip too, written straight to the socket."""
    body = _body_bytes(response)
    head = [f"HTTP/1.1 {response.status} OK", f"Content-Type: {response.headers['Content-Type']}",
            f"Content-Length: {len(body)}", f"Date: {formatdate(usegmt=True)}",
            "Connection: close"]
    wire = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body
    for index in range(len(wire)):
        transport = request.transport
        if transport is None or transport.is_closing():
            break  # the client gave up
        transport.write(wire[index:index + 1])
        await asyncio.sleep(interval_s)
    return drop(request)  # all written by hand: aiohttp must add nothing


def make_metrics_handler(runtime: EngineRuntime):
    async def metrics(request: web.Request) -> web.StreamResponse:
        runtime.totals.metrics_reads += 1
        if runtime.config.without_metrics:
            # SGLang registers /metrics only with --enable-metrics; FastAPI answers any other path so.
            return web.json_response({"detail": "Not Found"}, status=404)
        setting = runtime.setting
        mode = setting.mode
        if mode is Misbehaviour.HTTP500:
            return web.Response(status=500, text="Internal Server Error")
        if mode is Misbehaviour.REDIRECT:
            raise web.HTTPFound(setting.location)
        if mode is Misbehaviour.HANG:
            return await _wait_forever(request)
        if mode is Misbehaviour.GARBAGE:
            return web.Response(body=GARBAGE_BODY, content_type="text/plain")
        if mode is Misbehaviour.HUGE:
            return _healthy_response(runtime, request, setting, fill_to_bytes=int(setting.size_mb * _MB))
        response = _healthy_response(runtime, request, setting, may_gzip=mode not in _DRIPPING)
        if mode is Misbehaviour.DRIP:
            return await _drip_body(request, response, setting.interval_s)
        if mode is Misbehaviour.SLOW_HEADERS:
            return await _drip_everything(request, response, setting.interval_s)
        return response  # none, nan, negative, inf, missing (applied in the families)

    return metrics


def make_decoy_handler(runtime: EngineRuntime):
    """Where a redirect points by default: a healthy body with every work gauge at zero."""

    async def decoy(request: web.Request) -> web.Response:
        families_idle = runtime.render_idle_metrics(_accept(request))
        return web.Response(body=families_idle.data, headers={"Content-Type": families_idle.content_type})

    return decoy
