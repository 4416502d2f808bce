"""The one rule for a bearer token file, shared by drain-sidecar's --token-file and prestop's
--leader-token-file: both programs accept and refuse the same bytes with the same words.

A token goes into an `Authorization` header, so a byte outside printable ASCII (a CR or LF in
particular: a second header toward the leader) is refused; surrounding whitespace (a Secret
written with a final newline) is stripped.
"""

from __future__ import annotations

from modeldrain.hook.constants import MAX_TOKEN_FILE_BYTES
from modeldrain.hook.files import SmallFileError, read_small_file


class TokenFileError(ValueError):
    """The token file cannot serve as a token source; the message names the file and why."""


def read_token(path: str) -> bytes:
    """The token in `path`, surrounding whitespace stripped; raises TokenFileError."""
    try:
        raw = read_small_file(path, MAX_TOKEN_FILE_BYTES)
    except SmallFileError as exc:
        raise TokenFileError(f"token file: {exc}") from None
    token = raw.strip()
    if not token:
        raise TokenFileError(f"token file {path} is empty")
    if any(b < 0x21 or b > 0x7E for b in token):
        raise TokenFileError(f"token file {path} holds spaces, control or non-ASCII bytes")
    return token
