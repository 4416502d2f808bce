"""The reference client: what the conformance table cannot show (its inputs' edges, the network, its
dependencies), and the protocol against real sidecars over emulated engines, round by round."""

import ast
import sys
import threading
import time

import pytest

from emulation.engine_process import EngineProcess
from emulation.raw_server import RawServer, canned
from modeldrain.retirement import client as retirement
from modeldrain.retirement.client import Answer, ExpectedPod, MemberEndpoint, Reason, Retirement, RetirementVerdict
from modeldrain.sidecar.member import PodIdentity
from tests.sidecar.contract import assert_work
from tests.sidecar.sidecar_process import SidecarProcess, kill_now

from .conformance_scenarios import Sidecar

POD = ExpectedPod("team-a", "llm-0", "uid-llm-0")


def test_it_imports_only_the_standard_library():
    tree = ast.parse(open(retirement.__file__).read())
    names = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    names |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert names - {"__future__"} <= set(sys.stdlib_module_names), names


def test_a_replica_has_members_each_at_its_own_url():
    with pytest.raises(ValueError):
        Retirement([], 10.0)
    with pytest.raises(ValueError):
        Retirement([MemberEndpoint("http://a:1/v1/work"), MemberEndpoint("http://a:1/v1/work")], 10.0)


def test_rounds_go_forward_and_a_final_decision_stays():
    s = Sidecar("http://a:1/v1/work", "llm-0")
    protocol = Retirement([MemberEndpoint(s.url, POD)], 60.0)
    protocol.observe(0.0, {s.url: Answer(**s.answer(0.0))})
    with pytest.raises(ValueError):
        protocol.observe(-1.0, {})
    done = protocol.observe(1.1, {s.url: Answer(**s.answer(1.1))})
    assert done.verdict is RetirementVerdict.DELETE and done.speaker == s.url
    assert protocol.observe(2.2, {s.url: Answer(error="gone")}) is done


def test_the_budget_turns_a_hold_into_an_abort_at_its_end_not_before():
    s = Sidecar("http://a:1/v1/work", "llm-0")
    protocol = Retirement([MemberEndpoint(s.url, POD)], 2.0)
    assert protocol.observe(1.999, {s.url: Answer(**s.answer(1.999, "busy"))}).verdict is RetirementVerdict.HOLD
    aborted = protocol.observe(2.0, {s.url: Answer(**s.answer(2.0, "busy"))})
    assert (aborted.verdict, aborted.reason) == (RetirementVerdict.ABORT, Reason.BUSY)
    assert "budget of 2 s" in aborted.message


def test_a_delete_on_the_last_round_of_the_budget_stands():
    s = Sidecar("http://a:1/v1/work", "llm-0")
    protocol = Retirement([MemberEndpoint(s.url, POD)], 2.0)
    protocol.observe(1.0, {s.url: Answer(**s.answer(1.0))})
    assert protocol.observe(2.5, {s.url: Answer(**s.answer(2.5))}).verdict is RetirementVerdict.DELETE


def _body_with(path: str, value):
    body = Sidecar("http://a:1/v1/work", "llm-0").answer(0.0)["body"]
    node = body
    *parents, leaf = path.split(".")
    for key in parents:
        node = node[key]
    if value is KeyError:
        del node[leaf]
    else:
        node[leaf] = value
    return body


@pytest.mark.parametrize("path, value", [
    ("read.idle", 1),  # JSON 1 is not true
    ("read.seq", True),  # nor is true a number
    ("read.seq", "3"),
    ("member.worker_index", None),
    ("engine.command", KeyError),
    ("read.started_monotonic_s", "soon"),
])
def test_an_answer_with_a_field_of_the_wrong_type_is_no_answer(path, value):
    protocol = Retirement([MemberEndpoint("http://a:1/v1/work", POD)], 60.0)
    decision = protocol.observe(0.0, {"http://a:1/v1/work": Answer(status=200, body=_body_with(path, value))})
    assert (decision.verdict, decision.reason) == (RetirementVerdict.HOLD, Reason.UNREADABLE)
    assert "not a modeldrain.sidecar/v2 answer" in decision.message


@pytest.mark.parametrize("body", [None, [], "idle"])
def test_a_body_that_is_not_an_object_is_no_answer(body):
    protocol = Retirement([MemberEndpoint("http://a:1/v1/work", POD)], 60.0)
    assert protocol.observe(0.0, {"http://a:1/v1/work": Answer(status=200, body=body)}).reason is Reason.UNREADABLE


