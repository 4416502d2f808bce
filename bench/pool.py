"""Deletions run concurrently, longest first, each wholly inside one worker thread.

A deletion is mostly waiting (timers, sleeps, a few requests a second), so many run at once on two
cores. Each runs in one thread because the emulated engine (and kubelet's hook) die with the
thread that started them. A deletion that raises is recorded with its error, not raised: one bad
cell must not end a run of hundreds.
"""

from __future__ import annotations

import traceback
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Callable, Protocol, Sequence


class Job(Protocol):
    def expected_s(self) -> float:
        """A rough duration, to start the longest first."""
        ...

    def key(self) -> dict:
        """What identifies it in the results (family, scenario, strategy, repeat, ...)."""
        ...


def run_jobs(jobs: Sequence[Job], run: Callable[[Job], dict], workers: int,
             progress: Callable[[str], None] | None = None) -> list[dict]:
    """Every job's `key()` merged with what `run` returned (or its error), in the order given."""
    order = sorted(range(len(jobs)), key=lambda i: jobs[i].expected_s(), reverse=True)
    results: dict[int, dict] = {}

    def one(index: int) -> dict:
        job = jobs[index]
        try:
            return {**job.key(), **run(job), "error": None}
        except Exception as exc:  # recorded in the results and the report, never lost
            return {**job.key(), "error": "".join(traceback.format_exception_only(type(exc), exc)).strip()}

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="bench-job") as pool:
        futures = {pool.submit(one, i): i for i in order}
        for done, future in enumerate(as_completed(futures), 1):
            index = futures[future]
            results[index] = future.result()
            if progress:
                result = results[index]
                status = f"ERROR {result['error']}" if result["error"] else "done"
                progress(f"[{done}/{len(jobs)}] {' '.join(str(v) for v in jobs[index].key().values())}: {status}")
    return [results[i] for i in range(len(jobs))]
