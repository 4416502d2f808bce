"""The sidecar's own Prometheus metrics, on a private registry served at /metrics.

Private so that nothing another library registers globally leaks into it, and so tests can
build several. Route labels are route templates, never raw paths: a scan of random URLs
cannot grow the series count.
"""

from __future__ import annotations

import functools
from typing import Callable, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.process_collector import ProcessCollector

from modeldrain.hook.events import EventLog
from modeldrain.hook.outcome import Read, ReadOutcome

__all__ = ["SidecarMetrics"]

# Loopback reads take ~1-20 ms idle and up to the 2 s read timeout when the engine is busy.
READ_DURATION_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0)
# A drain holds the engine after its last request for the route wait plus two idle reads (~6 s)
# when all goes well, and up to the grace (15 to 3600 s) when something keeps it busy or unknown.
HELD_BUCKETS_S = (1.0, 2.5, 5.0, 7.5, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
# Requests still in flight when a drain reached its deadline (what SIGTERM then cuts).
IN_FLIGHT_AT_DEADLINE_BUCKETS = (0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0)


class SidecarMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        ProcessCollector(registry=self.registry)  # RSS, CPU, open fds of the sidecar itself
        self.reads = Counter(
            "modeldrain_sidecar_engine_reads", "Reads of the engine's /metrics, by outcome.",
            ["outcome"], registry=self.registry)
        for outcome in ReadOutcome:
            self.reads.labels(outcome.value)  # every class present from the start, at zero
        self.read_duration = Histogram(
            "modeldrain_sidecar_engine_read_duration_seconds", "Time one read of the engine took.",
            buckets=READ_DURATION_BUCKETS_S, registry=self.registry)
        self.in_flight = Gauge(
            "modeldrain_sidecar_engine_in_flight",
            "Work in flight at the last read (sum of the work gauges); NaN when it measured nothing.",
            registry=self.registry)
        self.in_flight.set(float("nan"))
        self.incarnation = Gauge(
            "modeldrain_sidecar_engine_incarnation",
            "Engine processes seen to take over since the sidecar started.", registry=self.registry)
        self.connections_evicted = Counter(
            "modeldrain_sidecar_connections_evicted",
            "Idle connections closed at the connection cap to make room for a new one.", registry=self.registry)
        self.requests = Counter(
            "modeldrain_sidecar_requests", "HTTP requests served, by route template and status code.",
            ["route", "code"], registry=self.registry)

        self.drains_started = Counter(
            "modeldrain_drains_started", "Drains this sidecar heard of starting: the engine's hook in this Pod "
            "(via=hook) and its own /v1/drain calls (via=drain_call).", ["via"], registry=self.registry)
        self.drains = Counter(
            "modeldrain_drains", "Drains this sidecar heard of ending, by outcome (the hook's exit class; abandoned: "
            "the caller went away; unreported: a hook never said how it ended).", ["outcome", "via"],
            registry=self.registry)
        self.drain_held = Histogram(
            "modeldrain_drain_held_after_last_busy_seconds", "Seconds a drain held the engine after its last read "
            "with work in flight (after its start when none had), to its return.", ["via"],
            buckets=HELD_BUCKETS_S, registry=self.registry)
        self.drain_in_flight_at_deadline = Histogram(
            "modeldrain_drain_in_flight_at_deadline", "Work in flight at the last read of a drain that reached its "
            "deadline (what SIGTERM then cuts); its _sum is the requests cut, where the engine said.", ["via"],
            buckets=IN_FLIGHT_AT_DEADLINE_BUCKETS, registry=self.registry)

    def watch_drains(self, in_progress: Callable[[str], int], draining: Callable[[], bool], vias: Sequence[str],
                     outcomes: Sequence[str]) -> None:
        """Every via and outcome present from the start, at zero; the two gauges read at each scrape."""
        running = Gauge("modeldrain_drains_in_progress", "Drains this sidecar knows of that have not ended.",
                        ["via"], registry=self.registry)
        for via in vias:
            self.drains_started.labels(via)
            self.drain_held.labels(via)
            self.drain_in_flight_at_deadline.labels(via)
            running.labels(via).set_function(functools.partial(in_progress, via))
            for outcome in outcomes:
                self.drains.labels(outcome, via)
        deleted = Gauge("modeldrain_pod_draining", "1 once the Pod's deletion reached this sidecar (the engine's "
                        "hook started, /v1/drain was called, or SIGTERM), else 0.", registry=self.registry)
        deleted.set_function(lambda: 1.0 if draining() else 0.0)

    def drain_started(self, via: str) -> None:
        self.drains_started.labels(via).inc()

    def drain_finished(self, via: str, outcome: str, held_s: float | None, in_flight_at_deadline: float | None) -> None:
        self.drains.labels(outcome, via).inc()
        if held_s is not None:
            self.drain_held.labels(via).observe(held_s)
        if in_flight_at_deadline is not None:
            self.drain_in_flight_at_deadline.labels(via).observe(in_flight_at_deadline)

    def watch_log(self, log: EventLog) -> None:
        """Export the log lines a stalled log reader made us drop (the log itself cannot say so)."""
        dropped = Gauge("modeldrain_sidecar_log_lines_dropped",
                        "Log lines not written because the log stream did not take them in time.",
                        registry=self.registry)
        dropped.set_function(lambda: log.dropped)

    def observe_read(self, read: Read, incarnation: int) -> None:
        self.reads.labels(read.outcome.value).inc()
        self.read_duration.observe(read.duration_s)
        self.in_flight.set(float("nan") if read.in_flight is None else read.in_flight)
        self.incarnation.set(incarnation)

    def observe_request(self, route: str, code: int) -> None:
        self.requests.labels(route, str(code)).inc()
