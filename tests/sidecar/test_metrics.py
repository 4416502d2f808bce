"""The sidecar's own metrics: every outcome class present from the start, route labels bounded."""

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from modeldrain.hook.outcome import Read, ReadOutcome
from modeldrain.sidecar.metrics import SidecarMetrics


def samples(metrics: SidecarMetrics) -> dict[tuple[str, tuple], float]:
    text = generate_latest(metrics.registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_every_outcome_is_exported_at_zero_before_any_read():
    values = samples(SidecarMetrics())
    for outcome in ReadOutcome:
        assert values[("modeldrain_sidecar_engine_reads_total", (("outcome", outcome.value),))] == 0


def test_a_read_is_counted_timed_and_its_in_flight_kept():
    metrics = SidecarMetrics()
    metrics.observe_read(Read(ReadOutcome.BUSY, 0.0, 0.02, in_flight=4.0), incarnation=1)
    values = samples(metrics)
    assert values[("modeldrain_sidecar_engine_reads_total", (("outcome", "busy"),))] == 1
    assert values[("modeldrain_sidecar_engine_read_duration_seconds_count", ())] == 1
    assert values[("modeldrain_sidecar_engine_in_flight", ())] == 4.0
    assert values[("modeldrain_sidecar_engine_incarnation", ())] == 1


def test_nothing_measured_is_nan_not_zero():
    metrics = SidecarMetrics()
    metrics.observe_read(Read(ReadOutcome.TIMEOUT, 0.0, 2.0), incarnation=0)
    value = samples(metrics)[("modeldrain_sidecar_engine_in_flight", ())]
    assert value != value  # NaN: "no answer" must not read as idle


def test_requests_are_counted_by_route_template_and_code():
    metrics = SidecarMetrics()
    metrics.observe_request("/v1/work", 200)
    metrics.observe_request("other", 404)
    values = samples(metrics)
    assert values[("modeldrain_sidecar_requests_total", (("code", "200"), ("route", "/v1/work")))] == 1
    assert values[("modeldrain_sidecar_requests_total", (("code", "404"), ("route", "other")))] == 1


def test_dropped_log_lines_are_exported(tmp_path):
    import os

    from modeldrain.hook.events import EventLog

    r, w = os.pipe()
    os.close(r)  # the log's reader is gone: every line is dropped
    log = EventLog("drain-sidecar", stream_fd=w)
    metrics = SidecarMetrics()
    metrics.watch_log(log)
    log.emit("one")
    log.emit("two")
    assert samples(metrics)[("modeldrain_sidecar_log_lines_dropped", ())] == 2
    os.close(w)
