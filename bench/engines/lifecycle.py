"""Each real engine's request lifecycle, measured: which signal shows a request in each phase, and how late.

    python -m bench.engines.lifecycle [--engines vllm,vllm-api2,sglang] [--out FILE.json]

Needs the real-engine tier (`make engines`). For each engine it starts a real server, then runs
each scenario while a sampler polls the work gauges (and vLLM's GET /load, the server started with
--enable-server-load-tracking) every SAMPLE_INTERVAL_S. The client keeps its own clock of each
request (sent, first byte, done); the rows compare the two:

- rise_s: from the last request sent until the gauges count every request (None: never all at once);
  load_rise_s the same for /load;
- max_uncounted: the most requests out (sent, not done, per the client) that the gauges missed in one
  sample, and max_load_uncounted the same for /load;
- fall_s: from the last response read until the gauges read zero; load_fall_s for /load;
- zero_while_out_s: how long the gauges read zero while the client still had a request out.

docs/engines.md's lifecycle tables are this output, with the machine's load average beside it.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

from bench.engines import command
from engines.servers import SERVED_MODEL_NAME, RealEngine

# Often enough to see a tick of SGLang's gauges (its idle timer, its decode_log_interval steps)
# and vLLM's per-step updates, rarely enough that the sampler's scrapes do not load the 2 cores.
SAMPLE_INTERVAL_S = 0.05
# After the last response: how long the sampler keeps watching for the gauges to reach zero.
TAIL_S = 8.0
BURST = 32

GAUGES = {
    "vllm": ("vllm:num_requests_running", "vllm:num_requests_waiting"),
    "sglang": ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:num_grammar_queue_reqs",
               "sglang:num_prefill_bootstrap_queue_reqs", "sglang:num_prefill_inflight_queue_reqs",
               "sglang:num_decode_prealloc_queue_reqs", "sglang:num_decode_transfer_queue_reqs",
               "sglang:num_decode_host_receive_queue_reqs", "sglang:num_decode_deferred_kv_release_reqs",
               "sglang:num_paused_reqs", "sglang:num_retracted_reqs"),
}
# What the gauge set counted before this measurement (modeldrain/hook/gauges.py's unified sets).
COUNTED = {"vllm": GAUGES["vllm"], "sglang": ("sglang:num_running_reqs", "sglang:num_queue_reqs")}
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


@dataclass
class Sample:
    t: float
    gauges: dict[str, float]
    load: float | None


@dataclass
class Row:
    engine: str
    scenario: str
    requests: int
    rise_s: float | None
    load_rise_s: float | None
    max_uncounted: int
    max_load_uncounted: int | None
    fall_s: float | None
    load_fall_s: float | None
    zero_while_out_s: float
    max_by_gauge: dict[str, float]
    loadavg_1m: float
    note: str = ""
    completed: int = 0
    errors: list[str] = field(default_factory=list)


def scrape(port: int, path: str) -> bytes | None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.read() if response.status == 200 else None
    except OSError:
        return None
    finally:
        connection.close()


def sample_lines(body: bytes) -> Iterator[tuple[str, str, str]]:
    """Each sample line of an exposition as written: its name, its label set ('' when none), its
    value (a caller converts the ones it wants: a line it skips is never parsed)."""
    for line in body.decode(errors="replace").splitlines():
        match = _SAMPLE.match(line)
        if match:
            yield match.group(1), match.group(2) or "", match.group(3)


def gauges_of(body: bytes, names: tuple[str, ...]) -> dict[str, float]:
    sums: dict[str, float] = {}
    for name, _, value in sample_lines(body):
        if name in names:
            sums[name] = sums.get(name, 0.0) + float(value)
    return sums


class Sampler(threading.Thread):
    def __init__(self, engine: RealEngine, read_load: bool):
        super().__init__(daemon=True)
        self.engine, self.read_load = engine, read_load
        self.samples: list[Sample] = []
        self._halt = threading.Event()

    def run(self) -> None:
        names = GAUGES[self.engine.kind]
        while not self._halt.is_set():
            started = time.monotonic()
            body = scrape(self.engine.port, "/metrics")
            load = None
            if self.read_load:
                raw = scrape(self.engine.port, "/load")
                load = float(json.loads(raw)["server_load"]) if raw else None
            if body is not None:
                self.samples.append(Sample((started + time.monotonic()) / 2, gauges_of(body, names), load))
            self._halt.wait(max(0.0, SAMPLE_INTERVAL_S - (time.monotonic() - started)))

    def stop(self) -> list[Sample]:
        self._halt.set()
        self.join()
        return self.samples


@dataclass
class ClientRequest:
    sent_at: float = 0.0
    first_byte_at: float | None = None
    done_at: float | None = None
    ok: bool = False
    error: str = ""


def post(port: int, path: str, body: dict, record: ClientRequest, *, read_delay_s: float = 0.0,
         cancel: threading.Event | None = None, rcvbuf: int | None = None, timeout_s: float = 300.0,
         received_into: bytearray | None = None) -> None:
    """One request on its own socket. read_delay_s: a slow reader (1 KB per delay). cancel: close
    the socket as soon as it is set (a client that goes away). received_into: every byte read, for a
    caller that checks the response's end (bench/engines/stream_tail.py)."""
    payload = json.dumps(body).encode()
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n").encode()
    sock = socket.socket()
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(0.2 if cancel else timeout_s)
    received = b""
    try:
        sock.connect(("127.0.0.1", port))
        record.sent_at = time.monotonic()
        sock.sendall(head + payload)
        while True:
            if cancel is not None and cancel.is_set():
                record.error = "cancelled"
                break
            try:
                chunk = sock.recv(1024 if read_delay_s else 65536)
            except socket.timeout:
                continue
            if not chunk:
                break
            if record.first_byte_at is None:
                record.first_byte_at = time.monotonic()
            received += chunk
            if received_into is not None:
                received_into.extend(chunk)
            if read_delay_s:
                time.sleep(read_delay_s)
        record.ok = received.startswith(b"HTTP/1.1 200") and (b"[DONE]" in received or b'"choices"' in received)
        if not record.ok and not record.error:
            record.error = received[:200].decode(errors="replace")
    except OSError as exc:
        record.error = f"{type(exc).__name__}: {exc}"
    finally:
        record.done_at = time.monotonic()
        sock.close()


