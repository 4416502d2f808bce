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
  data ends with CRLF;
- a close-delimited body must end with a line feed (the text format ends every line with one):
  one that ends mid-line may have been cut (TruncatedResponse); so may a Content-Length body
  with more bytes already behind it (the length is wrong: §6.3's last paragraph).
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from typing import Callable

# What http.client allows a status or field line, and a response's field lines.
MAX_LINE_BYTES = 65536
MAX_FIELDS = 100
# Real servers send one or two (103 Early Hints, 102 Processing); a stream of them is a listener
# stalling, and each costs a parse of its fields, so the reader stops counting here.
MAX_INTERIM_RESPONSES = 16
_READ_CHUNK = 65536

_STATUS_LINE = re.compile(rb"HTTP/1\.([01]) ([1-9][0-9]{2})(?: ([^\r\n]*))?\r?\n")
# field-name ":" OWS field-value OWS (RFC 9112 §5.1): no whitespace before the colon.
_FIELD_LINE = re.compile(rb"([!#$%&'*+\-.^_`|~0-9A-Za-z]+):[ \t]*(.*?)[ \t]*\r?\n", re.DOTALL)
_DIGITS = re.compile(rb"[0-9]+")
_HEX_DIGITS = re.compile(rb"[0-9A-Fa-f]+")
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


def read_head(fp: io.BufferedReader) -> Head:
    """The final response's status line and fields, interim responses skipped."""
    for _ in range(MAX_INTERIM_RESPONSES + 1):
        head = _one_head(fp)
        if head.status == 101:
            raise MalformedResponse("101 Switching Protocols to a request that asked for no upgrade")
        if head.status >= 200:
            return head
    raise MalformedResponse(f"over {MAX_INTERIM_RESPONSES} interim (1xx) responses")


def _one_head(fp: io.BufferedReader) -> Head:
    line = _line(fp)
    if not line:
        raise TruncatedResponse("closed before a status line")
    match = _STATUS_LINE.fullmatch(line)
    if match is None:
        raise MalformedResponse(f"not an HTTP/1.x status line: {line[:80]!r}")
    fields: list[tuple[str, bytes]] = []
    while True:
        line = _line(fp)
        if line in (b"\r\n", b"\n"):
            break
        if not line.endswith(b"\n"):
            raise TruncatedResponse("closed in the middle of the header section")
        if line[:1] in (b" ", b"\t") and fields:  # obs-fold: a continuation, read as one SP (§5.2)
            name, value = fields[-1]
            fields[-1] = (name, value + b" " + line.strip(b" \t\r\n"))
            continue
        field = _FIELD_LINE.fullmatch(line)
        if field is None:
            raise MalformedResponse(f"not a field line: {line[:80]!r}")
        if len(fields) >= MAX_FIELDS:
            raise MalformedResponse(f"over {MAX_FIELDS} header fields")
        fields.append((field.group(1).decode("ascii").lower(), field.group(2)))
    reason = (match.group(3) or b"").decode("latin-1").strip()
    return Head(int(match.group(2)), reason, int(match.group(1)), tuple(fields))


def _line(fp: io.BufferedReader) -> bytes:
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
        names = [c.strip(b" \t").lower() for value in codings for c in value.split(b",")]
        if names != [b"chunked"]:
            raise MalformedResponse(f"transfer coding {b', '.join(names).decode('latin-1')!r}: "
                                    "only one chunked coding is read (nothing else was asked for)")
        return Framing("chunked")
    if lengths:
        values = [v.strip(b" \t") for value in lengths for v in value.split(b",")]
        bad = [v for v in values if not _DIGITS.fullmatch(v)]
        if bad:
            raise MalformedResponse(f"Content-Length {bad[0][:40].decode('latin-1')!r} is not a number of octets "
                                    "(RFC 9112 §6.3: unrecoverable)")
        if len({int(v) for v in values}) > 1:
            shown = ", ".join(v[:40].decode("ascii") for v in values)
            raise MalformedResponse(f"conflicting Content-Length values ({shown}): RFC 9112 §6.3: unrecoverable")
        return Framing("length", int(values[0]))
    return Framing("close")


def read_body(fp: io.BufferedReader, head: Head, frame: Framing, max_body_bytes: int,
              buffered_beyond: Callable[[], bool]) -> bytes:
    """The body as `frame` delimits it. `buffered_beyond` says, without waiting, whether the
    stream holds more bytes now (after a Content-Length body: the length was wrong)."""
    if frame.kind == "none":
        return b""
    if frame.kind == "length":
        assert frame.length is not None
        if frame.length > max_body_bytes:
            raise BodyTooLarge(f"body of {frame.length} bytes is over the {max_body_bytes}-byte cap")
        body = _exactly(fp, frame.length, "the Content-Length")
        if buffered_beyond():
            raise MalformedResponse(f"more bytes follow the {frame.length} of its Content-Length "
                                    "(RFC 9112 §6.3: the length is wrong)")
        return body
    if frame.kind == "chunked":
        return _chunked(fp, max_body_bytes)
    body = _to_the_close(fp, max_body_bytes)
    if body and not body.endswith(b"\n") and not _openmetrics_end(head, body):
        raise TruncatedResponse("a close-delimited body that ends mid-line (the text format ends every line "
                                "with a line feed): it may have been cut")
    return body


def _openmetrics_end(head: Head, body: bytes) -> bool:
    """OpenMetrics ends with `# EOF` and its final line feed is optional: that is a whole body."""
    return head.content_type.encode("latin-1").lower().startswith(_OPENMETRICS) and (
        body == b"# EOF" or body.endswith(b"\n# EOF"))


def _exactly(fp: io.BufferedReader, size: int, what: str) -> bytes:
    parts: list[bytes] = []
    left = size
    while left:
        part = fp.read(min(left, _READ_CHUNK))
        if not part:
            raise TruncatedResponse(f"closed {left} bytes short of {what}")
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def _to_the_close(fp: io.BufferedReader, max_body_bytes: int) -> bytes:
    parts: list[bytes] = []
    size = 0
    while part := fp.read1(_READ_CHUNK):
        size += len(part)
        if size > max_body_bytes:
            raise BodyTooLarge(f"body is over the {max_body_bytes}-byte cap")
        parts.append(part)
    return b"".join(parts)


def _chunked(fp: io.BufferedReader, max_body_bytes: int) -> bytes:
    parts: list[bytes] = []
    size = 0
    while True:
        line = _line(fp)
        if not line.endswith(b"\n"):
            raise TruncatedResponse("closed before the last chunk")
        size_text, semicolon, _ = line.rstrip(b"\r\n").partition(b";")
        if semicolon:
            size_text = size_text.rstrip(b" \t")  # BWS before a chunk extension
        if not _HEX_DIGITS.fullmatch(size_text) or len(size_text) > _MAX_CHUNK_SIZE_DIGITS:
            raise MalformedResponse(f"chunk size {size_text[:40]!r} is not hex digits (RFC 9112 §7.1)")
        chunk_size = int(size_text, 16)
        if chunk_size == 0:
            _trailer(fp)
            return b"".join(parts)
        size += chunk_size
        if size > max_body_bytes:
            raise BodyTooLarge(f"body is over the {max_body_bytes}-byte cap")
        parts.append(_exactly(fp, chunk_size, "a chunk"))
        end = fp.readline(3)
        if end not in (b"\r\n", b"\n"):
            if not end:
                raise TruncatedResponse("closed after a chunk's data")
            raise MalformedResponse(f"a chunk's data runs past its size (followed by {end!r}, not CRLF)")


def _trailer(fp: io.BufferedReader) -> None:
    """The trailer section after the last chunk: read and dropped. The body is whole by then, so a
    close before its final CRLF costs nothing (RFC 9112 §7.1.3)."""
    for _ in range(MAX_FIELDS + 1):
        line = _line(fp)
        if line in (b"\r\n", b"\n", b""):
            return
    raise MalformedResponse(f"over {MAX_FIELDS} trailer fields")
