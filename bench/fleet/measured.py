"""The per-deletion figures the fleet simulation draws from: what they are, and the same pools out of
bench/results.json's drain matrix (eight deletions at a time), which the report sets beside the
fleet's own (bench/fleet/solo.py: one at a time, as each Pod's deletion has its node to itself).

Nothing here is typed in: each distribution is the pool of one measured quantity over real
deletions (emulated vLLM, kubelet emulation):

- abort exit lag: SIGTERM to the engine's exit, vLLM's default, with nothing running at SIGTERM
  (with requests running, vLLM answers them nothing and stays until their clients hang up: the
  lag then counts from the last one's leaving, bench/fleet/deletion.py);
- the `--shutdown-timeout` teardown, two pools, as vLLM tears down: SIGTERM to exit when SIGTERM
  found nothing running (~4.3 s), and the last drained request's end to exit when it found work
  (~7 s). One pool of the first kind had the drains of KServe's and llm-d's settings under long
  requests leave ~3 s early;
- prestop's return, two pools, as the hook reads: after its route wait when the replica was quiet
  by then (the first read and its confirmation 1 s later: ~1.05 s), and after the last request when
  that ended later (the busy cadence's phase, then the confirmation: ~1.1-1.35 s). One pool for both
  drew the slower second kind for quiet deletions: a real roll of quiet ones came in below its range;
- the router's lag: the range it was drawn from.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from modeldrain.hook.constants import ROUTE_WAIT_S

# The drain matrix's scenarios where the engine exits on its own (a hung one is SIGKILLed; a wrong
# port makes prestop fall back, which is not the drain being modelled).
_EXITING_SCENARIOS = ("idle", "steady short", "mixed ≤20 s", "long > G−5")
# prestop's drains that ended idle: the ones whose return followed the last request.
_PRESTOP_IDLE_SCENARIOS = ("idle", "steady short", "mixed ≤20 s")
_SHUTDOWN_TIMEOUT_FAMILY = "shutdown timeout"
# Measured's timing pools, by field name: what the report lists and the real-engine tier fills.
POOLS = ("abort_exit_lag_s", "teardown_idle_s", "teardown_after_drain_s", "prestop_quiet_return_s",
         "prestop_last_return_s")


class MissingMeasurement(ValueError):
    """results.json lacks a part the fleet simulation draws from."""


@dataclass(frozen=True)
class Measured:
    abort_exit_lag_s: tuple[float, ...]  # from SIGTERM, or from the last waiting client's leaving
    teardown_idle_s: tuple[float, ...]  # --shutdown-timeout, nothing running at SIGTERM: from SIGTERM
    teardown_after_drain_s: tuple[float, ...]  # --shutdown-timeout, work at SIGTERM: from the drain's end
    prestop_quiet_return_s: tuple[float, ...]  # after the route wait, nothing running by then
    prestop_last_return_s: tuple[float, ...]  # after the last request, which ended past the route wait
    route_lag_range_s: tuple[float, float]
    sources: tuple[str, ...]  # which results.json cells each pool came from, for the report

    def as_dict(self) -> dict:
        return {f.name: list(getattr(self, f.name)) for f in fields(self)}


def pool_label(name: str) -> str:
    """A pool's field name as the report words it: "abort exit lag"."""
    return name.removesuffix("_s").replace("_", " ")


def good(cell: dict) -> bool:
    """A deletion that ran and ended with the engine's own exit (not kubelet's SIGKILL): one whose
    timings a pool may hold."""
    return not cell.get("error") and cell.get("sigkill_at_s") is None


def drained_work(cell: dict) -> bool:
    """A `--shutdown-timeout` deletion whose SIGTERM found requests running, all of which finished (none
    failed at the timeout): its drain ended with the last one, and the teardown counts from there."""
    last = cell["last_completed_at_s"]
    return last is not None and last > cell["sigterm_at_s"] and not cell.get("failed")


def prestop_returns(drained: list[dict]) -> tuple[list[float], list[float]]:
    """prestop's return, from deletions it drained to idle: after its route wait where the replica was
    quiet by then, and after the last request where that ended later."""
    quiet = [c["sigterm_at_s"] - ROUTE_WAIT_S for c in drained if (c["last_completed_at_s"] or 0.0) <= ROUTE_WAIT_S]
    last = [c["sigterm_at_s"] - c["last_completed_at_s"] for c in drained
            if (c["last_completed_at_s"] or 0.0) > ROUTE_WAIT_S]
    return quiet, last


def teardowns_after_drain(flagged: list[dict]) -> list[float]:
    """The last drained request's end to the exit, of the `--shutdown-timeout` deletions that drained work."""
    return [c["engine_exited_at_s"] - c["last_completed_at_s"] for c in flagged if drained_work(c)]


def _pool(name: str, values: list[float]) -> tuple[float, ...]:
    if not values:
        raise MissingMeasurement(f"bench/results.json has no cells for {name}: run `python -m bench.run "
                                 "--parts drain,configurations` first")
    return tuple(round(v, 3) for v in values)


