"""What each engine does on SIGTERM, as measured (docs/engines.md), one coroutine per policy.

- abort (vLLM default): listener closed at once, in-flight requests get no response, their clients'
  connections held open, idle keep-alive connections closed; the process lingers until the last of
  those clients goes, then exits ~0.5 s later (real vLLM 0.32: held to kubelet's SIGKILL while a
  router still waits on its answers, bench/engines/matrix.py).
- drain-timeout (vLLM --shutdown-timeout N): /health and /metrics keep serving, in-flight work
  finishes, new requests get HTTP 500; when empty or after N s (the rest get HTTP 500), ~7 s of
  teardown, exit; ~4.25 s after a SIGTERM that found nothing in flight.
- drain (SGLang): /health 503 at once, everything (new requests too) is served; the queue is checked
  on a 5 s clock from the server's start (the first look 0-5 s after SIGTERM, uniform) and every 5 s after,
  exit 0 when empty, ~1.4 s after the last look; prefill/decode: the first look at 4 s, then 15 s
  more for their scheduler (the spec's GPU figure).
- ignore: nothing happens; only SIGKILL ends it.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time

from emulation import constants
from emulation.engine_config import Role, SigtermPolicy
from emulation.lifecycle import Lifecycle
from emulation.runtime import EngineRuntime, ServingState
from emulation.scheduler import Outcome

log = logging.getLogger(__name__)


async def on_sigterm(runtime: EngineRuntime, lifecycle: Lifecycle) -> None:
    policy = runtime.config.on_sigterm
    log.info("SIGTERM: %s with %d in flight", policy.value, runtime.scheduler.in_flight)
    if policy is SigtermPolicy.ABORT:
        await _abort(runtime, lifecycle)
    elif policy is SigtermPolicy.DRAIN_TIMEOUT:
        await _drain_with_timeout(runtime, lifecycle)
    elif policy is SigtermPolicy.DRAIN:
        await _drain(runtime, lifecycle)
    else:
        log.info("SIGTERM ignored")


async def _abort(runtime: EngineRuntime, lifecycle: Lifecycle) -> None:
    runtime.state = ServingState.STOPPING
    lifecycle.close_listener()
    lifecycle.abort_in_flight()
    await asyncio.sleep(constants.LINGER_POLL_S)  # the aborted handlers take up their lingering
    lifecycle.close_idle_connections()
    while runtime.lingering:
        await asyncio.sleep(constants.LINGER_POLL_S)
    log.info("no client waits any more")
    await asyncio.sleep(constants.VLLM_ABORT_EXIT_LAG_S)
    lifecycle.request_exit(0)


async def _drain_with_timeout(runtime: EngineRuntime, lifecycle: Lifecycle) -> None:
    runtime.state = ServingState.DRAINING
    runtime.rejects_new_work = True
    timeout_s = runtime.config.shutdown_timeout_s
    teardown_s = runtime.config.drain_teardown_s
    if runtime.scheduler.in_flight == 0:  # nothing to drain: the real one left sooner (constants)
        teardown_s = min(teardown_s, constants.VLLM_IDLE_DRAIN_EXIT_S)
    try:
        await asyncio.wait_for(runtime.scheduler.wait_idle(), timeout=timeout_s)
        log.info("drained: nothing in flight")
    except asyncio.TimeoutError:
        failed = runtime.scheduler.end_all(Outcome.FAILED)
        log.info("shutdown timeout %.1f s reached: %d requests failed", timeout_s, failed)
    runtime.state = ServingState.STOPPING
    lifecycle.close_listener()
    await asyncio.sleep(teardown_s)
    lifecycle.request_exit(0)


async def _drain(runtime: EngineRuntime, lifecycle: Lifecycle) -> None:
    runtime.state = ServingState.DRAINING
    runtime.health_ok = False
    started_at = time.monotonic()
    interval_s = constants.SGLANG_WATCHDOG_INTERVAL_S
    if runtime.config.role is Role.UNIFIED:
        # The watchdog's clock starts with the server, and a real server's 25-31 s start-up leaves its
        # phase against any later SIGTERM uniform: the next wake-up is 0-5 s away. (The emulator starts
        # in a fraction of a second, so its own start would give every deletion the same phase.)
        await asyncio.sleep(random.uniform(0.0, interval_s))
    else:
        # A prefill or decode server models the spec's GPU figure (~20 s to exit, the role reserve's
        # reason) whole: the first look at a fixed 4 s, then its exit wait.
        await asyncio.sleep(constants.SGLANG_SPLIT_ROLE_FIRST_CHECK_S)
    while runtime.scheduler.in_flight > 0:
        log.info("drain check: %d in flight", runtime.scheduler.in_flight)
        await asyncio.sleep(interval_s)
    log.info("drained after %.1f s", time.monotonic() - started_at)
    if runtime.config.role is not Role.UNIFIED:
        await asyncio.sleep(runtime.config.split_role_exit_wait_s)
    else:
        await asyncio.sleep(constants.SGLANG_EXIT_TEARDOWN_S)
    runtime.state = ServingState.STOPPING
    lifecycle.close_listener()
    lifecycle.request_exit(0)
