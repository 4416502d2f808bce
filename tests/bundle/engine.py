"""The emulated vLLM engine for the bundle tests, with a way to keep it busy for a while."""

from __future__ import annotations

from emulation.engine_process import EngineProcess
from tests.engine_work import send_requests

# Requests put in flight by busy_for: the hook reads exactly this many.
BUSY_REQUESTS = 3


class BusyableEngine:
    def __init__(self):
        self._engine = EngineProcess("--kind", "vllm").start()
        self.port = self._engine.port

    def busy_for(self, seconds: float) -> None:
        """Put BUSY_REQUESTS requests of `seconds` in flight and return once the engine holds them."""
        send_requests(self._engine, BUSY_REQUESTS, seconds)

    @property
    def reads(self) -> int:
        """How many times /metrics was read."""
        return self._engine.stats()["metrics_reads"]

    def close(self) -> None:
        self._engine.stop()
