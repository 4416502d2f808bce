"""Bearer-token check for /v1/*, against a token file that may rotate under us.

A mounted Secret rotates by Kubernetes swapping its `..data` symlink, so the file's path
stays and what it resolves to changes. Before each check the path is stat'ed (following links:
a few microseconds) and the token re-read only when device, inode, size or mtime differ. That
file I/O runs on a thread of its own, never on the event loop, and is awaited for a bounded
time: a file that hangs (a stuck volume) holds the /v1/* answers to a 503, never /healthz or
the loop. Concurrent requests share one refresh.

Fails closed: a file that cannot be read or holds no token accepts nothing, so a broken
Secret holds replicas (a bounded, safe outcome) rather than opening the API.

Rotation without an outage (docs/layouts.md, "Rotating the token"): kubelet refreshes a Secret
volume on each node at its own time, so for a minute or two a client and this sidecar may hold
different tokens. Two things bridge it: the file may hold two tokens, one per line (both are
accepted: hook.token), and after the file's tokens change, the ones it held before stay accepted
for `overlap_s` (--token-overlap, DEFAULT_OVERLAP_S), then never again.
"""

from __future__ import annotations

import asyncio
import hmac
import os
import time
from dataclasses import dataclass
from typing import Callable

from modeldrain.hook.token import TokenFileError, read_token, read_tokens
from modeldrain.sidecar.daemon_thread import run_in_daemon_thread

BEARER = "bearer"
# How long the tokens a file held stay accepted after it changes: kubelet refreshes a Secret volume
# within its sync period plus its cache's TTL (a minute each by default), on each node at its own
# time, so a client on another node may send the previous token for about two minutes; five
# leave room. A leaked token being revoked stays valid this long: --token-overlap 0 for that.
DEFAULT_OVERLAP_S = 300.0
# The token file's rule is the shared core's (hook.token): re-exported for the sidecar's callers.
__all__ = ["BEARER", "DEFAULT_OVERLAP_S", "TokenFile", "TokenFileError", "TokenCheck", "read_token"]


@dataclass(frozen=True)
class _Stamp:
    dev: int
    ino: int
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class TokenCheck:
    ok: bool
    reason: str = ""  # why not, for the 401's message; never echoes what was presented


class TokenFile:
    """The current token of a file, re-read when the file changes."""

    def __init__(self, path: str, on_change: Callable[[str], object] = lambda message: None, *,
                 overlap_s: float = DEFAULT_OVERLAP_S, clock: Callable[[], float] = time.monotonic):
        self._path = path
        self._on_change = on_change
        self._overlap_s = overlap_s
        self._clock = clock
        self._stamp: _Stamp | None = None
        self._tokens: tuple[bytes, ...] = ()  # empty: none valid (the file is bad): nothing accepted
        self._previous: tuple[bytes, ...] = ()  # what the file held before its last change
        self._previous_until = 0.0  # ... accepted until then (monotonic)
        self._problem = ""
        self._refreshing: asyncio.Future[None] | None = None
        read_token(path)  # at start, a bad file is a usage error, not a silent lock-out
        self.refresh()

    async def refreshed(self, timeout_s: float) -> None:
        """Refresh off the event loop, sharing a refresh already running; raises TimeoutError
        when the file does not answer within timeout_s (the refresh goes on on its thread)."""
        if self._refreshing is None:
            future = asyncio.ensure_future(run_in_daemon_thread(self.refresh, "token-file"))
            self._refreshing = future
            future.add_done_callback(self._refresh_done)
        await asyncio.wait_for(asyncio.shield(self._refreshing), timeout_s)

    def _refresh_done(self, future: asyncio.Future[None]) -> None:
        self._refreshing = None
        if not future.cancelled() and future.exception() is not None:
            # refresh() turns every OS error into a problem it records; anything else is a bug.
            self._set(self._stamp, (), f"token file check failed: {future.exception()!r}")

    def check(self, authorization: str | None) -> TokenCheck:
        """Whether an Authorization header value carries the current token (constant-time
        compare). No I/O: the token is what the last refresh() found."""
        if not self._tokens:
            # The detail (a path, an OS error) is in the log, not in an answer to any client.
            return TokenCheck(False, "the sidecar has no valid token configured; see its log")
        if not authorization:
            return TokenCheck(False, "missing Authorization: Bearer header")
        scheme, _, presented = authorization.strip().partition(" ")
        if scheme.lower() != BEARER or not presented.strip():
            return TokenCheck(False, "Authorization is not a Bearer token")
        accepted = self._tokens + (self._previous if self._clock() < self._previous_until else ())
        given = presented.strip().encode("utf-8", "replace")
        # Every accepted token is compared, each in constant time: which one matched takes no less time.
        matches = [hmac.compare_digest(given, token) for token in accepted]
        if not any(matches):
            return TokenCheck(False, "wrong token")
        return TokenCheck(True)

    def refresh(self) -> None:
        """Re-read the token if the file changed. Blocking file I/O: off the event loop."""
        try:
            st = os.stat(self._path)
        except OSError as exc:
            self._set(None, (), f"cannot stat {self._path}: {exc.strerror or exc}")
            return
        stamp = _Stamp(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        if stamp == self._stamp:
            return
        try:
            tokens = read_tokens(self._path)
        except TokenFileError as exc:
            self._set(stamp, (), str(exc))
            return
        self._set(stamp, tokens, "")

    def _set(self, stamp: _Stamp | None, tokens: tuple[bytes, ...], problem: str) -> None:
        changed = tokens != self._tokens or problem != self._problem
        first = self._stamp is None and not self._tokens and not self._problem
        if changed and not first and tokens and self._tokens:
            # A rotation: what the file held stays accepted for the overlap (a broken file in between,
            # which kubelet's atomic swap never shows, accepts nothing and bridges nothing).
            self._previous = tuple(t for t in self._tokens if t not in tokens)
            self._previous_until = self._clock() + self._overlap_s
        elif not tokens:
            self._previous, self._previous_until = (), 0.0
        self._stamp, self._tokens, self._problem = stamp, tokens, problem
        if changed and not first:
            overlap = (f"; the previous token stays accepted for {self._overlap_s:g} s"
                       if self._previous and self._overlap_s > 0 else "")
            self._on_change(problem or f"token file re-read: {len(tokens)} token(s) in effect{overlap}")
