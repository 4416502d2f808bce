"""Whether a zero can be trusted: an idle read's work gauges must be newer than the previous read.

SGLang republishes its scheduler gauges from the scheduler's loop, between forward passes; a
long pass (a long prompt's prefill) holds them at their last value while the requests it just
received wait. Measured on SGLang 0.5.23: 16 long prompts out, the gauges read 0 for 2.33 s
(docs/engines.md). Two reads 1 s apart can both fall inside such a window, so a zero counts
only when the scheduler's heartbeat counter (gauges.SCHEDULER_HEARTBEATS), which the same loop
advances at most once a second, has moved since the reader's previous read: the scheduler ran
after that read, so the second of two idle reads reflects the scheduler after the first. (The
first of the two needs no such proof: whatever it missed, the second sees. So the reader's very
first read, with nothing to compare with, may read idle.) Series are compared by their label sets,
never by their place in the body (two schedulers' series can come in either order); NaN and
+-Inf never count as progress, now or as the previous read's value (-Inf, then any number); and a counter missing from an earlier complete read and present now
has not advanced: its first value proves nothing.

The reader applies it (modeldrain/hook/reader.py: EngineReader), so the hook's drain, the sidecar's
/v1/work and the retirement protocol's two reads all see the same outcome: `stale`, never idle.
"""

from __future__ import annotations

import math

from modeldrain.hook.gauges import SCHEDULER_HEARTBEATS
from modeldrain.hook.outcome import LabelledSeries, Read, ReadOutcome

__all__ = ["Heartbeat", "WITHOUT_HEARTBEAT", "remembered", "stale_zero"]

Heartbeat = LabelledSeries
# What the reader remembers of a complete read whose body carried no heartbeat: "seen without",
# unlike None, "no complete read yet". A counter that appears after such a read has not moved.
WITHOUT_HEARTBEAT: Heartbeat = ()


def remembered(last: Heartbeat | None, read: Read) -> Heartbeat | None:
    """What the reader keeps of `read` for the next comparison: its heartbeat when it has one;
    WITHOUT_HEARTBEAT after a complete read of a heartbeat engine that carries none; else `last`
    (a read that got no body says nothing about the counter)."""
    if read.heartbeat is not None:
        return read.heartbeat
    if read.complete and read.kind in SCHEDULER_HEARTBEATS:
        return WITHOUT_HEARTBEAT
    return last


def stale_zero(last: Heartbeat | None, read: Read) -> str | None:
    """Why `read`'s zero may be stale, or None when it can be trusted. `last`: what `remembered`
    kept of the reader's earlier reads (None: no earlier complete read)."""
    if read.outcome is not ReadOutcome.IDLE or read.kind not in SCHEDULER_HEARTBEATS:
        return None
    name = SCHEDULER_HEARTBEATS[read.kind]
    now = read.heartbeat
    if now is None:
        if not last:
            return None  # a release without the counter: the two reads' rule alone (docs/prestop.md)
        return f"every work gauge reads zero, but {name} is gone from the body: the zero may be stale"
    if any(not math.isfinite(value) for _, value in now):
        # NaN compares false both ways and +Inf never grows: neither can show the scheduler ran.
        return f"every work gauge reads zero, but {name} is not a finite number: the zero may be stale"
    if last is None:
        # The reader's first sight of it: this read can only be the first of two idle reads, and the
        # second must show the counter moved past this one's.
        return None
    if not last:
        return (f"every work gauge reads zero, but {name} has appeared since the previous read: a counter "
                "first seen has not advanced yet")
    if any(not math.isfinite(value) for _, value in last):
        # -Inf before: any finite value "grew" past it, which shows no more than a late series does.
        return (f"every work gauge reads zero, but {name} was not a finite number on the previous read: "
                "no advance can be measured from it")
    now_by_labels, last_by_labels = dict(now), dict(last)
    if len(now_by_labels) != len(now) or now_by_labels.keys() != last_by_labels.keys():
        return (f"every work gauge reads zero, but {name}'s series are not the ones of the previous read "
                f"({len(now)} against {len(last)}, compared by their labels): the zero may be stale")
    if any(not value > last_by_labels[labels] for labels, value in now_by_labels.items()):
        return (f"every work gauge reads zero, but {name} has not advanced on every scheduler since the previous "
                "read: the scheduler has not republished its gauges (a long forward pass?)")
    return None
