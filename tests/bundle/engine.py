"""The emulated vLLM engine for the bundle tests, with a way to keep it busy for a while."""

from __future__ import annotations

import threading

from emulation.engine_process import EngineProcess

# Requests put in flight by busy_for: the hook reads exactly this many.
BUSY_REQUESTS = 3


class BusyableEngine:
    def __init__(self):
        self._engine = EngineProcess("--kind", "vllm").start()
        self.port = self._engine.port

    def busy_for(self, seconds: float) -> None:
        """Put BUSY_REQUESTS requests of `seconds` in flight and return once the engine runs them."""
        def one():
            try:
                self._engine.request("POST", "/v1/completions", {"duration_s": seconds}, timeout_s=seconds + 30)
            except OSError:
                pass  # the engine was stopped first, at the end of a test that did not wait for them
        for _ in range(BUSY_REQUESTS):
            threading.Thread(target=one, daemon=True).start()
        while self._engine.stats()["running"] < BUSY_REQUESTS:
            threading.Event().wait(0.02)

    @property
    def reads(self) -> int:
        """How many times /metrics was read."""
        return self._engine.stats()["metrics_reads"]

    def close(self) -> None:
        self._engine.stop()
