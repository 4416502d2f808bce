"""A worker's view of its leader: the leader's /v1/work answers, each turned into a Read."""

import json
import socket
from dataclasses import replace

import pytest

from emulation.raw_server import canned, http_response
from modeldrain.hook.constants import SIDECAR_SCHEMA
from modeldrain.hook.leader import LeaderConfig, LeaderReader, leader_from_env, parse_leader_url
from modeldrain.hook.outcome import ReadOutcome
from modeldrain.hook.target import Target


@pytest.mark.parametrize("text, host, port, path", [
    ("http://lws-0.lws.ns", "lws-0.lws.ns", 8490, "/v1/work"),
    ("http://10.0.0.7:9000", "10.0.0.7", 9000, "/v1/work"),
    ("http://[fd00::1]:8490/v1/work", "fd00::1", 8490, "/v1/work"),
    ("http://leader/", "leader", 8490, "/v1/work"),
])
def test_leader_urls(text, host, port, path):
    target = parse_leader_url(text)
    assert (target.scheme, target.host, target.port, target.path) == ("http", host, port, path)


@pytest.mark.parametrize("text", ["https://leader", "leader:8490", "http://", "http://a b", "http://x:70000",
                                  "http://x:port", "http://x/\u00e9", "http://a..b", "http://" + "x" * 64,
                                  "http://" + "a." * 127 + "b"])
def test_bad_leader_urls(text):
    with pytest.raises(ValueError, match="--follow-leader"):
        parse_leader_url(text)


def test_a_leaderworkerset_worker_follows_its_leader_and_the_leader_does_not():
    worker = {"LWS_WORKER_INDEX": "2", "LWS_LEADER_ADDRESS": "vllm-0.vllm.team-a"}
    assert leader_from_env(worker) == Target("http", 8490, "/v1/work", host="vllm-0.vllm.team-a", source="leader")
    assert leader_from_env({**worker, "LWS_WORKER_INDEX": "0"}) is None
    assert leader_from_env({"LWS_WORKER_INDEX": "1"}) is None
    assert leader_from_env({}) is None
    assert leader_from_env({**worker, "LWS_WORKER_INDEX": "00"}) is None  # the leader, written otherwise
    with pytest.raises(ValueError, match="LWS_WORKER_INDEX must be a whole number"):
        leader_from_env({**worker, "LWS_WORKER_INDEX": "one"})
    with pytest.raises(ValueError, match=r"^LWS_LEADER_ADDRESS is unusable \(--follow-leader host must be"):
        leader_from_env({**worker, "LWS_LEADER_ADDRESS": "vllm-0..team-a"})


def answer(seq=1, outcome="idle", instance="a" * 32, incarnation=0, in_flight=0.0, **extra) -> bytes:
    verdict = {"idle": "idle", "refused": "unmeasurable"}.get(outcome, "busy")
    complete = outcome in ("idle", "busy")
    return json.dumps({"schema": SIDECAR_SCHEMA, "sidecar": {"instance": instance},
                       "engine": {"incarnation": incarnation},
                       "read": {"seq": seq, "outcome": outcome, "verdict": verdict, "complete": complete,
                                "idle": outcome == "idle", "in_flight": in_flight, "detail": "d", **extra}}).encode()


class Leader:
    """A scripted leader sidecar: each connection gets the next answer."""

    def __init__(self, serve, answers):
        self.answers = list(answers)
        self.requests = []
        self.target = serve(self.respond)

    def respond(self, conn):
        body, status = self.answers.pop(0)
        conn.sendall(http_response(body, status=status, content_type="application/json"))

    def reader(self, token_file=None):
        return LeaderReader(LeaderConfig(self.target, token_file, "test"))


def outcomes(reader, n):
    return [reader.read(1.0) for _ in range(n)]


