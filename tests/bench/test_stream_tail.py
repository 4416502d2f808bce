"""bench/engines/stream_tail.py's judgements: a stream ended whole or cut, and which processes are the server's helpers."""

import os
import signal
import subprocess
import sys
import time

from bench.engines.stream_tail import ended_whole, session_helpers, watch_exits

# How vLLM 0.32's streams end on the wire (Transfer-Encoding: chunked), as the bench recorded them.
WHOLE = b'{"text":"x"}\n\n\r\ne\r\ndata: [DONE]\n\n\r\n0\r\n\r\n'


def test_a_stream_is_whole_only_with_its_last_event_and_the_chunked_end():
    assert ended_whole(WHOLE)
    assert not ended_whole(WHOLE[:-5])  # cut before the last chunk
    assert not ended_whole(WHOLE[:-7])  # the event, but not the body's end
    assert not ended_whole(b'data: {"text":"x"}\n\n\r\n0\r\n\r\n')  # ended without the last event
    assert not ended_whole(b"")


def test_the_helpers_are_the_servers_session_and_their_exit_is_seen():
    code = "import subprocess,sys,time; subprocess.Popen([sys.executable,'-c','import time; time.sleep(60)']); time.sleep(60)"
    server = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not (helpers := session_helpers(server.pid)):
            assert time.monotonic() < deadline, "the child never showed"
            time.sleep(0.05)
        assert server.pid not in helpers and len(helpers) == 1
        gone: list[float] = []
        os.kill(helpers[0], signal.SIGTERM)
        watch_exits(helpers, gone)
        assert gone, "the helper's exit (a zombie until reaped) was not seen"
    finally:
        server.kill()
        server.wait()
