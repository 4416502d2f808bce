"""Where the engine's /metrics is: scheme, loopback port and path, and where each came from."""

from __future__ import annotations

from dataclasses import dataclass

# The hook runs inside the engine's own Pod: the engine is always on loopback.
LOOPBACK_HOST = "127.0.0.1"


@dataclass(frozen=True)
class Target:
    scheme: str
    port: int
    path: str
    host: str = LOOPBACK_HOST
    # Where the port came from ("flag", "annotation", "cmdline", "default"), for the log.
    source: str = "default"

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}{self.path}"