def test_idle_and_busy_answers(serve):
    leader = Leader(serve, [(answer(1, "busy", in_flight=4.0), "200 OK"), (answer(2), "200 OK"), (answer(3), "200 OK")])
    reads = outcomes(leader.reader(), 3)
    assert [r.outcome for r in reads] == [ReadOutcome.BUSY, ReadOutcome.IDLE, ReadOutcome.IDLE]
    assert reads[0].in_flight == 4.0 and "4 in flight" in reads[0].detail


def test_a_restarted_leader_or_a_stale_read_is_not_a_second_idle(serve):
    leader = Leader(serve, [(answer(5), "200 OK"), (answer(5), "200 OK"),
                            (answer(1, instance="b" * 32), "200 OK"), (answer(2, instance="b" * 32, incarnation=1), "200 OK")])
    reads = outcomes(leader.reader(), 4)
    assert [r.outcome for r in reads] == [ReadOutcome.IDLE, ReadOutcome.INCOMPLETE, ReadOutcome.INCOMPLETE,
                                          ReadOutcome.INCOMPLETE]
    assert "not a fresh read" in reads[1].detail and "restarted" in reads[2].detail and "restarted" in reads[3].detail


def test_the_leaders_engine_gone_is_the_leader_gone(serve):
    leader = Leader(serve, [(answer(9, "refused", in_flight=None), "200 OK")])
    read = leader.reader().read(1.0)
    assert read.outcome is ReadOutcome.REFUSED and read.detail.startswith("its engine reads refused")
    assert read.leader_answered  # its sidecar answered: what makes it gone, not unknown


def test_an_http_error_from_the_leader_is_waited_on_not_taken_for_gone(serve):
    leader = Leader(serve, [(b'{"error":"unauthorized"}', "401 Unauthorized")])
    read = leader.reader().read(1.0)
    assert read.outcome is ReadOutcome.UNAVAILABLE and not read.outcome.ends_drain and read.http_status == 401


@pytest.mark.parametrize("body", [b"not json", b"[]", b'{"schema": "other/v1"}', answer(seq="1"),
                                  answer(seq=True), json.dumps({"schema": "modeldrain.sidecar/v1"}).encode()])
def test_an_answer_that_is_not_a_work_answer_is_unparseable(serve, body):
    read = Leader(serve, [(body, "200 OK")]).reader().read(1.0)
    assert read.outcome is ReadOutcome.UNPARSEABLE


