"""`drain-sidecar`: wiring only. Parse flags, build the service, serve until the lifecycle ends.

The logic lives in coalescer.py (fresh shared reads), incarnation.py, auth.py, app.py
(routes) and lifecycle.py (the SIGTERM linger).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
import uuid
from importlib import resources
from typing import Any

from aiohttp import web
from prometheus_client import disable_created_metrics

from modeldrain.hook import __version__
from modeldrain.hook.events import EventLog
from modeldrain.hook.outcome import Read
from modeldrain.hook.exitcodes import ExitCode
from modeldrain.hook.signals import IGNORED_SIGNALS
from modeldrain.sidecar import constants
from modeldrain.sidecar.app import MALFORMED_ROUTE, REJECTED_ROUTE, Service, make_app
from modeldrain.sidecar.auth import TokenFile
from modeldrain.sidecar.coalescer import Coalescer
from modeldrain.sidecar.command import CommandWatch
from modeldrain.sidecar.connections import ConnectionWatch
from modeldrain.sidecar.drain_admission import DrainAdmission, drain_call_cap
from modeldrain.sidecar.drain_job import DrainJobs
from modeldrain.sidecar.config import SidecarConfig, sidecar_parser, resolve_config
from modeldrain.sidecar.work_answer import Identity
from modeldrain.sidecar.library_logs import route_library_logs
from modeldrain.sidecar.lifecycle import Lifecycle
from modeldrain.sidecar.metrics import SidecarMetrics
from modeldrain.sidecar.sampler import EngineSampler, NumberedRead
from modeldrain.sidecar.site import LimitedTCPSite


# While lingering, one loopback read every half second: the sidecar leaves within ~0.5 s of
# the engine's listener closing, at the cost of two tiny scrapes a second for a few seconds.
LINGER_POLL_INTERVAL_S = 0.5

# Only GETs with a short path and a bearer token arrive; 4 KiB per line and per header is
# ample (a Kubernetes service-account token is ~1 KiB) and caps what a client can make us hold.
MAX_REQUEST_LINE_BYTES = 4096
MAX_HEADER_FIELD_BYTES = 4096
MAX_HEADERS = 32

# A connection that has not sent a whole request within this long is closed (aiohttp's
# keep-alive timer also runs before the first request), so slow-header clients are bounded.
# A controller reading once a second keeps its connection alive comfortably.
KEEPALIVE_TIMEOUT_S = 10.0

# At exit, requests still running get this long to finish (aiohttp waits it twice: for the
# handlers, then for the connections). The exit comes after the linger, which already waited for
# the engine; a read still pending then is cut rather than holding the Pod's deletion.
SHUTDOWN_TIMEOUT_S = 1.0

# Until the engine's own command is found in /proc (a native sidecar starts before its engine),
# look again at most this often: one listing of /proc, well under a millisecond in a Pod.
COMMAND_RESCAN_INTERVAL_S = 1.0

OPENAPI_RESOURCE = "openapi.json"


def load_openapi() -> bytes:
    return resources.files("modeldrain.sidecar").joinpath(OPENAPI_RESOURCE).read_bytes()


async def serve(config: SidecarConfig, log: EventLog) -> int:
    metrics = SidecarMetrics()
    metrics.watch_log(log)
    sampler = EngineSampler(config.read, metrics, log, ConnectionWatch(config.proc_root, config.service_ports))
    coalescer: Coalescer[NumberedRead] = Coalescer(sampler.sample, constants.MIN_READ_INTERVAL_S)
    lifecycle = Lifecycle(coalescer, log, linger_max_s=config.linger_max_s,
                          poll_interval_s=LINGER_POLL_INTERVAL_S)

    async def fresh_read() -> Read:
        return (await coalescer.fresh()).read

    tokens = None
    if config.token_file:
        tokens = TokenFile(config.token_file, lambda message: log.warning("token_file_changed", message=message))
    identity = Identity(
        instance=uuid.uuid4().hex,
        version=__version__,
        started_at_unix=time.time(),
        pod=config.pod,
        member=config.member,
    )
    service = Service(
        identity=identity,
        coalescer=coalescer,
        lifecycle=lifecycle,
        metrics=metrics,
        tokens=tokens,
        drains=DrainJobs(config.read, log, fresh_read, DrainAdmission(drain_call_cap(config.max_connections))),
        openapi_json=load_openapi(),
        command=CommandWatch(config.stated, config.proc_root,
                             rescan_interval_s=COMMAND_RESCAN_INTERVAL_S),
        # The read in flight, the spacing, then this caller's own read.
        work_wait_s=constants.work_answer_bound_s(config.read.read_timeout_s),
        log=log,
    )
    # Used by the site's per-connection handlers (the runner's own factory is bypassed).
    handler_kwargs: dict[str, Any] = dict(
        access_log=None,  # a controller polling every second would drown the log
        keepalive_timeout=KEEPALIVE_TIMEOUT_S,
        max_line_size=MAX_REQUEST_LINE_BYTES,
        max_field_size=MAX_HEADER_FIELD_BYTES,
        max_headers=MAX_HEADERS,
    )
    # handler_cancellation: a drain call whose client went away stops, and gives its place back.
    runner = web.AppRunner(make_app(service), handle_signals=False, shutdown_timeout=SHUTDOWN_TIMEOUT_S,
                           handler_cancellation=True, **handler_kwargs)
    await runner.setup()
    site = LimitedTCPSite(runner, host=config.listen_host, port=config.listen_port,
                          max_connections=config.max_connections, handler_kwargs=handler_kwargs,
                          on_reject=lambda: metrics.observe_request(REJECTED_ROUTE, 503),
                          on_evict=metrics.connections_evicted.inc,
                          on_error=lambda status: metrics.observe_request(MALFORMED_ROUTE, status))
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: _log_loop_error(log, context))
    loop.add_signal_handler(signal.SIGTERM, lifecycle.on_sigterm)
    loop.add_signal_handler(signal.SIGINT, lifecycle.on_sigint)
    loop.add_signal_handler(signal.SIGQUIT, lifecycle.on_sigint)  # Ctrl-\ at a terminal: stop now, too
    try:
        try:
            await site.start()
        except OSError as exc:  # the address is taken or not ours: say so plainly, no traceback
            log.error("listen_failed", listen=f"{config.listen_host}:{config.listen_port}",
                     error=str(exc))
            return ExitCode.LISTEN_FAILED
        addresses = site.addresses
        log.emit("listening", addresses=[f"{h}:{p}" for h, p in addresses], target=config.read.target.url,
                 target_source=config.read.target.source,
                 engine_hint=config.read.hint.kind.value if config.read.hint.kind else None,
                 pod=config.pod.name, namespace=config.pod.namespace, uid=config.pod.uid,
                 worker_index=config.member.worker_index,
                 group_size=config.member.group_size, auth="bearer" if tokens else "open",
                 instance=identity.instance, service_ports=list(config.service_ports))
        if config.ready_file:
            _write_ready_file(config.ready_file, addresses[0])
        reason = await lifecycle.wait()
        log.emit("stopping", reason=reason.value, reads=coalescer.reads_started)
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
        loop.remove_signal_handler(signal.SIGINT)
        loop.remove_signal_handler(signal.SIGQUIT)
        await runner.cleanup()
        await coalescer.close()
    log.emit("stopped", reason=reason.value)
    return ExitCode.OK


def _log_loop_error(log: EventLog, context: dict) -> None:
    """An error nothing awaited (a callback, a transport): one JSON line, like every other."""
    exc = context.get("exception")
    log.error("loop_error", message=context.get("message", ""),
             error=repr(exc) if exc else None)


def _write_ready_file(path: str, address: tuple[str, int]) -> None:
    host, port = address
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write(f"{host}:{port}\n")
    os.replace(tmp, path)  # readers never see a half-written file


def main(argv: list[str] | None = None) -> int:
    # The sidecar stops for SIGTERM (the linger), SIGINT and SIGQUIT (at once); every other signal
    # whose default would end or freeze it is stray here (no reload on SIGHUP: the token file is
    # re-read by itself) and is ignored, the hook's table (docs/sidecar-api.md, Signals).
    for signum in IGNORED_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    parser = sidecar_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    config = resolve_config(args, parser)
    log = EventLog("drain-sidecar")
    route_library_logs(log)
    disable_created_metrics()  # the *_created series only double the size of /metrics
    for warning in config.read.warnings + config.warnings:
        log.warning("config_warning", message=warning)
    if config.token_file is None:
        log.warning("api_open", message="no --token-file: /v1/* answers anyone who can reach the Pod IP")
    if os.geteuid() == 0:
        log.warning("running_as_root", message="run the sidecar as a non-root user (runAsNonRoot)")
    try:
        import uvloop
    except ImportError as exc:
        parser.error(f"uvloop is required: {exc}")
    return uvloop.run(serve(config, log))


if __name__ == "__main__":
    sys.exit(main())
