"""The emulated scheduler: where each in-flight request is, for how long, and how it ended.

Each request goes to the least-loaded data-parallel rank, passes through its role's queues, waits
for one of the rank's `max_running` slots, runs, and finishes. At every instant it is counted in
exactly one phase, so the phase counts are what the engine's work gauges publish.
"""

from __future__ import annotations

import asyncio
import enum
import itertools
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping

from emulation import constants
from emulation.engine_config import EngineKind, Role


class Phase(enum.Enum):
    PREFILL_BOOTSTRAP = "prefill_bootstrap"  # SGLang prefill: waiting for the decoder's handshake
    DECODE_PREALLOC = "decode_prealloc"  # SGLang decode: waiting to allocate KV
    DECODE_TRANSFER = "decode_transfer"  # SGLang decode: receiving KV
    # SGLang: a structured-output request waiting for its grammar, in the grammar manager and not
    # in waiting_queue (num_grammar_queue_reqs). vLLM compiles in its engine core, counted as waiting.
    GRAMMAR = "grammar"
    WAITING = "waiting"  # waiting for a slot (vLLM waiting, SGLang queue)
    RUNNING = "running"  # in the batch
    PREFILL_INFLIGHT = "prefill_inflight"  # SGLang prefill: KV still going to the decoder


class Outcome(enum.Enum):
    COMPLETED = "completed"
    ABORTED = "aborted"  # the engine dropped it: no response at all
    FAILED = "failed"  # the engine gave up on it with an HTTP error (vLLM drain timeout)
    CLIENT_GONE = "client_gone"  # the client disconnected first


@dataclass(frozen=True)
class LifePlan:
    """A role's phases before the slot and after it, each as a share of the request's duration."""

    before_slot: tuple[tuple[Phase, float], ...]
    after_slot: tuple[tuple[Phase, float], ...]

    @property
    def running_share(self) -> float:
        return 1.0 - sum(share for _, share in self.before_slot + self.after_slot)


UNIFIED_PLAN = LifePlan(before_slot=(), after_slot=())
LIFE_PLANS: Mapping[Role, LifePlan] = {
    Role.UNIFIED: UNIFIED_PLAN,
    Role.PREFILL: LifePlan(
        before_slot=((Phase.PREFILL_BOOTSTRAP, constants.PREFILL_BOOTSTRAP_SHARE),),
        after_slot=((Phase.PREFILL_INFLIGHT, constants.PREFILL_INFLIGHT_SHARE),),
    ),
    Role.DECODE: LifePlan(
        before_slot=((Phase.DECODE_PREALLOC, constants.DECODE_PREALLOC_SHARE),
                     (Phase.DECODE_TRANSFER, constants.DECODE_TRANSFER_SHARE)),
        after_slot=(),
    ),
}


@dataclass(frozen=True)
class Observation:
    """One finished request's timings, for the latency histograms."""

    queue_s: float
    running_s: float
    total_s: float


@dataclass
class RankState:
    """One data-parallel rank's counters (mutable: owned by the scheduler)."""

    phases: dict[Phase, int] = field(default_factory=lambda: {p: 0 for p in Phase})
    received: int = 0
    completed: int = 0
    aborted: int = 0
    observations: list[Observation] = field(default_factory=list)
    first_run_seen: bool = False

    @property
    def in_flight(self) -> int:
        return sum(self.phases.values())


@dataclass(frozen=True)
class RankSnapshot:
    phases: Mapping[Phase, int]
    received: int
    completed: int
    aborted: int
    observations: tuple[Observation, ...]
    heartbeat_s: float = 0.0  # SGLang's scheduler heartbeat counter, as published (emulation/stats_ticks.py)

    @property
    def running(self) -> int:
        return self.phases[Phase.RUNNING]

    @property
    def waiting(self) -> int:
        return self.phases[Phase.WAITING]

    @property
    def in_flight(self) -> int:
        return sum(self.phases.values())


class Ticket:
    """One request inside the scheduler; `done` resolves to its Outcome."""

    def __init__(self, request_id: int, duration_s: float, rank: int, loop: asyncio.AbstractEventLoop):
        self.request_id = request_id
        self.duration_s = duration_s
        self.rank = rank
        self.done: asyncio.Future[Outcome] = loop.create_future()
        self.phase: Phase | None = None
        self.task: asyncio.Task | None = None
        self.run_started: asyncio.Event = asyncio.Event()
        self.grammar_s = 0.0


