"""Markdown tables for RESULTS.md: numbers with their spread, and the paired verdict between strategies.

The verdict rule (bench/spread.py): repeats are paired by seed, and a difference is named only
when it has the same sign in every pair; a difference in seconds under MIN_SECONDS_DIFFERENCE is
not named either.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from bench.spread import MIN_RUNS_TO_JUDGE, Spread, Verdict, compare_paired

# Seconds differences smaller than this are not named even when the ranges do not overlap: a
# deletion's timing has this much grain of its own (kubelet counts the hook's time in whole
# seconds, so a hook returning at 25.04 s moves SIGKILL from 30.00 to 30.04 s; process exits
# are noticed by polling), and no Pod's cost turns on it.
MIN_SECONDS_DIFFERENCE = 0.25

DASH = "–"


def count(values: list[float]) -> str:
    spread = Spread.of(values)
    digits = 0 if float(spread.median).is_integer() else 1
    if spread.n < 2 or spread.low == spread.high:
        return f"{spread.median:.{digits}f}"
    return f"{spread.median:.{digits}f} ({spread.low:.0f}{DASH}{spread.high:.0f})"


def number(value: float | None, digits: int = 1) -> str:
    """One figure to `digits` places, or a dash where there is none."""
    return DASH if value is None else f"{value:.{digits}f}"


def seconds(values: list[float], digits: int = 1) -> str:
    return Spread.of(values).text(digits) if values else DASH


def ms(values: list[float], digits: int = 0) -> str:
    return Spread.of([v * 1000 for v in values]).text(digits) + " ms"


def table(header: list[str], rows: Iterable[list[str]], align: str | None = None) -> list[str]:
    align = align or "l" + "r" * (len(header) - 1)
    marks = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(marks) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def metric(cells: Sequence[dict], key: str) -> list[float]:
    return [float(c[key]) for c in cells]


def killed(cell: dict) -> float:
    """1 when kubelet had to SIGKILL the engine, else 0: a metric like any other."""
    return 0.0 if cell.get("sigkill_at_s") is None else 1.0


@dataclass(frozen=True)
class Judged:
    """One metric the verdict looks at: how to read it from a cell, which way is better, its label."""

    read: Callable[[dict], float]
    lower_is_better: bool
    label: str
    is_seconds: bool

    @classmethod
    def key(cls, key: str, lower_is_better: bool, label: str) -> "Judged":
        return cls(lambda c: float(c[key]), lower_is_better, label, key.endswith("_s"))


def paired(ours: Sequence[dict], theirs: Sequence[dict]) -> tuple[list[dict], list[dict]]:
    """The repeats both strategies ran (a failed cell leaves its pair out), in repeat order."""
    by_repeat = {c["repeat"]: c for c in theirs}
    pairs = [(c, by_repeat[c["repeat"]]) for c in sorted(ours, key=lambda c: c["repeat"]) if c["repeat"] in by_repeat]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def verdict(ours: Sequence[dict], theirs: Sequence[dict], judged: Sequence[Judged]) -> str:
    """`**better:** …; **worse:** …`, `tie`, or `not judged (one run)`: ours against theirs."""
    ours, theirs = paired(ours, theirs)
    if len(ours) < MIN_RUNS_TO_JUDGE:
        return "not judged (one run)"
    better: list[str] = []
    worse: list[str] = []
    for j in judged:
        a, b = [j.read(c) for c in ours], [j.read(c) for c in theirs]
        result, difference = compare_paired(a, b)
        if result is Verdict.TIE or difference is None:
            continue
        if j.is_seconds and abs(difference.median) < MIN_SECONDS_DIFFERENCE:
            continue
        is_better = (result is Verdict.LOWER) == j.lower_is_better
        digits = 1 if j.is_seconds else 0
        text = f"{j.label} {Spread.of(a).median:.{digits}f} vs {Spread.of(b).median:.{digits}f}"
        (better if is_better else worse).append(text)
    if not better and not worse:
        return "tie"
    parts = []
    if better:
        parts.append("**better:** " + ", ".join(better))
    if worse:
        parts.append("**worse:** " + ", ".join(worse))
    return "; ".join(parts)
