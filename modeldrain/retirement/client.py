"""May the operator delete this replica now? The retirement protocol's decision, as a reference client.

Standard library only and self-contained (it imports nothing from this project), so a controller
team can read it in one sitting or vendor it. It implements docs/controller.md, which states the
ModelDeployment operator's shutdown documentation ("Reading member work", "Drain read refusals",
"Limitations"; restated in modeldrain's docs/requirements.md, "the spec" below) as an algorithm over
drain-sidecar's GET /v1/work answers (schema modeldrain.sidecar/v2, READABLE_SCHEMAS):

    protocol = Retirement([MemberEndpoint("http://10.0.0.7:8490", ExpectedPod("team-a", "llm-0", uid))], budget_s=120)
    started_at = time.monotonic()
    while True:
        round_at_s = time.monotonic() - started_at
        pods = {...}  # url -> PodRead(resourceVersion, terminationGracePeriodSeconds), read before the requests
        answers = {m.url: read_member(m.url, token) for m in protocol.members}
        decision = protocol.observe(round_at_s, answers)
        if decision.verdict is RetirementVerdict.DELETE:  # send it now, or read on (verdict_expired)
            decision = protocol.deletes(time.monotonic() - started_at, pods)
            if decision.verdict is RetirementVerdict.DELETE:
                for d in decision.deletes:
                    ...  # DELETE d.path() with body d.options(); a 409: the verdict is void, start again
        if decision.verdict.final:
            break  # DELETE sent; REFUSE or ABORT: keep the Pods, report the reason
        time.sleep(ROUND_INTERVAL_S)

`Retirement.observe` does no I/O and reads no clock: rounds of answers go in, a decision comes out,
so conformance/retirement/ replays recorded rounds through it (and through any other
implementation). `read_member` is the one function that touches the network; `retire` is the loop.
"""

from __future__ import annotations

# The surface a controller uses (and copies): everything else here is the protocol's own detail.
__all__ = [
    "SCHEMA", "READABLE_SCHEMAS", "WORK_PATH", "MIN_IDLE_GAP_S", "ROUND_INTERVAL_S", "REQUEST_TIMEOUT_S",
    "MAX_ANSWER_BYTES", "WITHDRAWAL_BUDGET_S", "MAX_VERDICT_AGE_S",
    "RetirementVerdict", "Reason", "Decision", "ExpectedPod", "MemberEndpoint", "MemberPod", "Answer",
    "PodRead", "PodDelete", "Retirement",
    "work_url", "read_member", "read_member_with", "load_token", "load_tokens", "retire",
]

import concurrent.futures
import enum
import http.client
import json
import re
import time
import urllib.parse
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

SCHEMA = "modeldrain.sidecar/v2"
# The window of schemas this client reads (docs/controller.md, "Version skew"). Within one schema a
# sidecar release only adds fields, which a reader ignores; a change a reader could misread is a new
# schema, which readers learn one release before any sidecar writes it. A schema outside the window
# (one newer than this client) is no answer: held, never idle.
READABLE_SCHEMAS = (SCHEMA,)
_SCHEMA_NUMBER = re.compile(r"^modeldrain\.sidecar/v([0-9]{1,6})$")
_NEWEST_READ = max(int(schema.rsplit("/v", 1)[1]) for schema in READABLE_SCHEMAS)
WORK_PATH = "/v1/work"

# Spec "Reading member work": two idle reads; ours must start at least 1 s apart, by the reads' own
# start times (the sidecar's monotonic clock), as the hook's reads do.
MIN_IDLE_GAP_S = 1.0

# Rounds start this far apart. A little over MIN_IDLE_GAP_S: two reads' own start times differ from
# the rounds' by the requests' latency jitter, and a gap of 0.99 s would cost a third read.
ROUND_INTERVAL_S = 1.1

# drain-sidecar answers /v1/work within 5.1 s at its defaults (its work_answer_bound_s), or
# with a 504; a client waits a little longer so the sidecar's own answer arrives first. No retry
# within a round: a failed request holds the operation, and the next round is the retry.
REQUEST_TIMEOUT_S = 6.0

# An answer is ~1.5 KB; anything much larger is not one.
MAX_ANSWER_BYTES = 256 * 1024

# Spec "Retirement protocol": the withdrawal budget. Without a router, a replica whose outside
# connections have not been seen gone within this long of the first round ends as Aborted.
WITHDRAWAL_BUDGET_S = 30.0

