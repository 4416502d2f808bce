"""framing.py's head and trailer grammar against h11's (the HTTP/1.1 parser under httpcore and
uvicorn) as the oracle, on generated field lines: long whitespace runs, every class of byte, a
colon or none, obs-fold, CRLF or a bare LF.

Where they agree on RFC 9112 the two must agree: what h11 refuses framing.py refuses, and what
framing.py reads h11 reads to the same fields. framing.py is stricter in two documented places: a
control byte other than HTAB in a field value (RFC 9110 §5.5 lets a recipient refuse it; h11
refuses only NUL, CR, LF, VT and FF), and a line over 64 KiB (h11 takes any length once the whole
head has arrived; 16 KiB of head while it has not). Every parse is bounded by its deadline, so one that
backtracked would fail here as a TimeoutError, not as a slow test.

`make test` runs MODELDRAIN_FUZZ_EXAMPLES (default 150) heads; `make fuzz` many more.
"""

from __future__ import annotations

import io
import os
import re
import time

import h11
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modeldrain.hook import framing

EXAMPLES = int(os.environ.get("MODELDRAIN_FUZZ_EXAMPLES", "150"))
# Larger than any generated head, for h11 (16 KiB by default); framing.py's line cap (64 KiB) is
# one of its stricter rules, its field count (100) is past any generated head.
MAX_HEAD = 400_000
CONTROLS = bytes(range(0x09)) + bytes(range(0x0A, 0x20)) + b"\x7f"
TCHARS = b"!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

# Names h11 reads as framing (it checks Content-Length and Transfer-Encoding itself) are left to
# tests/hook/test_fetch.py: here a name is anything else.
NAMES = st.one_of(
    st.sampled_from([b"X-Pad", b"Server", b"Date", b"Content-Type", b"x!#$%&'*+-.^_`|~9", b"Link"]),
    st.binary(min_size=1, max_size=12).filter(lambda name: not name.lower().startswith((b"content-length",
                                                                                         b"transfer-encoding"))),
)
WHITESPACE = st.one_of(st.sampled_from([b"", b" ", b"\t", b" \t "]),
                       st.builds(lambda unit, n: unit * n, st.sampled_from([b" ", b"\t", b" \t"]),
                                 st.integers(0, 22_000)))
VALUE_BYTES = st.one_of(
    st.binary(min_size=1, max_size=8).map(lambda b: bytes(0x21 + c % 94 for c in b)),  # VCHAR
    st.binary(min_size=1, max_size=3).map(lambda b: bytes(0x80 + c % 128 for c in b)),  # obs-text
    st.sampled_from([b"\x00", b"\r", b"\x01", b"\x7f", b"\x0b", b"\x0c", b"\x1f", b'"', b":", b"="]),
)


@st.composite
def values(draw) -> bytes:
    parts = draw(st.lists(st.tuples(VALUE_BYTES, WHITESPACE), max_size=4))
    return draw(WHITESPACE) + b"".join(word + space for word, space in parts)


@st.composite
def field_lines(draw) -> bytes:
    name = draw(NAMES)
    colon = draw(st.sampled_from([b":", b":", b":", b" :", b""]))
    line = name + colon + draw(values())
    if draw(st.integers(0, 9)) == 0:  # obs-fold: a continuation line
        line += draw(st.sampled_from([b"\r\n", b"\n"])) + draw(st.sampled_from([b" ", b"\t", b"  "])) + draw(values())
    return line + draw(st.sampled_from([b"\r\n", b"\r\n", b"\n"]))


@st.composite
def heads(draw) -> bytes:
    status = draw(st.sampled_from([b"HTTP/1.1 200 OK", b"HTTP/1.0 200 OK", b"HTTP/1.1 200", b"HTTP/1.1 200 ",
                                   b"HTTP/1.1 404 Not Found", b"HTTP/1.1 500 a\tb"]))
    lines = draw(st.lists(field_lines(), max_size=6))
    return status + b"\r\n" + b"".join(lines) + b"\r\n"


def h11_head(wire: bytes) -> tuple[int, list[tuple[bytes, bytes]]] | None:
    """h11's status and fields, as a client that sent a GET; None when it refuses the head."""
    client = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD)
    client.send(h11.Request(method="GET", target="/metrics", headers=[("Host", "127.0.0.1")]))
    client.send(h11.EndOfMessage())
    client.receive_data(wire)
    try:
        event = client.next_event()
    except h11.RemoteProtocolError:
        return None
    assert isinstance(event, h11.Response), event
    return event.status_code, [(name, value) for name, value in event.headers]


