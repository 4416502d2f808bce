"""One loopback GET of the engine's /metrics, bounded by a single deadline end to end.

A socket timeout bounds each recv, not the read: an engine that drips one byte a second
would hold a plain client forever. Here every recv gets only the time left, and the parse of
what arrived checks the same deadline before each line and chunk, so connect, handshake, status
line, headers and body together never outlast `timeout_s`. The response is read, and its framing
judged, by modeldrain/hook/framing.py (RFC 9112: what it calls unrecoverable is refused, never
guessed; every line parsed in one linear pass).
"""

from __future__ import annotations

import errno
import io
import socket
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Mapping

from modeldrain.hook import __version__, framing
from modeldrain.hook.outcome import ReadOutcome
from modeldrain.hook.target import Target

__all__ = ["FetchError", "fetch"]

# Ask for the classic text format only. prometheus-client's servers (vLLM's and SGLang's) pick
# OpenMetrics whenever the Accept header names it, whatever its q-value, and prometheus-client
# 0.26 then escapes the colons of sample names (vllm_num_requests_running) but not of their
# TYPE lines. An engine that serves OpenMetrics anyway is still parsed (see exposition.py).
_ACCEPT = "text/plain;version=0.0.4, */*;q=0.1"
_RECV_CHUNK = 65536


@dataclass(frozen=True)
class Response:
    status: int
    content_type: str
    body: bytes


class FetchError(Exception):
    """A read that produced no usable body, already classified."""

    def __init__(self, outcome: ReadOutcome, detail: str, status: int | None = None):
        super().__init__(detail)
        self.outcome = outcome
        self.detail = detail
        self.status = status


class _DeadlineRaw(io.RawIOBase):
    """A socket's receive side where every recv gets only the time left before the deadline, or,
    while `probing`, none at all (a recv that would wait reads as no data yet)."""

    def __init__(self, sock: socket.socket, deadline_at: float):
        self._sock = sock
        self._deadline_at = deadline_at
        self.probing = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        if self.probing:
            return self._read_now(buffer)
        remaining_s = self._deadline_at - time.monotonic()
        if remaining_s <= 0:
            raise TimeoutError("read deadline passed")
        self._sock.settimeout(remaining_s)
        return self._sock.recv_into(buffer)

    def _read_now(self, buffer: Any) -> int | None:
        ssl = sys.modules.get("ssl")  # a TLS socket exists only once ssl is imported
        self._sock.settimeout(0.0)
        try:
            return self._sock.recv_into(buffer)
        except BlockingIOError:
            return None
        except OSError as exc:
            if ssl is not None and isinstance(exc, ssl.SSLWantReadError):
                return None
            raise


def fetch(target: Target, *, timeout_s: float, max_body_bytes: int, accept: str = _ACCEPT,
          headers: Mapping[str, str] | None = None) -> Response:
    """GET target; return a 2xx response's body or raise FetchError with its outcome."""
    deadline_at = time.monotonic() + timeout_s
    sock = _connect(target, deadline_at)
    try:
        if target.scheme == "https":
            sock = _handshake(sock, deadline_at)
        _send(sock, target, deadline_at, accept, headers or {})
        return _receive(sock, deadline_at, max_body_bytes)
    finally:
        sock.close()


def _remaining(deadline_at: float) -> float:
    remaining_s = deadline_at - time.monotonic()
    if remaining_s <= 0:
        raise FetchError(ReadOutcome.TIMEOUT, "read timed out")
    return remaining_s


def _connect(target: Target, deadline_at: float) -> socket.socket:
    """A connection to the first of the target's addresses that takes one. A name that resolves
    to several (an IPv6 and an IPv4 address) is refused only when every address refuses: each
    address gets an equal share of the time left, so one that does not answer leaves the others
    theirs."""
    addresses = _resolve(target, deadline_at)
    refused: list[str] = []
    other: FetchError | None = None
    for i, address in enumerate(addresses):
        share_s = _remaining(deadline_at) / (len(addresses) - i)
        try:
            return socket.create_connection(address, timeout=share_s)
        except ConnectionRefusedError:
            refused.append(_shown(address))
        except TimeoutError:
            other = other or FetchError(ReadOutcome.TIMEOUT, f"connect to {_shown(address)} timed out")
        except OSError as exc:
            # Anything else is this side's trouble (ephemeral ports exhausted, no descriptors or
            # buffers left, a reset in the handshake) while the engine may well listen and be busy:
            # keep waiting, and say which.
            name = errno.errorcode.get(exc.errno or 0, "no errno")
            other = other or FetchError(ReadOutcome.CONNECT_ERROR,
                                        f"cannot connect to {_shown(address)}: {name} {exc.strerror or exc}")
    if other is not None:
        raise other
    # The one answer that means nothing listens there, from every address: the drain ends at once.
    where = target.netloc if len(addresses) == 1 else f"{target.netloc} (every address: {', '.join(refused)})"
    raise FetchError(ReadOutcome.REFUSED, f"connection refused on {where}")