# How old a delete verdict may be when its deletes are sent, from the second idle read's own start.
# The controller cannot read the sidecar's clock, so it measures from its own round's start, which
# is earlier (every caller gets a read that started after it asked): the age it sees bounds the
# read's from above. The verdict says the replica was idle at that read; sending the deletes is
# milliseconds, so 2 s is that with room for a slow API server, and a verdict that misses it costs
# one more round (its second read pairs with the next idle read), not a new count.
MAX_VERDICT_AGE_S = 2.0

_UNMEASURABLE = frozenset({"refused", "http_error", "tls_error"})

# Statuses that no later round changes by itself: what the caller must fix, said with the first hold.
_STATUS_WHY = {
    401: ": the sidecar wants its bearer token (no token sent, or not the one its --token-file holds)",
    403: ": the sidecar refused this caller",
    404: f": no {WORK_PATH} at this address: is it a drain-sidecar's (port 8490), or another server's?",
}
_SPLIT_ROLES = frozenset({"prefill", "decode"})


class RetirementVerdict(enum.Enum):
    DELETE = "delete"  # delete every Pod of the replica now
    HOLD = "hold"  # not yet: read again next round
    REFUSE = "refuse"  # never through this protocol: keep the replica, report the reason
    ABORT = "abort"  # held past the caller's budget: keep the replica and its capacity

    @property
    def final(self) -> bool:
        return self is not RetirementVerdict.HOLD


class Reason(enum.Enum):
    """Stable codes for a status field; the Decision's message says it in the spec's words."""

    IDLE_TWICE = "idle_twice"
    ONE_IDLE_READ = "one_idle_read"
    TOO_CLOSE = "too_close"
    SAME_READ = "same_read"
    INTERRUPTED = "interrupted"
    BUSY = "busy"
    INCOMPLETE = "incomplete"
    UNMEASURABLE = "unmeasurable"
    TERMINATING = "terminating"
    UNREADABLE = "unreadable"
    WRONG_POD = "wrong_pod"
    SIDECAR_RESTARTED = "sidecar_restarted"
    ENGINE_RESTARTED = "engine_restarted"
    NO_LEADER = "no_leader"
    SEVERAL_LEADERS = "several_leaders"
    CONFIGURATION_MISMATCH = "configuration_mismatch"
    SIZE_MISMATCH = "size_mismatch"
    COMMAND_UNKNOWN = "command_unknown"
    PREFILL_DECODE = "prefill_decode"
    UNKNOWN_SCHEMA = "unknown_schema"
    # Sending the deletes (Retirement.deletes):
    VERDICT_EXPIRED = "verdict_expired"
    GRACE_TOO_SHORT = "grace_too_short"
    # Withdrawal without a router (router=False):
    CONNECTED = "connected"
    CONNECTIONS_UNKNOWN = "connections_unknown"
    ONE_FREE_READ = "one_free_read"


@dataclass(frozen=True)
class ExpectedPod:
    namespace: str | None
    name: str | None
    uid: str | None

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name} (uid {self.uid})"


@dataclass(frozen=True)
class MemberPod:
    """A member Pod as it answered in the round a delete verdict was reached on: the UID the deletion
    must be preconditioned on (Pod names are reused: a StatefulSet's or LeaderWorkerSet's replacement)."""

    url: str
    namespace: str
    name: str
    uid: str

    def as_dict(self) -> dict[str, str]:
        return {"url": self.url, "namespace": self.namespace, "name": self.name, "uid": self.uid}


@dataclass(frozen=True)
class PodRead:
    """What the controller read of a member Pod from the API server when the deciding round started."""

    resource_version: str  # metadata.resourceVersion
    termination_grace_period_s: int  # spec.terminationGracePeriodSeconds (the API server defaults it to 30)


@dataclass(frozen=True)
class PodDelete:
    """One member Pod's delete: DELETE path() with options() as its body."""

    pod: MemberPod
    resource_version: str
    grace_period_s: int | None  # None: the Pod's own terminationGracePeriodSeconds applies

    def path(self) -> str:
        quote = urllib.parse.quote
        return f"/api/v1/namespaces/{quote(self.pod.namespace, safe='')}/pods/{quote(self.pod.name, safe='')}"

    def options(self) -> dict[str, Any]:
        """metav1.DeleteOptions: the API server deletes only the Pod of this UID, unchanged since it was read."""
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions",
                                "preconditions": {"uid": self.pod.uid, "resourceVersion": self.resource_version}}
        if self.grace_period_s is not None:
            body["gracePeriodSeconds"] = self.grace_period_s
        return body


