"""Where the current run of idle reads began: so a controller sees reads other callers took.

Spec "Reading member work": a member must read idle twice, and a read between them that finds work
holds the operation. Other callers (a peer, a second controller replica) take reads too, so the
controller's two reads need not have consecutive seqs; each answer therefore says the seq of the
first read of the unbroken run of complete idle reads, in one engine incarnation, that it ends.
Two idle answers F and S belong to one run exactly when S's run began at or before F's seq.

Pure: fed one read per seq, in order.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class IdleRunTracker:
    _since_seq: int | None = None
    _incarnation: int | None = None

    def observe(self, seq: int, *, idle: bool, incarnation: int) -> int | None:
        """The seq where the idle run this read belongs to began; None when this read is not idle."""
        if not idle:
            self._since_seq = None
        elif self._since_seq is None or incarnation != self._incarnation:
            self._since_seq = seq
        self._incarnation = incarnation
        return self._since_seq
