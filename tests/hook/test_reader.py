"""The reader over real loopback sockets: what came back becomes the right outcome, never an exception."""

import socket
from dataclasses import replace

import pytest

from emulation.raw_server import canned, hang, http_response
from modeldrain.hook.engine import EngineHint
from modeldrain.hook.gauges import EngineKind, Role
from modeldrain.hook.outcome import ReadOutcome
from modeldrain.hook.reader import EngineReader, read_work
from modeldrain.hook.settings import ReadConfig
from modeldrain.hook.target import UNKNOWN_PORT_SOURCE, Target

IDLE = b"vllm:num_requests_running{engine=\"0\"} 0\nvllm:num_requests_waiting{engine=\"0\"} 0\n"
BUSY = b"vllm:num_requests_running{engine=\"0\"} 2\nvllm:num_requests_waiting{engine=\"0\"} 1\n"
NOHINT = EngineHint()


def read(target, timeout_s=2.0, max_body=1 << 20, hint=NOHINT):
    return read_work(target, hint, timeout_s=timeout_s, max_body_bytes=max_body)


def test_idle_and_busy(serve):
    idle = read(serve(canned(http_response(IDLE))))
    assert idle.outcome is ReadOutcome.IDLE and idle.complete and idle.in_flight == 0
    r = read(serve(canned(http_response(BUSY))))
    assert r.outcome is ReadOutcome.BUSY and r.in_flight == 3 and r.kind is EngineKind.VLLM
    assert r.gauges == {"vllm:num_requests_running": 2.0, "vllm:num_requests_waiting": 1.0}
    assert r.http_status == 200 and r.body_bytes == len(BUSY) and r.duration_s > 0


@pytest.mark.parametrize("respond, outcome", [
    (canned(http_response(b"", status="503 Service Unavailable")), ReadOutcome.HTTP_ERROR),
    (hang, ReadOutcome.TIMEOUT),
    (canned(b"SSH-2.0-OpenSSH\r\n\r\n"), ReadOutcome.UNPARSEABLE),
])
def test_a_failed_fetch_is_an_outcome_with_the_hints_engine(serve, respond, outcome):
    hint = EngineHint(kind=EngineKind.SGLANG, role=Role.PREFILL)
    r = read(serve(respond), timeout_s=0.3, hint=hint)
    assert r.outcome is outcome and not r.complete and r.in_flight is None
    assert (r.kind, r.role) == (EngineKind.SGLANG, Role.PREFILL) and r.detail


def test_garbage_body(serve):
    r = read(serve(canned(http_response(b"<html>not metrics</html>"))))
    assert r.outcome is ReadOutcome.INCOMPLETE and "engine unknown" in r.detail


def sidecar_metrics_body() -> bytes:
    """What drain-sidecar's own /metrics serves (port 8490): its private registry, rendered."""
    from prometheus_client import generate_latest

    from modeldrain.sidecar.metrics import SidecarMetrics

    return generate_latest(SidecarMetrics().registry)


@pytest.mark.parametrize("hint", [NOHINT, EngineHint(kind=EngineKind.VLLM, source="flag")], ids=["detected", "told"])
def test_the_sidecars_own_metrics_read_as_not_an_engine_with_nothing_in_flight(serve, hint):
    """A probe on the sidecar's port: said in the read's words, and never a count of 0 in flight."""
    r = read(serve(canned(http_response(sidecar_metrics_body()))), hint=hint)
    assert r.outcome is ReadOutcome.INCOMPLETE and r.outcome.verdict == "busy" and r.in_flight is None
    assert r.detail.startswith("this is not an engine's /metrics: it looks like drain-sidecar's own")


@pytest.mark.parametrize("body, words", [
    (b'{"schema": "modeldrain.sidecar/v2", "read": {}}', "the body is JSON"),
    (b"<html>not metrics</html>", "the body is HTML"),
    (b"", "the body is empty"),
    (b"router_requests_total 3\n", "it has none of any known engine's work gauges"),
])
def test_a_body_that_is_no_engines_says_what_it_is(serve, body, words):
    r = read(serve(canned(http_response(body))), hint=EngineHint(kind=EngineKind.VLLM, source="flag"))
    assert not r.complete and r.in_flight is None
    assert r.detail.startswith(f"this is not an engine's /metrics: {words}"), r.detail


