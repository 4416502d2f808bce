"""A vLLM KV producer's zero: its connector may still hold blocks for the decoder.

A vLLM prefill server of a prefill/decode split (`--kv-transfer-config` with `kv_role`
`kv_producer`, or `kv_both`) finishes a request after its prefill: the request leaves both work
gauges, but its connector keeps the request's KV blocks until the decoder has pulled them
(NixlConnector's and MooncakeConnector's delayed free), or until vLLM's own lease on them ends
(constants.KV_PRODUCER_HOLD_S says which). Deleting it then fails or recomputes every pending
pull on the decoder. No vLLM release from 0.8 to 0.33 exports how many requests or blocks wait
to be sent (NixlConnector's metrics are transfer histograms and failure counters,
MooncakeConnector's the same or none), so the gauges cannot say it: an idle read of a producer
stands only once KV_PRODUCER_HOLD_S has passed since the last read that showed work, or that
showed a request finished since the read before it (vLLM's request counter moved). A producer
whose counter reads 0 has finished nothing, so nothing is parked: its idle read stands.

The reader applies it (modeldrain/hook/reader.py: EngineReader), so the hook's drain and the
sidecar's /v1/work read the same: `incomplete`, with the rule in words, never idle.
"""

from __future__ import annotations

import math

from modeldrain.hook.gauges import RESTART_COUNTERS, EngineKind
from modeldrain.hook.outcome import Read, ReadOutcome

__all__ = ["FINISHED_COUNTER", "ParkedSends"]

FINISHED_COUNTER = RESTART_COUNTERS[EngineKind.VLLM]


class ParkedSends:
    """What one reader remembers of a producer's reads: when work was last seen, and the request
    counter of the latest read that carried it. Fed every read, in order."""

    def __init__(self, producer: str, hold_s: float):
        self.producer = producer  # the role and connector, in words (engine.EngineHint.kv_producer)
        self.hold_s = hold_s
        self.last_work_at: float | None = None
        self._finished: float | None = None

    def observe(self, read: Read) -> str | None:
        """Remember what `read` shows; why its zero must not stand, or None when it may."""
        if read.kind is not EngineKind.VLLM:
            return None
        if read.outcome is ReadOutcome.BUSY:
            self.last_work_at = read.started_at
        finished = read.restart_counters.get(FINISHED_COUNTER)
        if read.complete:
            if finished is None or not math.isfinite(finished):
                if self.last_work_at is None:
                    self.last_work_at = read.started_at  # no counter: when the last request ended is unknown
            elif finished != self._finished and (finished != 0 or self._finished is not None):
                # a request finished since the previous read (or before the first: when is unknown)
                self.last_work_at = read.started_at
            self._finished = finished if finished is not None and math.isfinite(finished) else None
        if read.outcome is not ReadOutcome.IDLE or self.last_work_at is None:
            return None
        left_s = self.last_work_at + self.hold_s - read.started_at
        if left_s <= 0:
            return None
        return (f"every work gauge reads zero, but this vLLM is a KV producer ({self.producer}): its connector may "
                f"still hold finished requests' KV blocks for the decoder, and no gauge counts them; held "
                f"{self.hold_s:g} s (vLLM's own send lease) after the last read that showed work or a request "
                f"finished: {left_s:.1f} s left")
