"""Where the engine's /metrics is: scheme, loopback port and path, and where each came from."""

from __future__ import annotations

from dataclasses import dataclass

# The hook runs inside the engine's own Pod: the engine is always on loopback.
LOOPBACK_HOST = "127.0.0.1"
SCHEMES = ("http", "https")


@dataclass(frozen=True)
class Target:
    scheme: str
    port: int
    path: str
    host: str = LOOPBACK_HOST
    # Where port/path/scheme came from ("flag", "annotation", "cmdline", "default"), for the log.
    source: str = "default"

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}{self.path}"


def check_port(value: object) -> int:
    """A TCP port from a flag or an annotation; raises ValueError with a specific message."""
    text = str(value).strip()
    if not text.isdigit():
        raise ValueError(f"port must be a number from 1 to 65535, got {value!r}")
    port = int(text)
    if not 1 <= port <= 65535:
        raise ValueError(f"port must be from 1 to 65535, got {port}")
    return port


def check_path(value: str) -> str:
    """An absolute request path with nothing that could split the request line."""
    if not value.startswith("/"):
        raise ValueError(f"path must start with '/', got {value!r}")
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        raise ValueError(f"path must not contain spaces or control characters, got {value!r}")
    return value


def check_scheme(value: str) -> str:
    scheme = value.strip().lower()
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be http or https, got {value!r}")
    return scheme