def test_an_engine_missing_its_gauges_is_not_called_something_else(serve):
    r = read(serve(canned(http_response(b"vllm:kv_cache_usage_perc 0.5\n"))), hint=EngineHint(kind=EngineKind.VLLM))
    assert r.outcome is ReadOutcome.INCOMPLETE and r.in_flight is None
    assert "not an engine's" not in r.detail and "missing vllm:num_requests_running" in r.detail


def test_body_that_is_not_utf8_is_unparseable(serve):
    r = read(serve(canned(http_response(b"vllm:num_requests_running \xff\xfe\n"))))
    assert r.outcome is ReadOutcome.UNPARSEABLE and r.body_bytes == 29


def test_missing_gauge_is_incomplete_with_what_is_missing(serve):
    r = read(serve(canned(http_response(b"vllm:num_requests_running 0\n"))))
    assert r.outcome is ReadOutcome.INCOMPLETE and r.missing == ("vllm:num_requests_waiting",)


def test_invalid_values_are_never_idle(serve):
    body = b"vllm:num_requests_running -1\nvllm:num_requests_waiting 1\n"
    r = read(serve(canned(http_response(body))))
    assert r.outcome is ReadOutcome.INVALID_VALUE and r.in_flight is None


def test_hint_chooses_the_gauge_set(serve):
    body = b"sglang:num_running_reqs 0\nsglang:num_queue_reqs 0\n"
    target = serve(canned(http_response(body)))
    assert read(target).outcome is ReadOutcome.IDLE
    decode = EngineHint(kind=EngineKind.SGLANG, role=Role.DECODE)
    r = read(target, hint=decode)
    assert r.outcome is ReadOutcome.INCOMPLETE and "sglang:num_decode_prealloc_queue_reqs" in r.missing


def test_restart_evidence_is_carried(serve):
    body = IDLE + b"process_start_time_seconds 1.7e9\nvllm:request_success_total{r=\"stop\"} 4\n"
    r = read(serve(canned(http_response(body))))
    assert r.process_start_time == 1.7e9 and r.restart_counters == {"vllm:request_success_total": 4.0}


def config_for(target, fallback=None):
    alternates = (fallback,) if fallback is not None else ()
    return ReadConfig(target=target, hint=NOHINT, read_timeout_s=1.0, max_body_bytes=1 << 20, alternates=alternates)


