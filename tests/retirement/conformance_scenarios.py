"""The retirement protocol's conformance table: each scenario's rounds of answers and expected verdicts.

The answers are rendered by the sidecar's own code (sidecar.work_answer.work_answer, the idle-run
tracker), so every body is a real modeldrain.sidecar/v2 answer; the expected verdict and reason of
each round are written here by hand, from the spec. `--write` renders conformance/retirement/*.json,
which the tests replay through modeldrain/retirement/client.py and which another implementation (the
operator's controller) replays unchanged (format: conformance/retirement/README.md).

    .venv/bin/python -m tests.retirement.conformance_scenarios --write
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from modeldrain.hook.gauges import EngineKind, Role, gauge_set
from modeldrain.hook.outcome import Read, ReadOutcome
from modeldrain.retirement.client import MAX_VERDICT_AGE_S
from modeldrain.sidecar.command import CommandSource, EngineCommand
from modeldrain.sidecar.connections import ConnectionCount
from modeldrain.sidecar.drain_ledger import Draining, Via
from modeldrain.sidecar.member import Member, PodIdentity
from modeldrain.sidecar.sampler import Evidence, Incarnation, NumberedRead, RunTracker
from modeldrain.sidecar.work_answer import Identity, work_answer

REPO = Path(__file__).resolve().parents[2]
TABLE_DIR = REPO / "conformance" / "retirement"
FORMAT = "modeldrain.retirement-conformance/v1"

WALL_BASE = 1_795_000_000.0  # the wall clock at at_s 0, for the answers' human-readable times
MONO_BASE = 86_400.0  # the sidecars' monotonic clock at at_s 0 (a node up for a day)
LATENCY_S = 0.003  # from the controller's round to the read's own start
NAMESPACE = "team-a"

UNIFIED_VLLM = EngineCommand(CommandSource.FLAG, False, ())
UNIFIED_SGLANG_CMDLINE = EngineCommand(CommandSource.CMDLINE, False, ())
NOT_KNOWN = EngineCommand(CommandSource.NONE, None, ())

# Fields a later sidecar release adds within the schema (docs/controller.md, "Version skew"): at the
# top, in an object the protocol reads and in one it reads a field of. A reader ignores them; the
# table's strict check of each answer removes exactly these first (the OpenAPI document is this
# release's, and stays strict).
ADDED_LATER: dict[tuple[str, ...], Any] = {("added_in_a_later_release",): {"rollout": "wave-3", "weights": [1, 2]},
               ("sidecar", "added_in_a_later_release"): True,
               ("read", "added_in_a_later_release"): 0.25,
               ("engine", "command", "added_in_a_later_release"): ["--new-flag"]}
NEXT_SCHEMA = "modeldrain.sidecar/v3"  # a schema no reader of this release knows
# Fields this release's sidecar writes that the first modeldrain.sidecar/v2 release did not: an answer
# without them is an older sidecar's, and each is optional in the OpenAPI document.
ADDED_WITHIN_V2: list[tuple[str, ...]] = [("connections",), ("sidecar", "draining"), ("leader",)]


def _read(outcome: str, started_at: float, kind: EngineKind, role: Role, in_flight: int) -> Read:
    names = [g.name for g in gauge_set(kind, role).required]
    common: dict[str, Any] = dict(started_at=started_at, duration_s=0.009, kind=kind, role=gauge_set(kind, role).role)
    if outcome == "idle":
        return Read(ReadOutcome.IDLE, detail="every work gauge reads zero", gauges={n: 0.0 for n in names},
                    in_flight=0.0, http_status=200, body_bytes=47_211, **common)
    if outcome == "busy":
        gauges = {n: 0.0 for n in names}
        gauges[names[0]] = float(in_flight)
        return Read(ReadOutcome.BUSY, detail=f"{in_flight} in flight", gauges=gauges, in_flight=float(in_flight),
                    http_status=200, body_bytes=47_380, **common)
    if outcome == "incomplete":
        present = {n: 0.0 for n in names[:1]}
        return Read(ReadOutcome.INCOMPLETE, detail="missing " + ", ".join(names[1:]), gauges=present,
                    missing=tuple(names[1:]), in_flight=0.0, http_status=200, body_bytes=41_002, **common)
    if outcome == "timeout":
        return Read(ReadOutcome.TIMEOUT, detail="no whole response within 2 s", **common)
    if outcome == "refused":
        return Read(ReadOutcome.REFUSED, detail="connection refused", **common)
    raise ValueError(outcome)


@dataclass
class Sidecar:
    """One member's drain-sidecar as the controller sees it: numbered reads, restarts, identity."""

    url: str
    name: str
    worker_index: int = 0
    group_size: int = 1
    configuration: str | None = None
    command: EngineCommand = UNIFIED_VLLM
    kind: EngineKind = EngineKind.VLLM
    role: Role = Role.UNIFIED
    pod: PodIdentity | None = None  # default: NAMESPACE/name with a UID made from the name
    instance: str = ""
    seq: int = 0
    incarnation: Incarnation = Incarnation(0, None, None)
    terminating: bool = False
    draining_via: Via | None = None  # the Pod's deletion reached the sidecar (its hook started, or /v1/drain)
    counts_connections: bool = False  # its answers carry `connections` (a sidecar of this release)
    _pending_restart: Evidence | None = None
    _idle_run: RunTracker = field(default_factory=RunTracker)
    _free_run: RunTracker = field(default_factory=RunTracker)
    _last: dict | None = None

    def __post_init__(self) -> None:
        self.pod = self.pod or PodIdentity(NAMESPACE, self.name, f"uid-{self.name}")
        self.instance = self.instance or _instance(self.name, 0)

    def identity(self) -> Identity:
        assert self.pod is not None
        return Identity(instance=self.instance, version="0.1.0", started_at_unix=WALL_BASE - 3600.0, pod=self.pod,
                        member=Member(self.worker_index, self.group_size, "env", self.configuration))

    def _numbered_read(self, at_s: float, outcome: str, in_flight: int, connected: int | None = 0) -> NumberedRead:
        self.seq += 1
        if self._pending_restart is not None and outcome != "refused":
            self.incarnation = Incarnation(self.incarnation.value + 1, self._pending_restart, self.seq)
            self._pending_restart = None
        started = round(MONO_BASE + at_s + LATENCY_S, 6)
        read = _read(outcome, started, self.kind, self.role, in_flight)
        since = self._idle_run.observe(self.seq, idle=read.outcome.is_idle, incarnation=self.incarnation.value)
        count, free_since = None, None
        if self.counts_connections:
            count = _count(started, connected)
            free_since = self._free_run.observe(self.seq, idle=connected == 0, incarnation=0)
        return NumberedRead(self.seq, WALL_BASE + at_s + LATENCY_S, read, self.incarnation,
                            "http://127.0.0.1:8000/metrics", since, count, free_since)

    def answer(self, at_s: float, outcome: str = "idle", in_flight: int = 2, connected: int | None = 0) -> dict:
        """A read the controller asked for, as it arrives; `connected`: outside connections (None: unknown)."""
        numbered_read = self._numbered_read(at_s, outcome, in_flight, connected)
        draining = None if self.draining_via is None else Draining(WALL_BASE - 2.0, MONO_BASE - 2.0, self.draining_via)
        body = work_answer(self.identity(), numbered_read, command=self.command, terminating=self.terminating,
                           draining=draining)
        self._last = {"status": 200, "body": json.loads(json.dumps(body))}
        return self._last

    def taken_by_another_caller(self, at_s: float, outcome: str = "busy", connected: int | None = 0) -> None:
        """A read a peer took: it moves seq and the idle run, and the controller never sees it."""
        self._numbered_read(at_s, outcome, 1, connected)

    def answer_from_a_later_release(self, at_s: float, outcome: str = "idle") -> dict:
        """An answer as a later sidecar release of the same schema writes it: the fields it added too."""
        answer = self.answer(at_s, outcome)
        for path, value in ADDED_LATER.items():
            node = answer["body"]
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = value
        return answer

    def answer_in_schema(self, at_s: float, schema: str, outcome: str = "idle") -> dict:
        """An answer under another schema string, every field of this one kept: its idle must not count."""
        answer = self.answer(at_s, outcome)
        answer["body"]["schema"] = schema
        return answer

    def answer_as_first_released(self, at_s: float, outcome: str = "idle") -> dict:
        """An answer as the schema's first sidecar release wrote it: without the fields added since."""
        answer = self.answer(at_s, outcome)
        for path in ADDED_WITHIN_V2:
            node = answer["body"]
            for key in path[:-1]:
                node = node[key]
            node.pop(path[-1], None)
        return answer

    def again(self) -> dict:
        """The same read as the last answer: a concurrent caller's request shared it."""
        assert self._last is not None
        return self._last

    def restart_engine(self, evidence: Evidence = Evidence.LISTENER_RETURNED) -> None:
        self._pending_restart = evidence

    def restart_sidecar(self, generation: int) -> None:
        self.instance = _instance(self.name, generation)
        self.seq = 0
        self.incarnation = Incarnation(0, None, None)
        self._idle_run = RunTracker()
        self._free_run = RunTracker()