def test_a_member_missing_from_the_round_holds():
    protocol = Retirement([MemberEndpoint("http://a:1/v1/work", POD)], 60.0)
    decision = protocol.observe(0.0, {})
    assert decision.reason is Reason.UNREADABLE and "no answer in this round" in decision.message


@pytest.mark.parametrize("text, url", [
    ("http://10.0.0.7:8490", "http://10.0.0.7:8490/v1/work"),
    ("http://10.0.0.7:8490/", "http://10.0.0.7:8490/v1/work"),
    ("https://[fd00::7]:8490/v1/work", "https://[fd00::7]:8490/v1/work"),
    ("http://pod.ns.svc:8490/v1/work?x=1#y", "http://pod.ns.svc:8490/v1/work"),
])
def test_member_urls(text, url):
    assert retirement.work_url(text) == url


@pytest.mark.parametrize("text", ["10.0.0.7:8490", "ftp://h/", "http://", "http://h:99999/", "http://h:x/"])
def test_bad_member_urls(text):
    with pytest.raises(ValueError):
        retirement.work_url(text)


@pytest.mark.parametrize("reply, problem", [
    (b"", "RemoteDisconnected"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nnope!", "not JSON"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 300000\r\n\r\n" + b"[" * 300000, "answer over"),
])
def test_what_the_network_does_becomes_an_answer_not_an_exception(reply, problem):
    with RawServer(canned(reply)) as listener:
        answer = retirement.read_member(f"http://127.0.0.1:{listener.port}", timeout_s=2.0)
    assert answer.error is not None and problem in answer.error, answer


def test_a_refused_connection_and_a_timeout_are_answers():
    with RawServer(canned(b"")) as listener:
        port = listener.port
    assert "ConnectionRefused" in retirement.read_member(f"http://127.0.0.1:{port}", timeout_s=1.0).error
    with EngineProcess("--kind", "vllm") as engine:  # a listener that never answers /v1/work in time
        engine.misbehave("hang")
        started = time.monotonic()
        answer = retirement.read_member(f"http://127.0.0.1:{engine.port}/metrics", timeout_s=0.3)
        assert time.monotonic() - started < 2.0
        kill_now(engine)
    assert "timed out" in answer.error


def test_the_token_file_holds_one_token(tmp_path):
    path = tmp_path / "token"
    path.write_text("abc\n")
    assert retirement.load_token(str(path)) == "abc"
    for bad in ("", "a b", "x" * 5000):
        path.write_text(bad)
        with pytest.raises(ValueError):
            retirement.load_token(str(path))


# --- against real sidecars, round by round ---

def _pod_env(name: str, **extra: str) -> dict[str, str]:
    return {"POD_NAMESPACE": "team-a", "POD_NAME": name, "POD_UID": f"uid-{name}", **extra}


def _rounds(protocol: Retirement, members, rounds: int, interval_s: float = retirement.ROUND_INTERVAL_S,
            between=None, started_at: float | None = None):
    """Run the protocol for up to `rounds` rounds; each answer is also checked against the contract.
    `started_at`: the monotonic time of the operation's first round, when this call continues one."""
    started_at = time.monotonic() if started_at is None else started_at
    seen = []
    for i in range(rounds):
        round_at = time.monotonic()
        answers = {m.url: retirement.read_member(m.url, timeout_s=5.0) for m in members}
        for answer in answers.values():
            if answer.status == 200:
                assert_work(answer.body)
        decision = protocol.observe(round_at - started_at, answers)
        seen.append((decision.verdict.value, decision.reason.value))
        if decision.verdict.final:
            break
        if between is not None:
            between(i)
        time.sleep(max(0.0, round_at + interval_s - time.monotonic()))
    return seen


@pytest.fixture(scope="module")
def idle_vllm():
    with EngineProcess("--kind", "vllm") as engine:
        yield engine
        kill_now(engine)


def test_a_single_pod_goes_from_busy_to_deletable_exactly_on_its_second_idle_read(idle_vllm, tmp_path):
    with SidecarProcess("--port", str(idle_vllm.port), "--engine", "vllm", "--read-timeout", "0.5",
                        "--proc-root", str(tmp_path), env=_pod_env("llm-0")) as s:
        member = MemberEndpoint(s.base_url, POD)
        request = threading.Thread(target=idle_vllm.request, args=("POST", "/v1/completions", {"duration_s": 1.6}),
                                   kwargs={"timeout_s": 10})
        request.start()
        time.sleep(0.2)
        try:
            seen = _rounds(Retirement([member], 30.0), [member], 8)
        finally:
            request.join()
    busy = seen.index(("hold", "one_idle_read"))
    assert busy >= 1 and set(seen[:busy]) == {("hold", "busy")}, seen
    assert seen[busy + 1:] == [("delete", "idle_twice")], seen


