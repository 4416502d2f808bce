"""The configuration's values: where and how to read the engine, and how to drain it.

Frozen, and built in one place (config.py, from flags, annotations, argv and environment); the
reader, the drain loop and the sidecar take them from here, below the parser that builds them.
"""

from __future__ import annotations

from dataclasses import dataclass

from modeldrain.hook.engine import EngineHint
from modeldrain.hook.leader import LeaderConfig
from modeldrain.hook.rerun import FirstRun
from modeldrain.hook.target import Target

__all__ = ["DrainConfig", "ReadConfig"]


@dataclass(frozen=True)
class ReadConfig:
    """Where and how to read the engine: shared by `prestop`, `prestop check` and the sidecar."""

    target: Target
    hint: EngineHint
    read_timeout_s: float
    max_body_bytes: int
    warnings: tuple[str, ...] = ()
    # Where else the engine can be, in order, when the target refuses (hook.reader.EngineReader):
    # the other loopback addresses and the engine's own --host, then the engine's own --port.
    alternates: tuple[Target, ...] = ()
    # The container's other engines (or other listeners of an engine whose metrics port no source
    # names), each read too: no read is idle while one of them is not (hook.reader.EngineReader).
    others: tuple["ReadConfig", ...] = ()


@dataclass(frozen=True)
class DrainConfig:
    read: ReadConfig
    leader: LeaderConfig | None  # a worker Pod: wait on the leader's drain-sidecar, not the local engine
    grace_s: float
    route_wait_s: float
    exit_reserve_s: float | None  # None: by the engine's role (hook.decision.exit_reserve_for)
    interval_s: float
    busy_interval_s: float
    warnings: tuple[str, ...] = ()
    grace_given: bool = True  # False: --grace was not given and grace_s is DEFAULT_GRACE_S, assumed
    grace_flag: str = "--grace"  # what gave it, for drain_started (the sidecar's /v1/drain: ?grace=)
    # A worker: its own drain-sidecar, asked at the start which leader it saw answer (hook.leader_memory).
    own_sidecar: Target | None = None
    # An earlier run of this hook in this container that never finished (hook.rerun): the route
    # wait it served is not waited again.
    rerun_of: FirstRun | None = None