def test_refused_and_a_name_that_no_longer_resolves_mean_the_leader_is_gone():
    probe = socket.create_server(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    refused = LeaderReader(LeaderConfig(Target("http", port, "/v1/work"), None, "test")).read(1.0)
    assert refused.outcome is ReadOutcome.REFUSED and refused.detail.startswith("the leader's drain-sidecar: connection refused")
    gone = LeaderReader(LeaderConfig(parse_leader_url("http://leader-0.gone.invalid"), None, "test")).read(5.0)
    assert gone.outcome is ReadOutcome.REFUSED and "not found" in gone.detail


def test_the_token_is_sent_and_an_unreadable_token_file_is_waited_on(serve, tmp_path):
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    target = replace(serve(canned(http_response(answer(1), content_type="application/json"))), path="/v1/work")
    assert LeaderReader(LeaderConfig(target, str(token), "test")).read(2.0).outcome is ReadOutcome.IDLE
    captured = serve.servers[0].requests
    assert b"Authorization: Bearer s3cret\r\n" in captured[0] and b"Accept: application/json\r\n" in captured[0]
    missing = LeaderReader(LeaderConfig(target, str(tmp_path / "nope"), "test")).read(1.0)
    assert missing.outcome is ReadOutcome.UNAVAILABLE and "--leader-token-file" in missing.detail
    assert not missing.leader_answered


# --- what counts as an answer (issue 15, "Following a leader") --------------------------------------

def work_answer(**read_fields) -> bytes:
    body = json.loads(answer())
    body["read"].update(read_fields)
    return json.dumps(body).encode()


@pytest.mark.parametrize("schema", ["modeldrain.sidecar/v999", "modeldrain.sidecar/v1", "modeldrain.sidecar/",
                                    "modeldrain.sidecar/v2 ", None])
def test_an_answer_in_a_schema_the_hook_does_not_know_is_not_read(serve, schema):
    body = json.loads(answer())
    body["schema"] = schema
    read = Leader(serve, [(json.dumps(body).encode(), "200 OK")]).reader().read(1.0)
    assert read.outcome is ReadOutcome.UNPARSEABLE and not read.leader_answered and "schema" in read.detail


@pytest.mark.parametrize("fields, says", [
    ({"outcome": "busy", "verdict": "busy", "idle": True, "in_flight": 2}, "idle True"),  # idle where it says busy
    ({"outcome": "busy", "verdict": "idle"}, "verdict 'idle'"),
    ({"idle": True, "complete": False}, "complete False"),
    ({"in_flight": 3}, "outcome idle with in_flight 3"),
    ({"in_flight": None}, "outcome idle with in_flight None"),
    ({"outcome": "busy", "verdict": "busy", "idle": False, "in_flight": 0}, "outcome busy with in_flight 0"),
    ({"outcome": "incomplete", "verdict": "busy", "idle": False, "complete": False, "in_flight": -1}, "in_flight -1"),
    ({"outcome": "refused", "verdict": "busy", "idle": False, "complete": False}, "verdict 'busy'"),
    ({"outcome": "drained", "verdict": "idle"}, "outcome 'drained' is none the hook knows"),
    ({"seq": -1}, "below zero"),
])
def test_an_answer_whose_fields_disagree_is_unavailable_never_idle_or_gone(serve, fields, says):
    read = Leader(serve, [(work_answer(**fields), "200 OK")]).reader().read(1.0)
    assert read.outcome is ReadOutcome.UNAVAILABLE and not read.outcome.ends_drain, read
    assert not read.leader_answered and says in read.detail


def test_in_flight_that_is_not_a_number_is_not_an_answer(serve):
    read = Leader(serve, [(work_answer(in_flight="0"), "200 OK")]).reader().read(1.0)
    assert read.outcome is ReadOutcome.UNPARSEABLE and not read.leader_answered


def test_a_name_with_several_addresses_is_gone_only_when_every_address_refuses(serve, monkeypatch):
    """Dual stack: the name's first address (::1) refuses, the second (127.0.0.1) answers busy.
    The resolver's answer is injected here; tests/e2e/test_prestop_leader.py resolves a real name."""
    leader = Leader(serve, [(answer(1, "busy", in_flight=2.0), "200 OK")])
    refusing = socket.socket(socket.AF_INET6)
    refusing.bind(("::1", 0))  # bound, never listening: refused
    addresses = [("::1", refusing.getsockname()[1]), ("127.0.0.1", leader.target.port)]

    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if host != "leader.dual.test":
            return real(host, port, *args, **kwargs)  # the connect's own lookup of an address
        return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, p))
                for a, p in addresses]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    target = parse_leader_url(f"http://leader.dual.test:{leader.target.port}")
    read = LeaderReader(LeaderConfig(target, None, "test")).read(2.0)
    assert read.outcome is ReadOutcome.BUSY and read.in_flight == 2.0
    addresses[1] = ("127.0.0.1", refusing.getsockname()[1])
    gone = LeaderReader(LeaderConfig(target, None, "test")).read(2.0)
    assert gone.outcome is ReadOutcome.REFUSED and "every address" in gone.detail
    refusing.close()