def from_results(results: dict) -> Measured:
    """The pools out of a results.json document (its `drain` and `configurations` parts)."""
    try:
        drain = results["drain"]
        configurations = results["configurations"]["cells"]
    except KeyError as exc:
        raise MissingMeasurement(f"bench/results.json lacks the {exc.args[0]!r} part the fleet draws from") from None
    matrix = [c for c in drain["cells"] if good(c)]
    exiting = [c for c in matrix if c["scenario"] in _EXITING_SCENARIOS]
    abort = [c["engine_exited_at_s"] - c["sigterm_at_s"] for c in exiting if c["cut"] == 0]
    drained = [c for c in matrix if c["strategy"] == "prestop" and c["scenario"] in _PRESTOP_IDLE_SCENARIOS
               and c["hook_outcome"] == "idle"]
    quiet, last = prestop_returns(drained)
    flagged = [c for c in configurations if c.get("family") == _SHUTDOWN_TIMEOUT_FAMILY and good(c)
               and "--shutdown-timeout" in c["strategy"]]
    teardown = [c["engine_exited_at_s"] - c["sigterm_at_s"] for c in flagged if c["scenario"] == "idle"]
    after_drain = teardowns_after_drain(flagged)
    low, high = drain["settings"]["route_lag_range_s"]
    return Measured(
        abort_exit_lag_s=_pool("vLLM's abort exit with nothing running (drain matrix)", abort),
        teardown_idle_s=_pool("vLLM's --shutdown-timeout teardown (configurations, idle)", teardown),
        teardown_after_drain_s=_pool("vLLM's --shutdown-timeout teardown after a drain of work (configurations)",
                                     after_drain),
        prestop_quiet_return_s=_pool("prestop's return after a quiet route wait (drain matrix)", quiet),
        prestop_last_return_s=_pool("prestop's return after the last request (drain matrix)", last),
        route_lag_range_s=(float(low), float(high)),
        sources=(f"abort exit lag: {len(abort)} drain-matrix deletions with nothing running at SIGTERM "
                 f"({', '.join(_EXITING_SCENARIOS)})",
                 f"teardown with nothing running: {len(teardown)} idle shutdown-timeout deletions",
                 f"teardown after a drain of work: {len(after_drain)} shutdown-timeout deletions whose SIGTERM "
                 "found requests running, all finished",
                 f"prestop's return after a quiet route wait: {len(quiet)} drain-matrix prestop deletions",
                 f"prestop's return after the last request: {len(last)} drain-matrix prestop deletions"),
    )


# The real-engine tier's loads where prestop's drain is the one modelled: a wrong port makes it fall
# back, and a slow router's late arrivals end its reads out of step with the last request.
_REAL_DRAIN_SCENARIOS = ("idle", "steady short", "mixed ≤20 s")


def from_real_engine_matrix(results: dict, fallback: Measured) -> Measured:
    """The same pools from the real-engine tier's real vLLM deletions (results.json's
    `real_engine_matrix`, bench/engines/matrix.py), each the emulator's (`fallback`) where the tier has
    no deletion that shows it; `sources` says which is which."""
    cells = [c for c in results.get("real_engine_matrix", {}).get("cells", [])
             if c.get("backend") == "real" and c.get("engine") == "vllm" and good(c)]
    flagged = [c for c in cells if "--shutdown-timeout" in c["strategy"]]
    aborting = [c for c in cells if c not in flagged and c["scenario"] in _REAL_DRAIN_SCENARIOS]
    drained = [c for c in aborting + flagged if c["strategy"].startswith("prestop") and c["hook_outcome"] == "idle"
               and c["scenario"] in _REAL_DRAIN_SCENARIOS]
    quiet, last = prestop_returns(drained)
    found = {
        "abort_exit_lag_s": [c["engine_exited_at_s"] - c["sigterm_at_s"] for c in aborting if c["cut"] == 0],
        "teardown_idle_s": [c["engine_exited_at_s"] - c["sigterm_at_s"] for c in flagged
                            if (c["last_completed_at_s"] or 0.0) <= c["sigterm_at_s"] and not c.get("failed")],
        "teardown_after_drain_s": teardowns_after_drain(flagged),
        "prestop_quiet_return_s": quiet,
        "prestop_last_return_s": last,
    }
    pools, sources = {}, []
    for name, values in found.items():
        label = pool_label(name)
        if values:
            pools[name] = tuple(round(v, 3) for v in values)
            sources.append(f"{label}: {len(values)} real vLLM deletion{'s' if len(values) > 1 else ''}")
        else:
            pools[name] = getattr(fallback, name)
            sources.append(f"{label}: the emulator's (the real-engine tier has no deletion that shows it)")
    return Measured(**pools, route_lag_range_s=fallback.route_lag_range_s, sources=tuple(sources))
