"""Repeated measurements as a median with its range, and the rule that calls a difference real.

The bench's repeats are paired: repeat k of every strategy runs the same seed (the same arrivals,
durations and router lag), and different repeats run different seeds. So two strategies are
compared repeat by repeat: a difference is real only when it has the same sign in every pair (the
range of the paired differences excludes zero). Anything the spread could flip is a tie. With
fewer than two pairs there is no spread to judge by, so nothing is called.
"""

from __future__ import annotations

import enum
import statistics
from dataclasses import dataclass
from typing import Iterable, Sequence

# A verdict needs a spread: at least this many pairs.
MIN_RUNS_TO_JUDGE = 2


@dataclass(frozen=True)
class Spread:
    median: float
    low: float
    high: float
    n: int

    @classmethod
    def of(cls, values: Iterable[float]) -> Spread:
        ordered = sorted(values)
        if not ordered:
            raise ValueError("no values")
        return cls(statistics.median(ordered), ordered[0], ordered[-1], len(ordered))

    def text(self, digits: int = 1, unit: str = "") -> str:
        """`12.3 (11.0–13.1)`; the range is left out when there is none."""
        median = f"{self.median:.{digits}f}{unit}"
        if self.n < 2 or self.low == self.high:
            return median
        return f"{median} ({self.low:.{digits}f}–{self.high:.{digits}f})"


class Verdict(enum.Enum):
    LOWER = "lower"
    HIGHER = "higher"
    TIE = "tie"
    UNJUDGED = "unjudged"  # too few runs for a spread


def compare_paired(a: Sequence[float], b: Sequence[float]) -> tuple[Verdict, Spread | None]:
    """Where `a` stands against `b`, pair by pair (a[k] with b[k]), and the spread of a − b."""
    if len(a) != len(b):
        raise ValueError(f"unpaired: {len(a)} against {len(b)} values")
    if len(a) < MIN_RUNS_TO_JUDGE:
        return Verdict.UNJUDGED, None
    differences = Spread.of([x - y for x, y in zip(a, b)])
    if differences.high < 0:
        return Verdict.LOWER, differences
    if differences.low > 0:
        return Verdict.HIGHER, differences
    return Verdict.TIE, differences