@dataclass(frozen=True)
class Decision:
    verdict: RetirementVerdict
    reason: Reason
    message: str
    speaker: str | None = None  # the URL of the member that speaks for the replica, once named
    # DELETE: every member's Pod as it answered in the deciding round, and that round's at_s (the
    # verdict's age is measured from it: MAX_VERDICT_AGE_S).
    pods: tuple[MemberPod, ...] = ()
    decided_at_s: float | None = None
    deletes: tuple[PodDelete, ...] = ()  # from Retirement.deletes: what to send, one per member

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"verdict": self.verdict.value, "reason": self.reason.value, "message": self.message,
                               "speaker": self.speaker}
        if self.pods:
            out["pods"] = [pod.as_dict() for pod in self.pods]
        if self.deletes:
            out["deletes"] = [{"path": d.path(), "body": d.options()} for d in self.deletes]
        return out


@dataclass(frozen=True)
class MemberEndpoint:
    """One member Pod of the replica: where its sidecar answers, and which Pod the caller means."""

    url: str
    pod: ExpectedPod | None = None  # None: the first answer's Pod is taken as the one meant


@dataclass(frozen=True)
class Answer:
    """What one GET /v1/work gave: an HTTP status and its JSON, or why there was none."""

    status: int | None = None
    body: Any = None
    error: str | None = None


@dataclass(frozen=True)
class _View:
    """The fields of one valid v2 answer that the protocol uses."""

    pod: ExpectedPod
    instance: str
    terminating: bool
    worker_index: int
    group_size: int
    configuration: str | None
    disaggregated: bool | None
    evidence: tuple[str, ...]
    incarnation: int
    seq: int
    started_monotonic_s: float
    idle_run_since_seq: int | None
    outcome: str
    idle: bool
    in_flight: float | None
    role: str | None
    detail: str
    connections: _Connections | None  # None: the sidecar does not count them (an older release)


@dataclass(frozen=True)
class _Connections:
    """The answer's connections field: outside connections on the port the Service targets."""

    established: int | None
    recent_data: int | None
    free_since_seq: int | None
    scanned_monotonic_s: float
    detail: str


@dataclass(frozen=True)
class _IdleRead:
    url: str
    instance: str
    incarnation: int
    seq: int
    started_monotonic_s: float


