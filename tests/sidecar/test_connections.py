"""The outside-connection count: socket tables, the Pod's own addresses, and what a table that cannot
be trusted gives (unknown, never zero). Real sockets on this machine for the kernel's side; written
tables for what the kernel never writes."""

import os
import resource
import socket
import statistics

import pytest

from modeldrain.sidecar import socket_table
from modeldrain.sidecar.connections import count_connections, outside
from modeldrain.sidecar.pod_addresses import own_networks
from modeldrain.sidecar.socket_table import established
from tests.kernel_tables import HEADER4, HEADER6, hex_address, line

from .contract import assert_work
from .sidecar_process import SidecarProcess

FIB = """Main:
  +-- 0.0.0.0/0 3 0 5
     +-- 127.0.0.0/8 2 0 2
           |-- 127.0.0.1
              /32 host LOCAL
     |-- 10.4.0.7
        /32 host LOCAL
"""
IF_INET6 = ("00000000000000000000000000000001 01 80 10 80       lo\n"
            "fe800000000000000000000000000007 02 40 20 80     eth0\n")
PORT = 8000


def proc(tmp_path, tcp=HEADER4, tcp6=HEADER6, fib=FIB, if_inet6=IF_INET6):
    net = tmp_path / "net"
    net.mkdir()
    for name, text in (("tcp", tcp), ("tcp6", tcp6), ("fib_trie", fib), ("if_inet6", if_inet6)):
        if text is not None:
            (net / name).write_text(text)
    return str(tmp_path)


def test_ipv4_ipv6_and_v4_mapped_peers_outside_the_pod_count(tmp_path):
    root = proc(tmp_path, tcp=HEADER4 + "".join([
        line(0, "10.4.0.7", PORT, "10.4.9.9", 40001, inode=1),  # a client: counts
        line(1, "10.4.0.7", PORT, "127.0.0.1", 40002, inode=2),  # loopback: the hook
        line(2, "10.4.0.7", PORT, "10.4.0.7", 40003, inode=3),  # the Pod's own address: in-Pod proxy
        line(3, "10.4.0.7", 9000, "10.4.9.9", 40004, inode=4),  # another port
        line(4, "0.0.0.0", PORT, "0.0.0.0", 0, state="0A", inode=5),  # the listener
        line(5, "10.4.0.7", PORT, "10.4.9.9", 40005, state="06", inode=6),  # TIME_WAIT: not established
    ]), tcp6=HEADER6 + "".join([
        line(0, "::ffff:10.4.0.7", PORT, "::ffff:10.4.9.8", 50001, inode=7),  # v4-mapped client: counts
        line(1, "fe80::7", PORT, "fe80::99", 50002, inode=8),  # a link-local client: counts
        line(2, "fe80::7", PORT, "fe80::7", 50003, inode=9),  # own link-local
        line(3, "::1", PORT, "::1", 50004, inode=10),
        line(4, "::ffff:127.0.0.1", PORT, "::ffff:127.0.0.1", 50005, inode=11),
    ]))
    found = outside(established(root, [PORT]), own_networks(root))
    assert sorted(c.inode for c in found) == [1, 7, 8]
    assert {str(c.remote) for c in found} == {"10.4.9.9", "10.4.9.8", "fe80::99"}
    count = count_connections(root, [PORT])
    assert count.established == 3 and count.detail == "3 established from outside the Pod", count


def test_a_node_address_peer_counts_like_any_client(tmp_path):
    # Kubelet's probes come from the node's address, and so does a client SNAT'd to the node: both count.
    root = proc(tmp_path, tcp=HEADER4 + line(0, "10.4.0.7", PORT, "10.4.0.1", 41000, inode=1))
    assert count_connections(root, [PORT]).established == 1


