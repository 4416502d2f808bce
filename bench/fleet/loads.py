"""What one replica serves while a fleet turns over: request durations and the arrival rate per replica.

The durations are those of real serving, not of the emulator's test loads: a chat answer is a few
hundred tokens (1–12 s at the 30–100 tokens/s a loaded replica streams), a long generation
(reasoning, code, a summary) a few thousand (20–120 s); the mixed tail is one request in ten long.
These are stated assumptions, parameters like the rate; the per-deletion figures they combine with
are measured (measured.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from emulation.load import DEFAULT_REQUEST_TIMEOUT_S, Durations, MixedDurations, UniformDurations

SHORT_CHAT_S = (1.0, 12.0)
LONG_GENERATION_S = (20.0, 120.0)
# The mixed tail's share of long generations.
MIXED_LONG_SHARE = 0.1


@dataclass(frozen=True)
class Load:
    name: str
    rate_per_s: float  # Poisson arrivals at one replica, until the router drops it
    durations: Durations
    # The router's: the bench's router gives up after this long, as real ones do after a few minutes.
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S

    def __post_init__(self) -> None:
        if self.rate_per_s < 0:
            raise ValueError(f"{self.name}: the arrival rate cannot be negative")

    @property
    def longest_s(self) -> float:
        """The longest request: a request that started this long before the delete has ended by it."""
        if isinstance(self.durations, UniformDurations):
            return self.durations.high_s
        return max(high for _, _, high in self.durations.parts)

    @property
    def mean_s(self) -> float:
        if isinstance(self.durations, UniformDurations):
            return (self.durations.low_s + self.durations.high_s) / 2
        total = sum(w for w, _, _ in self.durations.parts)
        return sum(w * (low + high) / 2 for w, low, high in self.durations.parts) / total

    def durations_text(self) -> str:
        if isinstance(self.durations, UniformDurations):
            return f"{self.durations.low_s:g}–{self.durations.high_s:g}"
        total = sum(w for w, _, _ in self.durations.parts)
        return ", ".join(f"{w / total:.0%} {low:g}–{high:g}" for w, low, high in self.durations.parts)

    def describe(self) -> str:
        return f"{self.rate_per_s:g} req/s per replica, ~{self.rate_per_s * self.mean_s:.0f} in flight"


def mix(long_share: float) -> Durations:
    """Short chat with this share of long generations (0: all chat, 1: all long)."""
    if not 0.0 <= long_share <= 1.0:
        raise ValueError(f"a share is within 0–1, not {long_share}")
    if long_share == 0.0:
        return UniformDurations(*SHORT_CHAT_S)
    if long_share == 1.0:
        return UniformDurations(*LONG_GENERATION_S)
    return MixedDurations(((1.0 - long_share, *SHORT_CHAT_S), (long_share, *LONG_GENERATION_S)))


# Rates for about 8 requests in flight per replica on each shape (a replica busy, not saturated).
IN_FLIGHT_TARGET = 8.0


def steady(name: str, durations: Durations, in_flight: float = IN_FLIGHT_TARGET) -> Load:
    """A load of these durations at the rate that keeps `in_flight` requests running (Little's law)."""
    probe = Load(name, 1.0, durations)
    return Load(name, round(in_flight / probe.mean_s, 3), durations)


LOADS: tuple[Load, ...] = (
    steady("short chat", mix(0.0)),
    steady("mixed tail", mix(MIXED_LONG_SHARE)),
    steady("long generation", mix(1.0)),
)
# The plot's x axis: the share of long generations.
LONG_SHARES = (0.0, 0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0)
