"""The one rule for a bearer token file, shared by drain-sidecar's --token-file and prestop's
--leader-token-file: both programs accept and refuse the same bytes with the same words.

A token goes into an `Authorization` header, so a byte outside printable ASCII (a CR or LF in
particular: a second header toward the leader) is refused; surrounding whitespace (a Secret
written with a final newline) is stripped.

A file may hold two tokens, one per line, for a rotation (docs/layouts.md, "Rotating the token"):
a sidecar accepts both, and a client sends the first and, answered 401, the second once. Each
line is one whole token by the same rule, so a line break can never smuggle a header.
"""

from __future__ import annotations

from modeldrain.hook.constants import MAX_TOKEN_FILE_BYTES
from modeldrain.hook.files import SmallFileError, read_small_file

__all__ = ["TokenFileError", "read_token", "read_tokens"]


class TokenFileError(ValueError):
    """The token file cannot serve as a token source; the message names the file and why."""


# The current token and, during a rotation, the other one: never more.
MAX_TOKENS = 2


def read_tokens(path: str) -> tuple[bytes, ...]:
    """The one or two tokens in `path` (one per line, surrounding whitespace stripped), the one a
    client sends first; raises TokenFileError."""
    try:
        raw = read_small_file(path, MAX_TOKEN_FILE_BYTES)
    except SmallFileError as exc:
        raise TokenFileError(f"token file: {exc}") from None
    text = raw.strip()
    if not text:
        raise TokenFileError(f"token file {path} is empty")
    tokens = tuple(line.strip() for line in text.split(b"\n"))
    if any(not token for token in tokens):
        raise TokenFileError(f"token file {path} holds a blank line between its tokens")
    if len(tokens) > MAX_TOKENS:
        raise TokenFileError(f"token file {path} holds more than {MAX_TOKENS} lines (a token, and the other one "
                             "during a rotation)")
    if any(b < 0x21 or b > 0x7E for token in tokens for b in token):
        raise TokenFileError(f"token file {path} holds spaces, control or non-ASCII bytes")
    return tokens


def read_token(path: str) -> bytes:
    """The token a client sends first: the first line of `path`; raises TokenFileError."""
    return read_tokens(path)[0]