def completion(tokens: int, prompt: str = "the replica drains", **extra: object) -> dict:
    return {"model": SERVED_MODEL_NAME, "prompt": prompt, "max_tokens": tokens, "ignore_eos": True, **extra}


def chat(tokens: int) -> dict:
    return {"model": SERVED_MODEL_NAME, "messages": [{"role": "user", "content": "drain the replica"}],
            "max_tokens": tokens, "ignore_eos": True}


def schema_body(index: int, tokens: int) -> dict:
    """A json_schema response format new to the engine (its grammar is compiled, not cached)."""
    props = {f"field_{index}_{k}": {"type": "integer"} for k in range(8)}
    schema = {"type": "object", "properties": props, "required": list(props)}
    return completion(tokens, ignore_eos=False,
                      response_format={"type": "json_schema",
                                       "json_schema": {"name": f"s{index}", "schema": schema}})


LONG_PROMPT = " ".join(["graceful shutdown of the replica"] * 350)  # ~1800 tokens of the tiny BPE


@dataclass(frozen=True)
class Scenario:
    name: str
    note: str
    requests: Callable[[int], tuple[str, dict]]  # index -> (path, body)
    count: int = BURST
    read_delay_s: float = 0.0
    rcvbuf: int | None = None
    cancel_after_s: float | None = None  # close every client socket this long after the last send


SCENARIOS = (
    Scenario("completions", "32 completions at once, 64 tokens each",
             lambda i: ("/v1/completions", completion(64))),
    Scenario("chat", "32 chat completions at once (chat template), 64 tokens each",
             lambda i: ("/v1/chat/completions", chat(64))),
    Scenario("long prompts", "16 prompts of ~1800 tokens at once, 8 tokens out",
             lambda i: ("/v1/completions", completion(8, prompt=LONG_PROMPT)), count=16),
    Scenario("structured", "16 json_schema requests at once, each schema new",
             lambda i: ("/v1/completions", schema_body(i, 64)), count=16),
    Scenario("slow reader", "1 stream of 600 tokens, client reads 1 KB per 20 ms, 4 KB receive buffer",
             lambda i: ("/v1/completions", completion(600, stream=True)), count=1, read_delay_s=0.02,
             rcvbuf=4096),
    Scenario("cancel storm", "32 streams of 1500 tokens; every client closes 2 s after the last send",
             lambda i: ("/v1/completions", completion(1500, stream=True)), cancel_after_s=2.0),
)


