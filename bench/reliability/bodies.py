"""What a hostile engine sends: the bodies and raw HTTP responses the reliability figures serve.

Each is one way an engine's /metrics broke a reader once (issue 12), or the worst the reader's
caps admit. They are served byte for byte by a scripted listener (emulation/raw_server.py),
so the programs read them over a real socket exactly as they would read an engine.
"""

from __future__ import annotations

from bench.paths import REPO
from emulation.raw_server import http_response

# Bodies that once broke a reader, replayed by tests/hook/test_exposition_differential.py too.
CORPUS = REPO / "tests" / "hook" / "corpus" / "exposition"

TEXT = "text/plain; version=0.0.4; charset=utf-8"
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"

# An engine with work in flight, and the same engine idle (vLLM's two work gauges).
BUSY_VLLM = b'vllm:num_requests_running{engine="0"} 2\nvllm:num_requests_waiting{engine="0"} 1\n'
IDLE_VLLM = b'vllm:num_requests_running{engine="0"} 0\nvllm:num_requests_waiting{engine="0"} 0\n'

# A float holds integers up to ~1.8e308: one with more digits is an int prometheus-client gives
# back as such, and float() of it raises OverflowError.
TOO_LARGE_FOR_A_FLOAT = "1" + "0" * 400

# A label costs prometheus-client's text parser more the more labels precede it on the line
# (superlinear in the labels of one line). The bodies: lines of thousands of labels.
MANY_LABELS = 3000
# The reader's cap on a line (modeldrain/hook/exposition.py MAX_LINE_CHARS): a line just under it is the
# most one line may cost and still be parsed.
LINE_CAP_CHARS = 4096


def http_200(body: bytes, content_type: str = TEXT) -> bytes:
    """A 200 as a real engine labels its exposition (with the charset)."""
    return http_response(body, content_type=content_type)


def chunked_200(body: bytes, size_line: bytes) -> bytes:
    """A chunked 200 whose one chunk is announced by `size_line` (malformed, or absurdly large)."""
    return (f"HTTP/1.1 200 OK\r\nContent-Type: {TEXT}\r\nTransfer-Encoding: chunked\r\n"
            "Connection: close\r\n\r\n").encode() + size_line + b"\r\n" + body + b"\r\n0\r\n\r\n"


def vllm_body(running: str, waiting: str = "0", extra: str = "") -> bytes:
    return (f'vllm:num_requests_running{{engine="0"}} {running}\n'
            f'vllm:num_requests_waiting{{engine="0"}} {waiting}\n{extra}').encode()


def labelled_line(name: str, labels: int, value: str, tag: int = 0) -> str:
    """`name{a0="",a1="",...} value`: one sample line carrying `labels` labels."""
    inner = ",".join(f'a{i}=""' for i in range(labels - 1))
    return f'{name}{{{inner},line="{tag}"}} {value}\n'