def _count(started: float, connected: int | None) -> ConnectionCount:
    """What modeldrain/sidecar/connections.py says for `connected` outside connections to port 8000."""
    if connected is None:
        return ConnectionCount((8000,), None, started, 4.0,
                               "count unknown: /proc/net/tcp6 line 7 is not a socket: '   5: nonsense'")
    if connected == 0:
        return ConnectionCount((8000,), 0, started, 4.0, "no established connection from outside the Pod")
    return ConnectionCount((8000,), connected, started, 4.0, f"{connected} established from outside the Pod")


def _instance(name: str, generation: int) -> str:
    return hashlib.sha256(f"{name}/{generation}".encode()).hexdigest()[:32]


def error(text: str) -> dict:
    return {"error": text}


def http_error(status: int, code: str, message: str) -> dict:
    return {"status": status, "body": {"error": code, "message": message}}


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    spec: str  # the spec's sentence this scenario pins
    members: list[dict]
    rounds: list[dict]
    budget_s: float = 60.0
    router: bool = True  # written only when false: the files before router-less withdrawal stay as they were

    def document(self) -> dict:
        head = {"format": FORMAT, "name": self.name, "description": self.description, "spec": self.spec,
                "budget_s": self.budget_s, "max_verdict_age_s": MAX_VERDICT_AGE_S}
        if not self.router:
            head["router"] = False
        return {**head, "members": self.members, "rounds": self.rounds}


def member(s: Sidecar, expect_pod: bool = True) -> dict:
    assert s.pod is not None
    pod = {"namespace": s.pod.namespace, "name": s.pod.name, "uid": s.pod.uid} if expect_pod else None
    return {"url": s.url, "pod": pod}


def rnd(at_s: float, answers: dict[str, dict], verdict: str, reason: str) -> dict:
    expect: dict[str, Any] = {"verdict": verdict, "reason": reason}
    if verdict == "delete":
        # The Pods to delete are the ones that answered, by UID: the deletes' precondition.
        expect["pods"] = [{"url": url, **a["body"]["pod"]} for url, a in answers.items()]
    return {"at_s": at_s, "answers": answers, "expect": expect}


def send(at_s: float, pods: dict[str, tuple[str, int]], verdict: str, reason: str, grace_s: int | None = None,
         deleting: list[Sidecar] | None = None) -> dict:
    """The controller about to send the deletes: each member URL's Pod as read from the API server
    (resourceVersion, terminationGracePeriodSeconds) and the gracePeriodSeconds it would send;
    `deleting`: the members whose Pods the expected deletes remove."""
    step: dict[str, Any] = {
        "at_s": at_s,
        "delete": {"grace_period_seconds": grace_s,
                   "pods": {url: {"resource_version": rv, "termination_grace_period_seconds": own_s}
                            for url, (rv, own_s) in pods.items()}},
        "expect": {"verdict": verdict, "reason": reason}}
    if deleting is not None:
        step["expect"]["pods"] = [{"url": m.url, **_pod(m)} for m in deleting]
        step["expect"]["deletes"] = [pod_delete(m, pods[m.url][0], grace_s) for m in deleting]
    return step


def _pod(s: Sidecar) -> dict:
    assert s.pod is not None
    return {"namespace": s.pod.namespace, "name": s.pod.name, "uid": s.pod.uid}


def pod_delete(s: Sidecar, resource_version: str, grace_s: int | None = None) -> dict:
    """DELETE /api/v1/namespaces/NS/pods/NAME with metav1.DeleteOptions: only this UID, unchanged since read."""
    assert s.pod is not None
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions",
                            "preconditions": {"uid": s.pod.uid, "resourceVersion": resource_version}}
    if grace_s is not None:
        body["gracePeriodSeconds"] = grace_s
    return {"path": f"/api/v1/namespaces/{s.pod.namespace}/pods/{s.pod.name}", "body": body}


