"""`make demo`: the same busy vLLM replica deleted twice, with the prestop hook and without.

An emulated vLLM engine serves steady requests of 2-10 s from a router. The Pod is deleted
through the kubelet emulation; the router learns of it ~1 s later and stops sending. With the hook,
kubelet waits for it before SIGTERM; without, SIGTERM comes at the delete and vLLM aborts every
request in flight. The demo prints the first deletion's timeline and both tallies side by side.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from emulation.engine_process import EngineProcess, EngineStartError
from emulation.kubelet import DeletionReport, delete_pod
from emulation.load import LoadGenerator, UniformDurations
from emulation.timeline import DeleteTally, delete_tally, render_timeline

GRACE_S = 30.0  # the operator's default terminationGracePeriodSeconds
ROUTE_LAG_S = 1.0  # how long the router takes to drop a deleted replica
WARMUP_S = 4.0  # load before the delete, so the replica is busy in a steady state
# Requests long enough that the replica is still busy when the route wait ends, so the hook's
# timeline shows it holding SIGTERM back until the work is done (~6 in flight against 8 slots).
DURATIONS = UniformDurations(2.0, 10.0)
RATE_PER_S = 1.0
MAX_RUNNING = "8"
SEED = 7  # the same arrivals and durations in both runs


def prestop_path() -> Path:
    return Path(sys.executable).parent / "prestop"


def _delete_busy_replica(hook: Path | None) -> DeletionReport:
    with EngineProcess("--kind", "vllm", "--max-running", MAX_RUNNING) as engine:
        load = LoadGenerator(engine.base_url, rate_per_s=RATE_PER_S, durations=DURATIONS, seed=SEED).start()
        time.sleep(WARMUP_S)
        stats = engine.stats()
        print(f"  replica busy: {stats['running']} running, {stats['waiting']} waiting; deleting the Pod…",
              flush=True)
        hook_argv = None
        if hook is not None:
            hook_argv = [str(hook), "--grace", f"{GRACE_S:g}", "--port", str(engine.port), "--engine", "vllm",
                         "--quiet"]
        return delete_pod(engine, hook_argv, GRACE_S, load=load, route_drop_after_s=ROUTE_LAG_S)


def _tally_table(with_hook: DeleteTally | None, without_hook: DeleteTally | None) -> str:
    def cell(tally: DeleteTally | None, field: str) -> str:
        return "-" if tally is None else str(getattr(tally, field))

    rows = [("requests the delete touched", "touched"), ("  completed", "completed"), ("  cut", "cut"),
            ("  rejected (HTTP 5xx)", "rejected"), ("  refused (nothing sent)", "refused"), ("  other", "other")]
    lines = [f"  {'':<30} {'with prestop':>12} {'no hook':>10}"]
    lines += [f"  {label:<30} {cell(with_hook, f):>12} {cell(without_hook, f):>10}" for label, f in rows]
    return "\n".join(lines)


def _summary(report: DeletionReport) -> str:
    return (f"  SIGTERM at {report.sigterm_at:.2f} s, engine gone at {report.engine_exited_at:.2f} s"
            + (f", SIGKILL at {report.sigkill_at:.2f} s" if report.sigkill_at is not None else ""))


def main() -> int:
    hook = prestop_path()
    print("modeldrain demo: deleting a busy emulated vLLM replica (grace 30 s, router drops it after 1 s)")
    print("Kubelet runs the preStop hook at the delete and sends SIGTERM when it returns; vLLM aborts every")
    print("request still in flight on SIGTERM. Times are seconds after the delete.\n")
    with_hook: DeletionReport | None = None
    try:
        if hook.exists():
            print(f"1) with the preStop hook: {hook} --grace 30 --port P --engine vllm --quiet")
            with_hook = _delete_busy_replica(hook)
            print(render_timeline(with_hook))
            print(_summary(with_hook) + "\n")
        else:
            print(f"1) with the preStop hook: SKIPPED, {hook} does not exist yet.\n"
                  "   The hook (package modeldrain/hook/) is not installed in this virtualenv; run `make venv` once it is.\n")
        print("2) no hook: SIGTERM at the delete")
        without_hook = _delete_busy_replica(None)
        print(render_timeline(without_hook))
        print(_summary(without_hook) + "\n")
    except EngineStartError as exc:
        print(f"demo: the emulated engine did not start: {exc}", file=sys.stderr)
        return 1
    print("How the requests in flight at the delete, or sent before the router dropped the replica, ended:")
    print(_tally_table(delete_tally(with_hook) if with_hook else None, delete_tally(without_hook)))
    if with_hook is None:
        print(f"\ndemo: ran without the hook: {hook} is missing.", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