@pytest.mark.parametrize("content", [b"tok\r\nX-Injected: 1\n", b"to ken\n", b"\n", b"tok\x00en", "t\u00f6k".encode()])
def test_a_token_file_the_sidecar_would_refuse_is_a_usage_error_at_start(tmp_path, content, capsys):
    from modeldrain.hook.cli import check_parser, drain_parser
    from modeldrain.hook.token import TokenFileError, read_token

    path = tmp_path / "token"
    path.write_bytes(content)
    with pytest.raises(TokenFileError):
        read_token(str(path))  # the sidecar's rule (modeldrain/sidecar/auth.py uses this same function)
    for parser in (drain_parser(), check_parser()):
        with pytest.raises(SystemExit) as stopped:
            parser.parse_args(["--follow-leader", "http://leader", "--leader-token-file", str(path)])
        assert stopped.value.code == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "--leader-token-file" in err and "token file" in err


def test_the_sidecar_and_the_hook_share_one_token_reader():
    from modeldrain.hook import token
    from modeldrain.sidecar import auth

    assert auth.read_token is token.read_token and auth.TokenFileError is token.TokenFileError


# --- version skew (docs/controller.md, "Version skew"): the hook and the sidecar ship as two images ---

def _sidecar_answers(n, render):
    """`n` real /v1/work bodies of one sidecar (the sidecar's own rendering), each passed through `render`."""
    from tests.retirement.conformance_scenarios import Sidecar

    s = Sidecar("http://10.4.0.7:8490/v1/work", "llm-1-0", worker_index=0, group_size=2, configuration="rev-5",
                counts_connections=True)
    return [(json.dumps(render(s, 1.1 * i)["body"]).encode(), "200 OK") for i in range(n)]


def test_an_older_hook_reads_a_newer_sidecars_answer_with_added_fields(serve):
    leader = Leader(serve, _sidecar_answers(2, lambda s, at_s: s.answer_from_a_later_release(at_s)))
    reads = outcomes(leader.reader(), 2)
    assert [r.outcome for r in reads] == [ReadOutcome.IDLE, ReadOutcome.IDLE], [r.detail for r in reads]


def test_a_newer_hook_reads_an_older_sidecars_answer_without_the_fields_added_since(serve):
    leader = Leader(serve, _sidecar_answers(2, lambda s, at_s: s.answer_as_first_released(at_s)))
    reads = outcomes(leader.reader(), 2)
    assert [r.outcome for r in reads] == [ReadOutcome.IDLE, ReadOutcome.IDLE], [r.detail for r in reads]


def test_a_newer_sidecars_unknown_schema_is_waited_on_never_idle_and_says_which_image_to_upgrade(serve):
    leader = Leader(serve, _sidecar_answers(3, lambda s, at_s: s.answer_in_schema(at_s, "modeldrain.sidecar/v3")))
    reads = outcomes(leader.reader(), 3)
    assert {r.outcome for r in reads} == {ReadOutcome.UNPARSEABLE}
    assert not any(r.outcome.ends_drain or r.leader_answered for r in reads)
    assert ("schema 'modeldrain.sidecar/v3' is newer than this hook reads (modeldrain.sidecar/v2): upgrade the "
            "engine image's hook") in reads[0].detail
    older = json.dumps({**json.loads(answer()), "schema": "modeldrain.sidecar/v1"}).encode()
    read = Leader(serve, [(older, "200 OK")]).reader().read(1.0)
    assert "schema 'modeldrain.sidecar/v1', not modeldrain.sidecar/v2" in read.detail


# --- issue 29: the leader known before the hook started, and a new leader of the same name ----------

def answer_from(uid, seq=1, outcome="idle", in_flight=0.0) -> bytes:
    body = json.loads(answer(seq, outcome, in_flight=in_flight))
    body["pod"] = {"namespace": "team-a", "name": "llm-0", "uid": uid}
    return json.dumps(body).encode()


def known(uid="uid-1"):
    from modeldrain.hook.leader import KnownLeader, LeaderIdentity
    return KnownLeader(LeaderIdentity(uid, "llm-0", "a" * 32), 3.5, 4)


