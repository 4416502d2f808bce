"""When the hook was exec'd, on the monotonic clock.

kubelet's grace clock starts before the exec; Python's imports (and a bundle's unpacking)
come after it. The kernel records each process's start in /proc/<pid>/stat on the boot-time
clock, so the deadline is measured from there, never from the end of the imports.
"""

from __future__ import annotations

import os
import time

def process_start_boottime(pid: int | str = "self") -> float:
    """Seconds since boot at which `pid` started (field 22 of /proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        stat = f.read()
    # The command name (field 2) is in parentheses and may itself hold spaces or ')'.
    fields = stat[stat.rindex(b")") + 2 :].split()
    start_ticks = int(fields[19])
    return start_ticks / os.sysconf("SC_CLK_TCK")


def exec_started_at(pid: int | str = "self") -> float:
    """The monotonic time at which `pid` started; now, if /proc cannot say."""
    now_mono = time.monotonic()
    try:
        started_boot = process_start_boottime(pid)
        now_boot = time.clock_gettime(time.CLOCK_BOOTTIME)
    except (OSError, ValueError, IndexError):
        return now_mono
    age_s = max(0.0, now_boot - started_boot)
    return now_mono - age_s
