"""Does vLLM's SIGTERM cut a stream whose tail is still going out to a slow reader?

    python -m bench.engines.stream_tail [--repeats 3] [--read-delay 0.04] [--sigterm-after 0.1]
        [--vllm-args "--shutdown-timeout 20"] [--out FILE.json]

Needs the real-engine tier (`make engines`). Each repeat starts a fresh real vLLM (default:
default SIGTERM, one API server), sends one streaming completion read slowly (lifecycle.py's
slow-reader row: a 4 KB receive buffer, 1 KB per --read-delay), and samples the work gauges and
the kernel's socket table for the engine's port (/proc/net/tcp: the server's unacknowledged
bytes, tx_queue) every SAMPLE_INTERVAL_S. Once the gauges read zero after counting the request
while the client is still reading (the tail: the engine core is done, the API server still
writes), it sends SIGTERM to the server and records whether the client still got the whole
stream (its last event, then the chunked body's end), how long it still read, and when the
server and its helpers (the engine core) exited. docs/engines.md's table is this output.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass

from bench.engines import command
from bench.engines.lifecycle import ClientRequest, completion, gauges_of, post, scrape
from bench.engines.unsent import unsent_bytes
from engines import tier as tier_module
from engines.servers import RealEngine
from modeldrain.hook.kernel_sockets import KernelSocketError

SAMPLE_INTERVAL_S = 0.05
GAUGES = ("vllm:num_requests_running", "vllm:num_requests_waiting")
# lifecycle.py's slow-reader row (600 tokens, a 4 KB receive buffer), read at half its pace
# (--read-delay): ~145 KB at 1 KB per 40 ms takes ~6 s, so the tail outlasts the engine's ~3 s of
# work even when other engines share the 2 cores (at 20 ms it sometimes did not).
TOKENS = 600
READ_DELAY_S = 0.04
RCVBUF = 4096
# How long after the gauges' first zero with the stream still out the SIGTERM goes (--sigterm-after):
# inside the window prestop's two idle reads would take.
SIGTERM_AFTER_ZERO_S = 0.1
CLIENT_WAIT_S = 120.0
# vLLM streams with Transfer-Encoding: chunked; a whole body ends with its zero-length chunk.
CHUNKED_END = b"\r\n0\r\n\r\n"
DONE_EVENT = b"data: [DONE]"


@dataclass
class Repeat:
    completed: bool  # the client read `data: [DONE]`
    whole: bool  # ...and the chunked body's last chunk after it: the response ended as HTTP says
    last_bytes: str
    bytes_read: int
    sigterm_after_engine_done_s: float | None  # SIGTERM's time after the gauges' first zero
    tail_after_sigterm_s: float | None  # how long the client still read after SIGTERM
    tx_queue_at_sigterm: int | None  # the server's unacknowledged bytes on the engine's port then
    tail_s: float | None  # from the gauges' first zero until the client read the end (or SIGTERM)
    min_tx_queue_in_tail: int | None  # the least unacknowledged bytes sampled in that time
    tail_samples: int  # samples of the socket table in that time
    tail_samples_owing: int  # ...of which the engine's port owed bytes (tx_queue > 0)
    client_error: str
    server_exit_s: float | None
    # When the server's helper processes (the engine core: what holds the accelerator) had all exited.
    helpers_exit_s: float | None
    loadavg_1m: float


def one(tier: tier_module.Tier, sigterm_after_s: float | None, read_delay_s: float,
        extra: tuple[str, ...] = ()) -> Repeat:
    with RealEngine.vllm(tier, *extra) as engine:
        print(f"vllm healthy after {engine.start_s:.0f} s", file=sys.stderr, flush=True)
        record = ClientRequest()
        received = bytearray()
        request = ("/v1/completions", completion(TOKENS, stream=True))
        client = threading.Thread(target=post_recording, args=(engine.port, *request, record, received, read_delay_s),
                                  daemon=True)
        client.start()
        counted = False
        zero_at = sigterm_at = None
        tx_queue = None
        tail_tx: list[int] = []
        helpers_gone: list[float] = []
        while client.is_alive():
            body = scrape(engine.port, "/metrics")
            in_flight = sum(gauges_of(body, GAUGES).values()) if body is not None else None
            if in_flight:
                counted = True
            elif in_flight == 0 and counted and zero_at is None:
                zero_at = time.monotonic()
            if zero_at is not None:
                try:
                    tx_queue = unsent_bytes("/proc", [engine.port]).bytes
                    tail_tx.append(tx_queue)
                except KernelSocketError as exc:
                    print(f"socket table: {exc}", file=sys.stderr)
            if zero_at is not None and sigterm_after_s is not None and time.monotonic() - zero_at >= sigterm_after_s:
                assert engine.process is not None
                helpers = session_helpers(engine.process.pid)
                sigterm_at = time.monotonic()
                engine.process.send_signal(signal.SIGTERM)
                helpers_watch = threading.Thread(target=watch_exits, args=(helpers, helpers_gone), daemon=True)
                helpers_watch.start()
                break
            time.sleep(SAMPLE_INTERVAL_S)
        client.join(CLIENT_WAIT_S)
        exit_s = None
        if sigterm_at is not None and engine.process is not None:
            try:
                engine.process.wait(30)
                exit_s = time.monotonic() - sigterm_at
            except Exception:  # noqa: BLE001 - still running: stop() below kills it
                pass
        done_at = record.done_at
        return Repeat(
            completed=DONE_EVENT in received,
            whole=ended_whole(bytes(received)),
            last_bytes=bytes(received[-60:]).decode(errors="replace"),
            bytes_read=len(received),
            sigterm_after_engine_done_s=None if sigterm_at is None or zero_at is None else round(sigterm_at - zero_at, 3),
            tail_after_sigterm_s=None if sigterm_at is None or done_at is None else round(done_at - sigterm_at, 3),
            tx_queue_at_sigterm=tx_queue if sigterm_at is not None else None,
            tail_s=None if zero_at is None else round((sigterm_at or done_at or 0.0) - zero_at, 3),
            min_tx_queue_in_tail=min(tail_tx, default=None), tail_samples=len(tail_tx),
            tail_samples_owing=sum(1 for b in tail_tx if b > 0), client_error=record.error[:120],
            server_exit_s=None if exit_s is None else round(exit_s, 2),
            helpers_exit_s=round(helpers_gone[0] - sigterm_at, 2) if helpers_gone and sigterm_at else None, loadavg_1m=round(os.getloadavg()[0], 2))




def ended_whole(received: bytes) -> bool:
    """The stream's last event came, then the chunked body's end: nothing was cut."""
    return received.endswith(CHUNKED_END) and DONE_EVENT in received[-len(DONE_EVENT) - 64:]


def session_helpers(pid: int) -> list[int]:
    """The other processes of the server's session (RealEngine starts it in one of its own)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != pid:
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == pid:  # the session id
                found.append(int(entry))
    return found