U0, U1, U2 = "http://10.4.0.7:8490/v1/work", "http://10.4.1.9:8490/v1/work", "http://10.4.2.3:8490/v1/work"

SPEC_TWICE = ("Reading member work: A member must read idle twice, on complete envelopes, before the deletion "
              "commits. Both reads have to carry every expected gauge, and a single unlucky zero cannot carry the "
              "protocol past a member that is still working. A second read that finds work holds the operation.")
SPEC_RESTART = ("Drain read refusals: A restarted container is held, and the hold is bounded. The drain budget and "
                "the operation's total still apply, so a replica that keeps crash-looping ends as Aborted with its "
                "capacity retained.")
SPEC_SPLIT = ("Drain read refusals: A prefill or decode replica is refused outright. The refusal is read from the "
              "member Pod's own rendered command: a vLLM member is recognized by its data-parallel balance flags, "
              "and an SGLang member by its --disaggregation-mode prefill or decode.")
SPEC_NAMED = ("Limitations: A replica whose answering member cannot be named is held: none of its members carries "
              "the leader index, more than one does, its members disagree on the configuration, or its role says "
              "a size the replica does not have; and the reason names which.")
SPEC_LEADER = ("Reading member work: a replica of one Pod answers through itself, and a leader-served replica of "
               "several answers through the member carrying rank 0.")
SPEC_WITHDRAWAL = ("Retirement protocol: Without spec.router, withdrawal cannot observe established connections made "
                   "directly through the role's Service. The withdrawal budget expires after 30 seconds and "
                   "retirement ends as Aborted, retaining its Pods, Workload and capacity. Removing the Service "
                   "endpoint does not prove those connections have ended. (docs/controller.md: the sidecar counts "
                   "them, so withdrawal waits for none on two reads >= 1 s apart.)")
SPEC_DELETE = ("docs/controller.md, Sending the deletes: Pod names are reused (a StatefulSet's, a LeaderWorkerSet's "
               "replacement), so each member Pod is deleted with Preconditions{UID, ResourceVersion}: the UID it "
               "answered with and the resourceVersion read when the deciding round started; never with a "
               "gracePeriodSeconds shorter than the Pod's; and only while the verdict is at most max_verdict_age_s "
               "old, from its second idle read's start.")
SPEC_SKEW = ("docs/controller.md, Version skew: within a schema a sidecar release only adds fields, and a reader "
             "ignores those it does not know; a schema outside the reader's window is no answer: held, never idle.")
SPEC_IDENTITY = ("docs/controller.md: Pod IPs are reused, so an answer counts only from the Pod the controller "
                 "meant (namespace, name and UID).")


def _single(**kw: Any) -> Sidecar:
    return Sidecar(U0, "llm-0", **kw)


def _group(size: int, indices: tuple[int, ...] | None = None, configs: tuple[str | None, ...] | None = None,
           sizes: tuple[int, ...] | None = None) -> list[Sidecar]:
    urls = [U0, U1, U2][:size]
    indices = indices or tuple(range(size))
    configs = configs or ("rev-5",) * size
    sizes = sizes or (size,) * size
    return [Sidecar(url, f"llm-1-{i}", worker_index=indices[i], group_size=sizes[i], configuration=configs[i])
            for i, url in enumerate(urls)]


class Table:
    """The scenarios, numbered in the order they are added: a new one goes last, so no file's number moves."""

    def __init__(self) -> None:
        self.scenarios: list[Scenario] = []

    def add(self, name: str, description: str, spec: str, members: list[Sidecar],
            build: Callable[..., list[dict]], budget_s: float = 60.0, expect_pods: bool = True,
            router: bool = True) -> None:
        """One scenario: `build` plays its rounds on its members' sidecars."""
        docs = [member(s, expect_pods) for s in members]
        self.scenarios.append(Scenario(name, description, spec, docs, build(*members), budget_s, router))

    def routerless(self, name: str, description: str, build: Callable[..., list[dict]],
                   sidecar: Sidecar | None = None, budget_s: float = 60.0) -> None:
        """A replica without a router: by default one member whose sidecar counts its connections."""
        self.add(name, description, SPEC_WITHDRAWAL, [sidecar or _single(counts_connections=True)], build,
                 budget_s, router=False)


def scenarios() -> list[Scenario]:
    table = Table()
    for group in GROUPS:
        group(table)
    return table.scenarios


def _unnamed(reason: str) -> Callable[..., list[dict]]:
    """Two rounds in which the leader answers idle and the others refuse, each held for `reason`."""
    def build(*group: Sidecar) -> list[dict]:
        return [rnd(at_s, {s.url: s.answer(at_s, "idle" if s.worker_index == 0 else "refused") for s in group},
                    "hold", reason) for at_s in (0.0, 1.1)]
    return build


