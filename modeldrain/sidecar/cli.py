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
from modeldrain.hook.exitcodes import ExitCode
from modeldrain.hook.outcome import Read
from modeldrain.hook.signals import IGNORED_SIGNALS
from modeldrain.sidecar import constants
from modeldrain.sidecar.app import MALFORMED_ROUTE, REJECTED_ROUTE, Service, make_app
from modeldrain.sidecar.auth import TokenFile
from modeldrain.sidecar.coalescer import Coalescer
from modeldrain.sidecar.command import CommandWatch
from modeldrain.sidecar.config import SidecarConfig, resolve_config, sidecar_parser
from modeldrain.sidecar.connections import ConnectionWatch
from modeldrain.sidecar.drain_admission import DrainAdmission, drain_call_cap
from modeldrain.sidecar.drain_job import DrainJobs
from modeldrain.sidecar.drain_ledger import DrainLedger
from modeldrain.sidecar.leader_watch import LeaderWatch, stop_watch
from modeldrain.sidecar.library_logs import route_library_logs
from modeldrain.sidecar.lifecycle import Lifecycle, StopReason
from modeldrain.sidecar.metrics import SidecarMetrics
from modeldrain.sidecar.sampler import EngineSampler, NumberedRead
from modeldrain.sidecar.site import LimitedTCPSite
from modeldrain.sidecar.work_answer import Identity

__all__ = ["SHUTDOWN_TIMEOUT_S", "serve_main"]

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
    """uvicorn's shape: startup builds the service and listens, main_loop waits for the lifecycle
    to end, shutdown takes it apart in order."""
    server = Server(config, log)
    try:
        if not await server.startup():
            return ExitCode.LISTEN_FAILED
        reason = await server.main_loop()
    finally:
        await server.shutdown()
    log.emit("stopped", reason=reason.value)
    return ExitCode.OK


