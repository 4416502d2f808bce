"""Child processes that cannot outlive the test or demo that started them.

Linux's PR_SET_PDEATHSIG makes the kernel SIGKILL the child when its parent thread dies, so even a
test run killed outright leaves no emulated engine or hook behind. Start children from a thread
that lives as long as they should (the main thread, in tests and the demo).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import signal
import subprocess
import sys
from typing import Callable

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def _die_with_parent() -> None:
    """Runs in the child between fork and exec."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def die_with_parent_preexec() -> Callable[[], None] | None:
    """The preexec_fn for Popen where the platform has it; None elsewhere."""
    return _die_with_parent if sys.platform.startswith("linux") else None


def stop_process(process: subprocess.Popen, term_wait_s: float, first_signal: int = signal.SIGTERM) -> int:
    """`first_signal`, then SIGKILL if it is still there after term_wait_s; returns its exit status."""
    if process.poll() is None:
        process.send_signal(first_signal)
        try:
            return process.wait(timeout=term_wait_s)
        except subprocess.TimeoutExpired:
            log.warning("pid %d outlived %s by %.1f s: SIGKILL", process.pid,
                        signal.Signals(first_signal).name, term_wait_s)
            process.kill()
    return process.wait()
