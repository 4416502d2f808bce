"""A routing proxy in front of a direct decoder, as its container runs it: no shell, and on SIGTERM
it stops at once, resetting every connection still in flight through it.

    python -m emulation.proxy --upstream PORT [--listen-port PORT] [--ready-file FILE]

A TCP forwarder on 127.0.0.1: each accepted connection is piped to the engine's port. Below
Kubernetes 1.29 such a proxy runs as a classic container and gets SIGTERM at the delete, while
the engine behind it drains: what was in flight through it is lost unless its own preStop waits
for the engine (tests/e2e/test_shell_less_proxy.py).

`ProxyProcess` runs it as a child process for tests.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from emulation.children import die_with_parent_preexec, stop_process
from modeldrain.hook.flags import Parser, arg, parse_port

_START_TIMEOUT_S = 15.0
_CHUNK = 65536


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(_CHUNK):
            writer.write(chunk)
            await writer.drain()
        writer.write_eof()
    except (ConnectionError, OSError):
        writer.close()  # one side went away: the other goes too


class Proxy:
    """Relays each client's connection to the engine; `source`: the address it connects from (a
    mesh's proxy has its own: emulation/mesh_proxy.py), else the kernel's choice."""

    def __init__(self, upstream_port: int, source: str | None = None):
        self._upstream_port = upstream_port
        self._local_addr = (source, 0) if source is not None else None
        self._connections: set[asyncio.StreamWriter] = set()

    async def handle(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            engine_reader, engine_writer = await asyncio.open_connection("127.0.0.1", self._upstream_port,
                                                                         local_addr=self._local_addr)
        except OSError:
            client_writer.close()
            return
        self._connections |= {client_writer, engine_writer}
        try:
            await asyncio.gather(pipe(client_reader, engine_writer), pipe(engine_reader, client_writer))
        finally:
            self._connections -= {client_writer, engine_writer}
            for writer in (client_writer, engine_writer):
                writer.close()

    def reset_all(self) -> int:
        """Abort every connection (an RST to the client): what a proxy killed mid-request does."""
        count = len(self._connections)
        for writer in list(self._connections):
            transport = writer.transport
            if isinstance(transport, asyncio.Transport):
                transport.abort()
        return count


def announce(ready_file: Path, port: int) -> None:
    """Written whole, then renamed: the starter polls for the name and must never read it half-written."""
    partial = ready_file.with_name(ready_file.name + ".partial")
    partial.write_text(f"{port}\n")
    partial.replace(ready_file)


def await_ready(process: subprocess.Popen, ready: Path, what: str) -> int:
    """The port a started proxy announced in `ready`; RuntimeError, with its stderr, if it exits or
    does not announce within _START_TIMEOUT_S."""
    deadline_at = time.monotonic() + _START_TIMEOUT_S
    while not ready.exists():
        if process.poll() is not None or time.monotonic() > deadline_at:
            stderr = process.stderr.read().decode() if process.poll() is not None and process.stderr else ""
            raise RuntimeError(f"the {what} did not start: {stderr.strip()[-300:]}")
        time.sleep(0.02)
    return int(ready.read_text())


async def serve(upstream_port: int, listen_port: int, ready_file: Path | None, *, host: str = "127.0.0.1") -> int:
    """Forward listen_port to the engine's upstream_port until SIGTERM; host "" is every address
    (a Pod's proxy, reached through its Service)."""
    proxy = Proxy(upstream_port)
    server = await asyncio.start_server(proxy.handle, host or None, listen_port)
    port = server.sockets[0].getsockname()[1]
    if ready_file is not None:
        announce(ready_file, port)
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stopped.set)
    loop.add_signal_handler(signal.SIGINT, stopped.set)
    await stopped.wait()
    server.close()
    reset = proxy.reset_all()
    print(f"proxy: SIGTERM, reset {reset // 2} connection(s) in flight", file=sys.stderr, flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m emulation.proxy", description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", type=arg(lambda text: parse_port(text, what="--upstream")), required=True)
    parser.add_argument("--listen-port", type=arg(lambda text: parse_port(text, what="--listen-port", allow_zero=True)),
                        default=0)
    parser.add_argument("--ready-file", type=Path)
    args = parser.parse_args(argv)
    return asyncio.run(serve(args.upstream, args.listen_port, args.ready_file))


class ProxyProcess:
    """The proxy as a child process: started, reachable on `port`, always cleaned up."""

    def __init__(self, upstream_port: int):
        self._upstream_port = upstream_port
        self._dir = Path(tempfile.mkdtemp(prefix="routing-proxy-"))
        self.process: subprocess.Popen | None = None
        self.port: int | None = None

    def __enter__(self) -> "ProxyProcess":
        ready = self._dir / "ready"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "emulation.proxy", "--upstream", str(self._upstream_port), "--ready-file", str(ready)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            preexec_fn=die_with_parent_preexec())
        self.port = await_ready(self.process, ready, "routing proxy")
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.process is not None:
            stop_process(self.process, term_wait_s=5.0)
            assert self.process.stderr is not None
            self.process.stderr.close()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


if __name__ == "__main__":
    sys.exit(main())
