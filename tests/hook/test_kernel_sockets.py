"""The kernel's socket tables as the hook reads them: what a port still owes its clients (tx_queue),
from written tables (hostile ones included: what the kernel never writes) and from this machine's
own /proc for the kernel's side."""

import ipaddress
import os
import socket

import pytest

from modeldrain.hook.kernel_sockets import (
    KernelSocketError,
    Unsent,
    packed_address,
    sockets,
    unsent_bytes,
)
from tests.kernel_tables import HEADER4, HEADER6, hex_address, line

PORT = 8000


def proc(tmp_path, tcp=HEADER4, tcp6=HEADER6):
    net = tmp_path / "net"
    net.mkdir()
    for name, text in (("tcp", tcp), ("tcp6", tcp6)):
        if text is not None:
            (net / name).write_text(text)
    return str(tmp_path)


def test_bytes_owed_on_the_engine_port_count_in_every_state_that_still_owes_them(tmp_path):
    root = proc(tmp_path, tcp=HEADER4 + "".join([
        line(0, "10.4.0.7", PORT, "10.4.9.9", 40001, "01", tx_queue=35020),  # ESTABLISHED, a slow reader
        line(1, "10.4.0.7", PORT, "10.4.9.9", 40002, "01", tx_queue=0),  # ESTABLISHED, all acknowledged
        line(2, "10.4.0.7", PORT, "10.4.9.9", 40003, "04", tx_queue=100),  # FIN_WAIT1: the kernel's tail
        line(3, "10.4.0.7", PORT, "10.4.9.9", 40004, "08", tx_queue=7),  # CLOSE_WAIT: the engine still writes
        line(4, "10.4.0.7", PORT, "10.4.9.9", 40005, "09", tx_queue=3),  # LAST_ACK
        line(5, "10.4.0.7", PORT, "10.4.9.9", 40006, "0B", tx_queue=2),  # CLOSING
        line(6, "10.4.0.7", 9000, "10.4.9.9", 40007, "01", tx_queue=999999),  # another port: not the engine's
        line(7, "10.4.9.9", 40008, "10.4.0.7", PORT, "01", tx_queue=999999),  # a client's end toward the port
        line(8, "0.0.0.0", PORT, "0.0.0.0", 0, "0A", tx_queue=5),  # LISTEN owes nothing
        line(9, "10.4.0.7", PORT, "10.4.9.9", 40009, "03", tx_queue=5),  # SYN_RECV
        line(10, "10.4.0.7", PORT, "10.4.9.9", 40010, "05", tx_queue=5),  # FIN_WAIT2
        line(11, "10.4.0.7", PORT, "10.4.9.9", 40011, "06", tx_queue=5),  # TIME_WAIT
    ]), tcp6=HEADER6 + "".join([
        line(0, "::ffff:10.4.0.7", PORT, "::ffff:10.4.9.8", 50001, "01", tx_queue=4096),  # v4-mapped peer
        line(1, "fe80::7", PORT, "fe80::99", 50002, "01", tx_queue=1),  # IPv6 peer
        line(2, "fe80::7", PORT + 1, "fe80::99", 50003, "01", tx_queue=1),  # another port
    ]))
    assert unsent_bytes(root, [PORT]) == Unsent(35020 + 100 + 7 + 3 + 2 + 4096 + 1, 7)
    assert unsent_bytes(root, [PORT, 9000]).bytes == 35020 + 100 + 7 + 3 + 2 + 4096 + 1 + 999999
    assert unsent_bytes(root, [1234]) == Unsent(0, 0)


def test_the_readers_own_connection_is_no_clients_work(tmp_path):
    root = proc(tmp_path, tcp=HEADER4 + line(0, "127.0.0.1", PORT, "127.0.0.1", 40001, tx_queue=47000),
                tcp6=HEADER6 + "".join([line(0, "::ffff:127.0.0.1", PORT, "::ffff:127.0.0.1", 40002, tx_queue=10),
                                        line(1, "::1", PORT, "::1", 40003, tx_queue=20)]))
    assert unsent_bytes(root, [PORT]) == Unsent(47030, 3)
    own = [(packed_address("127.0.0.1"), 40001), (packed_address("127.0.0.1"), 40002), (packed_address("::1"), 40003)]
    assert unsent_bytes(root, [PORT], own) == Unsent(0, 0)
    # The same port from another address is another client's.
    assert unsent_bytes(root, [PORT], [(packed_address("10.4.0.7"), 40001)]).bytes == 47030


def test_addresses_decode_as_the_kernel_prints_them(tmp_path):
    root = proc(tmp_path, tcp=HEADER4 + line(0, "10.4.0.7", PORT, "10.4.9.9", 40001, inode=11),
                tcp6=HEADER6 + "".join([line(0, "::ffff:10.4.0.7", PORT, "::ffff:10.4.9.8", 50001, inode=12),
                                        line(1, "2001:db8::7", PORT, "2001:db8::99", 50002, "08", 5, inode=13)]))
    found = {s.inode: s for s in sockets(root, [PORT])}
    assert found[11].local_address == ipaddress.ip_address("10.4.0.7").packed
    assert found[11].remote_address == ipaddress.ip_address("10.4.9.9").packed and found[11].remote_port == 40001
    assert found[12].remote_address == ipaddress.ip_address("10.4.9.8").packed  # v4-mapped: as IPv4
    assert found[13].remote_address == ipaddress.ip_address("2001:db8::99").packed
    assert (found[13].state, found[13].tx_queue) == (0x08, 5)


