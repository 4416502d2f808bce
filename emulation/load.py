"""A router in miniature: sends completions to one replica and tallies how each one ended.

    load = LoadGenerator("http://127.0.0.1:8000", rate_per_s=8, durations=SHORT_REQUESTS, seed=1)
    load.start()
    ...                      # delete the Pod
    load.stop_sending()      # the router drops the replica
    tally = load.wait()      # every request has ended
    tally.completed, tally.cut, tally.rejected, tally.refused

It runs its own asyncio loop in a thread, so a plain synchronous test or the demo can drive it.
Every request uses a new connection (as a router spreading load over replicas does), so a closed
listener shows as `refused` rather than as a reused connection that happens to still be open.

Outcomes:
- completed: HTTP 200 with the whole response (a stream up to its [DONE]).
- cut: the connection closed or reset before the whole response, or no response in time.
- rejected: HTTP 5xx, or a stream the engine ended with finish_reason "abort".
- refused: the connection was refused; nothing was sent.
- other: anything else (4xx, a TLS failure), with its detail in the record.
"""

from __future__ import annotations

import asyncio
import enum
import json
import math
import random
import ssl
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import aiohttp

# Requests that outlive this are counted as cut: no router waits longer than a couple of minutes.
DEFAULT_REQUEST_TIMEOUT_S = 120.0

# With fixed concurrency, a worker whose request did not complete (refused at once, say) pauses this
# long before its next one, so a dead replica is not hammered in a busy loop.
FAILED_REQUEST_PAUSE_S = 0.1


class RequestOutcome(enum.Enum):
    COMPLETED = "completed"
    CUT = "cut"
    REJECTED = "rejected"
    REFUSED = "refused"
    OTHER = "other"


@dataclass(frozen=True)
class UniformDurations:
    """Request durations drawn uniformly from [low_s, high_s]."""

    low_s: float
    high_s: float

    def draw(self, rng: random.Random) -> float:
        return rng.uniform(self.low_s, self.high_s)


@dataclass(frozen=True)
class MixedDurations:
    """A weighted mix of uniform ranges: ((weight, low_s, high_s), ...)."""

    parts: tuple[tuple[float, float, float], ...]

    def draw(self, rng: random.Random) -> float:
        weights = [w for w, _, _ in self.parts]
        _, low_s, high_s = rng.choices(self.parts, weights=weights)[0]
        return rng.uniform(low_s, high_s)


# Steady short chat-like requests, and a mix with a long tail (the demo and benches use these).
SHORT_REQUESTS = UniformDurations(0.5, 3.0)
MIXED_REQUESTS = MixedDurations(((0.8, 0.5, 3.0), (0.2, 3.0, 20.0)))

Durations = UniformDurations | MixedDurations

# What one request sends: (duration_s, stream) -> JSON body. The emulator's own body asks for a
# duration; a real engine is asked for tokens instead (engines/servers.py's completion_body).
RequestBody = Callable[[float, bool], dict]


def emulator_body(duration_s: float, stream: bool) -> dict:
    return {"duration_s": duration_s, "stream": stream}


@dataclass(frozen=True)
class RequestRecord:
    index: int
    duration_s: float  # asked of the engine
    started_at: float  # time.monotonic() when the router started sending it
    ended_at: float  # time.monotonic() when it was classified
    outcome: RequestOutcome
    status: int | None  # HTTP status, if a status line arrived
    detail: str  # why, for anything but completed


@dataclass(frozen=True)
class LoadTally:
    records: tuple[RequestRecord, ...]
    in_flight: int

    def count(self, outcome: RequestOutcome) -> int:
        return sum(1 for r in self.records if r.outcome is outcome)

    @property
    def sent(self) -> int:
        return len(self.records) + self.in_flight

    @property
    def completed(self) -> int:
        return self.count(RequestOutcome.COMPLETED)

    @property
    def cut(self) -> int:
        return self.count(RequestOutcome.CUT)

    @property
    def rejected(self) -> int:
        return self.count(RequestOutcome.REJECTED)

    @property
    def refused(self) -> int:
        return self.count(RequestOutcome.REFUSED)

    @property
    def other(self) -> int:
        return self.count(RequestOutcome.OTHER)

    @property
    def last_finished_at(self) -> float | None:
        """When the last completed request finished (monotonic), None if none did."""
        ends = [r.ended_at for r in self.records if r.outcome is RequestOutcome.COMPLETED]
        return max(ends) if ends else None

    @property
    def last_started_at(self) -> float | None:
        return max((r.started_at for r in self.records), default=None)

    def summary(self) -> str:
        return (f"{self.sent} sent: {self.completed} completed, {self.cut} cut, {self.rejected} rejected, "
                f"{self.refused} refused, {self.other} other, {self.in_flight} in flight")


