"""Where the engine's /metrics is: scheme, host, port and path, and where each came from."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

__all__ = ["GUESSED", "Target", "UNKNOWN_PORT_SOURCE", "engine_hosts", "on_hosts", "usable_host"]

# The hook runs inside the engine's own Pod: the engine is on loopback, IPv4 first.
LOOPBACK_HOST = "127.0.0.1"
# The loopback addresses an engine can listen on: 127.0.0.1 (vLLM's default of every IPv4
# address, SGLang's own default, `--host 0.0.0.0`) and ::1 (`--host ::1`, or `--host ::` with
# IPV6_V6ONLY set).
LOOPBACK_HOSTS = (LOOPBACK_HOST, "::1")
# Target.source where the engine's argv is seen but its port cannot be read (hook.engine's
# EngineHint.port_unknown): the port read is the engine's default, a guess.
UNKNOWN_PORT_SOURCE = "unknown"
# Target.source of a port no source named: the engine's default, guessed (hook.reader.EngineReader).
GUESSED = "default"
# --host values that mean every address: loopback answers for them.
_WILDCARDS = frozenset({"", "0.0.0.0", "::"})
# An address or a DNS name: nothing else goes into a request's Host header.
_HOST = re.compile(r"^(?:[0-9A-Fa-f:.]+|[A-Za-z0-9][A-Za-z0-9._-]{0,252})$")


@dataclass(frozen=True)
class Target:
    scheme: str
    port: int
    path: str
    host: str = LOOPBACK_HOST
    # Where the port came from ("flag", "annotation", "cmdline", "listener": the kernel's socket of
    # an engine process, GUESSED, UNKNOWN_PORT_SOURCE), for the log and for what an answer there means.
    source: str = GUESSED

    @property
    def port_unknown(self) -> bool:
        """The engine's port could not be read: this one is a guess, and no answer on it is the engine's."""
        return self.source == UNKNOWN_PORT_SOURCE

    @property
    def netloc(self) -> str:
        """HOST:PORT as a URL and a Host header write it: an IPv6 address in brackets."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.netloc}{self.path}"


def engine_hosts(engine_host: str | None) -> tuple[str, ...]:
    """Where an engine whose argv says `--host engine_host` can be read from inside its Pod, in
    order: its own --host when it names one address or name (an engine bound there alone does not
    answer on loopback), then every other loopback address. A --host that is neither an address
    nor a name is left out (usable_host)."""
    own = usable_host(engine_host)
    first = (own,) if own is not None and own not in _WILDCARDS else ()
    return first + tuple(host for host in LOOPBACK_HOSTS if host not in first)


def usable_host(engine_host: str | None) -> str | None:
    """The engine's --host without an IPv6 address's brackets; None when there is none or it is
    neither an address nor a DNS name."""
    own = (engine_host or "").strip()
    if own.startswith("[") and own.endswith("]"):
        own = own[1:-1]
    return own if own in _WILDCARDS or _HOST.match(own) else None


def on_hosts(target: Target, hosts: tuple[str, ...]) -> tuple[Target, ...]:
    """`target` on each of `hosts`, in order."""
    return tuple(replace(target, host=host) for host in hosts)