@pytest.mark.parametrize("why, files, reason", [
    ("no /proc/net", None, "cannot read"),
    ("no tcp table", {"tcp": None}, "cannot read"),
    ("a hostile line", {"tcp": HEADER4 + "   0: 0100007F:1F40 nonsense\n"}, "line 2 is not a socket"),
    ("a bad hex address", {"tcp": HEADER4 + line(0, "10.4.0.7", PORT, "10.4.9.9", 1).replace(
        hex_address("10.4.9.9"), "0A0409ZZ")}, "line 2 is not a socket"),
    ("a bad hex tx_queue", {"tcp": HEADER4 + line(0, "10.4.0.7", PORT, "10.4.9.9", 1, tx_queue=0x10).replace(
        "00000010:", "0000001G:")}, "line 2 is not a socket"),
    ("lower-case hex (not the kernel's)", {"tcp": HEADER4 + line(0, "10.4.0.10", PORT, "10.4.9.9", 1).replace(
        hex_address("10.4.0.10"), hex_address("10.4.0.10").lower())}, "line 2 is not a socket"),
    ("an IPv4 line in the IPv6 table", {"tcp6": HEADER6 + line(0, "10.4.0.7", PORT, "10.4.9.9", 1)},
     "tcp6 line 2 is not a socket"),
    ("a truncated line", {"tcp": HEADER4 + line(0, "10.4.0.7", PORT, "10.4.9.9", 1)[:60]}, "cut off"),
    ("a line cut short but ending", {"tcp": HEADER4 + line(0, "10.4.0.7", PORT, "10.4.9.9", 1)[:60] + "\n"},
     "line 2 is not a socket"),
    ("an empty table", {"tcp": ""}, "cut off"),
    ("no header", {"tcp": line(0, "10.4.0.7", PORT, "10.4.9.9", 1)}, "header"),
    ("not ASCII", {"tcp": HEADER4 + "\u00e9\n"}, "not ASCII"),
    ("a NUL byte", {"tcp": HEADER4 + line(0, "10.4.0.7", PORT, "10.4.9.9", 1).replace(" 1 0000", " 1\x000000")},
     "line 2 is not a socket"),
])
def test_a_table_that_cannot_be_trusted_raises_one_line(tmp_path, why, files, reason):
    root = str(tmp_path) if files is None else proc(tmp_path, **{"tcp": HEADER4, "tcp6": HEADER6, **files})
    with pytest.raises(KernelSocketError) as caught:
        unsent_bytes(root, [PORT])
    assert reason in str(caught.value) and "\n" not in str(caught.value), why


def test_a_huge_table_is_refused_at_its_cap_never_read_whole(tmp_path):
    root = proc(tmp_path, tcp=HEADER4 + "".join(line(i, "10.4.0.7", PORT, "10.4.9.9", 1000 + i, tx_queue=1)
                                                  for i in range(100)))
    with pytest.raises(KernelSocketError, match="over 2000 bytes"):
        unsent_bytes(root, [PORT], max_bytes=2000)
    assert unsent_bytes(root, [PORT]) == Unsent(100, 100)


def test_a_fifo_in_place_of_the_table_is_refused_without_blocking(tmp_path):
    root = proc(tmp_path, tcp=None)
    os.mkfifo(os.path.join(root, "net", "tcp"))
    with pytest.raises(KernelSocketError, match="not a regular file"):
        unsent_bytes(root, [PORT])


def test_a_kernel_without_ipv6_has_no_tcp6_table(tmp_path):
    root = proc(tmp_path, tcp=HEADER4 + line(0, "10.4.0.7", PORT, "10.4.9.9", 1, tx_queue=9), tcp6=None)
    assert unsent_bytes(root, [PORT]) == Unsent(9, 1)


def test_packed_addresses_match_the_tables_form():
    assert packed_address("127.0.0.1") == bytes([127, 0, 0, 1])
    assert packed_address("::ffff:127.0.0.1") == bytes([127, 0, 0, 1])
    assert packed_address("::1") == socket.inet_pton(socket.AF_INET6, "::1")
    assert packed_address("fe80::1%eth0") == socket.inet_pton(socket.AF_INET6, "fe80::1")
    with pytest.raises(ValueError, match="not an IP address"):
        packed_address("localhost")


def test_this_machines_own_table_shows_a_listener_and_a_connection():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as client:
            accepted, _ = server.accept()
            with accepted:
                found = sockets("/proc", [port])
                states = sorted(s.state for s in found)
                assert states == [0x01, 0x0A], found
                served = next(s for s in found if s.state == 0x01)
                assert (served.remote_address, served.remote_port) == (bytes([127, 0, 0, 1]),
                                                                      client.getsockname()[1])
