"""One HTTP/1.1 response read off a byte stream, framed as RFC 9112 says, or refused.

http.client, which read it before, trusts framing the RFC calls unrecoverable: of two differing
Content-Length values it takes the first, one it cannot parse (`5, 6`, `+5`, `1_000`) turns into
"read to the close", it skips only `100` of the interim responses and hands back a `103 Early
Hints` as the response, and it ignores what follows a chunk's data. Each of those can make a
truncated or spliced exposition read idle. Here:

- interim responses (1xx but 101) are skipped (RFC 9110 §15.2), at most MAX_INTERIM_RESPONSES;
  a 101 nobody asked for is refused;
- the body's length comes from RFC 9112 §6.3: Transfer-Encoding together with Content-Length,
  differing or malformed Content-Length values, a transfer coding other than one `chunked`, or
  Transfer-Encoding in an HTTP/1.0 response are refused (MalformedResponse), never guessed;
- chunked framing is read strictly: a size is hex digits only (extensions allowed), each chunk's
  data ends with CRLF, a trailer line is a field line;
- a close-delimited body must end with a line feed (the text format ends every line with one):
  one that ends mid-line may have been cut (TruncatedResponse); a body that ends by its own
  framing (Content-Length, the last chunk and its trailer, or none: 204, 304) with more bytes
  already behind it is refused (§6.3's last paragraph: its framing is wrong, and the bytes behind
  it may be the rest of the exposition).

Every line is read in one pass with bytes methods, no regular expression: a parse is linear in
the bytes it reads (a field value of 45,000 spaces once took the old field regex 18.8 s
to backtrack through). And every line, and every chunk, is read only before `deadline_at`: whatever
arrives, and however fast, the parse ends by the read's deadline (TimeoutError).
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass
from typing import Callable

__all__ = [
    "BodyTooLarge", "Head", "MAX_LINE_BYTES", "MalformedResponse", "TruncatedResponse", "framing", "read_body",
    "read_head",
]

# What http.client allows a status or field line, and a response's field lines.
MAX_LINE_BYTES = 65536
MAX_FIELDS = 100
# Real servers send one or two (103 Early Hints, 102 Processing); a stream of them is a listener
# stalling, and each costs a parse of its fields, so the reader stops counting here.
MAX_INTERIM_RESPONSES = 16
_READ_CHUNK = 65536

# token (RFC 9110 §5.6.2): a field name's characters.
_TCHARS = b"!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
# The controls RFC 9110 §5.5 keeps out of a field value (HTAB is whitespace there) and out of a
# reason phrase (RFC 9112 §4): NUL, CR and LF are dangerous, the rest invalid, and a recipient may
# refuse them. All refused (h11 refuses NUL, CR, LF, VT and FF; tests/hook/test_framing_differential.py).
_CONTROLS = bytes(range(0x09)) + bytes(range(0x0A, 0x20)) + b"\x7f"
_DIGITS = b"0123456789"
_HEX_DIGITS = b"0123456789ABCDEFabcdef"
_OWS = b" \t"
# A chunk size past this many hex digits is larger than any body the reader takes.
_MAX_CHUNK_SIZE_DIGITS = 16
_OPENMETRICS = b"application/openmetrics-text"


class MalformedResponse(ValueError):
    """Not HTTP/1.x, or framing the RFC says a recipient must not trust."""


class TruncatedResponse(ValueError):
    """The stream ended (or may have been cut) before a whole response."""


class BodyTooLarge(ValueError):
    """The body is over the size cap."""


@dataclass(frozen=True)
class Head:
    status: int
    reason: str
    http_minor: int  # 1.0 or 1.1
    fields: tuple[tuple[str, bytes], ...]  # (lower-case name, value), in order

    def values(self, name: str) -> list[bytes]:
        return [value for field, value in self.fields if field == name]

    @property
    def content_type(self) -> str:
        found = self.values("content-type")
        return found[0].decode("latin-1") if found else ""


def _only(data: bytes, allowed: bytes) -> bool:
    """Whether every byte of data is one of `allowed` (one pass, nothing to backtrack)."""
    return not data.translate(None, allowed)


def _has_control(data: bytes) -> bool:
    return len(data.translate(None, _CONTROLS)) != len(data)


def read_head(fp: io.BufferedReader, deadline_at: float) -> Head:
    """The final response's status line and fields, interim responses skipped."""
    for _ in range(MAX_INTERIM_RESPONSES + 1):
        head = _one_head(fp, deadline_at)
        if head.status == 101:
            raise MalformedResponse("101 Switching Protocols to a request that asked for no upgrade")
        if head.status >= 200:
            return head
    raise MalformedResponse(f"over {MAX_INTERIM_RESPONSES} interim (1xx) responses")