@dataclass
class Retirement:
    """The protocol for one replica, fed one round of answers at a time, in order."""

    members: Sequence[MemberEndpoint]
    budget_s: float  # hold no longer than this from the first round (at_s 0), then ABORT
    # False: no router drops the replica, so its Service endpoint was removed just before the first
    # round and withdrawal waits for its outside connections to be gone (docs/controller.md).
    router: bool = True
    _first_free: _IdleRead | None = None  # the speaker's first connection-free read
    _withdrawn: _IdleRead | None = None  # the read that proved withdrawal
    _pinned: dict[str, ExpectedPod] = field(default_factory=dict)  # url -> the Pod meant there
    _last: dict[str, _View] = field(default_factory=dict)  # url -> its previous valid answer
    _first_idle: _IdleRead | None = None
    _deciding_read: _IdleRead | None = None  # the second idle read of a DELETE verdict
    _final: Decision | None = None
    _last_at_s: float = -float("inf")

    def __post_init__(self) -> None:
        urls = [m.url for m in self.members]
        if not urls or len(set(urls)) != len(urls):
            raise ValueError("a replica has at least one member, each at its own URL")

    def observe(self, at_s: float, answers: Mapping[str, Answer]) -> Decision:
        """The decision after one round; `at_s`: seconds since the first round, on the caller's clock."""
        if self._final is not None:
            return self._final
        if at_s < self._last_at_s:
            raise ValueError(f"rounds go forward in time: {at_s} after {self._last_at_s}")
        self._last_at_s = at_s
        decision = self._decide(answers)
        if decision.verdict is RetirementVerdict.DELETE:
            decision = replace(decision, decided_at_s=at_s)
        return self._settle(at_s, decision)

    def deletes(self, at_s: float, pods: Mapping[str, PodRead], grace_period_s: int | None = None) -> Decision:
        """The deletes to send now for a DELETE verdict, or why not; `pods`: each member URL's Pod as the
        controller read it when the deciding round started; `grace_period_s`: None (the Pods' own) or at
        least every member Pod's terminationGracePeriodSeconds."""
        verdict = self._final
        if verdict is None or verdict.verdict is not RetirementVerdict.DELETE or verdict.decided_at_s is None:
            raise ValueError("no delete verdict to send: observe rounds until one is reached")
        if at_s < self._last_at_s:
            raise ValueError(f"rounds go forward in time: {at_s} after {self._last_at_s}")
        missing = [m.url for m in self.members if m.url not in pods]
        if missing:
            raise ValueError(f"no Pod read for {', '.join(missing)}")
        self._last_at_s = at_s
        if grace_period_s is not None:
            shorter = [(pod, pods[pod.url].termination_grace_period_s) for pod in verdict.pods
                       if grace_period_s < pods[pod.url].termination_grace_period_s]
            if shorter:
                pod, own_s = shorter[0]
                # Final: no later round makes the delete asked for a safe one.
                self._final = Decision(RetirementVerdict.REFUSE, Reason.GRACE_TOO_SHORT,
                                       f"a delete with gracePeriodSeconds {grace_period_s} is shorter than Pod "
                                       f"{pod.namespace}/{pod.name}'s {own_s}: kubelet would cut the drain "
                                       "running and start every hook again on the shorter grace; send none "
                                       "(the Pod's own applies)", verdict.speaker)
                return self._final
        age_s = at_s - verdict.decided_at_s
        if age_s > MAX_VERDICT_AGE_S:
            # The verdict's second read may still pair with the next idle read: keep it as the first.
            self._final = None
            self._first_idle = self._deciding_read
            return self._settle(at_s, Decision(
                RetirementVerdict.HOLD, Reason.VERDICT_EXPIRED,
                f"the delete verdict is {age_s:.2f} s old, over {MAX_VERDICT_AGE_S:g} s from its second idle "
                "read: nothing is sent, and the next idle read decides again", verdict.speaker))
        return replace(verdict, deletes=tuple(
            PodDelete(pod, pods[pod.url].resource_version, grace_period_s) for pod in verdict.pods))

    def _settle(self, at_s: float, decision: Decision) -> Decision:
        """A hold past the withdrawal budget or the caller's budget aborts; a final decision stays."""
        if decision.verdict is RetirementVerdict.HOLD and not self.router and self._withdrawn is None \
                and at_s >= min(self.budget_s, WITHDRAWAL_BUDGET_S):
            decision = Decision(RetirementVerdict.ABORT, decision.reason,
                                f"not withdrawn within the withdrawal budget of {WITHDRAWAL_BUDGET_S:g} s, so the "
                                f"retirement ends as Aborted and the replica keeps its capacity: {decision.message}",
                                decision.speaker)
        elif decision.verdict is RetirementVerdict.HOLD and at_s >= self.budget_s:
            decision = Decision(RetirementVerdict.ABORT, decision.reason,
                                f"held past the budget of {self.budget_s:g} s, so the retirement ends as Aborted "
                                f"and the replica keeps its capacity: {decision.message}", decision.speaker)
        if decision.verdict.final:
            self._final = decision
        return decision

    # --- one round ------------------------------------------------------------------------------

    def _decide(self, answers: Mapping[str, Answer]) -> Decision:
        views: dict[str, _View] = {}
        unreadable: dict[str, _Unread] = {}
        for member in self.members:
            answer = answers.get(member.url)
            parsed = _parse(answer) if answer is not None else _Unread(Reason.UNREADABLE, "no answer in this round")
            if isinstance(parsed, _Unread):
                unreadable[member.url] = parsed
            else:
                views[member.url] = parsed
        # Which Pod answers comes first: at a reused IP, another Pod's answer says nothing of this replica.
        held = self._identity(views)
        if held is None:
            # A refusal is final whatever else the round says (spec "Drain read refusals").
            for url, view in views.items():
                if view.disaggregated or view.role in _SPLIT_ROLES:
                    said = ", ".join(view.evidence) or f"its gauge set is {view.role}"
                    return Decision(RetirementVerdict.REFUSE, Reason.PREFILL_DECODE,
                                    f"a prefill or decode replica is refused outright: {url} runs one ({said})")
            held = self._restarts(views)
            for url, view in views.items():
                self._last[url] = view
        if held is not None:
            return self._hold(*held)
        if unreadable:
            url, unread = next(iter(unreadable.items()))
            return self._hold(unread.reason, f"member {url} gave no answer the protocol can read: {unread.why}")
        named = self._speaker(views)
        if isinstance(named, tuple):
            return self._hold(*named)
        view = views[named]
        if view.disaggregated is None:
            return self._hold(Reason.COMMAND_UNKNOWN,
                              f"{named} cannot say whether its command runs a prefill or decode server "
                              "(engine.command.source none), so the refusal cannot be ruled out", named)
        terminating = [url for url, v in views.items() if v.terminating]
        if terminating:
            return self._hold(Reason.TERMINATING, f"{terminating[0]} is already terminating or draining: its Pod "
                              "is being deleted, and the drain window, not this protocol, decides when it goes", named)
        if not self.router:
            held_by = self._withdrawal(named, view)
            if held_by is not None:
                return held_by
        decision = self._two_reads(named, view)
        if decision.verdict is RetirementVerdict.DELETE:
            # Delete exactly the Pods that answered: the UIDs the deletes are preconditioned on.
            decision = replace(decision, pods=tuple(
                MemberPod(m.url, str(views[m.url].pod.namespace), str(views[m.url].pod.name), str(views[m.url].pod.uid))
                for m in self.members))
        return decision

    def _hold(self, reason: Reason, message: str, speaker: str | None = None, *,
              keep_withdrawal: bool = False) -> Decision:
        self._first_idle = None  # anything but an idle read between the two holds the operation
        if not keep_withdrawal:  # a restart, an unreadable answer, a connection: withdrawal starts again
            self._first_free = self._withdrawn = None
        return Decision(RetirementVerdict.HOLD, reason, message, speaker)

    def _withdrawal(self, url: str, view: _View) -> Decision | None:
        """Without a router: no outside connection on two reads >= 1 s apart, and on every read after."""
        c = view.connections
        if c is None or c.established is None:
            why = c.detail if c is not None else "the answer has no connections field (an older sidecar)"
            return self._hold(Reason.CONNECTIONS_UNKNOWN, f"removing the Service endpoint does not prove its "
                              f"connections have ended, and {url} cannot count them: {why}", url)
        if c.established > 0:
            return self._hold(Reason.CONNECTED, f"{c.established} connection(s) from outside the Pod are still "
                              f"open to the port the Service targets ({c.detail})", url)
        this = _IdleRead(url, view.instance, view.incarnation, view.seq, c.scanned_monotonic_s)
        first = self._first_free
        if first is None or (first.url, first.instance) != (url, view.instance):
            self._first_free, self._withdrawn = this, None
            return self._hold(Reason.ONE_FREE_READ, f"no outside connection on read {view.seq}; withdrawal needs "
                              f"two such reads at least {MIN_IDLE_GAP_S:g} s apart", url, keep_withdrawal=True)
        if c.free_since_seq is None or c.free_since_seq > first.seq:
            self._first_free, self._withdrawn = this, None
            return self._hold(Reason.INTERRUPTED, f"a read between reads {first.seq} and {view.seq} saw an outside "
                              f"connection (a reconnect; the connection-free run began at read "
                              f"{c.free_since_seq}); counting again from read {view.seq}", url, keep_withdrawal=True)
        if self._withdrawn is not None:
            return None  # withdrawn, and still no connection since: the two idle reads decide
        if view.seq == first.seq:
            return self._hold(Reason.SAME_READ, f"read {view.seq} again: an answer shared by concurrent callers "
                              "is one read", url, keep_withdrawal=True)
        gap_s = c.scanned_monotonic_s - first.started_monotonic_s
        if gap_s < MIN_IDLE_GAP_S:
            return self._hold(Reason.TOO_CLOSE, f"connection-free reads {first.seq} and {view.seq} started "
                              f"{gap_s:.3f} s apart; they must start at least {MIN_IDLE_GAP_S:g} s apart", url,
                              keep_withdrawal=True)
        self._withdrawn = this  # this read may be the first of the two idle reads
        return None

    def _identity(self, views: Mapping[str, _View]) -> tuple[Reason, str] | None:
        """Each answer comes from the Pod meant at its URL (spec: Pod IPs are reused)."""
        by_uid: dict[str | None, str] = {}
        for member in self.members:
            view = views.get(member.url)
            if view is None:
                continue
            if None in (view.pod.namespace, view.pod.name, view.pod.uid):
                return Reason.WRONG_POD, (f"{member.url} does not name its Pod (namespace, name and UID), so "
                                          "its answer cannot be told from another Pod's at a reused IP")
            meant = member.pod or self._pinned.setdefault(member.url, view.pod)
            if view.pod != meant:
                return Reason.WRONG_POD, (f"{member.url} answers as Pod {view.pod}, not {meant}: "
                                          "its Pod IP was reused")
            if view.pod.uid in by_uid:
                return Reason.WRONG_POD, f"{by_uid[view.pod.uid]} and {member.url} answer as one Pod {view.pod}"
            by_uid[view.pod.uid] = member.url
        return None

    def _restarts(self, views: Mapping[str, _View]) -> tuple[Reason, str] | None:
        """Spec: a restarted container is held; its reads cannot pair with the old process's."""
        for url, view in views.items():
            last = self._last.get(url)
            if last is None:
                continue
            if view.instance != last.instance:
                return Reason.SIDECAR_RESTARTED, (f"a restarted container is held: the drain-sidecar of {url} "
                                                  "restarted (sidecar.instance changed)")
            if view.incarnation != last.incarnation:
                return Reason.ENGINE_RESTARTED, (f"a restarted container is held: the engine of {url} restarted "
                                                 f"(engine.incarnation {last.incarnation} -> {view.incarnation})")
            if view.seq < last.seq:
                return Reason.UNREADABLE, f"{url} went back from read {last.seq} to {view.seq} in one instance"
        return None

    def _speaker(self, views: Mapping[str, _View]) -> str | tuple[Reason, str]:
        """The member whose answer stands for the replica, or why none can be named."""
        size = len(self.members)
        for url, view in views.items():
            if view.group_size != size:
                return Reason.SIZE_MISMATCH, (f"its role says a size the replica does not have: {url} says group "
                                              f"size {view.group_size}, the replica has {size} member(s)")
        if size > 1:
            silent = [url for url, view in views.items() if view.configuration is None]
            if silent:
                return Reason.CONFIGURATION_MISMATCH, (f"its members cannot be shown to agree on the configuration: "
                                                       f"{silent[0]} does not say its own")
            configurations = sorted({str(view.configuration) for view in views.values()})
            if len(configurations) > 1:
                return Reason.CONFIGURATION_MISMATCH, (f"its members disagree on the configuration "
                                                       f"({', '.join(configurations)})")
        leaders = [url for url, view in views.items() if view.worker_index == 0]
        if not leaders:
            return Reason.NO_LEADER, "none of its members carries the leader index (worker_index 0)"
        if len(leaders) > 1:
            return Reason.SEVERAL_LEADERS, f"more than one member carries the leader index: {', '.join(leaders)}"
        return leaders[0]

    def _two_reads(self, url: str, view: _View) -> Decision:
        """Spec: a member must read idle twice, on complete envelopes; a read that finds work holds."""
        if not view.idle:
            # Work in flight with no client connected is no reason to withdraw again: keep the withdrawal.
            if view.outcome == "busy":
                return self._hold(Reason.BUSY, f"a read that finds work holds the operation ({view.detail})", url,
                                  keep_withdrawal=True)
            if view.outcome in _UNMEASURABLE:
                return self._hold(Reason.UNMEASURABLE, f"nothing answers the engine read ({view.outcome}: "
                                  f"{view.detail})", url, keep_withdrawal=True)
            return self._hold(Reason.INCOMPLETE, f"a read not on a complete envelope holds the operation "
                              f"({view.outcome}: {view.detail})", url, keep_withdrawal=True)
        first = self._first_idle
        this = _IdleRead(url, view.instance, view.incarnation, view.seq, view.started_monotonic_s)
        if first is None or (first.url, first.instance, first.incarnation) != (url, view.instance, view.incarnation):
            self._first_idle = this
            return Decision(RetirementVerdict.HOLD, Reason.ONE_IDLE_READ,
                            f"one idle read on a complete envelope (read {view.seq}); a member must read idle "
                            "twice", url)
        if view.seq == first.seq:
            return Decision(RetirementVerdict.HOLD, Reason.SAME_READ, f"read {view.seq} again: an answer shared by "
                            "concurrent callers is one read", url)
        if view.idle_run_since_seq is None or view.idle_run_since_seq > first.seq:
            self._first_idle = this
            return Decision(RetirementVerdict.HOLD, Reason.INTERRUPTED,
                            f"a read between reads {first.seq} and {view.seq} was not idle (the idle run began at "
                            f"read {view.idle_run_since_seq}); counting again from read {view.seq}", url)
        gap_s = view.started_monotonic_s - first.started_monotonic_s
        if gap_s < MIN_IDLE_GAP_S:
            return Decision(RetirementVerdict.HOLD, Reason.TOO_CLOSE, f"idle reads {first.seq} and {view.seq} started "
                            f"{gap_s:.3f} s apart; they must start at least {MIN_IDLE_GAP_S:g} s apart", url)
        self._deciding_read = this
        return Decision(RetirementVerdict.DELETE, Reason.IDLE_TWICE,
                        f"read idle twice on complete envelopes (reads {first.seq} and {view.seq}, {gap_s:.2f} s "
                        "apart)", url)


