"""POST /v1/completions: a request that waits for a slot, runs for `duration_s`, then answers.

How it ends is the scheduler's and the shutdown policy's call; this handler only turns the outcome
into what the client sees: 200 JSON (or an SSE stream), HTTP 500, or a dropped connection.
"""

from __future__ import annotations

import asyncio
import json
import math
import time

from aiohttp import web

from emulation import constants
from emulation.connections import drop
from emulation.engine_config import SigtermPolicy
from emulation.runtime import EngineRuntime, ServingState
from emulation.scheduler import Outcome, Scheduler, Ticket


def _bad_request(message: str) -> web.Response:
    return web.json_response({"error": {"message": message, "type": "BadRequestError"}}, status=400)


def _server_error(message: str) -> web.Response:
    return web.json_response({"error": {"message": message, "type": "InternalServerError"}}, status=500)


def _completion(runtime: EngineRuntime, ticket: Ticket) -> dict:
    return {
        "id": f"cmpl-{runtime.incarnation.number}-{ticket.request_id}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": runtime.config.model_name,
        "choices": [{"index": 0, "text": " emulated", "finish_reason": "stop"}],
        "usage": {"prompt_tokens": constants.PROMPT_TOKENS_PER_REQUEST,
                  "completion_tokens": constants.GENERATION_TOKENS_PER_REQUEST},
    }


def _seconds(body: dict, key: str, default: float) -> float | web.Response:
    value = body.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return _bad_request(f"{key} must be a finite number >= 0, got {value!r}")
    return float(value)


async def _parse(request: web.Request) -> tuple[float, float, bool] | web.Response:
    try:
        body = await request.json() if request.can_read_body else {}
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return _bad_request(f"body is not JSON: {exc}")
    if not isinstance(body, dict):
        return _bad_request("body must be a JSON object")
    duration_s = _seconds(body, "duration_s", constants.DEFAULT_REQUEST_DURATION_S)
    # A structured-output request: this long compiling its grammar before it queues.
    grammar_s = _seconds(body, "grammar_s", 0.0)
    for value in (duration_s, grammar_s):
        if isinstance(value, web.Response):
            return value
    assert isinstance(duration_s, float) and isinstance(grammar_s, float)
    return duration_s, grammar_s, bool(body.get("stream", False))


def _client_gone(scheduler: Scheduler, ticket: Ticket) -> None:
    scheduler.end(ticket, Outcome.CLIENT_GONE)  # no-op if it had already ended


def make_completions_handler(runtime: EngineRuntime):
    async def completions(request: web.Request) -> web.StreamResponse:
        parsed = await _parse(request)
        if isinstance(parsed, web.Response):
            return parsed
        duration_s, grammar_s, stream = parsed
        if runtime.state is ServingState.STOPPING:
            return drop(request)  # a connection that slipped in as the listener closed
        if runtime.rejects_new_work:
            runtime.totals.rejected += 1
            return _server_error(constants.VLLM_DRAIN_REJECT_MESSAGE)
        scheduler = runtime.scheduler
        ticket = scheduler.submit(duration_s, grammar_s)
        try:
            if stream:
                return await _stream(request, runtime, ticket)
            outcome = await asyncio.shield(ticket.done)
        except asyncio.CancelledError:
            # The client went away (aiohttp cancels the handler): the engine drops the request.
            _client_gone(scheduler, ticket)
            raise
        except ConnectionError:
            # The client went away while a stream was being written.
            _client_gone(scheduler, ticket)
            return web.Response(status=499)
        if outcome is Outcome.COMPLETED:
            return web.json_response(_completion(runtime, ticket))
        if outcome is Outcome.FAILED:
            return _server_error("request aborted: shutdown timeout reached")
        return await _abandoned(request, runtime)

    return completions


async def _abandoned(request: web.Request, runtime: EngineRuntime) -> web.StreamResponse:
    """A request the engine dropped. vLLM's SIGTERM abort answers nothing and holds the connection
    (its API process lingers until the client goes: aiohttp then cancels this handler); any other
    drop (a restart) closes it now."""
    if runtime.state is not ServingState.STOPPING or runtime.config.on_sigterm is not SigtermPolicy.ABORT:
        return drop(request)
    protocol = request.protocol
    runtime.lingering.add(protocol)
    try:
        await asyncio.Event().wait()  # only the client's leaving (a cancellation) or SIGKILL ends it
    finally:
        runtime.lingering.discard(protocol)
    return drop(request)  # not reached: the wait ends only by cancellation


async def _stream(request: web.Request, runtime: EngineRuntime, ticket: Ticket) -> web.StreamResponse:
    """Server-sent events: headers at once, a chunk every STREAM_CHUNK_INTERVAL_S, then [DONE]."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    chunk = {"id": f"cmpl-{runtime.incarnation.number}-{ticket.request_id}", "object": "text_completion",
             "model": runtime.config.model_name, "choices": [{"index": 0, "text": " tok", "finish_reason": None}]}
    while True:
        done, _ = await asyncio.wait({ticket.done}, timeout=constants.STREAM_CHUNK_INTERVAL_S)
        if done:
            break
        if ticket.run_started.is_set():
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
    outcome = ticket.done.result()
    if outcome is Outcome.COMPLETED:
        final = dict(chunk, choices=[{"index": 0, "text": "", "finish_reason": "stop"}])
        await response.write(f"data: {json.dumps(final)}\n\ndata: [DONE]\n\n".encode())
        await response.write_eof()
        return response
    if outcome is Outcome.FAILED:
        aborted = dict(chunk, choices=[{"index": 0, "text": "", "finish_reason": "abort"}])
        await response.write(f"data: {json.dumps(aborted)}\n\ndata: [DONE]\n\n".encode())
        await response.write_eof()
        return response
    await _abandoned(request, runtime)  # vLLM: the headers, then nothing
    return response
