"""`python -m emulation.engine`: an emulated vLLM or SGLang server. Wiring only; the logic is in
the modules it connects (see emulation/__init__.py and `--help`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import ssl
import sys
import time
from pathlib import Path
from typing import Sequence

from aiohttp import web

from emulation import constants, server_load
from emulation.completions import make_completions_handler
from emulation.control import make_misbehave_handler, make_stats_handler
from emulation.engine_config import EngineConfig, EngineKind, parse_engine_args
from emulation.health import make_health_handler
from emulation.http_active import counting_middleware
from emulation.lifecycle import Lifecycle
from emulation.listener import Listener, server_tls_context
from emulation.metrics_endpoint import make_decoy_handler, make_metrics_handler
from emulation.misbehaviour import IDLE_DECOY_PATH, Misbehaviour
from emulation.runtime import EngineRuntime
from emulation.shutdown import on_sigterm

log = logging.getLogger("emulation.engine")


def write_atomically(path: Path, text: str) -> None:
    """Readers polling for the file never see it half written."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


def build_app(runtime: EngineRuntime, lifecycle: Lifecycle) -> web.Application:
    # SGLang counts each request in its HTTP gauge from arrival; vLLM has no such gauge.
    # vLLM counts them in GET /load from arrival, with --enable-server-load-tracking.
    if runtime.config.kind is EngineKind.SGLANG:
        middlewares = [counting_middleware(runtime.http_active)]
    else:
        middlewares = [server_load.counting_middleware(runtime.server_load)]
    app = web.Application(middlewares=middlewares)
    if runtime.config.kind is EngineKind.VLLM:
        app.router.add_get(server_load.LOAD_PATH, server_load.make_load_handler(runtime.server_load))
    app.router.add_get("/metrics", make_metrics_handler(runtime))
    app.router.add_get(IDLE_DECOY_PATH, make_decoy_handler(runtime))
    app.router.add_get("/health", make_health_handler(runtime))
    app.router.add_post("/v1/completions", make_completions_handler(runtime))
    app.router.add_post("/control/misbehave", make_misbehave_handler(runtime, lifecycle))
    app.router.add_get("/control/stats", make_stats_handler(runtime))
    return app


async def serve(config: EngineConfig, tls: ssl.SSLContext | None) -> int:
    runtime = EngineRuntime(config)
    lifecycle = Lifecycle(runtime)
    runner = web.AppRunner(build_app(runtime, lifecycle), handle_signals=False, access_log=None,
                           handler_cancellation=True, shutdown_timeout=constants.HANDLER_SHUTDOWN_GRACE_S,
                           keepalive_timeout=constants.HTTP_KEEP_ALIVE_TIMEOUT_S)
    await runner.setup()
    assert runner.server is not None  # set by setup()
    listener = Listener(runner.server, config.host, config.port, tls)
    lifecycle.attach(listener, runner.server)
    runtime.port = await listener.open()
    log.info("%s (%s) listening on %s:%d%s", config.kind.value, config.role.value, config.host,
             runtime.port, " (TLS)" if tls else "")

    loop = asyncio.get_running_loop()
    sigterms = 0

    def sigterm() -> None:
        nonlocal sigterms
        sigterms += 1
        if sigterms == 1:
            lifecycle.spawn(on_sigterm(runtime, lifecycle))
        else:
            log.info("SIGTERM again (%d): already shutting down", sigterms)

    loop.add_signal_handler(signal.SIGTERM, sigterm)
    loop.add_signal_handler(signal.SIGINT, lambda: lifecycle.request_exit(130))
    if runtime.setting.mode is Misbehaviour.REFUSE:
        lifecycle.spawn(lifecycle.refuse(runtime.setting))
    elif runtime.setting.mode is Misbehaviour.RESTART:
        lifecycle.spawn(lifecycle.restart(runtime.setting))
    if config.ready_file is not None:
        write_atomically(config.ready_file, f"{runtime.port}\n")

    code = await lifecycle.wait_exit()
    lifecycle.close_listener()
    if config.stats_file is not None:
        stats = dict(runtime.stats(), exit_code=code, exited_at=time.time())
        write_atomically(config.stats_file, json.dumps(stats, indent=1) + "\n")
    await runner.cleanup()
    log.info("exit %d", code)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    config = parse_engine_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"%(asctime)s emulated-{config.kind.value}[%(process)d] %(message)s")
    try:
        tls = server_tls_context(config.tls_cert, config.tls_key) if config.tls_cert and config.tls_key else None
    except (OSError, ssl.SSLError) as exc:
        print(f"emulation.engine: cannot load TLS certificate/key: {exc}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(serve(config, tls))
    except OSError as exc:
        print(f"emulation.engine: cannot listen on {config.host}:{config.port}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