# --- one answer -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Unread:
    """Why one member's answer is no read this round."""

    reason: Reason
    why: str


def _parse(answer: Answer) -> _View | _Unread:
    """The protocol's fields of one answer, or why it has none. Fields it does not use are ignored,
    whoever added them; fields added within the schema are optional (absent: an older sidecar)."""
    if answer.error is not None:
        return _Unread(Reason.UNREADABLE, answer.error)
    body = answer.body
    if answer.status != 200:
        code = body.get("error") if isinstance(body, dict) else None
        return _Unread(Reason.UNREADABLE, f"HTTP {answer.status}" + (f" ({code})" if code else "")
                       + _STATUS_WHY.get(answer.status or 0, ""))
    if not isinstance(body, dict):
        return _Unread(Reason.UNREADABLE, "the body is not a JSON object")
    if body.get("schema") not in READABLE_SCHEMAS:
        return _Unread(Reason.UNKNOWN_SCHEMA, _unknown_schema(body.get("schema")))
    try:
        pod, sidecar, member = body["pod"], body["sidecar"], body["member"]
        engine, read = body["engine"], body["read"]
        command = engine["command"]
        return _View(
            pod=ExpectedPod(_opt(pod["namespace"], str), _opt(pod["name"], str), _opt(pod["uid"], str)),
            instance=_req(sidecar["instance"], str),
            # `draining` was added within v2: absent (an older sidecar) says nothing; the controller's
            # own metadata.deletionTimestamp check covers that sidecar (docs/controller.md, step 9).
            terminating=_req(sidecar["terminating"], bool) or sidecar.get("draining") is not None,
            worker_index=_req(member["worker_index"], int),
            group_size=_req(member["group_size"], int),
            configuration=_opt(member["configuration"], str),
            disaggregated=_opt(command["disaggregated"], bool),
            evidence=tuple(_req(word, str) for word in _req(command["evidence"], list)),
            incarnation=_req(engine["incarnation"], int),
            seq=_req(read["seq"], int),
            started_monotonic_s=float(_req(read["started_monotonic_s"], (int, float))),
            idle_run_since_seq=_opt(read["idle_run_since_seq"], int),
            outcome=_req(read["outcome"], str),
            idle=_req(read["idle"], bool) and _req(read["complete"], bool),
            in_flight=_opt(read["in_flight"], (int, float)),
            role=_opt(read["role"], str),
            detail=_req(read["detail"], str),
            connections=_connections(body["connections"]) if "connections" in body else None,
        )
    except (KeyError, TypeError) as exc:
        return _Unread(Reason.UNREADABLE, f"not a {SCHEMA} answer: {type(exc).__name__} {exc}")


