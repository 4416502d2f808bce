"""What the engine's own command says about it: whether it runs one half of a prefill/decode pair.

Spec "Drain read refusals": a prefill or decode replica is refused, and the refusal is read from the
member's own command. The sidecar sees the engine's argv only when the Pod shares its process
namespace (shareProcessNamespace); otherwise it knows what its own flags state (--engine and
--disaggregation-mode, which the operator renders from the same command). It says which of the
two it used, and a controller holds a member that can say neither.

A native sidecar starts before its engine, so /proc is scanned again (at most once per
`rescan_interval_s`) until an engine's argv appears; the command of a container does not change
across its restarts, so once found it is kept.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass
from typing import Callable

from modeldrain.hook.engine import EngineHint, hint_from_proc
from modeldrain.hook.gauges import Role
from modeldrain.sidecar.daemon_thread import run_in_daemon_thread

__all__ = ["CommandSource", "CommandWatch", "EngineCommand", "engine_command"]


class CommandSource(enum.Enum):
    CMDLINE = "cmdline"  # the engine's argv, read from /proc
    FLAG = "flag"  # the sidecar's --engine / --disaggregation-mode
    NONE = "none"  # neither: nothing says whether the engine is a prefill or decode server


@dataclass(frozen=True)
class EngineCommand:
    source: CommandSource
    disaggregated: bool | None  # None: not known (source NONE)
    evidence: tuple[str, ...]  # the words that say prefill or decode, each prefixed by where it was read


def engine_command(flags: EngineHint, proc: EngineHint) -> EngineCommand:
    """Both sources count, so a prefill or decode mark in either makes it disaggregated."""
    evidence = tuple(f"cmdline: {mark}" for mark in proc.disaggregation)
    if flags.role in (Role.PREFILL, Role.DECODE):
        evidence += (f"flag: --disaggregation-mode={flags.role.value}",)
    if proc.kind is not None:
        return EngineCommand(CommandSource.CMDLINE, bool(evidence), evidence)
    if flags.kind is not None or flags.role is not None:
        return EngineCommand(CommandSource.FLAG, bool(evidence), evidence)
    return EngineCommand(CommandSource.NONE, None, ())


class CommandWatch:
    """The engine's command as the sidecar knows it now; /proc is read again until the engine shows."""

    def __init__(self, flags: EngineHint, proc_root: str, *, rescan_interval_s: float,
                 clock: Callable[[], float] = time.monotonic):
        self._flags = flags
        self._proc_root = proc_root
        self._rescan_interval_s = rescan_interval_s
        self._clock = clock
        self._found: EngineHint | None = None
        self._scanned_at = -float("inf")
        self._current = engine_command(self._flags, EngineHint())

    async def current(self) -> EngineCommand:
        """The scan (a listing of /proc, a read per process) runs off the event loop; callers
        meanwhile get what the last scan found."""
        if self._found is None and self._clock() - self._scanned_at >= self._rescan_interval_s:
            self._scanned_at = self._clock()
            hint = await run_in_daemon_thread(lambda: hint_from_proc(self._proc_root), "proc-scan")
            if hint.kind is not None:
                self._found = hint
            self._current = engine_command(self._flags, hint)
        return self._current
