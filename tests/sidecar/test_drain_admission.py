"""Who may hold a drain call: each source address its share, all of them a total below the connection cap."""

import pytest

from modeldrain.sidecar.drain_admission import DrainAdmission, drain_call_cap


def test_one_address_cannot_take_another_addresses_share():
    admission = DrainAdmission(total_cap=6, per_source_cap=4)
    assert [admission.admit("10.0.0.9") for _ in range(4)] == [None] * 4
    refused = admission.admit("10.0.0.9")
    assert refused is not None and "from this address" in refused.message and "10.0.0.9" not in refused.message
    assert admission.admit("10.1.0.1") is None  # kubelet's node
    assert admission.waiting == 5 and admission.held_by("10.0.0.9") == 4


def test_the_total_holds_whatever_the_addresses():
    admission = DrainAdmission(total_cap=3, per_source_cap=2)
    assert admission.admit("a") is None and admission.admit("b") is None and admission.admit("c") is None
    refused = admission.admit("d")
    assert refused is not None and "3 drain calls already wait" in refused.message
    admission.release("b")
    assert admission.admit("d") is None and admission.held_by("b") == 0


def test_a_release_without_an_admission_is_a_bug():
    with pytest.raises(RuntimeError):
        DrainAdmission(total_cap=1).release("a")


@pytest.mark.parametrize(("connections", "cap"), [(64, 48), (8, 6), (2, 1), (1, 1)])
def test_drain_calls_get_three_quarters_of_the_connections(connections, cap):
    assert drain_call_cap(connections) == cap