def _unknown_schema(schema: Any) -> str:
    """Why a schema outside READABLE_SCHEMAS is no answer, and which side to upgrade."""
    window = ", ".join(READABLE_SCHEMAS)
    said = repr(schema)[:80]
    number = _SCHEMA_NUMBER.match(schema) if isinstance(schema, str) else None
    if number and int(number[1]) > _NEWEST_READ:
        return (f"schema {said} is newer than this client reads ({window}): a field layout it was not "
                "written for is never read as idle; upgrade the controller")
    return f"schema {said}, not one this client reads ({window})"


def _connections(field: Any) -> _Connections:
    c = _req(field, dict)
    return _Connections(
        established=_opt(c["established"], int),
        recent_data=_opt(c["recent_data"], int),
        free_since_seq=_opt(c["free_since_seq"], int),
        scanned_monotonic_s=float(_req(c["scanned_monotonic_s"], (int, float))),
        detail=_req(c["detail"], str),
    )


def _req(value: Any, kind: type | tuple[type, ...]) -> Any:
    # bool is an int in Python, never in JSON: keep them apart.
    if isinstance(value, bool) != (kind is bool) or not isinstance(value, kind):
        raise TypeError(f"{value!r} is not {kind}")
    return value


def _opt(value: Any, kind: type | tuple[type, ...]) -> Any:
    return None if value is None else _req(value, kind)