def run_scenario(engine: RealEngine, scenario: Scenario, label: str, read_load: bool) -> Row:
    sampler = Sampler(engine, read_load)
    sampler.start()
    time.sleep(0.5)  # a few idle samples first
    records = [ClientRequest() for _ in range(scenario.count)]
    cancel = threading.Event() if scenario.cancel_after_s is not None else None
    threads = []
    for i, record in enumerate(records):
        path, body = scenario.requests(i)
        thread = threading.Thread(target=post, args=(engine.port, path, body, record),
                                  kwargs={"read_delay_s": scenario.read_delay_s, "cancel": cancel,
                                          "rcvbuf": scenario.rcvbuf}, daemon=True)
        thread.start()
        threads.append(thread)
    if cancel is not None:
        time.sleep(scenario.cancel_after_s or 0.0)
        cancel.set()
    for thread in threads:
        thread.join(600)
    time.sleep(TAIL_S)
    samples = sampler.stop()
    return summarize(engine.kind, label, scenario, records, samples, read_load)


def summarize(kind: str, label: str, scenario: Scenario, records: list[ClientRequest], samples: list[Sample],
              read_load: bool) -> Row:
    counted = COUNTED[kind]
    last_sent = max(r.sent_at for r in records)
    last_done = max(r.done_at or 0.0 for r in records)
    n = len(records)

    def out_at(t: float) -> int:
        return sum(1 for r in records if r.sent_at <= t and (r.done_at is None or r.done_at > t))

    def in_gauges(s: Sample) -> float:
        return sum(s.gauges.get(g, 0.0) for g in counted)

    rise = next((s.t - last_sent for s in samples if s.t >= last_sent and in_gauges(s) >= n), None)
    load_rise = next((s.t - last_sent for s in samples if s.t >= last_sent and (s.load or 0) >= n), None) \
        if read_load else None
    fall = next((s.t - last_done for s in samples if s.t >= last_done and in_gauges(s) == 0), None)
    load_fall = next((s.t - last_done for s in samples if s.t >= last_done and s.load == 0), None) \
        if read_load else None
    max_uncounted = max((out_at(s.t) - int(in_gauges(s)) for s in samples), default=0)
    max_load_uncounted = max((out_at(s.t) - int(s.load or 0) for s in samples), default=0) if read_load else None
    zero_out = 0.0
    for a, b in zip(samples, samples[1:]):
        if in_gauges(a) == 0 and out_at(a.t) > 0:
            zero_out += b.t - a.t
    max_by_gauge: dict[str, float] = {}
    for s in samples:
        for name, value in s.gauges.items():
            max_by_gauge[name] = max(max_by_gauge.get(name, 0.0), value)
    if read_load:
        max_by_gauge["/load"] = max((s.load or 0.0 for s in samples), default=0.0)
    errors = sorted({r.error for r in records if r.error and r.error != "cancelled"})[:3]
    return Row(label, scenario.name, n, _round(rise), _round(load_rise), max(0, max_uncounted),
               None if max_load_uncounted is None else max(0, max_load_uncounted), _round(fall), _round(load_fall),
               round(zero_out, 2), max_by_gauge, round(os.getloadavg()[0], 2), scenario.note,
               sum(1 for r in records if r.ok), errors)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


ENGINE_RUNS: dict[str, tuple[str, tuple[str, ...], bool]] = {
    # label: (kind, extra argv, reads /load)
    "vllm": ("vllm", ("--enable-server-load-tracking",), True),
    "vllm-api2": ("vllm", ("--enable-server-load-tracking", "--api-server-count", "2"), True),
    "sglang": ("sglang", (), False),
}
# --api-server-count 2: the burst rows are what differ (/load is one API process's count).
API2_SCENARIOS = ("completions", "long prompts")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--engines", default="vllm,vllm-api2,sglang")
    parser.add_argument("--scenarios", default=",".join(s.name for s in SCENARIOS))
    parser.add_argument("--out", default=None, help="write the rows here as JSON")
    args = parser.parse_args(argv)
    found = command.tier("python -m bench.engines.lifecycle")
    rows: list[Row] = []
    wanted = args.scenarios.split(",")
    for label in args.engines.split(","):
        kind, extra, read_load = ENGINE_RUNS[label]
        start = RealEngine.vllm if kind == "vllm" else RealEngine.sglang
        with start(found, *extra) as engine:
            print(f"{label}: healthy after {engine.start_s:.0f} s", file=sys.stderr, flush=True)
            for scenario in SCENARIOS:
                if scenario.name not in wanted or (label == "vllm-api2" and scenario.name not in API2_SCENARIOS):
                    continue
                command.keep(rows, run_scenario(engine, scenario, label, read_load))
    command.write_rows(args.out, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
