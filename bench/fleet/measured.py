"""The per-deletion figures the fleet simulation draws from, read out of bench/results.json.

Nothing here is typed in: each distribution is the pool of one measured quantity over the drain
matrix's and the shutdown-timeout family's real deletions (emulated vLLM, kubelet emulation):

- abort exit lag: SIGTERM to the engine's exit, vLLM's default (abort every request, then exit);
- drain teardown: SIGTERM to exit of an idle engine under `--shutdown-timeout` (the teardown that
  follows a drain, busy or not);
- prestop's return: the later of its route wait's end and the last request's end, to SIGTERM
  (the hook's reads noticing idle and returning);
- the router's lag: the range it was drawn from.
"""

from __future__ import annotations

from dataclasses import dataclass

from modeldrain.hook.constants import ROUTE_WAIT_S

# The drain matrix's scenarios where the engine exits on its own (a hung one is SIGKILLed; a wrong
# port makes prestop fall back, which is not the drain being modelled).
_EXITING_SCENARIOS = ("idle", "steady short", "mixed ≤20 s", "long > G−5")
# prestop's drains that ended idle: the ones whose return followed the last request.
_PRESTOP_IDLE_SCENARIOS = ("idle", "steady short", "mixed ≤20 s")
_SHUTDOWN_TIMEOUT_FAMILY = "shutdown timeout"


class MissingMeasurement(ValueError):
    """results.json lacks a part the fleet simulation draws from."""


@dataclass(frozen=True)
class Measured:
    abort_exit_lag_s: tuple[float, ...]
    drain_teardown_s: tuple[float, ...]
    prestop_return_s: tuple[float, ...]
    route_lag_range_s: tuple[float, float]
    sources: tuple[str, ...]  # which results.json cells each pool came from, for the report

    def as_dict(self) -> dict:
        return {"abort_exit_lag_s": list(self.abort_exit_lag_s), "drain_teardown_s": list(self.drain_teardown_s),
                "prestop_return_s": list(self.prestop_return_s), "route_lag_range_s": list(self.route_lag_range_s),
                "sources": list(self.sources)}


def _good(cell: dict) -> bool:
    return not cell.get("error") and cell.get("sigkill_at_s") is None


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
    matrix = [c for c in drain["cells"] if _good(c)]
    abort = [c["engine_exited_at_s"] - c["sigterm_at_s"] for c in matrix if c["scenario"] in _EXITING_SCENARIOS]
    returns = [c["sigterm_at_s"] - max(ROUTE_WAIT_S, c["last_completed_at_s"] or 0.0) for c in matrix
               if c["strategy"] == "prestop" and c["scenario"] in _PRESTOP_IDLE_SCENARIOS
               and c["hook_outcome"] == "idle"]
    teardown = [c["engine_exited_at_s"] - c["sigterm_at_s"] for c in configurations
                if c.get("family") == _SHUTDOWN_TIMEOUT_FAMILY and c["scenario"] == "idle" and _good(c)
                and "--shutdown-timeout" in c["strategy"]]
    low, high = drain["settings"]["route_lag_range_s"]
    return Measured(
        abort_exit_lag_s=_pool("vLLM's abort exit (drain matrix)", abort),
        drain_teardown_s=_pool("vLLM's --shutdown-timeout teardown (configurations, idle)", teardown),
        prestop_return_s=_pool("prestop's return after idle (drain matrix)", returns),
        route_lag_range_s=(float(low), float(high)),
        sources=(f"abort exit lag: {len(abort)} drain-matrix deletions ({', '.join(_EXITING_SCENARIOS)})",
                 f"drain teardown: {len(teardown)} idle shutdown-timeout deletions",
                 f"prestop's return: {len(returns)} drain-matrix prestop deletions that ended idle"),
    )
