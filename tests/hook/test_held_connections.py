"""The engine port's outside connections that predate the delete: counted from the kernel's tables at
the hook's start and at each look, said in drain_started, progress and a deadline's reason."""

import socket

from modeldrain.hook.decision import DrainOutcome
from modeldrain.hook.drain import run_drain
from modeldrain.hook.held_connections import HeldConnections
from modeldrain.hook.outcome import ReadOutcome
from tests.kernel_tables import HEADER4, HEADER6, line

from .test_drain import T0, FakeClock, ScriptedEngine, config
from .test_drain import logged as logged  # the fixture, shared

PORT = 8000


def tables(tmp_path, *rows):
    net = tmp_path / "net"
    net.mkdir(exist_ok=True)
    (net / "tcp").write_text(HEADER4 + "".join(rows))
    (net / "tcp6").write_text(HEADER6)
    return str(tmp_path)


KEEP_ALIVE_A = line(0, "10.4.0.7", PORT, "10.4.9.1", 40001, inode=11)
KEEP_ALIVE_B = line(1, "10.4.0.7", PORT, "10.4.9.2", 40002, inode=12)
LOOPBACK = line(2, "127.0.0.1", PORT, "127.0.0.1", 40003, inode=13)  # the hook's own read, the sidecar's
OWN_ADDRESS = line(3, "10.4.0.7", PORT, "10.4.0.7", 40004, inode=14)  # an in-Pod proxy dialling the Pod IP
NEW_CLIENT = line(4, "10.4.0.7", PORT, "10.4.9.3", 40005, inode=15)
OTHER_PORT = line(5, "10.4.0.7", 9000, "10.4.9.4", 40006, inode=16)


def test_outside_connections_open_since_the_start_are_told_apart_from_new_ones(tmp_path):
    root = tables(tmp_path, KEEP_ALIVE_A, KEEP_ALIVE_B, LOOPBACK, OWN_ADDRESS, OTHER_PORT)
    held = HeldConnections(PORT, root)
    assert (held.at_start.outside, held.at_start.from_before_delete) == (2, 2)
    tables(tmp_path, KEEP_ALIVE_A, NEW_CLIENT, LOOPBACK)  # B closed, a new client came
    now = held.look()
    assert (now.outside, now.from_before_delete) == (2, 1), now
    assert now.fields() == {"outside_connections": 2, "outside_connections_from_before_delete": 1}


def test_a_reused_inode_with_another_peer_is_a_new_connection(tmp_path):
    root = tables(tmp_path, KEEP_ALIVE_A)
    held = HeldConnections(PORT, root)
    tables(tmp_path, line(0, "10.4.0.7", PORT, "10.4.9.9", 40001, inode=11))
    assert held.look().from_before_delete == 0


def test_tables_that_cannot_be_read_are_unknown_never_zero(tmp_path):
    held = HeldConnections(PORT, str(tmp_path))
    assert held.at_start.outside is None and "connections unknown" in held.at_start.detail
    assert HeldConnections(None, str(tmp_path)).look().outside is None


def test_a_real_connection_from_a_non_loopback_peer_address_is_outside():
    # 127.0.0.1 is the Pod's own; a peer bound to another address of lo is not the socket's local
    # address, and only loopback (127/8) and the socket's own address are taken as in the Pod.
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
        with client, server:
            held = HeldConnections(listener.getsockname()[1], "/proc")
            assert held.at_start.outside == 0, held.at_start  # loopback: in the Pod


def test_a_drain_to_its_deadline_names_the_connections_from_before_the_delete(tmp_path, logged):
    log, events = logged
    root = tables(tmp_path, KEEP_ALIVE_A, KEEP_ALIVE_B, LOOPBACK)
    clock = FakeClock(T0)
    held = HeldConnections(PORT, root)
    result = run_drain(config(grace_s=30.0), T0, log, read=ScriptedEngine(clock, [(ReadOutcome.BUSY, 1.0),
                                                                                  (ReadOutcome.BUSY, 2.0)]),
                       clock=clock, held=held)
    assert result.outcome is DrainOutcome.DEADLINE
    assert "2 connection(s) to port 8000 from outside the Pod, 2 of them open since before the delete" in result.reason
    assert "keep-alive" in result.reason
    said = events()
    assert said[0]["event"] == "drain_started" and said[0]["outside_connections_from_before_delete"] == 2
    progress = [e for e in said if e["event"] == "progress"]
    assert progress and all(e["outside_connections_from_before_delete"] == 2 for e in progress), said


def test_a_deadline_without_such_connections_keeps_its_reason(tmp_path, logged):
    log, _ = logged
    clock = FakeClock(T0)
    held = HeldConnections(PORT, tables(tmp_path, LOOPBACK))
    result = run_drain(config(grace_s=30.0), T0, log, read=ScriptedEngine(clock, [(ReadOutcome.BUSY, 1.0)]),
                       clock=clock, held=held)
    assert result.outcome is DrainOutcome.DEADLINE and "before the delete" not in result.reason
