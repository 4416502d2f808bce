"""Drain every configuration (issue 10): the families of deletions beyond the vLLM drain matrix.

- split roles: SGLang prefill and decode at G = 30 and 45, with and without the role reserve;
- leader and worker: a multi-Pod replica's worker, following its leader or not;
- shutdown timeout: `sleep` + vLLM's `--shutdown-timeout`, as users run it, against prestop;
- return lag: the last request's end to the hook's return, at the new and the old busy cadence.

The first three families' deletions share one pool (they are mostly waiting), longest first. The
return lag is a timing, so its deletions run afterwards in a small pool of their own: on this
2-core machine, 24 deletions at a time added ~0.2 s of scheduling delay to every lag (median
1.46 s at 24 at a time, 1.22 s at 2 and 1.24 s at 4, the same 8 seeds). Each family's module says
what it measures and why. Wiring only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from bench.drains import leader_worker, return_lag, shutdown_timeout, split_roles
from bench.pool import run_jobs

# Concurrent deletions. A deletion is mostly waiting (the drain matrix's 8 at a time used ~0.2 of
# a core); the busiest here (the return-lag cells, a read every 0.25 s) cost the engine and the
# hook a few ms of CPU a read. The part's CPU line in RESULTS.md shows what they used.
DEFAULT_JOBS = 24

# Concurrent return-lag deletions: few enough that the machine's load does not show in the lag.
LAG_JOBS = 4


def all_cells(repeats: int | None, quick: bool) -> list[Any]:
    """Every family's cells but the return lag's; `repeats` None: each family's own default."""
    return [*split_roles.cells(repeats, quick), *leader_worker.cells(repeats, quick),
            *shutdown_timeout.cells(repeats, quick)]


def _runner(prestop: Path) -> Callable[[Any], dict]:
    by_type: dict[type, Callable[[Any, Path], dict]] = {split_roles.Cell: split_roles.run, leader_worker.Cell: leader_worker.run,
               shutdown_timeout.Cell: shutdown_timeout.run, return_lag.Cell: return_lag.run}
    return lambda cell: by_type[type(cell)](cell, prestop)


def run(prestop: Path, repeats: int | None, quick: bool, jobs: int = DEFAULT_JOBS,
        progress: Callable[[str], None] | None = None) -> dict:
    cells, lag_cells = all_cells(repeats, quick), return_lag.cells(repeats, quick)
    lag_jobs = min(jobs, LAG_JOBS)
    if progress:
        progress(f"drain configurations: {len(cells)} deletions, {jobs} at a time, then {len(lag_cells)} "
                 f"return-lag deletions, {lag_jobs} at a time; prestop = {prestop}")
    results = run_jobs(cells, _runner(prestop), jobs, progress)
    results += run_jobs(lag_cells, _runner(prestop), lag_jobs, progress)
    return {
        "settings": {"jobs": jobs, "lag_jobs": lag_jobs, "quick": quick, "repeats": {
            split_roles.FAMILY: repeats or split_roles.REPEATS[quick],
            leader_worker.FAMILY: repeats or leader_worker.REPEATS[quick],
            shutdown_timeout.FAMILY: repeats or shutdown_timeout.REPEATS[quick],
            return_lag.FAMILY: repeats or return_lag.REPEATS[quick],
            "idle return": return_lag.IDLE_REPEATS[quick]}},
        "cells": results,
    }
