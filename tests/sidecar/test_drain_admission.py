"""Who may hold a drain call: each source network its share (as many as the connection cap), all of
them a total of their own; IPv6 counted by /64, so one host's many addresses count once."""

import pytest

from modeldrain.sidecar.drain_admission import DrainAdmission, drain_call_cap, source_network


def test_one_network_cannot_take_another_networks_share():
    admission = DrainAdmission(total_cap=32, per_network_cap=8)
    assert [admission.admit("10.0.0.9") for _ in range(8)] == [None] * 8
    refused = admission.admit("10.0.0.9")
    assert refused is not None and "from this address's network" in refused.message
    assert "10.0.0.9" not in refused.message
    assert admission.admit("10.1.0.1") is None  # kubelet's node
    assert admission.waiting == 9 and admission.held_by("10.0.0.9") == 8


def test_fewer_calls_than_the_connection_cap_from_kubelets_own_address_never_refuse_it():
    """Issue 25, 8: four stranger calls from kubelet's own source address got kubelet's call a 429."""
    admission = DrainAdmission(total_cap=drain_call_cap(64), per_network_cap=64)
    assert [admission.admit("10.1.0.1") for _ in range(63)] == [None] * 63
    assert admission.admit("10.1.0.1") is None  # kubelet's, the 64th


def test_one_host_with_many_addresses_of_one_ipv6_64_counts_once():
    """Issue 25, 8: one host using 12 addresses of one /64 filled the total cap."""
    admission = DrainAdmission(total_cap=32, per_network_cap=8)
    admitted = [admission.admit(f"2001:db8:1:2::{n:x}") is None for n in range(1, 13) for _ in range(4)]
    assert admitted.count(True) == 8 and admission.waiting == 8
    assert admission.admit("2001:db8:1:3::1") is None  # the next /64: another host
    assert admission.admit("10.1.0.1") is None  # kubelet's node


def test_the_total_holds_whatever_the_networks():
    admission = DrainAdmission(total_cap=3, per_network_cap=2)
    assert admission.admit("10.0.0.1") is None and admission.admit("10.0.0.2") is None
    assert admission.admit("10.0.0.3") is None
    refused = admission.admit("10.0.0.4")
    assert refused is not None and "3 drain calls already wait" in refused.message
    admission.release("10.0.0.2")
    assert admission.admit("10.0.0.4") is None and admission.held_by("10.0.0.2") == 0


@pytest.mark.parametrize(("source", "network"), [
    ("10.0.0.9", "10.0.0.9"),
    ("::ffff:10.0.0.9", "10.0.0.9"),  # a dual-stack listener's view of an IPv4 peer
    ("2001:db8:1:2:aaaa:bbbb:cccc:dddd", "2001:db8:1:2::/64"),
    ("fe80::1%eth0", "fe80::/64"),
    ("::1", "::/64"),
    ("unknown", "unknown"),
])
def test_the_network_a_source_counts_in(source, network):
    assert source_network(source) == network


def test_a_release_without_an_admission_is_a_bug():
    with pytest.raises(RuntimeError):
        DrainAdmission(total_cap=1, per_network_cap=1).release("10.0.0.1")


@pytest.mark.parametrize(("connections", "cap"), [(64, 256), (8, 32), (1, 4)])
def test_drain_calls_may_hold_four_times_the_connection_cap(connections, cap):
    assert drain_call_cap(connections) == cap