def _two_reads(table: Table) -> None:
    """The two-read rule: a member reads idle twice, 1 s apart or more, with no busy read between."""
    add = table.add
    add("single-pod-idle-twice", "A single-Pod replica reads idle twice, 1.1 s apart: it may be deleted.",
        SPEC_TWICE, [_single()], lambda a: [
            rnd(0.0, {U0: a.answer(0.0)}, "hold", "one_idle_read"),
            rnd(1.1, {U0: a.answer(1.1)}, "delete", "idle_twice")])
    add("busy-then-idle", "A busy replica holds until two idle reads follow its last busy one.",
        SPEC_TWICE, [_single()], lambda a: [
            rnd(0.0, {U0: a.answer(0.0, "busy", 3)}, "hold", "busy"),
            rnd(1.1, {U0: a.answer(1.1, "busy", 1)}, "hold", "busy"),
            rnd(2.2, {U0: a.answer(2.2)}, "hold", "one_idle_read"),
            rnd(3.3, {U0: a.answer(3.3)}, "delete", "idle_twice")])
    add("unlucky-single-zero", "An idle read between two busy ones does not pair with a later idle read: a "
        "single unlucky zero cannot carry the protocol past a member still working.",
        SPEC_TWICE, [_single()], lambda a: [
            rnd(0.0, {U0: a.answer(0.0)}, "hold", "one_idle_read"),
            rnd(1.1, {U0: a.answer(1.1, "busy", 1)}, "hold", "busy"),
            rnd(2.2, {U0: a.answer(2.2)}, "hold", "one_idle_read"),
            rnd(3.3, {U0: a.answer(3.3)}, "delete", "idle_twice")])
    add("reads-too-close", "Two idle reads 0.4 s apart by their own start times do not count; a third, 1.1 s "
        "after the first, pairs with the first.", SPEC_TWICE, [_single()], lambda a: [
            rnd(0.0, {U0: a.answer(0.0)}, "hold", "one_idle_read"),
            rnd(0.4, {U0: a.answer(0.4)}, "hold", "too_close"),
            rnd(1.1, {U0: a.answer(1.1)}, "delete", "idle_twice")])
    add("same-read-twice", "Two answers with the same seq are one read shared by concurrent callers: they "
        "count once.", SPEC_TWICE, [_single()], lambda a: [
            rnd(0.0, {U0: a.answer(0.0)}, "hold", "one_idle_read"),
            rnd(1.1, {U0: a.again()}, "hold", "same_read"),
            rnd(2.2, {U0: a.answer(2.2)}, "delete", "idle_twice")])

    def between(a: Sidecar) -> list[dict]:
        first = a.answer(0.0)
        a.taken_by_another_caller(0.6, "busy")
        return [rnd(0.0, {U0: first}, "hold", "one_idle_read"),
                rnd(1.1, {U0: a.answer(1.1)}, "hold", "interrupted"),
                rnd(2.2, {U0: a.answer(2.2)}, "delete", "idle_twice")]
    add("busy-read-taken-by-another-caller", "A busy read another caller took between the controller's two "
        "idle reads holds the operation: read.idle_run_since_seq shows it.", SPEC_TWICE, [_single()], between)

    def gap_ok(a: Sidecar) -> list[dict]:
        first = a.answer(0.0)
        a.taken_by_another_caller(0.5, "idle")
        return [rnd(0.0, {U0: first}, "hold", "one_idle_read"),
                rnd(1.1, {U0: a.answer(1.1)}, "delete", "idle_twice")]
    add("idle-read-taken-by-another-caller", "Seqs need not be consecutive: an idle read another caller took "
        "in between leaves the run unbroken.", SPEC_TWICE, [_single()], gap_ok)


def _reads_that_hold(table: Table) -> None:
    """Reads that are no idle read: incomplete, timed out, refused."""
    add = table.add
    add("incomplete-read-holds", "A read missing an expected gauge (an SGLang decode server before its first "
        "request) is not on a complete envelope: it holds.", SPEC_TWICE,
        [_single(kind=EngineKind.SGLANG, command=UNIFIED_SGLANG_CMDLINE)], lambda a: [
            rnd(0.0, {U0: a.answer(0.0)}, "hold", "one_idle_read"),
            rnd(1.1, {U0: a.answer(1.1, "incomplete")}, "hold", "incomplete"),
            rnd(2.2, {U0: a.answer(2.2)}, "hold", "one_idle_read"),
            rnd(3.3, {U0: a.answer(3.3)}, "delete", "idle_twice")])
    add("timed-out-read-holds", "A read the sidecar could not finish counts as busy: it holds.", SPEC_TWICE,
        [_single()], lambda a: [
            rnd(0.0, {U0: a.answer(0.0)}, "hold", "one_idle_read"),
            rnd(1.1, {U0: a.answer(1.1, "timeout")}, "hold", "incomplete"),
            rnd(2.2, {U0: a.answer(2.2)}, "hold", "one_idle_read"),
            rnd(3.3, {U0: a.answer(3.3)}, "delete", "idle_twice")])
    add("unmeasurable-until-the-budget", "An engine that refuses the read gives nothing to measure: held, and "
        "aborted when the caller's budget is spent.", SPEC_RESTART, [_single()], lambda a: [
            rnd(0.0, {U0: a.answer(0.0, "refused")}, "hold", "unmeasurable"),
            rnd(1.1, {U0: a.answer(1.1, "refused")}, "hold", "unmeasurable"),
            rnd(3.3, {U0: a.answer(3.3, "refused")}, "abort", "unmeasurable")], budget_s=3.0)


def _restarted_containers(table: Table) -> None:
    """A restarted sidecar or engine: held, counted again, and bounded by the budget."""
    add = table.add
    def sidecar_restart(a: Sidecar) -> list[dict]:
        first = a.answer(0.0)
        a.restart_sidecar(1)
        return [rnd(0.0, {U0: first}, "hold", "one_idle_read"),
                rnd(1.1, {U0: a.answer(1.1)}, "hold", "sidecar_restarted"),
                rnd(2.2, {U0: a.answer(2.2)}, "hold", "one_idle_read"),
                rnd(3.3, {U0: a.answer(3.3)}, "delete", "idle_twice")]
    add("sidecar-restart-between-reads", "The sidecar restarted between two idle reads (sidecar.instance "
        "changed): held, and counted again in the new instance.", SPEC_RESTART, [_single()], sidecar_restart)

    def engine_restart(a: Sidecar) -> list[dict]:
        first = a.answer(0.0)
        a.restart_engine(Evidence.START_TIME_CHANGED)
        return [rnd(0.0, {U0: first}, "hold", "one_idle_read"),
                rnd(1.1, {U0: a.answer(1.1)}, "hold", "engine_restarted"),
                rnd(2.2, {U0: a.answer(2.2)}, "hold", "one_idle_read"),
                rnd(3.3, {U0: a.answer(3.3)}, "delete", "idle_twice")]
    add("engine-restart-between-reads", "The engine restarted between two idle reads (engine.incarnation "
        "changed): the fresh process cannot speak for the old one's work, so it is held and counted again.",
        SPEC_RESTART, [_single()], engine_restart)

    def crash_loop(a: Sidecar) -> list[dict]:
        rounds = [rnd(0.0, {U0: a.answer(0.0)}, "hold", "one_idle_read")]
        for at_s in (1.1, 2.2, 3.3):
            a.restart_engine()
            rounds.append(rnd(at_s, {U0: a.answer(at_s)}, "abort" if at_s >= 3.0 else "hold", "engine_restarted"))
        return rounds
    add("crash-loop-aborts", "An engine that restarts on every round is held until the budget is spent, then "
        "the retirement ends as Aborted.", SPEC_RESTART, [_single()], crash_loop, budget_s=3.0)


