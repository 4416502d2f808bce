"""Where a process listens, as the kernel says (modeldrain/hook/listeners.py): this test process's own
sockets, read from the real /proc."""

from __future__ import annotations

import os
import socket

import pytest

from modeldrain.hook.listeners import Listener, ListenerError, engine_listeners, socket_inodes

PID = str(os.getpid())


def own_listeners() -> tuple[Listener, ...]:
    return engine_listeners("/proc", [PID])


def v6only_server(port: int = 0) -> socket.socket:
    sock = socket.socket(socket.AF_INET6)
    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    sock.bind(("::", port))
    sock.listen()
    return sock


def test_a_listening_socket_is_found_with_its_address_and_one_that_only_connects_is_not():
    with socket.create_server(("127.0.0.1", 0)) as server, socket.create_connection(server.getsockname()) as client:
        port = server.getsockname()[1]
        found = [listener for listener in own_listeners() if listener.port == port]
        assert found == [Listener(socket.inet_aton("127.0.0.1"), port, PID)]
        assert found[0].hosts() == ("127.0.0.1",) and found[0].where == f"127.0.0.1:{port}"
        assert client.getsockname()[1] not in {listener.port for listener in own_listeners()}


def test_an_ipv6_wildcard_is_read_on_ipv6_loopback_first_and_on_127_0_0_1_only_while_nobody_else_holds_it():
    with v6only_server() as v6:
        port = v6.getsockname()[1]
        alone = next(listener for listener in own_listeners() if listener.port == port)
        # IPV6_V6ONLY is not in /proc: [::1] reaches a `::` listener either way, 127.0.0.1 may.
        assert alone.v6only is None and alone.hosts() == ("::1", "127.0.0.1")
        with socket.create_server(("127.0.0.1", port)):
            # Another socket holds the port on IPv4: 127.0.0.1 is not the `::` listener's.
            held = next(listener for listener in own_listeners() if listener.port == port and listener.family == 6)
            assert held.v6only is True and held.hosts() == ("::1",)


def test_the_descriptors_are_read_under_a_cap_and_an_ended_process_holds_nothing(tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as server:
        assert server.fileno() >= 0 and socket_inodes(f"/proc/{PID}")
        with pytest.raises(ListenerError, match="holds over 1 descriptors"):
            socket_inodes(f"/proc/{PID}", max_descriptors=1)
    assert socket_inodes(str(tmp_path / "ended")) == set()
    assert engine_listeners(str(tmp_path), ["12345"]) == ()


def test_a_table_that_cannot_be_read_is_an_error_not_an_empty_answer(tmp_path):
    process = tmp_path / PID
    process.mkdir()
    (process / "fd").symlink_to(f"/proc/{PID}/fd")
    (process / "net").mkdir()
    (process / "net" / "tcp").write_text("not the kernel's table\n")
    with socket.create_server(("127.0.0.1", 0)), pytest.raises(ListenerError, match="header"):
        engine_listeners(str(tmp_path), [PID])