def framing_head(wire: bytes) -> framing.Head | None:
    try:
        return framing.read_head(buffered(wire), deadline_at=time.monotonic() + 5)
    except framing.MalformedResponse:
        return None


def spaced(value: bytes) -> bytes:
    """A value with each whitespace run as one SP: RFC 9112 §5.2 lets an obs-fold be read as one or
    more SP, and the two fold differently (h11 keeps the first line's trailing whitespace)."""
    return re.sub(rb"[ \t]+", b" ", value)


def shown(wire: bytes) -> str:
    """The wire with each long whitespace run as its length: a failure that can be read."""
    return repr(re.sub(rb"[ \t]{20,}", lambda run: b"<%d SP/HTAB>" % len(run.group(0)), wire))


def stricter_by_rule(field_section: bytes) -> bool:
    """Whether framing.py's two stricter rules refuse these field lines: a control byte other than
    HTAB in a value (what follows the first colon, or a continuation line), or a line over its
    cap (h11 takes any length once the whole head is in)."""
    lines = re.split(rb"\r?\n", field_section)
    return any(len(line) + 2 > framing.MAX_LINE_BYTES or set(line.partition(b":")[2] if b":" in line else line)
               & set(CONTROLS) for line in lines)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(heads())
def test_the_head_grammar_agrees_with_h11(wire):
    theirs, ours = h11_head(wire), framing_head(wire)
    if theirs is None:
        assert ours is None, f"read a head h11 refuses: {shown(wire)}"
    elif ours is None:
        # The one stricter rule: a control byte h11 lets through in a value.
        assert stricter_by_rule(wire.partition(b"\n")[2]), f"refused what h11 reads: {shown(wire)}"
    else:
        assert ours.status == theirs[0]
        assert [(name.encode(), spaced(value)) for name, value in ours.fields] == \
               [(name, spaced(value)) for name, value in theirs[1]]


def h11_body(wire: bytes) -> bytes | None:
    """The body h11 reads from a whole response to a GET that asked to close, the close included
    (bytes after the response's end are an error to it); None when it refuses."""
    client = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD)
    client.send(h11.Request(method="GET", target="/metrics", headers=[("Host", "127.0.0.1"), ("Connection", "close")]))
    client.send(h11.EndOfMessage())
    client.receive_data(wire)
    client.receive_data(b"")
    body = b""
    try:
        while not isinstance(event := client.next_event(), h11.EndOfMessage):
            if isinstance(event, h11.Data):
                body += event.data
            assert event is not h11.NEED_DATA
        assert isinstance(client.next_event(), h11.ConnectionClosed)
    except h11.RemoteProtocolError:
        return None
    return body


def buffered(wire: bytes) -> io.BufferedReader:
    return io.BufferedReader(io.BytesIO(wire), 65536)


def framing_body(wire: bytes) -> bytes | None:
    fp = buffered(wire)
    try:
        head = framing.read_head(fp, deadline_at=time.monotonic() + 5)
        return framing.read_body(fp, head, framing.framing(head), 1 << 20, lambda: bool(fp.peek(1)),
                                 deadline_at=time.monotonic() + 5)
    except (framing.MalformedResponse, framing.TruncatedResponse):
        return None


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(field_lines(), max_size=4), st.binary(min_size=1, max_size=200))
def test_the_trailer_grammar_agrees_with_h11(trailer, body):
    wire = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"%x\r\n" % len(body) + body + b"\r\n0\r\n"
            + b"".join(trailer) + b"\r\n")
    theirs, ours = h11_body(wire), framing_body(wire)
    if theirs is None:
        assert ours is None, f"read a trailer h11 refuses: {wire[-300:]!r}"
    elif ours is None:
        assert stricter_by_rule(b"".join(trailer)), f"refused what h11 reads: {shown(wire)}"
    else:
        assert ours == theirs == body


@pytest.mark.parametrize("after", [b"vllm:num_requests_running 4\n", b"\r\n", b"HTTP/1.1 200 OK\r\n\r\n"])
def test_bytes_after_the_last_chunk_are_refused_as_h11_refuses_them(after):
    wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
    assert h11_body(wire) == framing_body(wire) == b"abc"
    assert h11_body(wire + after) is None and framing_body(wire + after) is None