def _which_pod_answers(table: Table) -> None:
    """An answer counts only from the Pod the controller meant."""
    add = table.add
    def ip_reused_at_start(a: Sidecar) -> list[dict]:
        other = Sidecar(U0, "other-7")
        return [rnd(0.0, {U0: other.answer(0.0)}, "hold", "wrong_pod"),
                rnd(1.1, {U0: other.answer(1.1)}, "hold", "wrong_pod"),
                rnd(3.3, {U0: other.answer(3.3)}, "abort", "wrong_pod")]
    add("pod-ip-reused-before-the-first-read", "Another Pod now has the IP the controller meant: its idle "
        "answers never count.", SPEC_IDENTITY, [_single()], ip_reused_at_start, budget_s=3.0)

    def ip_reused_midway(a: Sidecar) -> list[dict]:
        first = a.answer(0.0)
        successor = Sidecar(U0, "llm-0", pod=PodIdentity(NAMESPACE, "llm-0", "uid-llm-0-recreated"))
        return [rnd(0.0, {U0: first}, "hold", "one_idle_read"),
                rnd(1.1, {U0: successor.answer(1.1)}, "hold", "wrong_pod"),
                rnd(2.2, {U0: successor.answer(2.2)}, "hold", "wrong_pod")]
    add("pod-ip-reused-between-reads", "With no expected Pod given, the first answer's Pod is the one meant: a "
        "Pod of the same name recreated at the same IP (a new UID) holds.", SPEC_IDENTITY, [_single()],
        ip_reused_midway, expect_pods=False)
    add("pod-not-named", "An answer that does not name its Pod (no POD_UID) cannot be told from another Pod's.",
        SPEC_IDENTITY, [_single(pod=PodIdentity(NAMESPACE, "llm-0", None))], lambda a: [
            rnd(0.0, {U0: a.answer(0.0)}, "hold", "wrong_pod"),
            rnd(1.1, {U0: a.answer(1.1)}, "hold", "wrong_pod")], expect_pods=False)


def _no_answer(table: Table) -> None:
    """No answer, or one from a member already being deleted: never a read."""
    add = table.add
    add("unreadable-answers-hold", "A timeout, a 504, a 401 and a v1 answer are no reads: each holds, and the "
        "count starts again.", SPEC_TWICE, [_single()], lambda a: [
            rnd(0.0, {U0: a.answer(0.0)}, "hold", "one_idle_read"),
            rnd(1.1, {U0: error("timed out")}, "hold", "unreadable"),
            rnd(2.2, {U0: a.answer(2.2)}, "hold", "one_idle_read"),
            rnd(3.3, {U0: http_error(504, "read_timeout", "no fresh read of the engine finished within 5.1 s")},
                "hold", "unreadable"),
            rnd(4.4, {U0: http_error(401, "unauthorized", "missing bearer token")}, "hold", "unreadable"),
            rnd(5.5, {U0: a.answer_in_schema(5.5, "modeldrain.sidecar/v1")}, "hold", "unknown_schema"),
            rnd(6.6, {U0: a.answer(6.6)}, "hold", "one_idle_read"),
            rnd(7.7, {U0: a.answer(7.7)}, "delete", "idle_twice")])
    add("terminating-member-holds", "A member whose sidecar got SIGTERM is already being deleted: its reads do "
        "not count.", SPEC_TWICE, [_single(terminating=True)], lambda a: [
            rnd(0.0, {U0: a.answer(0.0)}, "hold", "terminating"),
            rnd(1.1, {U0: a.answer(1.1)}, "hold", "terminating")])


def _refusals(table: Table) -> None:
    """A prefill or decode member is refused, by its command or its metrics; a refusal is final."""
    add = table.add
    add("sglang-prefill-refused", "An SGLang prefill member, by its own command: refused at the first answer.",
        SPEC_SPLIT, [_single(kind=EngineKind.SGLANG, role=Role.PREFILL,
                             command=EngineCommand(CommandSource.CMDLINE, True,
                                                   ("cmdline: --disaggregation-mode=prefill",)))], lambda a: [
            rnd(0.0, {U0: a.answer(0.0)}, "refuse", "prefill_decode")])
    add("sglang-decode-refused-by-flag", "An SGLang decode member, by the sidecar's --disaggregation-mode the "
        "operator rendered from its command: refused even while busy.", SPEC_SPLIT,
        [_single(kind=EngineKind.SGLANG, role=Role.DECODE,
                 command=EngineCommand(CommandSource.FLAG, True, ("flag: --disaggregation-mode=decode",)))],
        lambda a: [rnd(0.0, {U0: a.answer(0.0, "busy", 4)}, "refuse", "prefill_decode")])
    add("vllm-data-parallel-balance-refused", "A vLLM member started with data-parallel balance flags: refused.",
        SPEC_SPLIT, [_single(command=EngineCommand(CommandSource.CMDLINE, True,
                                                   ("cmdline: --data-parallel-hybrid-lb",)))], lambda a: [
            rnd(0.0, {U0: a.answer(0.0)}, "refuse", "prefill_decode")])
    add("sglang-role-from-its-metrics-refused", "The command seen says unified, but the engine's own metrics say "
        "decode (engine_type): refused.", SPEC_SPLIT,
        [_single(kind=EngineKind.SGLANG, role=Role.DECODE,
                 command=EngineCommand(CommandSource.FLAG, False, ()))], lambda a: [
            rnd(0.0, {U0: a.answer(0.0)}, "refuse", "prefill_decode")])

    def refused_after_holds(a: Sidecar) -> list[dict]:
        a.command = EngineCommand(CommandSource.CMDLINE, True, ("cmdline: --disaggregation-mode=decode",))
        a.kind, a.role = EngineKind.SGLANG, Role.DECODE
        return [rnd(0.0, {U0: error("connection refused")}, "hold", "unreadable"),
                rnd(1.1, {U0: a.answer(1.1, "incomplete")}, "refuse", "prefill_decode"),
                rnd(2.2, {U0: a.answer(2.2)}, "refuse", "prefill_decode")]
    add("refusal-is-final", "Once refused, later answers change nothing.", SPEC_SPLIT, [_single()],
        refused_after_holds)
    add("command-not-known-holds", "A member that cannot say whether its command runs a prefill or decode "
        "server (no --engine, argv not visible) is held: the refusal cannot be ruled out.", SPEC_SPLIT,
        [_single(command=NOT_KNOWN)], lambda a: [
            rnd(0.0, {U0: a.answer(0.0)}, "hold", "command_unknown"),
            rnd(1.1, {U0: a.answer(1.1)}, "hold", "command_unknown")])


