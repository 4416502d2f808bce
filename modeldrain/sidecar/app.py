"""The HTTP routes: /v1/work, /v1/leader, /v1/drain, /v1/hook-events, /v1/openapi.json, /healthz, /readyz, /metrics.

Nothing in a request reaches the engine read: /v1/work takes no parameters, and the target
was fixed at start. Every error is JSON `{"error": <stable code>, "message": ...}`.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
from dataclasses import dataclass
from typing import Awaitable, Callable, Mapping

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from modeldrain.hook.constants import ADMITTED_GRACE_MAX_S, ADMITTED_GRACE_MIN_S, SIDECAR_SCHEMA
from modeldrain.hook.events import EventLog
from modeldrain.hook.flags import parse_seconds
from modeldrain.sidecar import errors
from modeldrain.sidecar.auth import TokenFile
from modeldrain.sidecar.coalescer import Coalescer
from modeldrain.sidecar.command import CommandWatch
from modeldrain.sidecar.constants import SERVER_HEADER
from modeldrain.sidecar.drain_job import DrainJobs, DrainRefused
from modeldrain.sidecar.drain_ledger import DrainLedger
from modeldrain.sidecar.leader_watch import LeaderWatch
from modeldrain.sidecar.lifecycle import Lifecycle
from modeldrain.sidecar.metrics import SidecarMetrics
from modeldrain.sidecar.sampler import NumberedRead
from modeldrain.sidecar.work_answer import Identity, work_answer

__all__ = [
    "API_PREFIX", "HOOK_EVENTS", "MALFORMED_ROUTE", "MAX_REQUEST_BODY_BYTES", "METRICS", "REJECTED_ROUTE", "ROUTES",
    "Service", "TOKENLESS", "TOKEN_FILE_WAIT_S", "WORK", "from_loopback", "make_app",
]

# No route takes a body; anything larger than this is refused before it is read.
MAX_REQUEST_BODY_BYTES = 1024

# A check of the token file (a stat, rarely a read of 4 KiB) takes microseconds; one that has
# not answered in this long is a stuck volume, and /v1/* answers 503 rather than wait on it.
TOKEN_FILE_WAIT_S = 1.0

WORK = "/v1/work"
LEADER = "/v1/leader"
DRAIN = "/v1/drain"
# kubelet before 1.26 (or with ConsistentHTTPGetHandlers off) joins host and path with a "/" of
# its own: an httpGet path of /v1/drain arrives as //v1/drain.
LEGACY_DRAIN = "//v1/drain"
HOOK_EVENTS = "/v1/hook-events"  # POST, from loopback peers only: the engine's hook in this Pod
OPENAPI = "/v1/openapi.json"
HEALTHZ = "/healthz"
READYZ = "/readyz"
METRICS = "/metrics"
ROUTES = (WORK, LEADER, DRAIN, HOOK_EVENTS, OPENAPI, HEALTHZ, READYZ, METRICS)
# No bearer token here: kubelet's httpGet hook could only send one from the Pod spec, where anyone
# who may read Pods reads it. Every call drains for itself, from its own arrival (no call can
# shorten, end or answer another), and callers are capped per source network (docs/sidecar-api.md,
# "Threat model").
# /v1/hook-events needs none either: the hook in the engine's container holds no sidecar token, and
# the route answers loopback peers only (the Pod's own containers), 403 to anyone else.
TOKENLESS = (DRAIN, LEGACY_DRAIN, HOOK_EVENTS)
API_PREFIX = "/v1/"
OTHER_ROUTE = "other"  # the metrics label of every path we do not serve
MALFORMED_ROUTE = "malformed"  # requests that failed to parse (oversized line or headers)
REJECTED_ROUTE = "rejected"  # connections over the cap


@dataclass(frozen=True)
class Service:
    """Everything the handlers use, built once by the wiring in cli.py."""

    identity: Identity
    coalescer: Coalescer[NumberedRead]
    lifecycle: Lifecycle
    metrics: SidecarMetrics
    tokens: TokenFile | None
    drains: DrainJobs
    ledger: DrainLedger  # every drain it knows of, and whether the Pod is draining
    openapi_json: bytes
    command: CommandWatch  # the engine's own command, for the retirement protocol's refusal
    work_wait_s: float  # the longest a /v1/work waits for its read
    log: EventLog
    leader: LeaderWatch | None = None  # a worker: what it remembers of its leader, for its hook


APP_SERVICE = web.AppKey("service", Service)


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}


def error_response(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(status=status, text=errors.error_body(code, message), content_type="application/json",
                        headers=headers)


def _json(body: Mapping[str, object], status: int = 200) -> web.Response:
    return web.Response(status=status, text=json.dumps(body, separators=(",", ":")),
                        content_type="application/json", headers={"Cache-Control": "no-store"})


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def _errors_and_metrics(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Outermost: every failure becomes a JSON error, and every answer is counted."""
    service = request.app[APP_SERVICE]
    route = DRAIN if request.path == LEGACY_DRAIN else request.path if request.path in ROUTES else OTHER_ROUTE
    try:
        if request.content_length and request.content_length > MAX_REQUEST_BODY_BYTES:
            raise ApiError(413, errors.REQUEST_TOO_LARGE, f"no route takes a body over {MAX_REQUEST_BODY_BYTES} bytes")
        response = await handler(request)
    except ApiError as exc:
        response = error_response(exc.status, exc.code, exc.message, exc.headers)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        headers = {k: v for k, v in exc.headers.items() if k.lower() == "allow"}
        # What the client sent is never echoed back: the status and the way to the routes only.
        message = f"{exc.status} {exc.reason}; the routes are listed at {OPENAPI}"
        response = error_response(exc.status, errors.code_for_status(exc.status), message, headers)
    except Exception as exc:  # a bug: answer 500 and log it, never drop the connection silently
        service.log.error("handler_failed", route=route, error=repr(exc))
        response = error_response(500, errors.INTERNAL_ERROR, "internal error; see the sidecar's log")
    service.metrics.observe_request(route, response.status)
    return response