# --- the network ----------------------------------------------------------------------------------

def work_url(text: str) -> str:
    """http(s)://HOST:PORT[/v1/work]: where a member's sidecar answers; raises ValueError."""
    parts = urllib.parse.urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"a member is an http:// or https:// URL with a host, got {text!r}")
    try:
        parts.port  # noqa: B018 -- parsing it is the check
    except ValueError:
        raise ValueError(f"bad port in {text!r}") from None
    path = parts.path if parts.path not in ("", "/") else WORK_PATH
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def read_member(url: str, token: str | None = None, timeout_s: float = REQUEST_TIMEOUT_S) -> Answer:
    """One GET of a member's /v1/work, bounded by timeout_s; never raises for what the network does."""
    parts = urllib.parse.urlsplit(work_url(url))
    connection_class = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    connection = connection_class(parts.netloc, timeout=timeout_s)
    headers = {"Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        connection.request("GET", parts.path, headers=headers)
        response = connection.getresponse()
        raw = response.read(MAX_ANSWER_BYTES + 1)
        status = response.status
    except (OSError, http.client.HTTPException) as exc:
        return Answer(error=f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
    finally:
        connection.close()
    if len(raw) > MAX_ANSWER_BYTES:
        return Answer(status=status, error=f"answer over {MAX_ANSWER_BYTES} bytes")
    try:
        return Answer(status=status, body=json.loads(raw))
    except ValueError:
        return Answer(status=status, error=f"HTTP {status} with a body that is not JSON" + _STATUS_WHY.get(status, ""))


def load_tokens(path: str) -> tuple[str, ...]:
    """The bearer tokens of a token file as drain-sidecar's --token-file holds them: one, or two on
    two lines during a rotation (docs/layouts.md, "Rotating the token"); raises OSError or ValueError."""
    with open(path, encoding="utf-8") as f:
        text = f.read(2 * 4097 + 1)
    tokens = tuple(line.strip() for line in text.splitlines() if line.strip())
    if not 1 <= len(tokens) <= 2 or any(len(t) > 4096 or any(c.isspace() for c in t) for t in tokens):
        raise ValueError(f"{path} does not hold one token, or two on two lines")
    return tokens


def load_token(path: str) -> str:
    """The token a request sends first: the file's first line."""
    return load_tokens(path)[0]


def read_member_with(url: str, tokens: Sequence[str], timeout_s: float = REQUEST_TIMEOUT_S) -> Answer:
    """read_member with the first token; a 401 is tried once more with the second (a rotation that
    this member's node has not seen yet, or has seen first)."""
    answer = read_member(url, tokens[0] if tokens else None, timeout_s)
    if answer.status == 401 and len(tokens) > 1:
        return read_member(url, tokens[1], timeout_s)
    return answer


def retire(members: Sequence[MemberEndpoint], *, budget_s: float, token_file: str | None = None,
           timeout_s: float = REQUEST_TIMEOUT_S, interval_s: float = ROUND_INTERVAL_S, router: bool = True,
           on_round: Callable[[float, Decision], None] | None = None) -> Decision:
    """Read every member once a round until the decision is final; the token file is re-read each round.
    router=False: the replica's Service endpoint has just been removed, and no router drops it."""
    protocol = Retirement(members, budget_s, router)
    started_at = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(members), thread_name_prefix="member") as pool:
        while True:
            round_at = time.monotonic()
            answers = _read_round(pool, members, token_file, timeout_s)
            at_s = round_at - started_at
            decision = protocol.observe(at_s, answers)
            if on_round is not None:
                on_round(at_s, decision)
            if decision.verdict.final:
                return decision
            time.sleep(max(0.0, round_at + interval_s - time.monotonic()))


def _read_round(pool: concurrent.futures.Executor, members: Sequence[MemberEndpoint], token_file: str | None,
                timeout_s: float) -> dict[str, Answer]:
    tokens: tuple[str, ...] = ()
    if token_file is not None:
        try:
            tokens = load_tokens(token_file)
        except (OSError, ValueError) as exc:
            return {m.url: Answer(error=f"token file: {exc}") for m in members}
    futures = {m.url: pool.submit(read_member_with, m.url, tokens, timeout_s) for m in members}
    return {url: future.result() for url, future in futures.items()}