def _leader_served(table: Table) -> None:
    """A replica of several Pods answers through its leader, which its members must name."""
    add = table.add
    def leader_served(leader: Sidecar, worker: Sidecar) -> list[dict]:
        # The worker's engine serves no metrics: its read is refused, and only its identity is used.
        return [rnd(0.0, {U0: leader.answer(0.0), U1: worker.answer(0.0, "refused")}, "hold", "one_idle_read"),
                rnd(1.1, {U0: leader.answer(1.1), U1: worker.answer(1.1, "refused")}, "delete", "idle_twice")]
    add("leader-served-two-members", "A replica of two Pods answers through the member carrying index 0; the "
        "worker's refused read does not hold it.", SPEC_LEADER, _group(2), leader_served)

    def worker_unreachable(leader: Sidecar, worker: Sidecar) -> list[dict]:
        return [rnd(0.0, {U0: leader.answer(0.0), U1: error("timed out")}, "hold", "unreadable"),
                rnd(1.1, {U0: leader.answer(1.1), U1: worker.answer(1.1, "refused")}, "hold", "one_idle_read"),
                rnd(2.2, {U0: leader.answer(2.2), U1: worker.answer(2.2, "refused")}, "delete", "idle_twice")]
    add("leader-served-worker-unreachable", "A member that does not answer leaves the leader unnamed: held.",
        SPEC_NAMED, _group(2), worker_unreachable)

    def worker_restart(leader: Sidecar, worker: Sidecar) -> list[dict]:
        first = [rnd(0.0, {U0: leader.answer(0.0), U1: worker.answer(0.0, "refused")}, "hold", "one_idle_read")]
        worker.restart_sidecar(1)
        return first + [
            rnd(1.1, {U0: leader.answer(1.1), U1: worker.answer(1.1, "refused")}, "hold", "sidecar_restarted"),
            rnd(2.2, {U0: leader.answer(2.2), U1: worker.answer(2.2, "refused")}, "hold", "one_idle_read"),
            rnd(3.3, {U0: leader.answer(3.3), U1: worker.answer(3.3, "refused")}, "delete", "idle_twice")]
    add("leader-served-worker-restarted", "A worker's container restarted between the leader's idle reads: a "
        "restarted container is held, whichever member it is.", SPEC_RESTART, _group(2), worker_restart)

    add("no-leader", "No member carries index 0: held.", SPEC_NAMED, _group(2, indices=(1, 1)),
        _unnamed("no_leader"))
    add("several-leaders", "Two members carry index 0: held.", SPEC_NAMED, _group(2, indices=(0, 0)),
        _unnamed("several_leaders"))
    add("configuration-mismatch", "The members were created from different configurations: held.", SPEC_NAMED,
        _group(2, configs=("rev-5", "rev-6")), _unnamed("configuration_mismatch"))
    add("configuration-missing", "A replica of several whose members do not say their configuration: held.",
        SPEC_NAMED, _group(2, configs=(None, None)), _unnamed("configuration_mismatch"))
    add("size-mismatch", "The members say a group of 3, but the replica has 2 members: held.", SPEC_NAMED,
        _group(2, sizes=(3, 3)), _unnamed("size_mismatch"))
    add("single-pod-says-a-group", "One Pod that says it is a member of a group of 2: held.", SPEC_NAMED,
        [_single(group_size=2, configuration="rev-5")], _unnamed("size_mismatch"))

    def worker_prefill(leader: Sidecar, worker: Sidecar) -> list[dict]:
        split = EngineCommand(CommandSource.CMDLINE, True, ("cmdline: --disaggregation-mode=prefill",))
        for s in (leader, worker):
            s.command, s.kind, s.role = split, EngineKind.SGLANG, Role.PREFILL
        return [rnd(0.0, {U0: leader.answer(0.0), U1: worker.answer(0.0, "refused")}, "refuse", "prefill_decode")]
    add("leader-served-prefill-refused", "A leader-served SGLang prefill replica: refused.", SPEC_SPLIT,
        _group(2), worker_prefill)


def _without_a_router(table: Table) -> None:
    """No router: withdrawal waits for no outside connection on two reads >= 1 s apart."""
    routerless = table.routerless
    routerless("no-router-idle-replica", "No router: the endpoint is removed, no outside connection on two reads "
               "1.1 s apart (withdrawn), then the second of them and the next read are the two idle reads.",
               lambda a: [rnd(0.0, {U0: a.answer(0.0)}, "hold", "one_free_read"),
                          rnd(1.1, {U0: a.answer(1.1)}, "hold", "one_idle_read"),
                          rnd(2.2, {U0: a.answer(2.2)}, "delete", "idle_twice")])
    routerless("no-router-keep-alives-close", "Two idle keep-alive connections stay open until the engine closes "
               "them (vLLM: 5 s after their last response); withdrawal follows.",
               lambda a: [rnd(at_s, {U0: a.answer(at_s, connected=2)}, "hold", "connected")
                          for at_s in (0.0, 1.1, 2.2, 3.3)] + [
                   rnd(4.4, {U0: a.answer(4.4, connected=1)}, "hold", "connected"),
                   rnd(5.5, {U0: a.answer(5.5)}, "hold", "one_free_read"),
                   rnd(6.6, {U0: a.answer(6.6)}, "hold", "one_idle_read"),
                   rnd(7.7, {U0: a.answer(7.7)}, "delete", "idle_twice")])
    routerless("no-router-reconnect-between-reads", "A client reconnects between the two connection-free reads "
               "(its endpoint cache was stale): the count starts again.",
               lambda a: [rnd(0.0, {U0: a.answer(0.0)}, "hold", "one_free_read"),
                          rnd(1.1, {U0: a.answer(1.1, connected=1)}, "hold", "connected"),
                          rnd(2.2, {U0: a.answer(2.2)}, "hold", "one_free_read"),
                          rnd(3.3, {U0: a.answer(3.3)}, "hold", "one_idle_read"),
                          rnd(4.4, {U0: a.answer(4.4)}, "delete", "idle_twice")])

    def reconnect_seen_by_another(a: Sidecar) -> list[dict]:
        first = a.answer(0.0)
        a.taken_by_another_caller(0.5, "idle", connected=1)
        return [rnd(0.0, {U0: first}, "hold", "one_free_read"),
                rnd(1.1, {U0: a.answer(1.1)}, "hold", "interrupted"),
                rnd(2.2, {U0: a.answer(2.2)}, "hold", "one_idle_read"),
                rnd(3.3, {U0: a.answer(3.3)}, "delete", "idle_twice")]
    routerless("no-router-reconnect-seen-by-another-caller", "A read another caller took between the two saw a "
               "connection (connections.free_since_seq shows it): the count starts again.", reconnect_seen_by_another)
    routerless("no-router-reconnect-after-withdrawal", "A connection after withdrawal was seen, before the "
               "deletion: withdrawal and the idle reads start again.",
               lambda a: [rnd(0.0, {U0: a.answer(0.0)}, "hold", "one_free_read"),
                          rnd(1.1, {U0: a.answer(1.1)}, "hold", "one_idle_read"),
                          rnd(2.2, {U0: a.answer(2.2, connected=1)}, "hold", "connected"),
                          rnd(3.3, {U0: a.answer(3.3)}, "hold", "one_free_read"),
                          rnd(4.4, {U0: a.answer(4.4)}, "hold", "one_idle_read"),
                          rnd(5.5, {U0: a.answer(5.5)}, "delete", "idle_twice")])
    routerless("no-router-free-reads-too-close", "Two connection-free reads 0.4 s apart do not withdraw; a third "
               "1.1 s after the first does.",
               lambda a: [rnd(0.0, {U0: a.answer(0.0)}, "hold", "one_free_read"),
                          rnd(0.4, {U0: a.answer(0.4)}, "hold", "too_close"),
                          rnd(1.1, {U0: a.answer(1.1)}, "hold", "one_idle_read"),
                          rnd(2.2, {U0: a.answer(2.2)}, "delete", "idle_twice")])
    routerless("no-router-same-read", "The same connection-free read twice (a shared answer) counts once.",
               lambda a: [rnd(0.0, {U0: a.answer(0.0)}, "hold", "one_free_read"),
                          rnd(1.1, {U0: a.again()}, "hold", "same_read"),
                          rnd(2.2, {U0: a.answer(2.2)}, "hold", "one_idle_read"),
                          rnd(3.3, {U0: a.answer(3.3)}, "delete", "idle_twice")])


