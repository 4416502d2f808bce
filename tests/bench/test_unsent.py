"""bench/engines/unsent.py: what the engine's port still owes its clients, from written tables."""

from bench.engines.unsent import Unsent, unsent_bytes
from tests.kernel_tables import HEADER4, HEADER6, line

PORT = 8000


def proc(tmp_path, tcp=HEADER4, tcp6=HEADER6):
    net = tmp_path / "net"
    net.mkdir()
    for name, text in (("tcp", tcp), ("tcp6", tcp6)):
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
