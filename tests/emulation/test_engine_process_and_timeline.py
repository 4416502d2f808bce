"""No emulated engine outlives its parent; a deletion renders as a timeline whatever the hook says."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from emulation.kubelet import DeletionReport
from emulation.load import LoadTally, RequestOutcome, RequestRecord
from emulation.timeline import delete_tally, render_timeline

_PARENT = """
from emulation.engine_process import EngineProcess
import time
engine = EngineProcess("--kind", "vllm").start()
print(engine.pid, flush=True)
time.sleep(60)
"""


def test_engine_dies_with_a_killed_parent():
    parent = subprocess.Popen([sys.executable, "-c", _PARENT], stdout=subprocess.PIPE, text=True)
    engine_pid = int(parent.stdout.readline())
    os.kill(engine_pid, 0)  # alive
    parent.send_signal(signal.SIGKILL)
    parent.wait(5)
    deadline_at = time.monotonic() + 5
    while time.monotonic() < deadline_at:
        try:
            os.kill(engine_pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.kill(engine_pid, signal.SIGKILL)
    raise AssertionError(f"engine {engine_pid} outlived its parent")


def test_timeline_renders_hook_events_and_junk():
    t0 = 1000.0
    records = (
        RequestRecord(0, 1.0, t0 - 0.5, t0 + 0.5, RequestOutcome.COMPLETED, 200, ""),
        RequestRecord(1, 2.0, t0 - 0.1, t0 + 7.0, RequestOutcome.CUT, None, "reset"),
        RequestRecord(2, 2.0, t0 - 5.0, t0 - 3.0, RequestOutcome.COMPLETED, 200, ""),  # before the delete
    )
    report = DeletionReport(
        grace_s=30, hook_kind="exec", hook_started_at=0.01, hook_returned_at=6.1, hook_abandoned=False,
        hook_exit_code=0,
        hook_stdout='{"event":"drain_finished","outcome":"idle","elapsed_s":6.05,"reads":2}\n',
        hook_stderr=('{"event":"drain_started","elapsed_s":0.02,"grace_s":30,"target":"http://127.0.0.1:8000/metrics",'
                     '"first_read_s":5.0,"deadline_s":25.0}\n'
                     '{"event":"read_state","elapsed_s":5.01,"outcome":"busy","in_flight":3.0}\n'
                     '{"event":"config_warning","elapsed_s":0.03,"message":"odd"}\n'
                     'Traceback (most recent call last)\n[1, 2]\n'),
        route_dropped_at=1.0, sigterm_at=6.1, sigkill_at=None, engine_exited_at=8.2, engine_exit_code=0,
        load=LoadTally(records, 0), t0=t0)
    text = render_timeline(report)
    for expected in ("drain started: reads http://127.0.0.1:8000/metrics from 5.0 s, deadline 25.0 s",
                     "read: busy, 3 in flight", "config_warning  message=odd", "drain finished: idle",
                     "(not JSON) Traceback",
                     "(not an object) [1, 2]", "SIGTERM to the engine", "exited, status 0", "last request completed"):
        assert expected in text, expected
    lines = text.splitlines()
    assert lines.index(next(x for x in lines if "drain started" in x)) < lines.index(
        next(x for x in lines if "SIGTERM" in x))
    tally = delete_tally(report)
    assert (tally.touched, tally.completed, tally.cut) == (2, 1, 1)


def test_an_idle_keep_alive_is_closed_5_s_after_its_last_response_as_vllm_does():
    # vLLM: VLLM_HTTP_TIMEOUT_KEEP_ALIVE=5 (ENGINES.md); a router-less retirement waits for exactly this.
    import http.client
    import socket as socket_module

    from emulation.engine_process import EngineProcess
    with EngineProcess("--kind", "vllm") as engine:
        connection = http.client.HTTPConnection("127.0.0.1", engine.port, timeout=10)
        connection.request("GET", "/health")
        connection.getresponse().read()
        answered_at = time.monotonic()
        sock = connection.sock
        sock.settimeout(10)
        assert sock.recv(1, socket_module.MSG_PEEK) == b""  # the server's FIN
        closed_after_s = time.monotonic() - answered_at
        connection.close()
    assert 4.5 <= closed_after_s <= 7.5, closed_after_s
