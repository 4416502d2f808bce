"""The conformance table (conformance/retirement/): rendered from tests/retirement/conformance_scenarios.py,
made of answers that pass the contract strictly, covering every reason, and passed by the reference client."""

import copy
import json
from typing import Any

import pytest

from modeldrain.retirement import client as retirement
from tests.sidecar.contract import SCHEMAS, assert_work

from .conformance_scenarios import ADDED_LATER, ADDED_WITHIN_V2, FORMAT, TABLE_DIR, rendered

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
        if "delete" in round_:
            step = round_["delete"]
            pods = {url: retirement.PodRead(p["resource_version"], p["termination_grace_period_seconds"])
                    for url, p in step["pods"].items()}
            decisions.append(protocol.deletes(round_["at_s"], pods, step["grace_period_seconds"]))
            continue
        answers = {url: retirement.Answer(status=a.get("status"), body=a.get("body"), error=a.get("error"))
                   for url, a in round_["answers"].items()}
        decisions.append(protocol.observe(round_["at_s"], answers))
    return decisions


def outcome(decision: retirement.Decision, expect: dict) -> dict:
    """The decision in the table's terms: verdict and reason, and the Pods and deletes where expected."""
    got: dict[str, Any] = {"verdict": decision.verdict.value, "reason": decision.reason.value}
    if "pods" in expect or decision.verdict is retirement.RetirementVerdict.DELETE:
        got["pods"] = [pod.as_dict() for pod in decision.pods]
    if "deletes" in expect or decision.deletes:
        got["deletes"] = [{"path": d.path(), "body": d.options()} for d in decision.deletes]
    return got


def test_the_files_are_what_the_scenarios_render():
    # Regenerate with: .venv/bin/python -m tests.retirement.conformance_scenarios --write
    assert {p.name: p.read_text() for p in FILES} == rendered()


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_the_reference_client_passes(path):
    document = load(path)
    assert document["format"] == FORMAT
    assert document["max_verdict_age_s"] == retirement.MAX_VERDICT_AGE_S
    expected = [r["expect"] for r in document["rounds"]]
    got = [outcome(d, e) for d, e in zip(replay(document), expected)]
    assert got == expected


def without_later_fields(body: dict) -> dict:
    """The answer less the fields a later release adds (ADDED_LATER): what this release's document covers."""
    body = copy.deepcopy(body)
    for path in ADDED_LATER:
        node = body
        for key in path[:-1]:
            node = node[key]
        node.pop(path[-1], None)
    return body


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_answer_is_a_real_one(path):
    for round_ in load(path)["rounds"]:
        for answer in round_.get("answers", {}).values():
            if answer.get("status") == 200 and answer["body"].get("schema") == retirement.SCHEMA:
                assert_work(without_later_fields(answer["body"]))


def test_the_fields_added_later_are_none_this_release_writes_and_those_added_within_v2_are_optional():
    for path in ADDED_LATER:
        schema = SCHEMAS["Work"]
        for key in path[:-1]:
            schema = schema["properties"][key]
        assert path[-1] not in schema["properties"] and schema["additionalProperties"] is False, path
    for path in ADDED_WITHIN_V2:
        schema = SCHEMAS["Work"]
        for key in path[:-1]:
            schema = schema["properties"][key]
        assert path[-1] in schema["properties"] and path[-1] not in schema["required"], path


def test_every_verdict_and_reason_is_covered():
    seen = {(r["expect"]["verdict"], r["expect"]["reason"]) for p in FILES for r in load(p)["rounds"]}
    assert {v for v, _ in seen} == {v.value for v in retirement.RetirementVerdict}
    assert {r for _, r in seen} == {r.value for r in retirement.Reason}


def test_a_wrong_expectation_fails_the_replay():
    # The replay can fail: flip one expected verdict and it no longer matches.
    document = load(FILES[0])
    got = [outcome(d, r["expect"]) for d, r in zip(replay(document), document["rounds"])]
    assert got == [r["expect"] for r in document["rounds"]]
    document["rounds"][-1]["expect"]["verdict"] = "hold"
    assert got != [r["expect"] for r in document["rounds"]]


def test_a_delete_of_another_uid_fails_the_replay():
    # The Pods expected to be deleted are compared too: a delete verdict naming another UID does not pass.
    document = next(load(p) for p in FILES if p.stem.endswith("deletes-carry-each-members-uid"))
    expected = [r["expect"] for r in document["rounds"]]
    assert [outcome(d, e) for d, e in zip(replay(document), expected)] == expected
    expected[1]["pods"][1]["uid"] = "uid-llm-1-0"
    expected[-1]["deletes"][1]["body"]["preconditions"]["uid"] = "uid-llm-1-0"
    got = [outcome(d, e) for d, e in zip(replay(document), expected)]
    assert got[1] != expected[1] and got[-1] != expected[-1]
