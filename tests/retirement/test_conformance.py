"""The conformance table (conformance/retirement/): rendered from tests/retirement/conformance_scenarios.py,
made of answers that pass the contract strictly, covering every reason, and passed by the reference client."""

import json

import pytest

from modeldrain.retirement import client as retirement
from tests.sidecar.contract import assert_work

from .conformance_scenarios import FORMAT, TABLE_DIR, rendered

FILES = sorted(TABLE_DIR.glob("*.json"))


def load(path):
    return json.loads(path.read_text())


def replay(document) -> list[retirement.Decision]:
    """What conformance/retirement/README.md asks of any implementation, in Python."""
    members = [retirement.MemberEndpoint(m["url"], retirement.ExpectedPod(**m["pod"]) if m["pod"] else None)
               for m in document["members"]]
    protocol = retirement.Retirement(members, document["budget_s"], router=document.get("router", True))
    decisions = []
    for round_ in document["rounds"]:
        answers = {url: retirement.Answer(status=a.get("status"), body=a.get("body"), error=a.get("error"))
                   for url, a in round_["answers"].items()}
        decisions.append(protocol.observe(round_["at_s"], answers))
    return decisions


def test_the_files_are_what_the_scenarios_render():
    # Regenerate with: .venv/bin/python -m tests.retirement.conformance_scenarios --write
    assert {p.name: p.read_text() for p in FILES} == rendered()


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_the_reference_client_passes(path):
    document = load(path)
    assert document["format"] == FORMAT
    got = [(d.verdict.value, d.reason.value) for d in replay(document)]
    expected = [(r["expect"]["verdict"], r["expect"]["reason"]) for r in document["rounds"]]
    assert got == expected


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_answer_is_a_real_one(path):
    for round_ in load(path)["rounds"]:
        for answer in round_["answers"].values():
            if answer.get("status") == 200 and answer["body"].get("schema") == retirement.SCHEMA:
                assert_work(answer["body"])


def test_every_verdict_and_reason_is_covered():
    seen = {(r["expect"]["verdict"], r["expect"]["reason"]) for p in FILES for r in load(p)["rounds"]}
    assert {v for v, _ in seen} == {v.value for v in retirement.RetirementVerdict}
    assert {r for _, r in seen} == {r.value for r in retirement.Reason}


def test_a_wrong_expectation_fails_the_replay():
    # The replay can fail: flip one expected verdict and it no longer matches.
    document = load(FILES[0])
    got = [(d.verdict.value, d.reason.value) for d in replay(document)]
    document["rounds"][-1]["expect"]["verdict"] = "hold"
    assert got != [(r["expect"]["verdict"], r["expect"]["reason"]) for r in document["rounds"]]