def _withdrawal_budget(table: Table) -> None:
    """No router: what withdrawal never sees is held, and aborted at the 30 s withdrawal budget."""
    routerless = table.routerless
    routerless("no-router-requests-keep-coming-aborts", "A client that keeps sending requests keeps its "
               "connection open: withdrawal is never seen, and at the 30 s withdrawal budget the retirement ends "
               "as Aborted.",
               lambda a: [rnd(at_s, {U0: a.answer(at_s, "busy", 1, connected=1)},
                              "abort" if at_s >= 30.0 else "hold", "connected")
                          for at_s in (0.0, 1.1, 10.0, 20.0, 29.9, 30.0)])
    routerless("no-router-busy-after-withdrawal", "Withdrawn while a request still runs (its client gone): the "
               "withdrawal budget is spent only until withdrawal, and the two idle reads follow under the "
               "caller's budget.",
               lambda a: [rnd(0.0, {U0: a.answer(0.0, "busy", 1)}, "hold", "one_free_read"),
                          rnd(1.1, {U0: a.answer(1.1, "busy", 1)}, "hold", "busy"),
                          rnd(31.0, {U0: a.answer(31.0, "busy", 1)}, "hold", "busy"),
                          rnd(32.1, {U0: a.answer(32.1)}, "hold", "one_idle_read"),
                          rnd(33.2, {U0: a.answer(33.2)}, "delete", "idle_twice")])
    routerless("no-router-connections-unknown", "A socket table the sidecar cannot read makes the count "
               "unknown, never zero: held, and aborted at the withdrawal budget.",
               lambda a: [rnd(0.0, {U0: a.answer(0.0, connected=None)}, "hold", "connections_unknown"),
                          rnd(1.1, {U0: a.answer(1.1, connected=None)}, "hold", "connections_unknown"),
                          rnd(2.2, {U0: a.answer(2.2)}, "hold", "one_free_read"),
                          rnd(3.3, {U0: a.answer(3.3, connected=None)}, "hold", "connections_unknown"),
                          rnd(30.0, {U0: a.answer(30.0, connected=None)}, "abort", "connections_unknown")])
    routerless("no-router-older-sidecar", "An answer without the connections field (a sidecar that does not "
               "count them) proves nothing about withdrawal: held, then Aborted at 30 s, as without this protocol.",
               lambda a: [rnd(0.0, {U0: a.answer(0.0)}, "hold", "connections_unknown"),
                          rnd(1.1, {U0: a.answer(1.1)}, "hold", "connections_unknown"),
                          rnd(30.0, {U0: a.answer(30.0)}, "abort", "connections_unknown")], sidecar=_single())


