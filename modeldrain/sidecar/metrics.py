"""The sidecar's own Prometheus metrics, on a private registry served at /metrics.

Private so that nothing another library registers globally leaks into it, and so tests can
build several. Route labels are route templates, never raw paths: a scan of random URLs
cannot grow the series count.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.process_collector import ProcessCollector

from modeldrain.hook.events import EventLog
from modeldrain.hook.outcome import Read, ReadOutcome

# Loopback reads take ~1-20 ms idle and up to the 2 s read timeout when the engine is busy.
READ_DURATION_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0)


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
