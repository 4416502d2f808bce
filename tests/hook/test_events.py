"""The log: one JSON object per line, capped, and never stalled by a log reader that stops reading."""

import json
import os
import re
import threading
import time

import pytest

from modeldrain.hook import events
from modeldrain.hook.events import MAX_LINE_BYTES, WRITE_WAIT_S, EventLog, fit_line, utc_timestamp
from tests.pipes import fill


@pytest.fixture
def pipe():
    r, w = os.pipe()
    yield r, w
    for fd in (r, w):
        try:
            os.close(fd)
        except OSError:
            pass


def read_lines(fd: int) -> list[dict]:
    os.set_blocking(fd, False)
    data = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        data += chunk
    return [json.loads(line) for line in data.decode("ascii").splitlines()]


def test_every_line_carries_the_same_bookkeeping(pipe):
    r, w = pipe
    log = EventLog("prestop", started_at=time.monotonic() - 1.5, stream_fd=w)
    text = log.emit("drain_started", grace_s=30.0)
    log.warning("config_warning", message="m")
    first, second = read_lines(r)
    assert json.loads(text) == first
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", first["ts"])
    assert first["source"] == "prestop" and first["level"] == "info" and first["event"] == "drain_started"
    assert first["pid"] == os.getpid() and 1.5 <= first["elapsed_s"] < 5
    assert second["level"] == "warning"
    assert "elapsed_s" not in json.loads(EventLog("drain-sidecar", stream_fd=w).line("x"))


def test_timestamp_is_rfc3339_utc_with_z():
    assert utc_timestamp(0) == "1970-01-01T00:00:00.000Z"
    assert utc_timestamp(1764489600.1234) == "2025-11-30T08:00:00.123Z"


def test_a_huge_field_is_cut_and_the_line_fits_one_atomic_write():
    line = fit_line({"ts": "t", "source": "s", "level": "info", "event": "config_warning", "pid": 1,
                     "message": "x" * 5_000_000, "other": "kept"})
    assert len(line) < MAX_LINE_BYTES
    record = json.loads(line)
    assert record["truncated"] == ["message"] and record["other"] == "kept"
    assert record["message"].endswith(f"...[{5_000_000 - events.MAX_FIELD_CHARS} more]")


def test_many_large_fields_are_dropped_largest_first_keeping_the_bookkeeping():
    record = {"ts": "t", "source": "s", "level": "info", "event": "e", "pid": 1}
    record.update({f"f{i}": "y" * 600 for i in range(20)})
    fitted = json.loads(fit_line(record))
    assert all(k in fitted for k in ("ts", "source", "level", "event", "pid"))
    assert len(fit_line(record)) < MAX_LINE_BYTES and len(fitted["truncated"]) == 20


def test_control_and_non_ascii_characters_stay_on_one_ascii_line():
    line = fit_line({"event": "e", "detail": "a\nb\x00c\u00e9\U0001f600"})
    assert "\n" not in line and line.isascii()
    assert json.loads(line)["detail"] == "a\nb\x00c\u00e9\U0001f600"


def test_a_full_pipe_costs_one_bounded_wait_then_none(pipe):
    r, w = pipe
    fill(w)
    log = EventLog("prestop", stream_fd=w)
    started = time.monotonic()
    log.emit("first")
    first_s = time.monotonic() - started
    started = time.monotonic()
    for _ in range(100):
        log.emit("more")
    rest_s = time.monotonic() - started
    assert log.dropped == 101
    assert first_s < WRITE_WAIT_S + 0.5  # generous: a loaded CI machine
    assert rest_s < 0.5  # stalled: no more waiting, one try each
    # The reader catches up: lines flow again.
    os.set_blocking(r, False)
    while True:
        try:
            os.read(r, 1 << 20)
        except BlockingIOError:
            break
    log.emit("after")
    assert log.dropped == 101
    assert [e["event"] for e in read_lines(r)] == ["after"]


def test_the_stream_stays_blocking_for_whoever_shares_it(pipe):
    r, w = pipe
    EventLog("prestop", stream_fd=w).emit("x")
    assert os.get_blocking(w)  # our non-blocking description is a private one


def test_a_fifo_nobody_reads_is_not_waited_on(tmp_path, pipe):
    _, w = pipe
    fifo = tmp_path / "log"
    os.mkfifo(fifo)
    started = time.monotonic()
    log = EventLog("prestop", stream_fd=w, mirror_path=str(fifo))
    assert time.monotonic() - started < 1
    assert log.mirror_status.startswith("unavailable")


def test_mirror_gets_every_line_and_says_when_it_is_lost(pipe):
    r, w = pipe
    mr, mw = os.pipe()
    log = EventLog("prestop", stream_fd=w, mirror_path=f"/proc/self/fd/{mw}")
    assert log.mirror_status == f"/proc/self/fd/{mw}"
    log.emit("one")
    assert [e["event"] for e in read_lines(mr)] == ["one"]
    os.close(mr)  # the container's log reader went away
    os.close(mw)
    log.emit("two")
    assert log.mirror_status.startswith("lost:")
    log.emit("three")
    assert [e["event"] for e in read_lines(r)] == ["one", "two", "three"]


def test_mirror_that_is_stderr_is_not_written_twice(pipe):
    r, w = pipe
    log = EventLog("prestop", stream_fd=w, mirror_path=f"/proc/self/fd/{w}")
    assert log.mirror_status == "same as stderr"
    log.emit("once")
    assert len(read_lines(r)) == 1


def test_a_closed_stderr_is_counted_not_raised():
    r, w = os.pipe()
    os.close(r)
    os.close(w)
    log = EventLog("prestop", stream_fd=w)
    log.emit("nobody hears")
    assert log.dropped == 1


def test_concurrent_writers_never_interleave_within_a_line(pipe):
    r, w = pipe
    logs = [EventLog(f"writer-{i}", stream_fd=w) for i in range(4)]
    received = bytearray()

    def reader():
        os.set_blocking(r, True)
        while chunk := os.read(r, 65536):
            received.extend(chunk)

    t = threading.Thread(target=reader)
    t.start()

    def writer(log):
        for n in range(50):
            # Nine fields under the per-field cap: lines of ~3.8 KB, near PIPE_BUF.
            log.emit("big", n=n, **{f"p{i}": "z" * 400 for i in range(9)})

    threads = [threading.Thread(target=writer, args=(log,)) for log in logs]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for log in logs:
        log.close()
    os.close(w)
    t.join(10)
    lines = received.decode("ascii").splitlines()
    assert len(lines) + sum(log.dropped for log in logs) == 200
    assert all(3600 < len(line) < MAX_LINE_BYTES for line in lines)
    assert all(json.loads(line)["event"] == "big" for line in lines)