def test_another_leader_pod_at_the_same_name_is_the_old_one_gone(serve):
    leader = Leader(serve, [(answer_from("uid-2", in_flight=3.0, outcome="busy"), "200 OK")])
    read = LeaderReader(LeaderConfig(leader.target, None, "test"), known("uid-1")).read(1.0)
    assert read.outcome is ReadOutcome.REFUSED and read.leader_answered
    assert "another leader answers" in read.detail and "uid-2" in read.detail and "uid-1" in read.detail


def test_within_one_run_a_changed_pod_uid_is_gone_and_a_restarted_sidecar_is_not(serve):
    leader = Leader(serve, [(answer_from("uid-1", 1), "200 OK"), (answer(1, instance="b" * 32), "200 OK"),
                            (answer_from("uid-9", 2), "200 OK")])
    reads = outcomes(leader.reader(), 3)
    assert [r.outcome for r in reads] == [ReadOutcome.IDLE, ReadOutcome.INCOMPLETE, ReadOutcome.REFUSED]
    assert "uid-9" in reads[2].detail


def test_the_same_leader_pod_is_read_as_before_and_a_refusal_says_what_was_known(serve):
    leader = Leader(serve, [(answer_from("uid-1", 5, "busy", 2.0), "200 OK")])
    assert LeaderReader(LeaderConfig(leader.target, None, "test"), known()).read(1.0).outcome is ReadOutcome.BUSY
    probe = socket.create_server(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    refused = LeaderReader(LeaderConfig(Target("http", port, "/v1/work"), None, "test"), known()).read(1.0)
    assert refused.outcome is ReadOutcome.REFUSED and "Pod UID uid-1 answered the worker's drain-sidecar 4 times" \
        in refused.detail


@pytest.mark.parametrize("body, says", [
    (b"nope", "is not one this hook reads"),
    (json.dumps({"schema": "other/v9"}).encode(), "another schema"),
    (json.dumps({"schema": SIDECAR_SCHEMA}).encode(), "follows no leader"),
    (json.dumps({"schema": SIDECAR_SCHEMA, "leader": {"url": "http://elsewhere:8490/v1/work"}}).encode(),
     "follows http://elsewhere:8490/v1/work"),
    (json.dumps({"schema": SIDECAR_SCHEMA, "leader": {"url": "http://llm-0:8490/v1/work", "known": False,
                                                      "last_detail": "connection refused"}}).encode(),
     "never had an answer"),
    (json.dumps({"schema": SIDECAR_SCHEMA, "leader": {"url": "http://llm-0:8490/v1/work", "known": True,
                                                      "last_answered_age_s": -1, "answers": 1, "uid": "u",
                                                      "name": None, "instance": "i"}}).encode(),
     "last_answered_age_s"),
    (json.dumps({"schema": SIDECAR_SCHEMA, "leader": {"url": "http://llm-0:8490/v1/work", "known": True,
                                                      "last_answered_age_s": 1.0, "answers": 0, "uid": "u",
                                                      "name": None, "instance": "i"}}).encode(),
     "known with 0 answers"),
    (json.dumps({"schema": SIDECAR_SCHEMA, "leader": [1]}).encode(), "not an object"),
])
def test_a_memory_the_hook_cannot_trust_is_no_memory_said_in_words(body, says):
    from modeldrain.hook.leader_memory import parse_memory

    recall = parse_memory(body, parse_leader_url("http://llm-0"))
    assert recall.known is None and says in recall.detail, recall.detail


def test_a_memory_of_the_followed_leader_is_known():
    from modeldrain.hook.leader_memory import parse_memory

    body = json.dumps({"schema": SIDECAR_SCHEMA, "leader": {
        "url": "http://llm-0:8490/v1/work", "known": True, "last_answered_age_s": 2.5, "answers": 3, "uid": "uid-1",
        "name": "llm-0", "instance": "a" * 32}}).encode()
    recall = parse_memory(body, parse_leader_url("http://llm-0"))
    assert recall.known is not None and recall.known.identity.uid == "uid-1" and recall.known.answers == 3
