"""Put requests in flight on an emulated engine, for tests that need it busy."""

from __future__ import annotations

import threading
import time

# The engine admits a request within milliseconds; 5 s is for a loaded 2-core CI machine.
ADMIT_TIMEOUT_S = 5.0


def send_requests(engine, count: int, duration_s: float) -> list[threading.Thread]:
    """Start `count` requests of `duration_s` and return once the engine holds them all."""
    def one():
        try:
            engine.request("POST", "/v1/completions", {"duration_s": duration_s}, timeout_s=duration_s + 30)
        except OSError:
            pass  # the engine may be stopped first when a test ends early; the test checks what it needs
    threads = [threading.Thread(target=one, daemon=True) for _ in range(count)]
    for t in threads:
        t.start()
    deadline_at = time.monotonic() + ADMIT_TIMEOUT_S
    while True:
        stats = engine.stats()
        if stats["in_flight"] >= count:  # in any phase: waiting, running, a role's own queues
            return threads
        if time.monotonic() > deadline_at:
            raise AssertionError(f"the engine holds {stats['in_flight']} requests, not the {count} sent, "
                                 f"after {ADMIT_TIMEOUT_S} s")
        time.sleep(0.02)