class Server:
    """The sidecar's collaborators, built once, and the three steps that run them."""

    def __init__(self, config: SidecarConfig, log: EventLog):
        self.config, self.log = config, log
        self.metrics = SidecarMetrics()
        self.metrics.watch_log(log)
        self.ledger = DrainLedger(self.metrics, log)
        self.admission = DrainAdmission(drain_call_cap(config.max_connections), config.max_connections)
        sampler = EngineSampler(config.read, self.metrics, log,
                                ConnectionWatch(config.net_root, config.service_ports))
        self.coalescer: Coalescer[NumberedRead] = Coalescer(sampler.sample, constants.MIN_READ_INTERVAL_S)
        self.lifecycle = Lifecycle(self.coalescer, log, linger_max_s=config.linger_max_s,
                                   poll_interval_s=LINGER_POLL_INTERVAL_S, on_sigterm=self.ledger.sigterm)
        self.tokens = None
        if config.token_file:
            self.tokens = TokenFile(config.token_file,
                                    lambda message: log.warning("token_file_changed", message=message),
                                    overlap_s=config.token_overlap_s)
        self.identity = Identity(instance=uuid.uuid4().hex, version=__version__, started_at_unix=time.time(),
                                 pod=config.pod, member=config.member)
        self.leader = LeaderWatch(config.leader, log) if config.leader is not None else None
        self._leader_task: asyncio.Task[None] | None = None
        self.runner: web.AppRunner | None = None
        self.site: LimitedTCPSite | None = None
        self._signals: tuple[signal.Signals, ...] = ()

    def _service(self) -> Service:
        config = self.config

        async def fresh_read() -> Read:
            return (await self.coalescer.fresh()).read

        return Service(
            identity=self.identity,
            coalescer=self.coalescer,
            lifecycle=self.lifecycle,
            metrics=self.metrics,
            tokens=self.tokens,
            drains=DrainJobs(config.read, self.log, fresh_read,
                             self.admission, self.ledger),
            ledger=self.ledger,
            openapi_json=load_openapi(),
            command=CommandWatch(config.stated, config.proc_root, rescan_interval_s=COMMAND_RESCAN_INTERVAL_S),
            work_wait_s=constants.work_answer_bound_s(config.read.read_timeout_s),
            log=self.log,
            leader=self.leader,
        )

    async def startup(self) -> bool:
        """Build the app, take the signals, listen. False (and logged) when the address cannot be had."""
        config, metrics = self.config, self.metrics
        # Used by the site's per-connection handlers (the runner's own factory is bypassed).
        handler_kwargs: dict[str, Any] = dict(
            access_log=None,  # a controller polling every second would drown the log
            keepalive_timeout=KEEPALIVE_TIMEOUT_S,
            max_line_size=MAX_REQUEST_LINE_BYTES,
            max_field_size=MAX_HEADER_FIELD_BYTES,
            max_headers=MAX_HEADERS,
        )
        # handler_cancellation: a drain call whose client went away stops, and gives its place back.
        self.runner = web.AppRunner(make_app(self._service()), handle_signals=False,
                                    shutdown_timeout=SHUTDOWN_TIMEOUT_S, handler_cancellation=True, **handler_kwargs)
        await self.runner.setup()
        self.site = LimitedTCPSite(self.runner, host=config.listen_host, port=config.listen_port,
                                   max_connections=config.max_connections, handler_kwargs=handler_kwargs,
                                   on_reject=lambda: metrics.observe_request(REJECTED_ROUTE, 503),
                                   on_evict=metrics.connections_evicted.inc,
                                   on_error=lambda status: metrics.observe_request(MALFORMED_ROUTE, status),
                                   exempt=lambda: self.admission.waiting)
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _loop, context: _log_loop_error(self.log, context))
        # SIGTERM lingers until the engine is gone; SIGINT and Ctrl-\'s SIGQUIT stop at once.
        handlers = {signal.SIGTERM: self.lifecycle.on_sigterm, signal.SIGINT: self.lifecycle.on_sigint,
                    signal.SIGQUIT: self.lifecycle.on_sigint}
        for signum, handler in handlers.items():
            loop.add_signal_handler(signum, handler)
        self._signals = tuple(handlers)
        try:
            await self.site.start()
        except OSError as exc:  # the address is taken or not ours: say so plainly, no traceback
            self.log.error("listen_failed", listen=f"{config.listen_host}:{config.listen_port}", error=str(exc))
            return False
        addresses = self.site.addresses
        self.log.emit("listening", addresses=[f"{h}:{p}" for h, p in addresses], target=config.read.target.url,
                      target_source=config.read.target.source,
                      engine_hint=config.read.hint.kind.value if config.read.hint.kind else None,
                      pod=config.pod.name, namespace=config.pod.namespace, uid=config.pod.uid,
                      worker_index=config.member.worker_index, group_size=config.member.group_size,
                      auth="bearer" if self.tokens else "open", instance=self.identity.instance,
                      service_ports=list(config.service_ports),
                      leader=config.leader.target.url if config.leader else None)
        if self.leader is not None:
            self._leader_task = asyncio.create_task(self.leader.run(), name="leader-watch")
        if config.ready_file:
            _write_ready_file(config.ready_file, addresses[0])
        return True

    async def main_loop(self) -> StopReason:
        """Serve until the lifecycle ends: the linger after SIGTERM, or SIGINT/SIGQUIT at once."""
        reason = await self.lifecycle.wait()
        self.log.emit("stopping", reason=reason.value, reads=self.coalescer.reads_started)
        return reason

    async def shutdown(self) -> None:
        """In this order: give the signals back (a second SIGTERM now kills, as it should); close
        the listener and let running requests finish within SHUTDOWN_TIMEOUT_S; then stop reading
        the engine (a read still pending is cut rather than holding the Pod's deletion)."""
        loop = asyncio.get_running_loop()
        for signum in self._signals:
            loop.remove_signal_handler(signum)
        await stop_watch(self._leader_task)
        if self.runner is not None:
            await self.runner.cleanup()
        await self.coalescer.close()


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


def serve_main(argv: list[str] | None = None) -> int:
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
    sys.exit(serve_main())
