"""Two network namespaces, a Pod's and a client's, joined by a veth pair with IPv6 link-local addresses only.

Nothing is routable: no IPv4 address, no global IPv6 address, no route, and the veth is created
inside the Pod's namespace with its peer moved straight into the client's, so it never exists in
the host's namespace and no packet can leave the two. Each namespace is held by a `sleep` run under
`unshare --net`; stopping those (and the processes the test started inside) frees both. Root only.
Threads enter a namespace with tests/containers/netns.py.
"""

from __future__ import annotations

import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from emulation.engine_process import EngineProcess, free_port
from tests.containers.netns import call_in_netns
from tests.environment import require_executable, require_root
from tests.sidecar.sidecar_process import kill_now

POD_ADDRESS = "fe80::1"
CLIENT_ADDRESS = "fe80::2"
POD_LINK = "eth0"  # the Pod's side, named as a Pod's interface is
CLIENT_LINK = "client0"
HOLDER_START_TIMEOUT_S = 5.0


@dataclass
class LinkLocalPair:
    pod_holder: subprocess.Popen | None = None
    client_holder: subprocess.Popen | None = None

    @property
    def pod_netns(self) -> str:
        assert self.pod_holder is not None
        return f"/proc/{self.pod_holder.pid}/ns/net"

    @property
    def client_netns(self) -> str:
        assert self.client_holder is not None
        return f"/proc/{self.client_holder.pid}/ns/net"

    @property
    def pod_url_host(self) -> str:
        """The Pod's address as the client dials it (a link-local address needs its interface)."""
        return f"{POD_ADDRESS}%{CLIENT_LINK}"

    def __enter__(self) -> "LinkLocalPair":
        self.pod_holder = _holder()
        self.client_holder = _holder()
        try:
            pod, client = str(self.pod_holder.pid), str(self.client_holder.pid)
            _ip(pod, "link", "set", "lo", "up")
            _ip(client, "link", "set", "lo", "up")
            _ip(pod, "link", "add", POD_LINK, "type", "veth", "peer", "name", CLIENT_LINK, "netns", client)
            for pid, link, address in ((pod, POD_LINK, POD_ADDRESS), (client, CLIENT_LINK, CLIENT_ADDRESS)):
                _ip(pid, "link", "set", link, "addrgenmode", "none")  # no address but the one given
                _ip(pid, "-6", "addr", "add", f"{address}/64", "dev", link, "nodad")
                _ip(pid, "link", "set", link, "up")
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        for holder in (self.pod_holder, self.client_holder):
            if holder is not None and holder.poll() is None:
                holder.kill()
                holder.wait(5)

    def in_pod(self, function, timeout_s: float = 60):
        return call_in_netns(self.pod_netns, function, timeout_s)

    def in_client(self, function, timeout_s: float = 60):
        return call_in_netns(self.client_netns, function, timeout_s)

    def addresses(self, pid: str) -> str:
        return subprocess.run(["nsenter", "-t", pid, "-n", "ip", "addr"], capture_output=True, text=True,
                              check=True).stdout


@contextmanager
def pod_with_an_engine() -> Iterator[tuple[LinkLocalPair, int, EngineProcess]]:
    """The two namespaces, and an emulated vLLM listening on every address of the Pod's: the pair,
    the engine's port and the engine, killed at the end. Root only."""
    require_root("network namespaces and a veth pair")
    for tool in ("unshare", "nsenter", "ip"):
        require_executable(tool, "network namespaces")
    with LinkLocalPair() as pair:
        port = pair.in_pod(free_port)
        engine = pair.in_pod(lambda: EngineProcess("--kind", "vllm", "--host", "::", "--port", str(port),
                                                   die_with_parent=False).start())
        try:
            yield pair, port, engine
        finally:
            kill_now(engine)


def _holder() -> subprocess.Popen:
    holder = subprocess.Popen(["unshare", "--net", "sleep", "3600"], stdin=subprocess.DEVNULL)
    deadline_at = time.monotonic() + HOLDER_START_TIMEOUT_S
    host_netns = _netns_id("self")
    while _netns_id(str(holder.pid)) == host_netns:  # until unshare has exec'd sleep in the new namespace
        if holder.poll() is not None or time.monotonic() > deadline_at:
            holder.kill()
            raise RuntimeError("unshare --net did not start a namespace")
        time.sleep(0.01)
    return holder


def _netns_id(pid: str) -> str:
    import os
    return os.readlink(f"/proc/{pid}/ns/net")


def _ip(pid: str, *args: str) -> None:
    result = subprocess.run(["nsenter", "-t", pid, "-n", "ip", *args], capture_output=True, text=True, timeout=10)
    if result.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} in netns of {pid}: {result.stderr.strip()}")