@pytest.mark.parametrize("why, files, reason", [
    ("no /proc/net", None, "cannot read"),
    ("a hostile line", {"tcp": HEADER4 + "   0: 0100007F:1F40 nonsense\n"}, "line 2 is not a socket"),
    ("a line with a bad address", {"tcp": HEADER4 + line(0, "10.4.0.7", PORT, "10.4.9.9", 1).replace(
        hex_address("10.4.9.9"), "0A0409ZZ")}, "line 2 is not a socket"),
    ("a truncated table", {"tcp": HEADER4 + line(0, "10.4.0.7", PORT, "10.4.9.9", 1)[:60]}, "cut off"),
    ("an empty table", {"tcp": ""}, "cut off"),
    ("no header", {"tcp": line(0, "10.4.0.7", PORT, "10.4.9.9", 1)}, "header"),
    ("not ASCII", {"tcp": HEADER4 + "\u00e9\n"}, "not ASCII"),
    ("no tcp table", {"tcp": None}, "cannot read"),
    ("no fib_trie", {"fib": None}, "fib_trie"),
    ("a fib_trie without loopback", {"fib": "Main:\n"}, "no local address"),
    ("a hostile fib_trie line", {"fib": "     |-- 10.4.0.x\n        /32 host LOCAL\n"}, "not a local address"),
    ("a hostile if_inet6 line", {"if_inet6": "zz\n"}, "not an address"),
])
def test_a_table_that_cannot_be_trusted_makes_the_count_unknown_never_zero(tmp_path, why, files, reason):
    if files is None:
        root = str(tmp_path)
    else:
        kwargs = {"tcp": HEADER4, "tcp6": HEADER6, **files}
        root = proc(tmp_path, **kwargs)
    count = count_connections(root, [PORT])
    assert count.established is None, why
    assert count.detail.startswith("count unknown: ") and reason in count.detail, count.detail
    assert "\n" not in count.detail


def test_a_table_over_its_cap_is_unknown(tmp_path):
    root = proc(tmp_path, tcp=HEADER4 + "".join(line(i, "10.4.0.7", PORT, "10.4.9.9", 1000 + i, inode=i)
                                                  for i in range(100)), tcp6=HEADER6)
    with pytest.raises(socket_table.SocketTableError, match="over 2000 bytes"):
        established(root, [PORT], max_bytes=2000)
    assert len(established(root, [PORT])) == 100


def test_a_kernel_without_ipv6_has_no_tcp6_table(tmp_path):
    root = proc(tmp_path, tcp=HEADER4 + line(0, "10.4.0.7", PORT, "10.4.9.9", 1), tcp6=None, if_inet6=None)
    assert count_connections(root, [PORT]).established == 1


# --- this machine's kernel ---

def _pair(listener):
    client = socket.create_connection(listener.getsockname()[:2])
    server, _ = listener.accept()
    return client, server


def test_the_kernel_tables_show_a_real_connection_and_loopback_is_excluded():
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client, server = _pair(listener)
        with client, server:
            port = listener.getsockname()[1]
            seen = established("/proc", [port])
            assert [c.inode for c in seen] == [os.fstat(server.fileno()).st_ino]
            count = count_connections("/proc", [port])
            assert count.established == 0, count  # the peer is loopback


SCALE_CONNECTIONS = 5000


