"""Kubelet's Pod deletion for one container, on kubelet's own clock and rules.

The grace clock starts at the delete (t0), when kubelet execs the preStop hook:
- No hook: SIGTERM at t0.
- An exec hook runs as a real subprocess (its stdout and stderr captured). When it returns, SIGTERM.
  If it is still running at G, kubelet gives up on it ("PreStop hook not completed in grace
  period"); here the hook's process group is killed then, and SIGTERM follows.
- The native `sleep` action (hook_sleep_s) sleeps, capped at G, then SIGTERM.
- SIGKILL comes when what is left of the grace runs out. Kubelet subtracts the hook's time in whole
  seconds (it truncates) and never leaves under 2 s between SIGTERM and SIGKILL, so a hook that
  returns at 6.7 s of G = 30 is followed by SIGKILL at 30.7 s, and one abandoned at G by SIGKILL at
  G + 2 (the one-time 2 s extension).

A load generator attached to the deletion stops sending `route_drop_after_s` after t0 (the router
learning of the delete) and its tally is taken once every request has ended.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Mapping, Sequence

from emulation import constants
from emulation.children import die_with_parent_preexec
from emulation.engine_process import EngineProcess
from emulation.load import LoadGenerator, LoadTally

# After SIGKILL the process is gone within milliseconds; this bounds the wait if it is not.
_AFTER_KILL_WAIT_S = 5.0

# The exit status a shell gives a command it cannot run; a hook that cannot be exec'd reports it.
_EXEC_FAILED_EXIT_CODE = 127

# Requests still out after the engine has exited end at once (their connections close); this bounds
# the wait for the tally if one does not.
_LOAD_SETTLE_S = 10.0


@dataclass(frozen=True)
class DeletionReport:
    """What happened, in seconds after the delete (t0). None: it did not happen."""

    grace_s: float
    hook_kind: str  # "exec", "sleep" or "none"
    hook_started_at: float | None
    hook_returned_at: float | None  # None when kubelet abandoned the hook (or there was none)
    hook_abandoned: bool
    hook_exit_code: int | None
    hook_stdout: str
    hook_stderr: str
    route_dropped_at: float | None
    sigterm_at: float
    sigkill_at: float | None
    engine_exited_at: float
    engine_exit_code: int | None  # negative: killed by that signal
    load: LoadTally | None
    t0: float  # time.monotonic() of the delete, to place load records on this clock

    @property
    def completed(self) -> int | None:
        return self.load.completed if self.load else None

    @property
    def cut(self) -> int | None:
        return self.load.cut if self.load else None

    @property
    def rejected(self) -> int | None:
        return self.load.rejected if self.load else None

    @property
    def refused(self) -> int | None:
        return self.load.refused if self.load else None

    def relative(self, monotonic_at: float | None) -> float | None:
        return None if monotonic_at is None else monotonic_at - self.t0


@dataclass(frozen=True)
class _HookResult:
    started_at: float
    returned_at: float | None
    abandoned: bool
    exit_code: int | None
    stdout: str
    stderr: str


def _run_exec_hook(argv: Sequence[str], grace_s: float, t0: float, env: Mapping[str, str] | None) -> _HookResult:
    started_at = time.monotonic() - t0
    try:
        hook = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                env=None if env is None else dict(os.environ, **env), start_new_session=True,
                                preexec_fn=die_with_parent_preexec())
    except OSError as exc:
        # Kubelet records a failed exec as a failed hook (FailedPreStopHook) and goes on to SIGTERM.
        return _HookResult(started_at, time.monotonic() - t0, False, _EXEC_FAILED_EXIT_CODE, "",
                           f"cannot exec {argv[0]}: {exc}")
    try:
        out, err = hook.communicate(timeout=max(0.0, t0 + grace_s - time.monotonic()))
        return _HookResult(started_at, time.monotonic() - t0, False, hook.returncode,
                           out.decode(errors="replace"), err.decode(errors="replace"))
    except subprocess.TimeoutExpired:
        # Kubelet gives up on the hook at G; its process group goes with the container.
        try:
            os.killpg(hook.pid, signal.SIGKILL)
        except ProcessLookupError:
            hook.kill()  # the group leader is gone already; make sure of the process itself
        out, err = hook.communicate()
        return _HookResult(started_at, None, True, hook.returncode,
                           out.decode(errors="replace"), err.decode(errors="replace"))


def delete_pod(engine: EngineProcess | subprocess.Popen, hook_argv: Sequence[str] | None = None,
               grace_s: float = 30.0, *, hook_sleep_s: float | None = None, load: LoadGenerator | None = None,
               route_drop_after_s: float | None = None, hook_env: Mapping[str, str] | None = None) -> DeletionReport:
    """Delete the Pod around `engine`, the way kubelet does; returns once the engine has exited.

    `hook_argv`: an exec preStop hook. `hook_sleep_s`: the native sleep action instead. Neither: no
    hook. `load`: a running LoadGenerator whose sending stops route_drop_after_s after the delete
    (at the end, if None) and whose tally the report carries. `hook_env`: added to the hook's env.
    """
    if hook_argv is not None and hook_sleep_s is not None:
        raise ValueError("a container has one preStop handler: hook_argv or hook_sleep_s, not both")
    process = engine.process if isinstance(engine, EngineProcess) else engine
    if process is None:
        raise ValueError("the engine was never started")

    t0 = time.monotonic()
    route_timer = None
    if load is not None and route_drop_after_s is not None:
        route_timer = threading.Timer(route_drop_after_s, load.stop_sending)
        route_timer.start()

    hook_kind = "none"
    hook: _HookResult | None = None
    hook_seconds = 0  # what kubelet subtracts from the grace: the hook's time, whole seconds
    if hook_argv is not None:
        hook_kind = "exec"
        hook = _run_exec_hook(hook_argv, grace_s, t0, hook_env)
        hook_seconds = math.floor(time.monotonic() - t0)
    elif hook_sleep_s is not None:
        hook_kind = "sleep"
        time.sleep(max(0.0, min(hook_sleep_s, grace_s)))
        hook_seconds = math.floor(time.monotonic() - t0)

    sigterm_at = time.monotonic() - t0
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    stop_grace_s = max(grace_s - hook_seconds, constants.KUBELET_MIN_STOP_GRACE_S) if hook_kind != "none" \
        else grace_s
    kill_at = t0 + sigterm_at + stop_grace_s

    sigkill_at = None
    try:
        process.wait(timeout=max(0.0, kill_at - time.monotonic()))
    except subprocess.TimeoutExpired:
        sigkill_at = time.monotonic() - t0
        process.kill()
        process.wait(timeout=_AFTER_KILL_WAIT_S)
    engine_exited_at = time.monotonic() - t0

    tally = None
    if load is not None:
        if route_timer is not None:
            route_timer.cancel()
        load.stop_sending()
        tally = load.wait(timeout_s=_LOAD_SETTLE_S)
    route_dropped_at = None
    if load is not None and load.stopped_sending_at is not None:
        route_dropped_at = load.stopped_sending_at - t0

    return DeletionReport(
        grace_s=grace_s,
        hook_kind=hook_kind,
        hook_started_at=hook.started_at if hook else (0.0 if hook_kind == "sleep" else None),
        hook_returned_at=hook.returned_at if hook else (sigterm_at if hook_kind == "sleep" else None),
        hook_abandoned=hook.abandoned if hook else False,
        hook_exit_code=hook.exit_code if hook else None,
        hook_stdout=hook.stdout if hook else "",
        hook_stderr=hook.stderr if hook else "",
        route_dropped_at=route_dropped_at,
        sigterm_at=sigterm_at,
        sigkill_at=sigkill_at,
        engine_exited_at=engine_exited_at,
        engine_exit_code=process.returncode,
        load=tally,
        t0=t0,
    )