def _one_head(fp: io.BufferedReader, deadline_at: float) -> Head:
    line = _line(fp, deadline_at)
    if not line:
        raise TruncatedResponse("closed before a status line")
    status, reason, http_minor = _status_line(line)
    fields = _field_section(fp, deadline_at, "header")
    if fields is None:
        raise TruncatedResponse("closed in the middle of the header section")
    return Head(status, reason, http_minor, tuple(fields))


def _field_section(fp: io.BufferedReader, deadline_at: float, what: str) -> list[tuple[str, bytes]] | None:
    """Field lines up to the empty line that ends them (RFC 9112 §5), or None when the stream
    closes first. At most MAX_FIELDS fields and as many obs-fold continuation lines, each value's
    parts joined once at the end (never a value copied per line)."""
    fields: list[tuple[str, list[bytes]]] = []
    folds = 0
    while True:
        line = _line(fp, deadline_at)
        if line in (b"\r\n", b"\n"):
            return [(name, b" ".join(part for part in parts if part)) for name, parts in fields]
        if not line.endswith(b"\n"):
            return None
        if line[:1] in (b" ", b"\t") and fields:  # obs-fold: a continuation, read as one SP (§5.2)
            more = _content(line).strip(_OWS)
            if _has_control(more):
                raise MalformedResponse(f"not a field line: {line[:80]!r}")
            folds += 1
            if folds > MAX_FIELDS:
                raise MalformedResponse(f"over {MAX_FIELDS} obs-fold lines in the {what} section")
            fields[-1][1].append(more)
            continue
        if len(fields) >= MAX_FIELDS:
            raise MalformedResponse(f"over {MAX_FIELDS} {what} fields")
        name, value = _field_line(line)
        fields.append((name, [value]))


def _content(line: bytes) -> bytes:
    """A line without its line ending (CRLF, or a bare LF as RFC 9112 §2.2 lets a recipient read)."""
    if line.endswith(b"\r\n"):
        return line[:-2]
    return line[:-1] if line.endswith(b"\n") else line


def _status_line(line: bytes) -> tuple[int, str, int]:
    """HTTP-version SP status-code SP [reason-phrase] (RFC 9112 §4); the SP before an empty
    reason may be missing, as servers have sent it."""
    content = _content(line)
    version, code, reason = content[:8], content[9:12], content[13:]
    if not (line.endswith(b"\n") and version in (b"HTTP/1.0", b"HTTP/1.1") and content[8:9] == b" "
            and len(code) == 3 and _only(code, _DIGITS) and code[:1] != b"0"
            and (len(content) == 12 or content[12:13] == b" ") and not _has_control(reason)):
        raise MalformedResponse(f"not an HTTP/1.x status line: {line[:80]!r}")
    return int(code), reason.decode("latin-1").strip(), int(version[-1:])


def _field_line(line: bytes) -> tuple[str, bytes]:
    """field-name ":" OWS field-value OWS (RFC 9112 §5.1): the lower-case name and the value.
    No whitespace before the colon; no control in the value but HTAB."""
    name, colon, value = _content(line).partition(b":")
    value = value.strip(_OWS)
    if not (colon and name and _only(name, _TCHARS)) or _has_control(value):
        raise MalformedResponse(f"not a field line: {line[:80]!r}")
    return name.decode("ascii").lower(), value


def _line(fp: io.BufferedReader, deadline_at: float) -> bytes:
    if time.monotonic() >= deadline_at:
        raise TimeoutError("read deadline passed")
    line = fp.readline(MAX_LINE_BYTES + 1)
    if len(line) > MAX_LINE_BYTES:
        raise MalformedResponse(f"a line over {MAX_LINE_BYTES} bytes")
    return line


@dataclass(frozen=True)
class Framing:
    kind: str  # "none", "length", "chunked", "close"
    length: int | None = None


def framing(head: Head) -> Framing:
    """How the body's end is found (RFC 9112 §6.3, in its order), or MalformedResponse."""
    if head.status in (204, 304):
        return Framing("none", 0)
    codings = head.values("transfer-encoding")
    lengths = head.values("content-length")
    if codings:
        if head.http_minor == 0:
            raise MalformedResponse("Transfer-Encoding in an HTTP/1.0 response (RFC 9112 §6.1: faulty framing)")
        if lengths:
            raise MalformedResponse("both Transfer-Encoding and Content-Length (RFC 9112 §6.3: handled as an error)")
        names = [c.strip(_OWS).lower() for value in codings for c in value.split(b",")]
        if names != [b"chunked"]:
            raise MalformedResponse(f"transfer coding {b', '.join(names).decode('latin-1')!r}: "
                                    "only one chunked coding is read (nothing else was asked for)")
        return Framing("chunked")
    if lengths:
        values = [v.strip(_OWS) for value in lengths for v in value.split(b",")]
        bad = [v for v in values if not (v and _only(v, _DIGITS))]
        if bad:
            raise MalformedResponse(f"Content-Length {bad[0][:40].decode('latin-1')!r} is not a number of octets "
                                    "(RFC 9112 §6.3: unrecoverable)")
        if len({int(v) for v in values}) > 1:
            shown = ", ".join(v[:40].decode("ascii") for v in values)
            raise MalformedResponse(f"conflicting Content-Length values ({shown}): RFC 9112 §6.3: unrecoverable")
        return Framing("length", int(values[0]))
    return Framing("close")