@web.middleware
async def _authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
    tokens = request.app[APP_SERVICE].tokens
    if tokens is not None and request.path.startswith(API_PREFIX) and request.path not in TOKENLESS:
        try:
            await tokens.refreshed(TOKEN_FILE_WAIT_S)
        except TimeoutError:
            raise ApiError(503, errors.TOKEN_FILE_UNAVAILABLE,
                           "the token file did not answer; see the sidecar's log", {"Retry-After": "1"}) from None
        verdict = tokens.check(request.headers.get("Authorization"))
        if not verdict.ok:
            raise ApiError(401, errors.UNAUTHORIZED, verdict.reason,
                           {"WWW-Authenticate": 'Bearer realm="modeldrain"'})
    return await handler(request)


async def work(request: web.Request) -> web.Response:
    service = request.app[APP_SERVICE]
    try:
        numbered_read = await asyncio.wait_for(service.coalescer.fresh(), service.work_wait_s)
    except TimeoutError:
        raise ApiError(504, errors.READ_TIMEOUT,
                       f"no fresh read of the engine finished within {service.work_wait_s:g} s") from None
    return _json(work_answer(service.identity, numbered_read, command=await service.command.current(),
                               terminating=service.lifecycle.terminating, draining=service.ledger.draining,
                               leader=service.leader.fields() if service.leader is not None else None))


async def leader(request: web.Request) -> web.Response:
    """A worker's memory of its leader, at once: no engine read stands between the hook and it."""
    service = request.app[APP_SERVICE]
    if service.leader is None:
        raise ApiError(404, errors.NOT_FOUND,
                       "this sidecar follows no leader (not a LeaderWorkerSet worker, or --follow-leader none)")
    return _json({"schema": SIDECAR_SCHEMA, "leader": service.leader.fields()})


async def drain_route(request: web.Request) -> web.Response:
    """Run this call's own drain, the one kubelet's preStop httpGet waits on; answer when the hook would return."""
    service = request.app[APP_SERVICE]
    text = request.query.get("grace")
    bounds = f"{ADMITTED_GRACE_MIN_S:g} to {ADMITTED_GRACE_MAX_S:g} seconds (what the ModelDeployment operator's shutdown documentation admits, restated in docs/requirements.md)"
    if text is None:
        raise ApiError(400, errors.BAD_REQUEST,
                       f"grace is required: /v1/drain?grace=<terminationGracePeriodSeconds>, {bounds}")
    try:
        grace_s = parse_seconds(text, what="grace", inclusive=False)
    except ValueError:
        raise ApiError(400, errors.BAD_REQUEST, f"grace must be a number of seconds, {bounds}") from None
    if not ADMITTED_GRACE_MIN_S <= grace_s <= ADMITTED_GRACE_MAX_S:
        raise ApiError(400, errors.BAD_REQUEST, f"grace must be {bounds}")
    try:
        return _json(await service.drains.drain(grace_s, request.remote or "unknown"))
    except DrainRefused as exc:
        raise ApiError(429, errors.TOO_MANY_DRAIN_CALLS, exc.refusal.message, {"Retry-After": "1"}) from None


def from_loopback(remote: str | None) -> bool:
    """Whether the peer is this network namespace's loopback: the Pod's own containers. A packet from
    outside the Pod with a loopback source is dropped by the kernel before it is a connection."""
    try:
        address = ipaddress.ip_address(remote or "")
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


async def hook_events(request: web.Request) -> web.Response:
    """The engine's hook in this Pod saying its drain started or ended (modeldrain/hook/sidecar_report.py)."""
    service = request.app[APP_SERVICE]
    if not from_loopback(request.remote):
        raise ApiError(403, errors.FORBIDDEN, f"{HOOK_EVENTS} answers the Pod's own containers, over loopback only")
    try:
        message = json.loads(await request.read())
        done = service.ledger.hook_event(message)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, errors.BAD_REQUEST, f"not a hook event: {str(exc)[:200]}") from None
    return _json({"status": done})


async def openapi(request: web.Request) -> web.Response:
    return web.Response(body=request.app[APP_SERVICE].openapi_json, content_type="application/json")


async def healthz(request: web.Request) -> web.Response:
    return _json({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    # Ready whenever it serves: the engine being busy, slow or loading is an answer, not a fault,
    # and a native sidecar's readiness gates the Pod's.
    return _json({"status": "ready", "terminating": request.app[APP_SERVICE].lifecycle.terminating})


async def metrics(request: web.Request) -> web.Response:
    body = generate_latest(request.app[APP_SERVICE].metrics.registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def _name_server(request: web.Request, response: web.StreamResponse) -> None:
    response.headers["Server"] = SERVER_HEADER  # before aiohttp's own default is set


def make_app(service: Service) -> web.Application:
    app = web.Application(middlewares=[_errors_and_metrics, _authenticate], client_max_size=MAX_REQUEST_BODY_BYTES)
    app[APP_SERVICE] = service
    app.on_response_prepare.append(_name_server)
    for path, handler in ((WORK, work), (LEADER, leader), (DRAIN, drain_route), (LEGACY_DRAIN, drain_route), (OPENAPI, openapi),
                          (HEALTHZ, healthz), (READYZ, readyz), (METRICS, metrics)):
        app.router.add_get(path, handler, allow_head=False)
    app.router.add_post(HOOK_EVENTS, hook_events)
    return app