def test_a_leader_with_a_worker_answers_through_the_leader(idle_vllm, tmp_path):
    with RawServer(canned(b"")) as nothing:  # the worker's engine serves no metrics
        with SidecarProcess("--port", str(idle_vllm.port), "--engine", "vllm", "--read-timeout", "0.5",
                            "--proc-root", str(tmp_path),
                            env=_pod_env("llm-1-0", LWS_WORKER_INDEX="0", LWS_GROUP_SIZE="2",
                                         MEMBER_CONFIGURATION="rev-3")) as leader, \
                SidecarProcess("--port", str(nothing.port), "--engine", "vllm", "--read-timeout", "0.5",
                               "--proc-root", str(tmp_path),
                               env=_pod_env("llm-1-1", LWS_WORKER_INDEX="1", LWS_GROUP_SIZE="2",
                                            MEMBER_CONFIGURATION="rev-3")) as worker:
            members = [MemberEndpoint(leader.base_url, ExpectedPod("team-a", "llm-1-0", "uid-llm-1-0")),
                       MemberEndpoint(worker.base_url, ExpectedPod("team-a", "llm-1-1", "uid-llm-1-1"))]
            assert _rounds(Retirement(members, 30.0), members, 4) == [("hold", "one_idle_read"),
                                                                      ("delete", "idle_twice")]
            # The same two Pods read as a replica of one: the size does not match, so it holds.
            alone = [members[1]]
            assert _rounds(Retirement(alone, 30.0), alone, 1) == [("hold", "size_mismatch")]


def test_an_engine_restarted_between_the_reads_holds_then_counts_again(tmp_path):
    with EngineProcess("--kind", "vllm") as engine, \
            SidecarProcess("--port", str(engine.port), "--engine", "vllm", "--read-timeout", "0.5",
                           "--proc-root", str(tmp_path), env=_pod_env("llm-0")) as s:
        member = MemberEndpoint(s.base_url, POD)

        def restart_after_first(i):
            if i == 0:
                engine.misbehave("restart", down_s=0.2)
                time.sleep(0.4)  # the sidecar must see the listener gone, or the start time change
        seen = _rounds(Retirement([member], 30.0), [member], 6, between=restart_after_first)
        kill_now(engine)
    assert seen == [("hold", "one_idle_read"), ("hold", "engine_restarted"), ("hold", "one_idle_read"),
                    ("delete", "idle_twice")]


def test_a_replacement_pod_of_the_same_name_never_completes_the_old_pods_verdict(idle_vllm, tmp_path):
    # A StatefulSet's llm-0 is replaced mid-retirement: the new Pod has the name and answers at the same
    # address (a stable DNS name, here one port), idle, with another UID. Its reads never count.
    args = ("--port", str(idle_vllm.port), "--engine", "vllm", "--read-timeout", "0.5", "--proc-root", str(tmp_path))
    with SidecarProcess(*args, env=_pod_env("llm-0")) as old:
        member = MemberEndpoint(old.base_url, POD)
        protocol = Retirement([member], 30.0)
        started_at = time.monotonic()
        assert _rounds(protocol, [member], 1, started_at=started_at) == [("hold", "one_idle_read")]
        port = old.port
    with SidecarProcess(*args, "--listen", f"127.0.0.1:{port}", env={**_pod_env("llm-0"), "POD_UID": "uid-new"}):
        assert _rounds(protocol, [member], 3, started_at=started_at) == [("hold", "wrong_pod")] * 3


def test_the_clients_constants_agree_with_the_sidecar_and_the_hook():
    # The client restates them to stay self-contained; here they are held to their one home.
    from modeldrain.hook.constants import POLL_INTERVAL_S, READ_TIMEOUT_S, SIDECAR_SCHEMAS_READ
    from modeldrain.sidecar.constants import work_answer_bound_s
    from modeldrain.sidecar.work_answer import SCHEMA_VERSION

    assert retirement.SCHEMA == SCHEMA_VERSION
    assert retirement.READABLE_SCHEMAS == SIDECAR_SCHEMAS_READ  # the worker's hook reads the same window
    assert retirement.MIN_IDLE_GAP_S == POLL_INTERVAL_S  # the hook's reads are 1 s apart too
    sidecar_bound_s = work_answer_bound_s(READ_TIMEOUT_S)
    assert sidecar_bound_s < retirement.REQUEST_TIMEOUT_S < sidecar_bound_s + 2
    assert retirement.MIN_IDLE_GAP_S < retirement.ROUND_INTERVAL_S