def watch_exits(pids: list[int], gone: list[float]) -> None:
    """Appends the time at which every pid had exited (a zombie has)."""
    deadline = time.monotonic() + CLIENT_WAIT_S
    while time.monotonic() < deadline:
        alive = False
        for pid in pids:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    alive = alive or f.read().rsplit(")", 1)[1].split()[0] != "Z"
            except OSError:
                pass
        if not alive:
            gone.append(time.monotonic())
            return
        time.sleep(SAMPLE_INTERVAL_S)


# The slow reader's socket gives up after this long without a byte (a hung engine).
CLIENT_SOCKET_TIMEOUT_S = 60.0


def post_recording(port: int, path: str, body: dict, record: ClientRequest, received: bytearray,
                   read_delay_s: float) -> None:
    """lifecycle.post as this bench's slow reader: a 4 KB receive buffer, every byte kept."""
    post(port, path, body, record, read_delay_s=read_delay_s, rcvbuf=RCVBUF, timeout_s=CLIENT_SOCKET_TIMEOUT_S,
         received_into=received)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sigterm-after", type=float, default=SIGTERM_AFTER_ZERO_S,
                        help="seconds after the gauges' first zero; negative: no SIGTERM (the tail's length alone)")
    parser.add_argument("--read-delay", type=float, default=READ_DELAY_S, help="seconds between 1 KB reads")
    parser.add_argument("--vllm-args", default="", help="more vLLM flags, e.g. '--shutdown-timeout 20'")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    found = command.tier("python -m bench.engines.stream_tail")
    rows: list[Repeat] = []
    for _ in range(args.repeats):
        command.keep(rows, one(found, None if args.sigterm_after < 0 else args.sigterm_after, args.read_delay,
                               tuple(args.vllm_args.split())))
    command.write_rows(args.out, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
