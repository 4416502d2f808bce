"""A scripted TCP server per test: real sockets on 127.0.0.1, the bytes a test chooses."""

import pytest

from emulation.raw_server import RawServer
from modeldrain.hook.target import Target


@pytest.fixture
def serve():
    """start(respond, tls=None, wait_for_request=True) -> the Target of a new RawServer; the servers
    are `start.servers`, to see what each was sent."""
    servers = []

    def start(respond, tls=None, wait_for_request=True):
        server = RawServer(respond, tls, wait_for_request)
        servers.append(server)
        return Target("https" if tls else "http", server.port, "/metrics")

    start.servers = servers

    yield start
    for s in servers:
        s.close()
