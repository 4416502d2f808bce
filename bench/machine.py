"""The machine a bench ran on, and how busy it was: the lines RESULTS.md opens with.

Other work on the machine (another test suite, a build) skews timings. `CpuMeter` tells it apart:
the whole machine's busy CPU time from /proc/stat, less what this process and the children it
has waited for used, is what everything else took while the part ran.
"""

from __future__ import annotations

import os
import platform
import sys
import time
from dataclasses import dataclass

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass  # no /proc/cpuinfo (not Linux): fall back to what platform knows
    return platform.processor() or "unknown"


def usable_cpus() -> int:
    """What `nproc` prints: the CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def describe(command: str) -> dict:
    return {
        "nproc": usable_cpus(),
        "cpu_model": cpu_model(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "command": command,
    }


def _machine_busy_s() -> tuple[float, float]:
    """(busy, of which stolen by the hypervisor), in CPU-seconds since boot."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return (user + nice + system + irq + softirq + steal) / _CLOCK_TICKS, steal / _CLOCK_TICKS


def _ours_s() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


@dataclass(frozen=True)
class CpuUse:
    wall_s: float
    ours_cores: float  # this process and its waited-for children, in cores on average
    others_cores: float  # everything else on the machine, in cores on average
    steal_cores: float  # of others: time the hypervisor gave this VM's CPUs to someone else
    load_average: float  # 1-minute load average at the end

    def as_dict(self) -> dict:
        return {"wall_s": round(self.wall_s, 1), "ours_cores": round(self.ours_cores, 2),
                "others_cores": round(self.others_cores, 2), "steal_cores": round(self.steal_cores, 2),
                "load_average": self.load_average}


class CpuMeter:
    def __init__(self) -> None:
        self._wall = time.monotonic()
        self._busy, self._steal = _machine_busy_s()
        self._ours = _ours_s()

    def read(self) -> CpuUse:
        wall_s = max(1e-6, time.monotonic() - self._wall)
        busy, steal = _machine_busy_s()
        busy_s, steal_s = busy - self._busy, steal - self._steal
        ours_s = _ours_s() - self._ours
        return CpuUse(wall_s, ours_s / wall_s, max(0.0, busy_s - ours_s) / wall_s, steal_s / wall_s,
                      round(os.getloadavg()[0], 2))
