"""Whether a zero can be trusted: an idle read's work gauges must be newer than the previous read.

SGLang republishes its scheduler gauges from the scheduler's loop, between forward passes; a
long pass (a long prompt's prefill) holds them at their last value while the requests it just
received wait. Measured on SGLang 0.5.23: 16 long prompts out, the gauges read 0 for 2.33 s
(docs/engines.md). Two reads 1 s apart can both fall inside such a window, so a zero counts
only when the scheduler's heartbeat counter (gauges.SCHEDULER_HEARTBEATS), which the same loop
advances at most once a second, has moved since the reader's previous read: the scheduler ran
after that read, so the second of two idle reads reflects the scheduler after the first. (The
first of the two needs no such proof: whatever it missed, the second sees. So the reader's very
first read, with nothing to compare with, may read idle.)

The reader applies it (modeldrain/hook/reader.py: EngineReader), so the hook's drain, the sidecar's
/v1/work and the retirement protocol's two reads all see the same outcome: `stale`, never idle.
"""

from __future__ import annotations

from modeldrain.hook.gauges import SCHEDULER_HEARTBEATS
from modeldrain.hook.outcome import Read, ReadOutcome

Heartbeat = tuple[float, ...]


def stale_zero(last: Heartbeat | None, read: Read) -> str | None:
    """Why `read`'s zero may be stale, or None when it can be trusted. `last`: the heartbeat of the
    reader's latest earlier read that carried one (None: no earlier read did)."""
    if read.outcome is not ReadOutcome.IDLE or read.kind not in SCHEDULER_HEARTBEATS:
        return None
    name = SCHEDULER_HEARTBEATS[read.kind]
    now = read.heartbeat
    if now is None:
        if last is None:
            return None  # a release without the counter: the two reads' rule alone (docs/prestop.md)
        return f"every work gauge reads zero, but {name} is gone from the body: the zero may be stale"
    if last is None:
        # The reader's first sight of it: this read can only be the first of two idle reads, and the
        # second must show the counter moved past this one's.
        return None
    if len(now) != len(last):
        return (f"every work gauge reads zero, but {name} has {len(now)} series against {len(last)} before: "
                "the zero may be stale")
    if any(value <= before for value, before in zip(now, last)):
        return (f"every work gauge reads zero, but {name} has not advanced on every scheduler since the previous "
                "read: the scheduler has not republished its gauges (a long forward pass?)")
    return None