def refusing_target():
    probe = socket.create_server(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return Target("http", port, "/metrics", source="annotation")


def test_engine_reader_moves_to_the_engines_own_port_once_the_target_refuses(serve):
    answering = replace(serve(canned(http_response(BUSY))), source="cmdline")
    switched = []
    reader = EngineReader(config_for(refusing_target(), fallback=answering), switched.append)
    first = reader.read(1.0)
    assert first.outcome is ReadOutcome.BUSY and reader.target == answering
    assert len(switched) == 1 and f"own --port {answering.port} answers" in switched[0]
    assert reader.read(1.0).outcome is ReadOutcome.BUSY and len(switched) == 1


def test_engine_reader_without_a_fallback_or_with_a_refusing_one_reports_the_refusal():
    target = refusing_target()
    assert EngineReader(config_for(target)).read(1.0).outcome is ReadOutcome.REFUSED
    reader = EngineReader(config_for(target, fallback=refusing_target()))
    assert reader.read(1.0).outcome is ReadOutcome.REFUSED and reader.target == target


def test_engine_reader_keeps_an_answering_target(serve):
    target = serve(canned(http_response(IDLE)))
    fallback = serve(canned(http_response(BUSY)))
    reader = EngineReader(config_for(target, fallback=fallback))
    assert reader.read(1.0).outcome is ReadOutcome.IDLE and reader.target == target


@pytest.mark.parametrize("busy_line", [
    '{"vllm:num_requests_running\u200b",engine="1"} 4\n',  # a zero-width space after the name
    '{"\ufeffvllm:num_requests_waiting"} 4\n',  # a BOM inside the quotes
    'vllm:num_requests_run\u00adning{engine="1"} 4\n',  # a soft hyphen, no quotes at all
    '{__name__="vllm:num_requests_running\x00"} 4\n',  # a NUL in the __name__ label
    '# TYPE vllm:num_requests_running counter\nvllm:num_requests_running{engine="1"} 4\n',  # re-typed
], ids=["zwsp", "bom", "soft-hyphen", "nul", "second-type-counter"])
def test_a_work_gauge_hidden_from_the_sum_is_unparseable_never_idle(serve, busy_line):
    # Each of these read idle: the busy series became an unrelated metric, the rest summed to zero.
    body = (b'# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine="0"} 0\n'
            b'# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{engine="0"} 0\n' + busy_line.encode())
    r = read(serve(canned(http_response(body))))
    assert r.outcome is ReadOutcome.UNPARSEABLE and r.outcome.verdict == "busy", (r.outcome, r.detail)


@pytest.mark.parametrize("wire", [
    # Two Content-Lengths: http.client took the first, the idle lines; the busy line was never read.
    b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nContent-Length: %d\r\n\r\n" % (len(IDLE), len(IDLE + BUSY)) + IDLE + BUSY,
    # Read to the close, cut inside the busy line's name: the rest parsed as idle.
    b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + IDLE + b"vllm:num_requests_running",
    # 103 Early Hints was the response: an empty body, incomplete; now the final 200 is read (busy).
    b"HTTP/1.1 103 Early Hints\r\n\r\n" + http_response(BUSY),
], ids=["conflicting-lengths", "close-delimited-mid-line", "early-hints"])
def test_framing_the_rfc_does_not_trust_is_never_an_idle_read(serve, wire):
    r = read(serve(canned(wire)))
    assert r.outcome is not ReadOutcome.IDLE and r.outcome.verdict == "busy", (r.outcome, r.detail)
    if b"103" in wire:
        assert r.outcome is ReadOutcome.BUSY and r.in_flight == 3


def test_an_engine_on_ipv6_loopback_alone_is_read_there_not_taken_for_nothing_listening():
    """Issue 15: refused on 127.0.0.1 is not "nothing listens" while ::1 (or the engine's --host) answers."""
    from emulation.raw_server import RawServer

    with RawServer(canned(http_response(BUSY)), host="::1") as server:
        ipv4 = Target("http", server.port, "/metrics", source="cmdline")  # the same port, nothing on IPv4
        switched = []
        reader = EngineReader(config_for(ipv4, fallback=replace(ipv4, host="::1")), switched.append)
        first = reader.read(1.0)
        assert first.outcome is ReadOutcome.BUSY and reader.target.host == "::1"
        assert len(switched) == 1 and f"answers on [::1]:{server.port}" in switched[0]
        assert reader.read(1.0).outcome is ReadOutcome.BUSY and len(switched) == 1
        assert b"Host: [::1]:%d\r\n" % server.port in server.requests[0]
    gone = reader.read(1.0)
    assert gone.outcome is ReadOutcome.REFUSED and "every place the engine can be" in gone.detail


def test_a_refusal_on_a_guessed_port_is_incomplete_said_once_and_an_answer_before_makes_it_a_refusal(serve):
    """A port no source named (Target.source "default") is no engine's answer: refused there is not
    "nothing listens" (issue 25). A named port that refuses stays `refused` (the test above)."""
    guessed = replace(refusing_target(), source="default")
    said: list[str] = []
    reader = EngineReader(config_for(guessed), said.append)
    first, second = reader.read(1.0), reader.read(1.0)
    assert first.outcome is second.outcome is ReadOutcome.INCOMPLETE and first.outcome.verdict == "busy"
    assert len(said) == 1 and f"port {guessed.port} was guessed" in said[0] and "was guessed" in first.detail
    answering = replace(serve(canned(http_response(BUSY))), source="default")
    reader = EngineReader(config_for(answering))
    assert reader.read(1.0).outcome is ReadOutcome.BUSY
    serve.servers[-1].close()  # it answered, then its listener closed: the engine has exited
    assert reader.read(1.0).outcome is ReadOutcome.REFUSED


def test_another_engines_busy_read_stands_for_an_idle_one_and_its_unknown_is_never_idle(serve):
    idle = serve(canned(http_response(IDLE)))
    busy = serve(canned(http_response(BUSY)))
    both = replace(config_for(idle), others=(config_for(busy),))
    read = EngineReader(both).read(1.0)
    assert read.outcome is ReadOutcome.BUSY and f"other engine on {busy.netloc}" in read.detail
    never_answered = replace(config_for(idle), others=(config_for(refusing_target()),))
    read = EngineReader(never_answered).read(1.0)
    assert read.outcome is ReadOutcome.INCOMPLETE and not read.outcome.ends_drain


SGLANG_ZERO = (b'sglang:num_running_reqs{engine_type="unified"} 0\nsglang:num_queue_reqs{engine_type="unified"} 0\n'
               b'# TYPE sglang:scheduler_process_cpu_seconds_total counter\n')


def sglang_body(heartbeat_s: float) -> bytes:
    return SGLANG_ZERO + f'sglang:scheduler_process_cpu_seconds_total{{engine_type="unified"}} {heartbeat_s}\n'.encode()


def test_engine_reader_takes_an_sglang_zero_for_idle_only_after_the_scheduler_heartbeat_moved(serve):
    bodies = iter([sglang_body(7.9), sglang_body(7.9), sglang_body(9.4), sglang_body(9.4)])
    servers = [serve(canned(http_response(next(bodies)))) for _ in range(4)]
    reader = EngineReader(config_for(servers[0]))
    outcomes = []
    for target in servers:
        reader.target = target  # each server answers one body: the same reader reads them in order
        read = reader.read(1.0)
        outcomes.append(read.outcome)
        assert read.heartbeat is not None and read.kind is EngineKind.SGLANG
    # The first read has nothing to compare with (it can only be the first of two idle reads); the
    # second's counter stood still (a forward pass holding the gauges); the third moved; the fourth
    # stood still again.
    assert outcomes == [ReadOutcome.IDLE, ReadOutcome.STALE, ReadOutcome.IDLE, ReadOutcome.STALE]
    assert ReadOutcome.STALE.verdict == "busy" and not ReadOutcome.STALE.is_idle


def read_in_turn(serve, bodies: list[bytes]) -> list[ReadOutcome]:
    """One reader reading each body in order, each from a server that answers it."""
    servers = [serve(canned(http_response(body))) for body in bodies]
    reader = EngineReader(config_for(servers[0]))
    outcomes = []
    for target in servers:
        reader.target = target
        outcomes.append(reader.read(1.0).outcome)
    return outcomes


def ranked_body(*ranks: tuple[str, str]) -> bytes:
    """An idle SGLang body with one heartbeat series per (tp_rank, value), in the order given."""
    return SGLANG_ZERO + b"".join(
        f'sglang:scheduler_process_cpu_seconds_total{{engine_type="unified",tp_rank="{rank}"}} {value}\n'.encode()
        for rank, value in ranks)


@pytest.mark.parametrize("bodies", [
    # Issue 25 item 6: absent on the first read, then constant: both later zeros were trusted (exit 0).
    [SGLANG_ZERO, sglang_body(4.0), sglang_body(4.0)],
    # NaN compares false both ways: it counted as advanced.
    [sglang_body(3.0), sglang_body(float("nan")), sglang_body(float("nan"))],
    # Two schedulers whose series swap order: rank 0 frozen at 5, hidden when compared by position.
    # Compared by position, the second read's (9, 5) moved past the first's (5, 3).
    [ranked_body(("0", "5"), ("1", "3")), ranked_body(("1", "9"), ("0", "5")), ranked_body(("0", "5"), ("1", "10"))],
], ids=["late-heartbeat", "nan", "swapped-ranks"])
def test_no_zero_after_the_first_is_trusted_without_a_heartbeat_that_moved(serve, bodies):
    assert read_in_turn(serve, bodies)[1:] == [ReadOutcome.STALE, ReadOutcome.STALE]


def by_path(serve, metrics: bytes, load: bytes | None):
    """A server answering /load with `load` (None: HTTP 404) and anything else with `metrics`."""
    def respond(conn):
        asked = server.requests[-1]
        if asked.startswith(b"GET /load "):
            conn.sendall(http_response(load, content_type="application/json") if load is not None
                         else http_response(b"not found", "404 Not Found"))
        else:
            conn.sendall(http_response(metrics))
    target = serve(respond)
    server = serve.servers[-1]
    return target, server


TRACKED = EngineHint(kind=EngineKind.VLLM, source="cmdline", server_load_tracking=True)


@pytest.mark.parametrize("load, outcome, words", [
    (b'{"server_load": 0}', ReadOutcome.IDLE, "/load reads 0"),
    (b'{"server_load": 16}', ReadOutcome.BUSY, "/load counts 16 in the API server"),
    (b'{"load": 0}', ReadOutcome.INCOMPLETE, "no server_load count"),
    (b"<html>", ReadOutcome.INCOMPLETE, "no JSON"),
    (None, ReadOutcome.INCOMPLETE, "404"),
], ids=["zero", "tokenizing", "other-json", "not-json", "404"])
def test_with_server_load_tracking_an_idle_vllm_read_is_idle_only_if_load_says_zero_too(serve, load, outcome, words):
    target, server = by_path(serve, IDLE, load)
    r = read(target, hint=TRACKED)
    assert r.outcome is outcome and words in r.detail, r.detail
    assert any(req.startswith(b"GET /load ") for req in server.requests)


@pytest.mark.parametrize("load, outcome, words", [
    (b'{"server_load": 0}', ReadOutcome.IDLE, "/load reads 0 in one of 2 API servers"),
    (b'{"server_load": 3}', ReadOutcome.BUSY, "/load counts 3 in the API server"),
], ids=["zero", "counting"])
def test_with_two_api_servers_load_is_read_as_one_processs_count(serve, load, outcome, words):
    """A 0 from one of two API servers says nothing of the other: the read says so (its idle read
    still needs its confirming read, as every idle read does); a count above 0 is busy."""
    target, _ = by_path(serve, IDLE, load)
    r = read(target, hint=replace(TRACKED, api_servers=2))
    assert r.outcome is outcome and words in r.detail, r.detail
    assert not r.counted_from_arrival  # its confirming read keeps the full gap (hook.decision)


@pytest.mark.parametrize("hint, counted", [(TRACKED, True), (replace(TRACKED, api_servers=1), True),
                                           (replace(TRACKED, api_servers=2), False),
                                           (EngineHint(kind=EngineKind.VLLM, source="cmdline"), False)])
def test_an_idle_read_counts_from_arrival_only_with_one_api_servers_load(serve, hint, counted):
    target, _ = by_path(serve, IDLE, b'{"server_load": 0}')
    r = read(target, hint=hint)
    assert r.outcome is ReadOutcome.IDLE and r.counted_from_arrival is counted, r.detail


def test_without_the_flag_load_is_never_asked(serve):
    target, server = by_path(serve, IDLE, b'{"server_load": 16}')
    assert read(target, hint=EngineHint(kind=EngineKind.VLLM, source="cmdline")).outcome is ReadOutcome.IDLE
    assert not any(req.startswith(b"GET /load ") for req in server.requests)


def test_a_busy_read_does_not_ask_load(serve):
    target, server = by_path(serve, BUSY, b'{"server_load": 0}')
    assert read(target, hint=TRACKED).outcome is ReadOutcome.BUSY
    assert not any(req.startswith(b"GET /load ") for req in server.requests)


def changing(serve, answers: dict[str, bytes | None]):
    """A server answering /load and /metrics with what `answers` holds at the time of each request
    (a /load of None: HTTP 404), and the paths it was asked, in order."""
    asked: list[str] = []

    def respond(conn):
        path = serve.servers[-1].requests[-1].split(b" ")[1].decode()
        asked.append(path)
        if path == "/load":
            body = answers["/load"]
            conn.sendall(http_response(body, content_type="application/json") if body is not None
                         else http_response(b"not found", "404 Not Found"))
        else:
            conn.sendall(http_response(answers["/metrics"]))
    return serve(respond), asked


def drain_reader(target, hint=TRACKED, load_first=True):
    config = ReadConfig(target=target, hint=hint, read_timeout_s=1.0, max_body_bytes=1 << 20)
    return EngineReader(config, load_first=load_first)


def test_the_drains_reader_asks_load_alone_after_a_busy_read(serve):
    answers = {"/metrics": BUSY, "/load": b'{"server_load": 5}'}
    target, asked = changing(serve, answers)
    reader = drain_reader(target)
    first = reader.read(1.0)
    assert first.outcome is ReadOutcome.BUSY and not first.counted_from_arrival and asked == ["/metrics"]
    second = reader.read(1.0)
    assert second.outcome is ReadOutcome.BUSY and second.in_flight == 5 and second.counted_from_arrival
    assert "/load counts 5" in second.detail and second.http_status == 200 and asked == ["/metrics", "/load"]
    # /load at 0: no answer alone; the full read follows, and its zero is confirmed by /load again.
    answers.update({"/metrics": IDLE, "/load": b'{"server_load": 0}'})
    third = reader.read(1.0)
    assert third.outcome is ReadOutcome.IDLE and third.counted_from_arrival, third.detail
    assert asked[2:] == ["/load", "/metrics", "/load"]
    # After an idle read the next one is a full read again (the confirming read).
    reader.read(1.0)
    assert asked[5:] == ["/metrics", "/load"]


@pytest.mark.parametrize("load", [b'{"server_load": 0}', None, b"<html>"], ids=["zero", "404", "not-json"])
def test_a_load_that_says_no_work_or_nothing_is_no_answer_alone_the_gauges_still_are(serve, load):
    answers = {"/metrics": BUSY, "/load": b'{"server_load": 2}'}
    target, asked = changing(serve, answers)
    reader = drain_reader(target)
    reader.read(1.0)
    answers["/load"] = load
    r = reader.read(1.0)
    # The gauges still count 3: busy by them, whatever /load said (a 0 there is an aborted request
    # still in the engine core, or a count not kept).
    assert r.outcome is ReadOutcome.BUSY and r.in_flight == 3 and not r.counted_from_arrival
    assert asked == ["/metrics", "/load", "/metrics"]


@pytest.mark.parametrize("hint, load_first", [
    (TRACKED, False),  # the sidecar's and `prestop check`'s reader: every read shows the gauges
    (replace(TRACKED, api_servers=2), True),  # one process's count: a 0 is no word on the other
    (EngineHint(kind=EngineKind.VLLM, source="cmdline"), True),  # without the flag /load counts nothing
    (replace(TRACKED, kv_producer="kv_role=kv_producer, NixlConnector"), True),  # held 480 s anyway
], ids=["not-the-drain", "two-api-servers", "no-flag", "kv-producer"])
def test_load_is_asked_alone_only_where_it_counts_every_request_and_only_by_the_drain(serve, hint, load_first):
    target, asked = changing(serve, {"/metrics": BUSY, "/load": b'{"server_load": 5}'})
    reader = drain_reader(target, hint=hint, load_first=load_first)
    reader.read(1.0)
    r = reader.read(1.0)
    assert r.outcome is ReadOutcome.BUSY and r.in_flight == 3 and not r.counted_from_arrival
    assert asked == ["/metrics", "/metrics"]


@pytest.mark.parametrize("respond", [canned(http_response(IDLE)),
                                     canned(http_response(b"", status="404 Not Found"))], ids=["idle", "http-error"])
def test_at_a_port_that_is_a_guess_an_idle_or_failed_answer_is_not_the_engines(serve, respond):
    guessed = replace(serve(respond), source=UNKNOWN_PORT_SOURCE)
    r = read(guessed)
    assert r.outcome is ReadOutcome.INCOMPLETE and r.outcome.verdict == "busy" and "is a guess" in r.detail


def test_at_a_port_that_is_a_guess_a_refusal_is_not_nothing_listens():
    guessed = replace(refusing_target(), source=UNKNOWN_PORT_SOURCE)
    r = EngineReader(config_for(guessed)).read(1.0)
    assert r.outcome is ReadOutcome.INCOMPLETE and not r.outcome.ends_drain and "is a guess" in r.detail


def test_at_a_port_that_is_a_guess_a_busy_answer_is_still_busy(serve):
    assert read(replace(serve(canned(http_response(BUSY))), source=UNKNOWN_PORT_SOURCE)).outcome is ReadOutcome.BUSY


NOT_FOUND = canned(http_response(b'{"detail":"Not Found"}', status="404 Not Found"))


@pytest.mark.parametrize("hint, words", [
    (EngineHint(kind=EngineKind.SGLANG, source="cmdline"), "add --enable-metrics"),
    (NOHINT, "if the engine is SGLang"),
])
def test_a_404_on_metrics_names_sglangs_enable_metrics(serve, hint, words):
    # Issue 26: SGLang serves /metrics only with --enable-metrics; the 404 still ends the drain.
    r = read(serve(NOT_FOUND), hint=hint)
    assert r.outcome is ReadOutcome.HTTP_ERROR and r.http_status == 404
    assert "--enable-metrics" in r.detail and words in r.detail


def test_a_404_from_vllm_says_nothing_of_sglang(serve):
    r = read(serve(NOT_FOUND), hint=EngineHint(kind=EngineKind.VLLM, source="flag"))
    assert r.outcome is ReadOutcome.HTTP_ERROR and "enable-metrics" not in r.detail