# --- sending the deletes (docs/controller.md, "Sending the deletes") ---

URL = "http://a:1/v1/work"


def _deciding(s: Sidecar, pod: ExpectedPod | None = POD, at_s: float = 1.0) -> Retirement:
    """A protocol that has just reached DELETE on two idle reads of `s`, the second at `at_s`."""
    protocol = Retirement([MemberEndpoint(s.url, pod)], 60.0)
    assert protocol.observe(at_s - 1.0, {s.url: Answer(**s.answer(at_s - 1.0))}).reason is Reason.ONE_IDLE_READ
    assert protocol.observe(at_s, {s.url: Answer(**s.answer(at_s))}).verdict is RetirementVerdict.DELETE
    return protocol


def test_a_delete_verdict_names_each_pod_by_the_uid_it_answered_with():
    # No Pod given: the first answer's is pinned, and the verdict says which UID that was.
    s = Sidecar(URL, "llm-0", pod=PodIdentity("team-a", "llm-0", "uid-first"))
    decision = _deciding(s, pod=None).observe(2.0, {})
    assert decision.pods == (retirement.MemberPod(URL, "team-a", "llm-0", "uid-first"),)
    assert decision.decided_at_s == 1.0
    assert decision.as_dict()["pods"] == [{"url": URL, "namespace": "team-a", "name": "llm-0", "uid": "uid-first"}]


def test_the_deletes_are_preconditioned_on_the_answered_uid_and_the_resource_version_read():
    s = Sidecar(URL, "llm-0", pod=PodIdentity("team-a", "llm 0/x", "uid-a"))
    protocol = _deciding(s, pod=ExpectedPod("team-a", "llm 0/x", "uid-a"))
    sent = protocol.deletes(1.5, {URL: retirement.PodRead("812", 30)})
    assert sent.verdict is RetirementVerdict.DELETE and len(sent.deletes) == 1
    delete = sent.deletes[0]
    assert delete.path() == "/api/v1/namespaces/team-a/pods/llm%200%2Fx"
    assert delete.options() == {"apiVersion": "v1", "kind": "DeleteOptions",
                                "preconditions": {"uid": "uid-a", "resourceVersion": "812"}}  # no grace: the Pod's own


def test_deletes_need_a_delete_verdict_and_every_members_pod():
    s = Sidecar(URL, "llm-0")
    protocol = Retirement([MemberEndpoint(URL, POD)], 60.0)
    protocol.observe(0.0, {URL: Answer(**s.answer(0.0))})
    with pytest.raises(ValueError, match="no delete verdict"):
        protocol.deletes(0.5, {URL: retirement.PodRead("1", 30)})
    protocol.observe(1.0, {URL: Answer(**s.answer(1.0))})
    with pytest.raises(ValueError, match="no Pod read"):
        protocol.deletes(1.5, {})


@pytest.mark.parametrize("asked_s, own_s, sent", [(None, 30, None), (30, 30, 30), (45, 30, 45), (29, 30, "refused"),
                                                  (1, 45, "refused"), (0, 30, "refused")])
def test_a_grace_shorter_than_the_pods_is_never_sent(asked_s, own_s, sent):
    protocol = _deciding(Sidecar(URL, "llm-0"))
    decision = protocol.deletes(1.2, {URL: retirement.PodRead("7", own_s)}, grace_period_s=asked_s)
    if sent == "refused":
        assert (decision.verdict, decision.reason, decision.deletes) == (RetirementVerdict.REFUSE,
                                                                         Reason.GRACE_TOO_SHORT, ())
        assert f"gracePeriodSeconds {asked_s} is shorter than Pod team-a/llm-0's {own_s}" in decision.message
        assert protocol.observe(2.0, {}) is decision  # final: the replica is kept
    else:
        assert decision.verdict is RetirementVerdict.DELETE
        assert decision.deletes[0].options().get("gracePeriodSeconds") == sent


