"""The kernel's socket tables as the programs read them (modeldrain/hook/kernel_sockets.py): every
socket's endpoints, state and tx_queue, from written tables (hostile ones included: what the kernel
never writes) and from this machine's own /proc for the kernel's side."""

import ipaddress
import os
import socket

import pytest

from modeldrain.hook.kernel_sockets import KernelSocketError, sockets
from tests.kernel_tables import HEADER4, HEADER6, hex_address, line

PORT = 8000


def proc(tmp_path, tcp=HEADER4, tcp6=HEADER6):
    net = tmp_path / "net"
    net.mkdir()
    for name, text in (("tcp", tcp), ("tcp6", tcp6)):
        if text is not None:
            (net / name).write_text(text)
    return str(tmp_path)


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
        sockets(root, [PORT])
    assert reason in str(caught.value) and "\n" not in str(caught.value), why


def test_a_huge_table_is_refused_at_its_cap_never_read_whole(tmp_path):
    root = proc(tmp_path, tcp=HEADER4 + "".join(line(i, "10.4.0.7", PORT, "10.4.9.9", 1000 + i, tx_queue=1)
                                                  for i in range(100)))
    with pytest.raises(KernelSocketError, match="over 2000 bytes"):
        sockets(root, [PORT], max_bytes=2000)
    assert len(sockets(root, [PORT])) == 100


def test_a_fifo_in_place_of_the_table_is_refused_without_blocking(tmp_path):
    root = proc(tmp_path, tcp=None)
    os.mkfifo(os.path.join(root, "net", "tcp"))
    with pytest.raises(KernelSocketError, match="not a regular file"):
        sockets(root, [PORT])


def test_a_kernel_without_ipv6_has_no_tcp6_table(tmp_path):
    root = proc(tmp_path, tcp=HEADER4 + line(0, "10.4.0.7", PORT, "10.4.9.9", 1, tx_queue=9), tcp6=None)
    assert [(s.remote_port, s.tx_queue) for s in sockets(root, [PORT])] == [(1, 9)]


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