def _shown(address: tuple[str, int]) -> str:
    host, port = address
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _resolve(target: Target, deadline_at: float) -> list[tuple[str, int]]:
    """Every address of the target, in the resolver's order. The engine is an IP literal; a
    leader's sidecar is a DNS name, looked up on a thread so that a resolver that does not answer
    cannot hold the read past its deadline."""
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, target.host)
            return [(target.host, target.port)]
        except OSError:
            continue  # not an address of this family
    found: list[tuple[str, int]] = []
    failed: list[OSError | UnicodeError] = []

    def lookup() -> None:
        try:
            infos = socket.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
            for info in infos:
                address = (str(info[4][0]), int(info[4][1]))
                if address not in found:
                    found.append(address)
        except (OSError, UnicodeError) as exc:  # UnicodeError: a name the IDNA codec refuses
            failed.append(exc)

    resolver = threading.Thread(target=lookup, name="resolve", daemon=True)
    resolver.start()
    resolver.join(_remaining(deadline_at))
    if resolver.is_alive():
        raise FetchError(ReadOutcome.TIMEOUT, f"resolving {target.host} timed out")
    if found:
        return list(found)
    if failed:
        exc = failed[0]
        if isinstance(exc, socket.gaierror) and exc.errno in _NAME_NOT_FOUND:
            # The name is gone: nothing there, as a refused connection says.
            raise FetchError(ReadOutcome.REFUSED, f"{target.host} not found ({exc.strerror})")
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise FetchError(ReadOutcome.CONNECT_ERROR, f"cannot resolve {target.host}: {reason}")
    raise FetchError(ReadOutcome.CONNECT_ERROR, f"cannot resolve {target.host}: no address")


# getaddrinfo's answers that the name does not exist (not that the resolver is unreachable).
_NAME_NOT_FOUND = {socket.EAI_NONAME} | ({socket.EAI_NODATA} if hasattr(socket, "EAI_NODATA") else set())


def _handshake(sock: socket.socket, deadline_at: float) -> socket.socket:
    # Imported here: ssl costs start-up time, and only an https engine needs it.
    import ssl

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    # The engine's certificate names a Service, never 127.0.0.1: encrypt, do not verify.
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        sock.settimeout(_remaining(deadline_at))
        return context.wrap_socket(sock, server_hostname=None)
    except TimeoutError:
        raise FetchError(ReadOutcome.TIMEOUT, "TLS handshake timed out") from None
    except (ssl.SSLError, ConnectionError) as exc:
        raise FetchError(ReadOutcome.TLS_ERROR, f"TLS handshake failed: {exc}") from None


def _send(sock: socket.socket, target: Target, deadline_at: float, accept: str, headers: Mapping[str, str]) -> None:
    extra = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    request = (
        f"GET {target.path} HTTP/1.1\r\n"
        f"Host: {target.netloc}\r\n"
        f"User-Agent: modeldrain/{__version__}\r\n"
        f"Accept: {accept}\r\n"
        "Accept-Encoding: identity\r\n"
        f"{extra}"
        "Connection: close\r\n\r\n"
    ).encode("ascii")
    try:
        sock.settimeout(_remaining(deadline_at))
        sock.sendall(request)
    except TimeoutError:
        raise FetchError(ReadOutcome.TIMEOUT, "sending the request timed out") from None
    except OSError as exc:
        raise FetchError(ReadOutcome.RESET, f"connection lost while sending: {exc}") from None


def _receive(sock: socket.socket, deadline_at: float, max_body_bytes: int) -> Response:
    raw = _DeadlineRaw(sock, deadline_at)
    fp: io.BufferedReader = io.BufferedReader(raw, _RECV_CHUNK)

    def buffered_beyond() -> bool:
        """Whether more bytes are there already, without waiting for any."""
        raw.probing = True
        try:
            return bool(fp.peek(1))
        finally:
            raw.probing = False

    status: int | None = None
    try:
        head = framing.read_head(fp, deadline_at)
        status = head.status
        if head.status >= 300:
            raise FetchError(ReadOutcome.HTTP_ERROR, f"HTTP {head.status} {head.reason}".rstrip(), status=head.status)
        body = framing.read_body(fp, head, framing.framing(head), max_body_bytes, buffered_beyond, deadline_at)
        return Response(head.status, head.content_type, body)
    except TimeoutError:
        raise FetchError(ReadOutcome.TIMEOUT, "read timed out") from None
    except framing.BodyTooLarge as exc:
        raise FetchError(ReadOutcome.TOO_LARGE, str(exc), status=status) from None
    except framing.TruncatedResponse as exc:
        raise FetchError(ReadOutcome.RESET, f"connection closed before a whole response: {exc}", status=status) from None
    except framing.MalformedResponse as exc:
        # Framing RFC 9112 calls unrecoverable is never an idle read: busy, waited on (not "unmeasurable",
        # which would end the drain at once on what may be a busy engine's garbled answer).
        raise FetchError(ReadOutcome.UNPARSEABLE, f"malformed HTTP response: {exc}", status=status) from None
    except OSError as exc:
        raise FetchError(ReadOutcome.RESET, f"read failed: {exc}") from None
