"""Attackers of a drain-sidecar with no token: connections that hold slots, floods, slowloris.

    .venv/bin/python -m bench.reliability.attack --port P --seconds S [--hold 64 --hold-every 2]
        [--flood 200] [--slowloris 64] [--json tally.json]

A process of its own, so that its work does not slow the clients it is measured against in
their own interpreter (they still share the machine's cores). Three shapes, any together:

- hold: N keep-alive connections, each sending GET /healthz (no token needed) every few seconds
  and reading the answer: every connection slot taken by a client that is allowed to be there;
  a connection the server closes is reopened at once;
- flood: R new connections a second, each one GET /healthz, then closed;
- slowloris: N connections trickling a request head one byte a second, never finishing it;
  reopened when the server closes them.

At the end it prints (and writes) its tally: connections opened, answers by status, connections
the server closed under it, connect failures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Awaitable, Callable

REQUEST = b"GET /healthz HTTP/1.1\r\nHost: sidecar\r\n\r\n"
REQUEST_CLOSE = b"GET /healthz HTTP/1.1\r\nHost: sidecar\r\nConnection: close\r\n\r\n"
SLOW_HEAD = b"GET /healthz HTTP/1.1\r\nHost: sidecar\r\nX-Slow: "
# A flood keeps at most this many of its connections open at once (the attacker's descriptors).
MAX_FLOOD_OPEN = 512
ANSWER_TIMEOUT_S = 10.0
# After the server closes a slowloris or holding connection, or refuses one, wait this long
# before reopening it: a reconnecting client, not a busy loop.
REOPEN_PAUSE_S = 0.05


@dataclass
class Tally:
    opened: int = 0
    connect_failures: int = 0
    answers: dict[str, int] = field(default_factory=dict)  # status -> count
    closed_by_server: int = 0  # connections the server closed (evicted, timed out, or 503'd)

    def answer(self, status: str) -> None:
        self.answers[status] = self.answers.get(status, 0) + 1


async def read_answer(reader: asyncio.StreamReader) -> str:
    """One HTTP response: its status code, its body read (Content-Length) so the next can follow."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = lines[0].split(" ")[1] if " " in lines[0] else "?"
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    await reader.readexactly(length)
    return status


async def _open(port: int, tally: Tally) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        tally.connect_failures += 1
        await asyncio.sleep(REOPEN_PAUSE_S)
        return None
    tally.opened += 1
    return reader, writer


# What a request on a connection the server closed (or answered garbage on) raises.
_CLOSED = (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ValueError)


async def _ask(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes, tally: Tally) -> None:
    writer.write(request)
    tally.answer(await asyncio.wait_for(read_answer(reader), ANSWER_TIMEOUT_S))


async def _reopening(port: int, stop_at: float, tally: Tally,
                     converse: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
                     closed: tuple[type[BaseException], ...]) -> None:
    """A connection kept until `stop_at`, `converse` holding it; one the server closes (`converse`
    raising one of `closed`) is counted and, after a pause, opened again."""
    while time.monotonic() < stop_at:
        opened = await _open(port, tally)
        if opened is None:
            continue
        reader, writer = opened
        try:
            await converse(reader, writer)
        except closed:
            tally.closed_by_server += 1
            await asyncio.sleep(REOPEN_PAUSE_S)
        finally:
            writer.close()


async def hold(port: int, every_s: float, stop_at: float, tally: Tally, offset_s: float) -> None:
    async def keep_asking(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while time.monotonic() < stop_at:
            await _ask(reader, writer, REQUEST, tally)
            await asyncio.sleep(every_s)

    await asyncio.sleep(offset_s)  # spread: the N connections do not all ask in the same instant
    await _reopening(port, stop_at, tally, keep_asking, _CLOSED)


async def _one_flood_request(port: int, tally: Tally, slots: asyncio.Semaphore) -> None:
    try:
        opened = await _open(port, tally)
        if opened is None:
            return
        reader, writer = opened
        try:
            await _ask(reader, writer, REQUEST_CLOSE, tally)
        except _CLOSED:
            tally.closed_by_server += 1
        finally:
            writer.close()
    finally:
        slots.release()


async def flood(port: int, per_s: float, stop_at: float, tally: Tally) -> None:
    slots = asyncio.Semaphore(MAX_FLOOD_OPEN)
    tasks = set()
    next_at = time.monotonic()
    while time.monotonic() < stop_at:
        await slots.acquire()
        task = asyncio.create_task(_one_flood_request(port, tally, slots))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        next_at += 1.0 / per_s
        await asyncio.sleep(max(0.0, next_at - time.monotonic()))
    await asyncio.gather(*tasks, return_exceptions=True)


async def slowloris(port: int, stop_at: float, tally: Tally, offset_s: float) -> None:
    async def trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(SLOW_HEAD)
        while time.monotonic() < stop_at:
            await asyncio.sleep(1.0)
            if reader.at_eof():
                raise ConnectionResetError("closed by the server")
            writer.write(b"a")
            await writer.drain()

    await asyncio.sleep(offset_s)
    await _reopening(port, stop_at, tally, trickle, (OSError,))


async def attack(port: int, seconds: float, *, hold_n: int, hold_every_s: float, flood_per_s: float,
                 slowloris_n: int) -> dict[str, Tally]:
    stop_at = time.monotonic() + seconds
    tallies = {"hold": Tally(), "flood": Tally(), "slowloris": Tally()}
    jobs = [hold(port, hold_every_s, stop_at, tallies["hold"], hold_every_s * i / max(1, hold_n))
            for i in range(hold_n)]
    jobs += [slowloris(port, stop_at, tallies["slowloris"], i / max(1, slowloris_n)) for i in range(slowloris_n)]
    if flood_per_s > 0:
        jobs.append(flood(port, flood_per_s, stop_at, tallies["flood"]))
    await asyncio.gather(*jobs)
    return tallies


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.reliability.attack", description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--hold", type=int, default=0, help="keep-alive connections holding slots")
    parser.add_argument("--hold-every", type=float, default=2.0, help="seconds between a holder's requests")
    parser.add_argument("--flood", type=float, default=0.0, help="new connections a second")
    parser.add_argument("--slowloris", type=int, default=0, help="connections trickling a request head")
    parser.add_argument("--json", type=Path, help="also write the tally here")
    args = parser.parse_args(argv)
    tallies = asyncio.run(attack(args.port, args.seconds, hold_n=args.hold, hold_every_s=args.hold_every,
                                 flood_per_s=args.flood, slowloris_n=args.slowloris))
    report = {name: asdict(t) for name, t in tallies.items()}
    print(json.dumps(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
