"""One replica's deletion, modelled: its requests, the preStop, SIGTERM, the engine's exit, SIGKILL.

The rules are the ones the drain matrix measures on real processes (bench/drains/quality.py), and
the timings that are not rules are drawn from its measurements (measured.py):

- the router keeps sending Poisson arrivals for a lag after the delete (drawn from the matrix's range),
  and gives up on a request at its timeout (the connection closes: cut, and the engine's work ends);
- the preStop runs: none; `sleep S`; or prestop, which returns a measured moment after its route
  wait (nothing running by then) or after the last request's end (past the route wait), and at
  G − exit reserve at the latest;
- SIGTERM. vLLM's default aborts every running request (cut: no answer), stays while their
  clients wait (until the router's timeout: in practice kubelet's SIGKILL) and exits the measured
  abort lag after the last one goes, or after SIGTERM when none runs; with `--shutdown-timeout T` running requests finish until T, the rest get HTTP 500 (failed)
  and a request arriving meanwhile is refused with a 500 (failed); then the measured teardown (from
  SIGTERM when it found nothing running, else from the drain's end, and longer);
- kubelet's SIGKILL at G (its stop grace after a hook is G minus the hook's whole seconds, at least
  its minimum): whatever still runs then is cut.

Held idle is the drain matrix's: the engine's exit minus the later of the delete and the end of the
last request it completed.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Sequence

from bench.fleet.loads import Load
from bench.fleet.measured import Measured
from bench.fleet.strategies import Hook, Strategy
from emulation.constants import KUBELET_MIN_STOP_GRACE_S
from modeldrain.hook.constants import EXIT_RESERVE_S, ROUTE_WAIT_S


@dataclass(frozen=True)
class Request:
    """Relative to the delete: negative arrivals were in flight when it came."""

    arrives_s: float
    ends_s: float
    abandoned: bool = False  # the router gave up on it at ends_s (its request timeout): never completed
    gives_up_s: float = math.inf  # when the router gives up on it if it is never answered


def request(arrives_s: float, duration_s: float, timeout_s: float) -> Request:
    """A request as the router sees it: it gives up (the connection closes) at its timeout."""
    if duration_s > timeout_s:
        return Request(arrives_s, arrives_s + timeout_s, abandoned=True, gives_up_s=arrives_s + timeout_s)
    return Request(arrives_s, arrives_s + duration_s, gives_up_s=arrives_s + timeout_s)


@dataclass(frozen=True)
class Timings:
    """The drawn, not ruled, parts of one deletion."""

    route_lag_s: float
    prestop_quiet_return_s: float
    prestop_last_return_s: float
    abort_exit_lag_s: float
    teardown_idle_s: float
    teardown_after_drain_s: float

    @classmethod
    def draw(cls, measured: Measured, rng: random.Random, route_lag_s: float | None = None) -> Timings:
        """Every timing from `rng`; the router's lag too unless given (drawn with the requests it shapes)."""
        lag_s = rng.uniform(*measured.route_lag_range_s) if route_lag_s is None else route_lag_s
        return cls(lag_s, rng.choice(measured.prestop_quiet_return_s),
                   rng.choice(measured.prestop_last_return_s), rng.choice(measured.abort_exit_lag_s),
                   rng.choice(measured.teardown_idle_s), rng.choice(measured.teardown_after_drain_s))


@dataclass(frozen=True)
class Outcome:
    sigterm_at_s: float
    exited_at_s: float  # when the replica's accelerators are free
    completed: int
    cut: int  # the connection closed without a whole answer
    failed: int  # HTTP 500 or refused: sent after SIGTERM, or still running at --shutdown-timeout
    held_idle_s: float
    sigkilled: bool


def requests(load: Load, route_lag_s: float, rng: random.Random) -> list[Request]:
    """The requests a delete touches: in flight at it (steady state), and sent until the route drops."""
    out: list[Request] = []
    if load.rate_per_s == 0:
        return out
    t = -load.longest_s  # anything that arrived earlier has ended by the delete
    while True:
        t += rng.expovariate(load.rate_per_s)
        if t >= route_lag_s:
            return out
        drawn = request(t, load.durations.draw(rng), load.request_timeout_s)
        if drawn.ends_s > 0:
            out.append(drawn)


def hook_return_s(strategy: Strategy, touched: Sequence[Request], timings: Timings) -> float:
    """When the preStop returns and SIGTERM is sent."""
    if strategy.hook is Hook.NONE:
        return 0.0
    if strategy.hook is Hook.SLEEP:
        return min(strategy.sleep_s, strategy.grace_s)
    deadline_s = max(0.0, strategy.grace_s - EXIT_RESERVE_S)
    last_end_s = max([0.0, *(r.ends_s for r in touched)])
    if last_end_s <= ROUTE_WAIT_S:  # quiet by the first read: it and its confirmation
        return min(ROUTE_WAIT_S + timings.prestop_quiet_return_s, deadline_s)
    return min(last_end_s + timings.prestop_last_return_s, deadline_s)


def kill_at_s(strategy: Strategy, sigterm_at_s: float) -> float:
    """kubelet's SIGKILL: G after the delete with no hook, else the stop grace after the hook."""
    if strategy.hook is Hook.NONE:
        return strategy.grace_s
    return sigterm_at_s + max(strategy.grace_s - math.floor(sigterm_at_s), KUBELET_MIN_STOP_GRACE_S)


def delete(strategy: Strategy, touched: Sequence[Request], timings: Timings) -> Outcome:
    """The deletion's outcome for these requests and timings."""
    term = hook_return_s(strategy, touched, timings)
    kill = kill_at_s(strategy, term)
    before = [r for r in touched if r.arrives_s < term]
    late = len(touched) - len(before)  # sent after SIGTERM: refused, or a 500 while draining
    ended = [r for r in before if r.ends_s <= term]
    done = [r.ends_s for r in ended if not r.abandoned]
    cut = len(ended) - len(done)  # the router gave up on them
    failed = 0
    running = [r for r in before if r.ends_s > term]
    if strategy.shutdown_timeout_s is None:
        # Aborted with no answer, their clients wait on until their router gives up: vLLM stays till
        # the last one goes (bench/engines/matrix.py: held to kubelet's SIGKILL), then exits.
        waited_until = max([term, *(r.gives_up_s for r in running)])
        exited = waited_until + timings.abort_exit_lag_s
        cut += len(running)
    else:
        drain_until = term + strategy.shutdown_timeout_s
        finish = [r for r in running if r.ends_s <= min(drain_until, kill)]
        done += [r.ends_s for r in finish if not r.abandoned]
        cut += sum(r.abandoned for r in finish)
        unfinished = len(running) - len(finish)
        drain_end = max([term, *(r.ends_s for r in finish)]) if unfinished == 0 else min(drain_until, kill)
        if drain_until < kill:
            failed += unfinished  # the drain's end answers them with a 500
        else:
            cut += unfinished
        # vLLM's teardown: shorter when SIGTERM found nothing to drain (measured.py).
        exited = drain_end + (timings.teardown_after_drain_s if running else timings.teardown_idle_s)
    sigkilled = exited > kill
    exited = min(exited, kill)
    last_s = max([0.0, *done])
    return Outcome(sigterm_at_s=term, exited_at_s=exited, completed=len(done), cut=cut, failed=failed + late,
                   held_idle_s=exited - last_s, sigkilled=sigkilled)