def _sending_the_deletes(table: Table) -> None:
    """The deletes: each member's UID, its resourceVersion, no shorter grace, in time."""
    add = table.add
    def replaced(a: Sidecar) -> list[dict]:
        successor = Sidecar(a.url, "llm-0", pod=PodIdentity(NAMESPACE, "llm-0", "uid-llm-0-replacement"))
        successor.restart_sidecar(1)
        return [rnd(0.0, {a.url: a.answer(0.0)}, "hold", "one_idle_read"),
                rnd(1.1, {a.url: successor.answer(1.1)}, "hold", "wrong_pod"),
                rnd(2.2, {a.url: successor.answer(2.2)}, "hold", "wrong_pod"),
                rnd(3.3, {a.url: successor.answer(3.3)}, "abort", "wrong_pod")]
    add("replacement-pod-of-the-same-name", "A StatefulSet's Pod read by its stable name: after one idle read, "
        "its replacement (same name, another UID) answers idle twice. Its reads never complete the old Pod's "
        "verdict, and a verdict on either could never delete the other (the deletes carry the UID).",
        SPEC_DELETE, [Sidecar("http://llm-0.llm.team-a.svc:8490/v1/work", "llm-0")], replaced, budget_s=3.0)

    def preconditioned(leader: Sidecar, worker: Sidecar) -> list[dict]:
        pods = {U0: ("48213", 30), U1: ("48207", 30)}
        return [rnd(0.0, {U0: leader.answer(0.0), U1: worker.answer(0.0, "refused")}, "hold", "one_idle_read"),
                rnd(1.1, {U0: leader.answer(1.1), U1: worker.answer(1.1, "refused")}, "delete", "idle_twice"),
                send(1.3, pods, "delete", "idle_twice", deleting=[leader, worker])]
    add("deletes-carry-each-members-uid", "A leader-served replica deletes both members, each with its own UID as "
        "it answered and the resourceVersion read for the deciding round, and no gracePeriodSeconds (each Pod's "
        "own applies).", SPEC_DELETE, _group(2), preconditioned)

    def expired(a: Sidecar) -> list[dict]:
        pods = {U0: ("9120", 30)}
        return [rnd(0.0, {U0: a.answer(0.0)}, "hold", "one_idle_read"),
                rnd(1.1, {U0: a.answer(1.1)}, "delete", "idle_twice"),
                send(3.2, pods, "hold", "verdict_expired"),
                rnd(3.3, {U0: a.answer(3.3)}, "delete", "idle_twice"),
                send(3.5, {U0: ("9131", 30)}, "delete", "idle_twice", deleting=[a])]
    add("verdict-too-old-reads-again", f"The deletes were not sent within {MAX_VERDICT_AGE_S:g} s of the "
        "verdict's second idle read (the controller's rate limit held them 2.1 s): nothing is sent; that read "
        "pairs with the next idle one, and the new verdict's deletes go out in time.", SPEC_DELETE, [_single()],
        expired)

    def too_short(a: Sidecar) -> list[dict]:
        return [rnd(0.0, {U0: a.answer(0.0)}, "hold", "one_idle_read"),
                rnd(1.1, {U0: a.answer(1.1)}, "delete", "idle_twice"),
                send(1.2, {U0: ("9120", 30)}, "refuse", "grace_too_short", grace_s=10),
                rnd(2.2, {U0: a.answer(2.2)}, "refuse", "grace_too_short")]
    add("grace-shorter-than-the-pods-refused", "A delete with gracePeriodSeconds 10 for a Pod whose own is 30 "
        "would make kubelet cut the drain running and start every hook again on 10 s: refused, the replica "
        "kept.", SPEC_DELETE, [_single()], too_short)

    def not_shorter(a: Sidecar) -> list[dict]:
        return [rnd(0.0, {U0: a.answer(0.0)}, "hold", "one_idle_read"),
                rnd(1.1, {U0: a.answer(1.1)}, "delete", "idle_twice"),
                send(1.2, {U0: ("9120", 45)}, "delete", "idle_twice", grace_s=45, deleting=[a])]
    add("grace-equal-to-the-pods-is-sent", "A gracePeriodSeconds no shorter than the Pod's own (45, an SGLang "
        "split role's) is sent as asked.", SPEC_DELETE, [_single()], not_shorter)


def _version_skew(table: Table) -> None:
    """Version skew: added fields ignored, a schema outside the window held."""
    add = table.add
    add("newer-sidecar-added-fields", "A sidecar one release newer writes the same schema with fields this "
        "reader does not know (at the top, in sidecar, read and engine.command): they are ignored, and the "
        "replica is read as before.", SPEC_SKEW, [_single()], lambda a: [
            rnd(0.0, {U0: a.answer_from_a_later_release(0.0, "busy")}, "hold", "busy"),
            rnd(1.1, {U0: a.answer_from_a_later_release(1.1)}, "hold", "one_idle_read"),
            rnd(2.2, {U0: a.answer_from_a_later_release(2.2)}, "delete", "idle_twice")])
    add("newer-schema-holds", f"A sidecar writing a schema newer than this reader's window ({NEXT_SCHEMA}), every "
        "other field as an idle answer: it cannot be trusted, so it holds, never idle, and the budget aborts.",
        SPEC_SKEW, [_single()], lambda a: [
            rnd(0.0, {U0: a.answer_in_schema(0.0, NEXT_SCHEMA)}, "hold", "unknown_schema"),
            rnd(1.1, {U0: a.answer_in_schema(1.1, NEXT_SCHEMA)}, "hold", "unknown_schema"),
            rnd(2.2, {U0: a.answer_in_schema(2.2, NEXT_SCHEMA)}, "hold", "unknown_schema"),
            rnd(3.3, {U0: a.answer_in_schema(3.3, NEXT_SCHEMA)}, "abort", "unknown_schema")], budget_s=3.0)
    add("older-sidecar-without-added-fields", "A sidecar one release older writes the schema without the fields "
        "added since (connections): with a router the protocol never needs them, so it reads as before.",
        SPEC_SKEW, [_single(counts_connections=True)], lambda a: [
            rnd(0.0, {U0: a.answer_as_first_released(0.0, "busy")}, "hold", "busy"),
            rnd(1.1, {U0: a.answer_as_first_released(1.1)}, "hold", "one_idle_read"),
            rnd(2.2, {U0: a.answer_as_first_released(2.2)}, "delete", "idle_twice")])


def _draining_member(table: Table) -> None:
    """A member already draining (appended after the skew group: no file's number moved)."""
    add = table.add
    add("draining-member-holds", "A member whose engine's hook has started (or whose /v1/drain was called) is "
        "already being deleted, long before its sidecar's own SIGTERM: its reads do not count.", SPEC_TWICE,
        [_single(draining_via=Via.HOOK)], lambda a: [
            rnd(0.0, {U0: a.answer(0.0)}, "hold", "terminating"),
            rnd(1.1, {U0: a.answer(1.1)}, "hold", "terminating")])


# In the order of the files' numbers.
GROUPS: tuple[Callable[[Table], None], ...] = (
    _two_reads,
    _reads_that_hold,
    _restarted_containers,
    _which_pod_answers,
    _no_answer,
    _refusals,
    _leader_served,
    _without_a_router,
    _withdrawal_budget,
    _sending_the_deletes,
    _version_skew,
    _draining_member,
)


def render(scenario: Scenario, index: int) -> tuple[str, str]:
    return f"{index:02d}-{scenario.name}.json", json.dumps(scenario.document(), indent=1) + "\n"


def rendered() -> dict[str, str]:
    return dict(render(s, i) for i, s in enumerate(scenarios(), 1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"write {TABLE_DIR.relative_to(REPO)}/*.json")
    args = parser.parse_args(argv)
    files = rendered()
    if not args.write:
        print("\n".join(files))
        return 0
    TABLE_DIR.mkdir(parents=True, exist_ok=True)
    for stale in TABLE_DIR.glob("*.json"):
        if stale.name not in files:
            stale.unlink()
    for name, text in files.items():
        (TABLE_DIR / name).write_text(text)
    print(f"wrote {len(files)} scenarios to {TABLE_DIR.relative_to(REPO)}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