class Scheduler:
    """Admits, sequences and finishes requests; owns every count the work gauges publish."""

    def __init__(self, kind: EngineKind, role: Role, dp: int, max_running: int,
                 on_outcome: Callable[[Outcome], None]):
        self._on_outcome = on_outcome
        self._plan = LIFE_PLANS[role] if kind is EngineKind.SGLANG else UNIFIED_PLAN
        self._grammar_phase = Phase.GRAMMAR if kind is EngineKind.SGLANG else Phase.WAITING
        self._ranks = [RankState() for _ in range(dp)]
        self._slots = [asyncio.Semaphore(max_running) for _ in range(dp)]
        self._tickets: dict[int, Ticket] = {}
        self._ids = itertools.count(1)
        self._idle = asyncio.Event()
        self._idle.set()

    # --- admission and life ---------------------------------------------------------------------

    def submit(self, duration_s: float, grammar_s: float = 0.0) -> Ticket:
        """`grammar_s`: a structured-output request's grammar compilation before it queues."""
        rank = min(range(len(self._ranks)), key=lambda r: self._ranks[r].in_flight)
        ticket = Ticket(next(self._ids), duration_s, rank, asyncio.get_running_loop())
        ticket.grammar_s = grammar_s
        self._tickets[ticket.request_id] = ticket
        self._ranks[rank].received += 1
        self._idle.clear()
        ticket.task = asyncio.get_running_loop().create_task(self._live(ticket))
        return ticket

    async def _live(self, ticket: Ticket) -> None:
        rank = self._ranks[ticket.rank]
        arrived_at = time.monotonic()
        try:
            for phase, share in self._plan.before_slot:
                self._enter(ticket, phase)
                await asyncio.sleep(ticket.duration_s * share)
            if ticket.grammar_s > 0:
                self._enter(ticket, self._grammar_phase)
                await asyncio.sleep(ticket.grammar_s)
            self._enter(ticket, Phase.WAITING)
            queued_at = time.monotonic()
            async with self._slots[ticket.rank]:
                self._enter(ticket, Phase.RUNNING)
                rank.first_run_seen = True
                ticket.run_started.set()
                running_at = time.monotonic()
                await asyncio.sleep(ticket.duration_s * self._plan.running_share)
                running_s = time.monotonic() - running_at
            for phase, share in self._plan.after_slot:
                self._enter(ticket, phase)
                await asyncio.sleep(ticket.duration_s * share)
        except asyncio.CancelledError:
            self._leave(ticket)
            raise
        self._leave(ticket)
        rank.completed += 1
        now = time.monotonic()
        rank.observations.append(Observation(running_at - queued_at, running_s, now - arrived_at))
        self._resolve(ticket, Outcome.COMPLETED)

    def _resolve(self, ticket: Ticket, outcome: Outcome) -> None:
        if not ticket.done.done():
            ticket.done.set_result(outcome)
            self._on_outcome(outcome)

    def _enter(self, ticket: Ticket, phase: Phase) -> None:
        phases = self._ranks[ticket.rank].phases
        if ticket.phase is not None:
            phases[ticket.phase] -= 1
        phases[phase] += 1
        ticket.phase = phase

    def _leave(self, ticket: Ticket) -> None:
        if ticket.phase is not None:
            self._ranks[ticket.rank].phases[ticket.phase] -= 1
            ticket.phase = None
        self._tickets.pop(ticket.request_id, None)
        if not self._tickets:
            self._idle.set()

    # --- ending requests early ------------------------------------------------------------------

    def end(self, ticket: Ticket, outcome: Outcome) -> None:
        """Stop one request now: the engine aborts it or its client went away."""
        if ticket.task is not None and not ticket.task.done():
            ticket.task.cancel()
        self._leave(ticket)
        if ticket.done.done():
            return
        if outcome in (Outcome.ABORTED, Outcome.FAILED):
            self._ranks[ticket.rank].aborted += 1
        self._resolve(ticket, outcome)

    def end_all(self, outcome: Outcome) -> int:
        """Stop every request in flight; returns how many."""
        tickets = list(self._tickets.values())
        for ticket in tickets:
            self.end(ticket, outcome)
        return len(tickets)

    # --- what the gauges and the control API read ----------------------------------------------

    @property
    def in_flight(self) -> int:
        return len(self._tickets)

    async def wait_idle(self) -> None:
        await self._idle.wait()

    @property
    def first_run_seen(self) -> bool:
        return any(r.first_run_seen for r in self._ranks)

    def snapshot(self) -> tuple[RankSnapshot, ...]:
        return tuple(
            RankSnapshot(dict(r.phases), r.received, r.completed, r.aborted, tuple(r.observations))
            for r in self._ranks
        )