def read_body(fp: io.BufferedReader, head: Head, frame: Framing, max_body_bytes: int,
              buffered_beyond: Callable[[], bool], deadline_at: float) -> bytes:
    """The body as `frame` delimits it. `buffered_beyond` says, without waiting, whether the
    stream holds more bytes now: after a body that ends by its own framing, that framing is wrong."""
    if frame.kind == "close":
        body = _to_the_close(fp, max_body_bytes, deadline_at)
        if body and not body.endswith(b"\n") and not _openmetrics_end(head, body):
            raise TruncatedResponse("a close-delimited body that ends mid-line (the text format ends every line "
                                    "with a line feed): it may have been cut")
        return body
    if frame.kind == "length":
        assert frame.length is not None
        if frame.length > max_body_bytes:
            raise BodyTooLarge(f"body of {frame.length} bytes is over the {max_body_bytes}-byte cap")
        body, end = _exactly(fp, frame.length, "the Content-Length", deadline_at), f"the {frame.length} of its Content-Length"
    elif frame.kind == "chunked":
        body, end = _chunked(fp, max_body_bytes, deadline_at), "its last chunk and trailer"
    else:
        body, end = b"", f"a {head.status}, which has no body"
    if buffered_beyond():
        raise MalformedResponse(f"more bytes follow {end} (RFC 9112 §6.3: the framing is wrong)")
    return body


def _openmetrics_end(head: Head, body: bytes) -> bool:
    """OpenMetrics ends with `# EOF` and its final line feed is optional: that is a whole body."""
    return head.content_type.encode("latin-1").lower().startswith(_OPENMETRICS) and (
        body == b"# EOF" or body.endswith(b"\n# EOF"))


def _exactly(fp: io.BufferedReader, size: int, what: str, deadline_at: float) -> bytes:
    parts: list[bytes] = []
    left = size
    while left:
        if time.monotonic() >= deadline_at:
            raise TimeoutError("read deadline passed")
        part = fp.read(min(left, _READ_CHUNK))
        if not part:
            raise TruncatedResponse(f"closed {left} bytes short of {what}")
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def _to_the_close(fp: io.BufferedReader, max_body_bytes: int, deadline_at: float) -> bytes:
    parts: list[bytes] = []
    size = 0
    while True:
        if time.monotonic() >= deadline_at:
            raise TimeoutError("read deadline passed")
        part = fp.read1(_READ_CHUNK)
        if not part:
            return b"".join(parts)
        size += len(part)
        if size > max_body_bytes:
            raise BodyTooLarge(f"body is over the {max_body_bytes}-byte cap")
        parts.append(part)


def _chunked(fp: io.BufferedReader, max_body_bytes: int, deadline_at: float) -> bytes:
    parts: list[bytes] = []
    size = 0
    while True:
        line = _line(fp, deadline_at)
        if not line.endswith(b"\n"):
            raise TruncatedResponse("closed before the last chunk")
        size_text, semicolon, _ = _content(line).partition(b";")
        if semicolon:
            size_text = size_text.rstrip(_OWS)  # BWS before a chunk extension
        if not (size_text and _only(size_text, _HEX_DIGITS)) or len(size_text) > _MAX_CHUNK_SIZE_DIGITS:
            raise MalformedResponse(f"chunk size {size_text[:40]!r} is not hex digits (RFC 9112 §7.1)")
        chunk_size = int(size_text, 16)
        if chunk_size == 0:
            _trailer(fp, deadline_at)
            return b"".join(parts)
        size += chunk_size
        if size > max_body_bytes:
            raise BodyTooLarge(f"body is over the {max_body_bytes}-byte cap")
        parts.append(_exactly(fp, chunk_size, "a chunk", deadline_at))
        end = fp.readline(3)
        if end not in (b"\r\n", b"\n"):
            if not end:
                raise TruncatedResponse("closed after a chunk's data")
            raise MalformedResponse(f"a chunk's data runs past its size (followed by {end!r}, not CRLF)")


def _trailer(fp: io.BufferedReader, deadline_at: float) -> None:
    """The trailer section after the last chunk: field lines, read and dropped. The body is whole
    by then, so a close before its final CRLF, even inside a field, costs nothing (RFC 9112 §7.1.3);
    a whole line that is not a field line is no trailer (it may be the exposition's rest)."""
    _field_section(fp, deadline_at, "trailer")