def test_a_verdict_is_sent_up_to_its_max_age_and_not_after():
    assert _deciding(Sidecar(URL, "llm-0"), at_s=1.0).deletes(
        1.0 + retirement.MAX_VERDICT_AGE_S, {URL: retirement.PodRead("7", 30)}).verdict is RetirementVerdict.DELETE
    s = Sidecar(URL, "llm-0")
    protocol = _deciding(s, at_s=1.0)
    late = protocol.deletes(1.0 + retirement.MAX_VERDICT_AGE_S + 0.001, {URL: retirement.PodRead("7", 30)})
    assert (late.verdict, late.reason, late.deletes) == (RetirementVerdict.HOLD, Reason.VERDICT_EXPIRED, ())
    # Not final: the verdict's second read pairs with the next idle read, one round later.
    again = protocol.observe(3.1, {URL: Answer(**s.answer(3.1))})
    assert (again.verdict, again.decided_at_s) == (RetirementVerdict.DELETE, 3.1)
    assert protocol.deletes(3.2, {URL: retirement.PodRead("9", 30)}).deletes[0].resource_version == "9"


def test_an_expired_verdict_after_a_busy_read_counts_again_from_two_idle_reads():
    s = Sidecar(URL, "llm-0")
    protocol = _deciding(s, at_s=1.0)
    protocol.deletes(5.0, {URL: retirement.PodRead("7", 30)})
    assert protocol.observe(5.1, {URL: Answer(**s.answer(5.1, "busy"))}).reason is Reason.BUSY
    assert protocol.observe(6.2, {URL: Answer(**s.answer(6.2))}).reason is Reason.ONE_IDLE_READ


def test_an_expired_verdict_past_the_budget_aborts():
    s = Sidecar(URL, "llm-0")
    protocol = Retirement([MemberEndpoint(URL, POD)], 2.0)
    protocol.observe(0.0, {URL: Answer(**s.answer(0.0))})
    protocol.observe(1.1, {URL: Answer(**s.answer(1.1))})
    aborted = protocol.deletes(3.5, {URL: retirement.PodRead("7", 30)})
    assert (aborted.verdict, aborted.reason) == (RetirementVerdict.ABORT, Reason.VERDICT_EXPIRED)


# --- version skew (docs/controller.md, "Version skew"): one release either way ---

def test_an_answer_from_a_newer_sidecar_with_added_fields_still_reads():
    s = Sidecar(URL, "llm-0")
    protocol = Retirement([MemberEndpoint(URL, POD)], 60.0)
    first = protocol.observe(0.0, {URL: Answer(**s.answer_from_a_later_release(0.0))})
    second = protocol.observe(1.1, {URL: Answer(**s.answer_from_a_later_release(1.1))})
    assert (first.reason, second.verdict) == (Reason.ONE_IDLE_READ, RetirementVerdict.DELETE)


@pytest.mark.parametrize("schema, says", [
    ("modeldrain.sidecar/v3", "newer than this client reads (modeldrain.sidecar/v2): a field layout it was not "
                              "written for is never read as idle; upgrade the controller"),
    ("modeldrain.sidecar/v10", "newer than this client reads"),
    ("modeldrain.sidecar/v1", "not one this client reads (modeldrain.sidecar/v2)"),
    ("modeldrain.sidecar/v2 ", "not one this client reads"),
    (None, "schema None, not one this client reads"),
])
def test_an_answer_in_a_schema_outside_the_window_holds_and_never_reads_idle(schema, says):
    s = Sidecar(URL, "llm-0")
    protocol = Retirement([MemberEndpoint(URL, POD)], 3.0)
    decisions = [protocol.observe(at_s, {URL: Answer(**s.answer_in_schema(at_s, schema))})
                 for at_s in (0.0, 1.1, 2.2, 3.3)]
    assert [(d.verdict, d.reason) for d in decisions] == [(RetirementVerdict.HOLD, Reason.UNKNOWN_SCHEMA)] * 3 + [
        (RetirementVerdict.ABORT, Reason.UNKNOWN_SCHEMA)]
    assert says in decisions[0].message


def test_an_answer_from_an_older_sidecar_without_the_added_fields_reads():
    s = Sidecar(URL, "llm-0", counts_connections=True)
    protocol = Retirement([MemberEndpoint(URL, POD)], 60.0)
    old = s.answer_as_first_released(0.0)
    assert "connections" not in old["body"]
    protocol.observe(0.0, {URL: Answer(**old)})
    assert protocol.observe(1.1, {URL: Answer(**s.answer_as_first_released(1.1))}).verdict is RetirementVerdict.DELETE


def test_the_controller_doc_lists_every_reason_and_the_verdicts_max_age():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "controller.md").read_text()
    table = doc[doc.index("## Verdicts and reasons"):doc.index("## Decisions this contract makes")]
    assert [r.value for r in Reason if f"`{r.value}`" not in table] == []
    assert f"`MAX_VERDICT_AGE_S` ({retirement.MAX_VERDICT_AGE_S:g} s)" in doc