class LoadGenerator:
    def __init__(self, base_url: str, *, rate_per_s: float | None = None, concurrency: int | None = None,
                 durations: Durations = SHORT_REQUESTS, seed: int = 0, stream: bool = False,
                 ca_file: Path | None = None, request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
                 max_requests: int | None = None, request_body: RequestBody = emulator_body):
        """Poisson arrivals at `rate_per_s`, or `concurrency` requests always outstanding (one of them).

        `ca_file` verifies an https engine; without it an https engine is not verified (loopback).
        `max_requests` stops sending after that many. `request_body` builds each request's JSON
        (the emulator's by default).
        """
        if (rate_per_s is None) == (concurrency is None):
            raise ValueError("give exactly one of rate_per_s and concurrency")
        if rate_per_s is not None and not rate_per_s > 0:
            raise ValueError(f"rate_per_s must be > 0, got {rate_per_s}")
        if concurrency is not None and concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        self._url = base_url.rstrip("/") + "/v1/completions"
        self._rate_per_s = rate_per_s
        self._concurrency = concurrency
        self._durations = durations
        self._arrival_rng = random.Random(seed)
        self._duration_rng = random.Random(seed + 1)
        self._stream = stream
        self._tls = self._tls_context(base_url, ca_file)
        # Exactly at the timeout: aiohttp otherwise rounds a deadline of 5 s or more up to the loop
        # clock's next whole second, and a request given up 0-1 s late held an aborting vLLM (which
        # stays while its client waits) that much longer than the router's timeout says.
        self._timeout = aiohttp.ClientTimeout(total=request_timeout_s, ceil_threshold=math.inf)
        self._max_requests = max_requests
        self._request_body = request_body
        self._lock = threading.Lock()
        self._records: list[RequestRecord] = []
        self._in_flight = 0
        self._sent = 0
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._started = threading.Event()
        self._stop_requested = False
        self.stopped_sending_at: float | None = None
        self.error: BaseException | None = None

    @staticmethod
    def _tls_context(base_url: str, ca_file: Path | None) -> ssl.SSLContext | bool:
        if not base_url.startswith("https"):
            return True  # aiohttp's default (unused for http)
        context = ssl.create_default_context(cafile=str(ca_file) if ca_file else None)
        if ca_file is None:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context

    # --- control from the caller's thread --------------------------------------------------------

    def start(self) -> LoadGenerator:
        self._thread = threading.Thread(target=self._run, name="load-generator", daemon=True)
        self._thread.start()
        self._started.wait()
        return self

    def stop_sending(self) -> None:
        """The router drops the replica: no new request from now on (those in flight carry on)."""
        if self._stop_requested:
            return
        self._stop_requested = True
        self.stopped_sending_at = time.monotonic()
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)

    def wait(self, timeout_s: float | None = None) -> LoadTally:
        """Wait until every request has ended (stopping the sending first unless max_requests bounds
        it) and return the tally. Raises TimeoutError if requests are still out after timeout_s."""
        if self._max_requests is None:
            self.stop_sending()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                raise TimeoutError(f"requests still in flight after {timeout_s} s: {self.tally().summary()}")
        if self.error is not None:
            raise RuntimeError("the load generator failed") from self.error
        return self.tally()

    def tally(self) -> LoadTally:
        with self._lock:
            return LoadTally(tuple(self._records), self._in_flight)

    def __enter__(self) -> LoadGenerator:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop_sending()
        if self._thread is not None:
            self._thread.join()

    # --- the loop thread -------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # recorded and re-raised by wait(): a failed thread must show
            self.error = exc
            self._started.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        if self._stop_requested:
            self._stop.set()
        self._started.set()
        connector = aiohttp.TCPConnector(force_close=True, limit=0, ssl=self._tls)
        async with aiohttp.ClientSession(connector=connector, timeout=self._timeout) as session:
            tasks: set[asyncio.Task] = set()
            if self._rate_per_s is not None:
                await self._send_at_rate(session, tasks)
            else:
                await self._send_concurrently(session)
            if tasks:
                await asyncio.gather(*tasks)

    def _may_send(self) -> bool:
        assert self._stop is not None
        return not self._stop.is_set() and (self._max_requests is None or self._sent < self._max_requests)

    async def _send_at_rate(self, session: aiohttp.ClientSession, tasks: set[asyncio.Task]) -> None:
        assert self._stop is not None and self._rate_per_s is not None
        while self._may_send():
            task = asyncio.get_running_loop().create_task(self._one(session))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            gap_s = self._arrival_rng.expovariate(self._rate_per_s)
            try:
                await asyncio.wait_for(self._stop.wait(), timeout=gap_s)
            except asyncio.TimeoutError:
                continue  # the gap passed with no stop: send the next one

    async def _send_concurrently(self, session: aiohttp.ClientSession) -> None:
        async def worker() -> None:
            while self._may_send():
                if await self._one(session) is not RequestOutcome.COMPLETED:
                    await asyncio.sleep(FAILED_REQUEST_PAUSE_S)

        assert self._concurrency is not None
        await asyncio.gather(*(worker() for _ in range(self._concurrency)))

    async def _one(self, session: aiohttp.ClientSession) -> RequestOutcome:
        index = self._sent
        self._sent += 1
        duration_s = self._durations.draw(self._duration_rng)
        with self._lock:
            self._in_flight += 1
        started_at = time.monotonic()
        outcome, status, detail = await self._exchange(session, duration_s)
        record = RequestRecord(index, duration_s, started_at, time.monotonic(), outcome, status, detail)
        with self._lock:
            self._in_flight -= 1
            self._records.append(record)
        return outcome

    async def _exchange(self, session: aiohttp.ClientSession,
                        duration_s: float) -> tuple[RequestOutcome, int | None, str]:
        status: int | None = None
        try:
            async with session.post(self._url, json=self._request_body(duration_s, self._stream)) as response:
                status = response.status
                body = await response.read()
        except aiohttp.ClientConnectorError as exc:
            if isinstance(exc.os_error, ConnectionRefusedError):
                return RequestOutcome.REFUSED, None, str(exc)
            return RequestOutcome.OTHER, None, f"connect failed: {exc}"
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError, aiohttp.ClientOSError,
                ConnectionError) as exc:
            return RequestOutcome.CUT, status, f"{type(exc).__name__}: {exc}"
        except asyncio.TimeoutError:
            return RequestOutcome.CUT, status, "no full response in time"
        except aiohttp.ClientError as exc:
            return RequestOutcome.OTHER, status, f"{type(exc).__name__}: {exc}"
        if status >= 500:
            return RequestOutcome.REJECTED, status, body[:200].decode(errors="replace")
        if status != 200:
            return RequestOutcome.OTHER, status, body[:200].decode(errors="replace")
        if self._stream:
            return self._classify_stream(body)
        try:
            json.loads(body)
        except ValueError:
            return RequestOutcome.CUT, status, f"incomplete JSON body ({len(body)} bytes)"
        return RequestOutcome.COMPLETED, status, ""

    @staticmethod
    def _classify_stream(body: bytes) -> tuple[RequestOutcome, int, str]:
        text = body.decode(errors="replace")
        if "data: [DONE]" not in text:
            return RequestOutcome.CUT, 200, f"stream ended without [DONE] after {len(body)} bytes"
        if '"finish_reason": "abort"' in text:
            return RequestOutcome.REJECTED, 200, "stream ended with finish_reason abort"
        return RequestOutcome.COMPLETED, 200, ""
