"""A stand-in for a service mesh's sidecar proxy, as the Pod's kernel sees it.

    python -m emulation.mesh_proxy --mesh istio|linkerd --upstream PORT [--inbound-port PORT] [--ready-file FILE]

It listens where the mesh's proxy listens in the Pod's network namespace (Istio: inbound 15006,
outbound 15001; Linkerd: inbound 4143, outbound 4140) and relays each inbound connection to the
engine on 127.0.0.1:PORT from the source the mesh uses (Istio: 127.0.0.6, Linux lets any
127.0.0.0/8 address be bound on lo; Linkerd: 127.0.0.1). The Pod's iptables REDIRECT is not
emulated: clients dial the inbound port themselves, which leaves the same sockets in the tables
(a redirected connection's local port is the listener's). No mTLS, no HTTP: bytes are piped, one
upstream connection per client connection, as Envoy's TCP proxy does. The outbound listener
accepts and closes: it is here to be seen. On SIGTERM it stops at once, resetting what it holds.

`MeshProxyProcess` runs it as a child process for tests (in the caller's network namespace).
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from emulation.children import die_with_parent_preexec, stop_process
from emulation.proxy import Proxy, announce, await_ready
from modeldrain.hook.flags import Parser, arg, parse_port

# (inbound port, outbound port, the source of its connections to the app)
MESHES = {"istio": (15006, 15001, "127.0.0.6"), "linkerd": (4143, 4140, "127.0.0.1")}


async def _refuse(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.close()


async def serve(mesh: str, upstream_port: int, inbound_port: int | None, ready_file: Path | None) -> int:
    default_inbound, outbound, source = MESHES[mesh]
    relay = Proxy(upstream_port, source)
    inbound_server = await asyncio.start_server(relay.handle, None, inbound_port or default_inbound)
    outbound_server = await asyncio.start_server(_refuse, None, outbound)
    if ready_file is not None:
        announce(ready_file, inbound_server.sockets[0].getsockname()[1])
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stopped.set)
    loop.add_signal_handler(signal.SIGINT, stopped.set)
    await stopped.wait()
    inbound_server.close()
    outbound_server.close()
    relay.reset_all()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m emulation.mesh_proxy", description=__doc__.split("\n\n")[0])
    parser.add_argument("--mesh", choices=sorted(MESHES), required=True)
    parser.add_argument("--upstream", type=arg(lambda text: parse_port(text, what="--upstream")), required=True)
    parser.add_argument("--inbound-port", type=arg(lambda text: parse_port(text, what="--inbound-port")),
                        help="listen for inbound connections here instead of the mesh's own port")
    parser.add_argument("--ready-file", type=Path)
    args = parser.parse_args(argv)
    return asyncio.run(serve(args.mesh, args.upstream, args.inbound_port, args.ready_file))


class MeshProxyProcess:
    """The stand-in as a child process: started (its listeners up), always cleaned up."""

    def __init__(self, mesh: str, upstream_port: int, *extra: str, die_with_parent: bool = True):
        # die_with_parent=False when started from a thread that exits (one that entered a network
        # namespace): the kernel's parent-death signal follows the thread, not the process.
        self._die_with_parent = die_with_parent
        self._argv = ["--mesh", mesh, "--upstream", str(upstream_port), *extra]
        self._dir = Path(tempfile.mkdtemp(prefix="mesh-proxy-"))
        self.process: subprocess.Popen | None = None
        self.port: int | None = None

    def start(self) -> "MeshProxyProcess":
        ready = self._dir / "ready"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "emulation.mesh_proxy", *self._argv, "--ready-file", str(ready)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            preexec_fn=die_with_parent_preexec() if self._die_with_parent else None)
        self.port = await_ready(self.process, ready, "mesh proxy")
        return self

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process, term_wait_s=5.0)
            if self.process.stderr is not None:
                self.process.stderr.close()

    def __enter__(self) -> "MeshProxyProcess":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


if __name__ == "__main__":
    sys.exit(main())