def labels_to_fill(chars: int) -> int:
    """How many labels make a `labelled_line` about `chars` characters long."""
    per_label = len('a999="",')
    return max(2, (chars - 40) // per_label)


def heavy_idle_body(total_bytes: int, labels_per_line: int) -> bytes:
    """Idle work gauges, then other lines of `labels_per_line` labels up to `total_bytes`.

    The work gauges read idle on the fast path, so the reader must parse the whole body to confirm
    idle (modeldrain/hook/exposition.py): the body is all parse cost, bounded only by the reader's caps and
    its clock."""
    parts = [IDLE_VLLM.decode()]
    size = len(parts[0])
    tag = 0
    while size < total_bytes:
        line = labelled_line("engine_filler_info", labels_per_line, "1", tag)
        parts.append(line)
        size += len(line)
        tag += 1
    return "".join(parts).encode()


def corpus_bodies() -> list[tuple[str, bytes, str]]:
    """(name, body, content type) of every body in the corpus of bodies that broke a reader."""
    out = []
    for path in sorted(CORPUS.glob("*.txt")):
        content_type = OPENMETRICS if path.name.endswith(".om.txt") else TEXT
        out.append((path.name, path.read_bytes(), content_type))
    return out


# Issue 15: a busy series of a work gauge hidden from prometheus-client's parse. Each read idle.
TYPED_IDLE_VLLM = (b'# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine="0"} 0\n'
                   b'# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{engine="0"} 0\n')
HIDDEN_WORK_LINES: dict[str, str] = {
    "a zero-width space after a work gauge's quoted name": '{"vllm:num_requests_running\u200b",engine="1"} 4\n',
    "a BOM in a work gauge's __name__ label": '{__name__="\ufeffvllm:num_requests_waiting",engine="1"} 2\n',
    "a soft hyphen inside a work gauge's bare name": 'vllm:num_requests_run\u00adning{engine="1"} 3\n',
    "a NUL after a work gauge's quoted name": '{"vllm:num_requests_running\x00"} 1\n',
    "a word joiner and a ZWJ inside a quoted name": '{"vllm:num_\u2060requests_\u200drunning"} 2\n',
    "a line feed escaped into a work gauge's name": '{"vllm:num_requests_run\\nning"} 5\n',
    "a work gauge re-typed as a counter": '# TYPE vllm:num_requests_running counter\nvllm:num_requests_running{engine="1"} 5\n',
    "a second gauge TYPE line, a counter's samples between": 'other 1\n# TYPE vllm:num_requests_running gauge\n'
                                                              'vllm:num_requests_running{engine="1"} 5\n',
    "a work gauge typed untyped": '# TYPE vllm:num_requests_waiting untyped\nvllm:num_requests_waiting{engine="1"} 1\n',
}


def hidden_work_body(line: str) -> bytes:
    return TYPED_IDLE_VLLM + line.encode()


def raw_200(fields: list[bytes], payload: bytes, status: bytes = b"HTTP/1.1 200 OK") -> bytes:
    """A response with exactly these header fields (no Content-Length unless one is given)."""
    return status + b"\r\n" + b"".join(f + b"\r\n" for f in [f"Content-Type: {TEXT}".encode(), *fields]) + b"\r\n" + payload


def chunked_payload(body: bytes) -> bytes:
    return b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n"


# Issue 15: framing RFC 9112 calls unrecoverable, each hiding the busy line behind idle ones.
_WHOLE = IDLE_VLLM + b'vllm:num_requests_running{engine="1"} 4\n'
UNTRUSTED_FRAMING: dict[str, bytes] = {
    "two Content-Lengths (the idle lines', the whole body's)":
        raw_200([b"Content-Length: %d" % len(IDLE_VLLM), b"Content-Length: %d" % len(_WHOLE)], _WHOLE),
    "one Content-Length of two values":
        raw_200([b"Content-Length: %d, %d" % (len(IDLE_VLLM), len(_WHOLE))], _WHOLE),
    "Content-Length with a sign (+N)": raw_200([b"Content-Length: +%d" % len(IDLE_VLLM)], _WHOLE),
    "Content-Length with an underscore (N_0)": raw_200([b"Content-Length: %d_0" % len(IDLE_VLLM)], _WHOLE),
    "Content-Length short of the body, the rest right behind it":
        raw_200([b"Content-Length: %d" % len(IDLE_VLLM)], _WHOLE),
    "Transfer-Encoding chunked and Content-Length":
        raw_200([b"Transfer-Encoding: chunked", b"Content-Length: %d" % len(IDLE_VLLM)], chunked_payload(_WHOLE)),
    "Transfer-Encoding chunked, chunked": raw_200([b"Transfer-Encoding: chunked, chunked"], chunked_payload(_WHOLE)),
    "Transfer-Encoding on HTTP/1.0":
        raw_200([b"Transfer-Encoding: chunked"], chunked_payload(_WHOLE), status=b"HTTP/1.0 200 OK"),
    "chunk size with 0x": raw_200([b"Transfer-Encoding: chunked"], b"0x%x\r\n" % len(_WHOLE) + _WHOLE
                                  + b"\r\n0\r\n\r\n"),
    "chunk data past its size (no CRLF after it)":
        raw_200([b"Transfer-Encoding: chunked"], b"%x\r\n" % len(IDLE_VLLM) + _WHOLE + b"\r\n0\r\n\r\n"),
    "close-delimited body cut mid-line": raw_200([b"Connection: close"], _WHOLE[: len(IDLE_VLLM) + 28]),
    "101 Switching Protocols, then a 200": b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n" + http_200(_WHOLE),
    "100 000 interim 103s at once, then a 200": b"HTTP/1.1 103 Early Hints\r\n\r\n" * 100000 + http_200(_WHOLE),
}
# Issue 25: a field value of long whitespace runs (a field regex once backtracked through them
# quadratically: 3 x 20,000 spaces held `prestop check` 6.2 s, 45,000 a drain 4-10 s past its
# deadline), before a busy body; and bytes behind a body that ends by its own framing, where a
# Content-Length body's were refused but a chunked body's were read past.
_BUSY_LINE = b'vllm:num_requests_running{engine="1"} 4\n'
WHITESPACE_HEADS: dict[str, bytes] = {
    "a field value of 45,000 spaces before a busy body":
        raw_200([b"X-Pad: a" + b" " * 45000 + b"b", b"Content-Length: %d" % len(BUSY_VLLM)], BUSY_VLLM),
    "3 field values of 20,000 spaces before a busy body":
        raw_200([b"X-Pad: a" + b" " * 20000 + b"b"] * 3 + [b"Content-Length: %d" % len(BUSY_VLLM)], BUSY_VLLM),
    "a field value of 20,000 SP-HTAB pairs before a busy body":
        raw_200([b"X-Pad: a" + b" \t" * 20000 + b"b", b"Content-Length: %d" % len(BUSY_VLLM)], BUSY_VLLM),
}
BEHIND_FRAMED_BODIES: dict[str, bytes] = {
    "a busy series after a chunked body's last chunk":
        raw_200([b"Transfer-Encoding: chunked"], chunked_payload(IDLE_VLLM) + _BUSY_LINE),
    "a busy series after a chunked body's trailer":
        raw_200([b"Transfer-Encoding: chunked"], chunked_payload(IDLE_VLLM)[:-2] + b"X-Trailer: t\r\n\r\n" + _BUSY_LINE),
    "a busy series as a chunked body's trailer line":
        raw_200([b"Transfer-Encoding: chunked"], chunked_payload(IDLE_VLLM)[:-2] + _BUSY_LINE.replace(b":", b"_")
                + b"\r\n"),
    "a 204, then the rest of a busy body": b"HTTP/1.1 204 No Content\r\n\r\n" + IDLE_VLLM + _BUSY_LINE,
}
# Interim responses before the final one are skipped: the engine's answer is what it says.
INTERIM_THEN_BUSY = b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 102 Processing\r\n\r\n" + http_200(BUSY_VLLM)
INTERIM_THEN_IDLE = b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" + http_200(IDLE_VLLM)