def test_a_scan_of_thousands_of_sockets_is_bounded():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = 2 * SCALE_CONNECTIONS + 100
    if hard != resource.RLIM_INFINITY and hard < needed:
        pytest.skip(f"needs {needed} file descriptors, the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, needed), hard))
    sockets = []
    try:
        with socket.create_server(("::1", 0), family=socket.AF_INET6, backlog=1024) as listener:
            for _ in range(SCALE_CONNECTIONS):
                sockets.extend(_pair(listener))
            port = listener.getsockname()[1]
            assert len(established("/proc", [port])) == SCALE_CONNECTIONS
            durations = [count_connections("/proc", [port]).duration_ms for _ in range(3)]
            # Timing is the behaviour here: the scan runs per read (bench/drains/routerless.py measures it).
            assert statistics.median(durations) < 2000, durations
    finally:
        for s in sockets:
            s.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


# --- in the answer ---

def test_every_answer_carries_the_count_within_the_contract(vllm_engine, tmp_path):
    with SidecarProcess("--port", str(vllm_engine.port), "--engine", "vllm") as s:
        first = assert_work(s.work())["connections"]
        second = assert_work(s.work())
    # The sidecar's own read of the engine is loopback: nothing outside the Pod is connected. (This
    # machine's /proc may also show another engine's --port, which the sidecar takes as a fallback.)
    assert vllm_engine.port in first["ports"] and first["established"] == 0, first
    # No longer measured: null, with its window, for v2 readers (docs/sidecar-api.md).
    assert (first["recent_data"], first["recent_window_s"]) == (None, 2.0), first
    assert second["connections"]["free_since_seq"] == first["free_since_seq"] <= second["read"]["seq"] - 1
    with SidecarProcess("--port", str(vllm_engine.port), "--engine", "vllm", "--service-port", "9443",
                        "--service-port", "8080", "--net-root", str(tmp_path)) as s:
        unknown = assert_work(s.work())["connections"]
    assert unknown["ports"] == [8080, 9443]
    assert unknown["established"] is None and unknown["free_since_seq"] is None
    assert "cannot read" in unknown["detail"]


# --- behind a service mesh's proxy (modeldrain/sidecar/mesh.py) ---

def _listener(sl, port, address="0.0.0.0", inode=900):
    return line(sl, address, port, "::" if ":" in address else "0.0.0.0", 0, state="0A", inode=inode)


def _istio_pod(clients, relays, listeners=(15006, 15001)):
    """The tables of a Pod behind Istio's sidecar: clients on the inbound listener (the REDIRECT leaves
    its port on their sockets), the proxy's upstream connections to the engine from 127.0.0.6."""
    rows = [_listener(i, port, inode=900 + i) for i, port in enumerate(listeners)]
    rows += [line(10 + i, "10.4.0.7", 15006, f"10.4.9.{i + 1}", 40000 + i, inode=100 + i) for i in range(clients)]
    rows += [line(50 + i, "10.4.0.7", PORT, "127.0.0.6", 50000 + i, inode=200 + i) for i in range(relays)]
    rows += [line(90, "127.0.0.1", PORT, "127.0.0.1", 41000, inode=300)]  # the sidecar's own read
    return HEADER4 + "".join(rows)


def test_clients_behind_istios_proxy_are_counted_not_a_confident_zero(tmp_path):
    root = proc(tmp_path, tcp=_istio_pod(clients=3, relays=3))
    count = count_connections(root, [PORT])
    assert count.established == 3, count
    assert "3 through Istio's proxy" in count.detail and "0 directly" in count.detail, count.detail


def test_more_relays_than_inbound_connections_count_the_relays(tmp_path):
    # One client connection to the listener (a peer's pooled connection), three requests relayed.
    root = proc(tmp_path, tcp=_istio_pod(clients=1, relays=3))
    assert count_connections(root, [PORT]).established == 3


def test_a_direct_client_and_a_meshed_one_both_count(tmp_path):
    # A port excluded from the capture (or TPROXY mode) leaves the client on the engine's port itself.
    root = proc(tmp_path, tcp=_istio_pod(clients=2, relays=2) + line(95, "10.4.0.7", PORT, "10.4.8.8", 1, inode=5))
    count = count_connections(root, [PORT])
    assert count.established == 3 and "1 directly" in count.detail, count.detail


def test_an_idle_mesh_reads_zero_and_says_it_looked(tmp_path):
    root = proc(tmp_path, tcp=_istio_pod(clients=0, relays=0))
    count = count_connections(root, [PORT])
    assert count.established == 0 and "Istio's proxy (a listener on 15001, 15006)" in count.detail, count.detail


def test_the_inbound_listeners_in_pod_peers_are_not_clients(tmp_path):
    root = proc(tmp_path, tcp=_istio_pod(clients=0, relays=0)
                + line(96, "10.4.0.7", 15006, "10.4.0.7", 1, inode=6) + line(97, "127.0.0.1", 15006, "127.0.0.1", 2))
    assert count_connections(root, [PORT]).established == 0


def test_clients_behind_linkerds_proxy_are_counted(tmp_path):
    # Linkerd relays from 127.0.0.1, as the sidecar's own reads do: only its listener can count.
    rows = [_listener(0, 4143), _listener(1, 4140, inode=901)]
    rows += [line(10 + i, "10.4.0.7", 4143, f"10.4.9.{i + 1}", 40000 + i, inode=100 + i) for i in range(2)]
    rows += [line(50 + i, "127.0.0.1", PORT, "127.0.0.1", 50000 + i, inode=200 + i) for i in range(2)]
    count = count_connections(proc(tmp_path, tcp=HEADER4 + "".join(rows)), [PORT])
    assert count.established == 2 and "Linkerd" in count.detail, count.detail


@pytest.mark.parametrize("why, tcp", [
    ("relays from 127.0.0.6 and no inbound listener", _istio_pod(clients=0, relays=2, listeners=())),
    ("Istio's outbound listener without its inbound one", _istio_pod(clients=0, relays=0, listeners=(15001,))),
    ("Linkerd's outbound listener without its inbound one", HEADER4 + _listener(0, 4140)),
])
def test_a_mesh_whose_inbound_listener_is_not_seen_makes_the_count_unknown(tmp_path, why, tcp):
    count = count_connections(proc(tmp_path, tcp=tcp), [PORT])
    assert count.established is None, why
    assert count.detail.startswith("count unknown: ") and "inbound listener" in count.detail, count.detail


def test_an_engine_on_a_mesh_port_is_not_a_mesh(tmp_path):
    tcp = HEADER4 + _listener(0, 4143) + line(1, "10.4.0.7", 4143, "10.4.9.9", 1, inode=7)
    count = count_connections(proc(tmp_path, tcp=tcp), [4143])
    assert count.established == 1 and "Linkerd" not in count.detail, count.detail


def test_ipv6_listeners_and_istios_ipv6_relay_source(tmp_path):
    tcp6 = HEADER6 + _listener(0, 15006, address="::") + "".join(
        line(1 + i, "::1", PORT, "::6", 50000 + i, inode=200 + i) for i in range(2))
    count = count_connections(proc(tmp_path, tcp6=tcp6), [PORT])
    assert count.established == 2 and "from ::6" in count.detail, count.detail


def _listening_on(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def test_real_relays_from_127_0_0_6_count_with_a_mesh_listener_and_are_unknown_without():
    """This machine's kernel: connections bound to 127.0.0.6 (Linux lets any 127/8 address be a
    source on lo) to a stand-in engine, as Istio's proxy makes them; then a listener on 15006."""
    if _listening_on(15006):
        pytest.skip("something on this machine listens on 15006 already")
    with socket.create_server(("127.0.0.1", 0)) as engine:
        port = engine.getsockname()[1]
        relays = []
        try:
            for _ in range(2):
                relay = socket.socket()
                relay.bind(("127.0.0.6", 0))
                relay.connect(("127.0.0.1", port))
                relays += [relay, engine.accept()[0]]
            unknown = count_connections("/proc", [port])
            assert unknown.established is None and "from 127.0.0.6" in unknown.detail, unknown
            try:
                inbound = socket.create_server(("127.0.0.1", 15006))
            except OSError as exc:
                pytest.skip(f"cannot listen on 15006 here: {exc}")
            with inbound:
                counted = count_connections("/proc", [port])
            assert counted.established == 2 and "through Istio's proxy" in counted.detail, counted
        finally:
            for s in relays:
                s.close()
