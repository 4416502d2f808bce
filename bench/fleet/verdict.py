"""The issue's target, judged per load: among the strategies that cut and fail nothing, does prestop
end the rollout soonest and hold the fewest accelerator-hours? A yes or a finding, with the reason.

Figures are lists over the same seeds for every strategy, so the comparison is bench/spread.py's
paired rule: a difference is real only when every seed agrees on its sign.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from bench.spread import Spread, Verdict, compare_paired

PRESTOP_PREFIX = "prestop"


@dataclass(frozen=True)
class Row:
    strategy: str
    wall_s: Sequence[float]
    held_idle_h: Sequence[float]
    cut: Sequence[float]
    failed: Sequence[float]

    @property
    def clean(self) -> bool:
        """Cut and failed nothing in any seed."""
        return max(self.cut) == 0 and max(self.failed) == 0

    @property
    def is_prestop(self) -> bool:
        return self.strategy.startswith(PRESTOP_PREFIX)


def _hours(values: Sequence[float]) -> str:
    return f"{Spread.of(values).median / 3600:.2f} h"


def _lost(row: Row) -> str:
    return f"cuts {Spread.of(row.cut).median:.0f}, fails {Spread.of(row.failed).median:.0f}"


def judge(rows: Sequence[Row]) -> tuple[bool, str]:
    """(target met, the sentence for the report)."""
    clean = [r for r in rows if r.clean]
    if not clean:
        return False, "**finding:** no strategy cuts and fails nothing on this load."
    ours = [r for r in clean if r.is_prestop]
    if not ours:
        worst = [r for r in rows if r.is_prestop]
        why = "; ".join(f"{r.strategy} {_lost(r)}" for r in worst)
        return False, (f"**finding:** prestop is not among the strategies that cut and fail nothing "
                       f"({', '.join(r.strategy for r in clean)}): {why}.")
    best = min(ours, key=lambda r: (Spread.of(r.wall_s).median, Spread.of(r.held_idle_h).median))
    lossy_prestop = "".join(f"; {r.strategy} {_lost(r)}: requests outlast its G − 5" for r in rows
                            if r.is_prestop and not r.clean)
    others = [r for r in clean if not r.is_prestop]
    if not others:
        lossy = min((r for r in rows if not r.clean), key=lambda r: Spread.of(r.wall_s).median, default=None)
        cost = "" if lossy is None else (f". What finishing every request costs: {_hours(best.wall_s)} against "
                                          f"{_hours(lossy.wall_s)} for {lossy.strategy}, which {_lost(lossy)}")
        return True, (f"**target met, trivially:** {best.strategy} is the only strategy that cuts and fails nothing"
                      f"{lossy_prestop}{cost}.")
    beaten = []
    for other in others:
        for label, ours_v, theirs_v in (("rollout time", best.wall_s, other.wall_s),
                                        ("held accelerator-hours", best.held_idle_h, other.held_idle_h)):
            verdict, _ = compare_paired(ours_v, theirs_v)
            if verdict is not Verdict.LOWER:
                beaten.append(f"{label} against {other.strategy}: {verdict.value}")
    runner_up = min(others, key=lambda r: Spread.of(r.wall_s).median)
    if not beaten:
        return True, (f"**target met:** among {len(clean)} strategies that cut and fail nothing, {best.strategy} "
                      f"ends the rollout soonest ({_hours(best.wall_s)}; next {runner_up.strategy}, "
                      f"{_hours(runner_up.wall_s)}) and holds the fewest accelerator-hours "
                      f"({Spread.of(best.held_idle_h).median:.2f} against "
                      f"{min(Spread.of(r.held_idle_h).median for r in others):.2f} at best){lossy_prestop}.")
    return False, f"**finding:** {best.strategy} is not lower in every seed: " + "; ".join(beaten) + "."
