"""A deletion as a readable timeline: kubelet's acts, the router, each hook event, the engine's exit.

Times are seconds after the delete. Hook events come from its stderr (JSON lines with at least
"event" and "elapsed_s", counted from the hook's exec) and its last stdout line; a line that is not
JSON is shown as it is, so a crashing hook still shows why.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from emulation.kubelet import DeletionReport
from emulation.load import LoadTally, RequestOutcome

# Fields every hook event carries that the timeline already shows or that say nothing new.
_HOOK_BOOKKEEPING = frozenset({"ts", "source", "event", "elapsed_s", "pid"})
# Hook lines are cut to this many characters so the table stays readable in a terminal.
_MAX_DETAIL = 96


@dataclass(frozen=True)
class TimelineRow:
    at_s: float | None
    actor: str
    what: str


def _hook_rows(report: DeletionReport) -> list[TimelineRow]:
    offset = report.hook_started_at or 0.0
    rows = []
    lines = report.hook_stderr.splitlines() + report.hook_stdout.splitlines()[-1:]
    seen: set[str] = set()
    for line in lines:
        line = line.strip()
        if not line or line in seen:
            continue
        seen.add(line)
        try:
            event = json.loads(line)
        except ValueError:
            rows.append(TimelineRow(None, "hook", _cut(f"(not JSON) {line}")))
            continue
        if not isinstance(event, dict):
            rows.append(TimelineRow(None, "hook", _cut(f"(not an object) {line}")))
            continue
        elapsed = event.get("elapsed_s")
        at_s = offset + elapsed if isinstance(elapsed, (int, float)) else None
        first_read = event.get("first_read_s")
        if isinstance(first_read, (int, float)) and not isinstance(first_read, bool):
            rows.append(TimelineRow(offset + first_read, "hook",
                                    f"route wait over ({first_read:g} s): reading /metrics from now on"))
        rows.append(TimelineRow(at_s, "hook", _cut(_describe(event))))
    return rows


def _describe(event: dict) -> str:
    """The hook's own events in words; any other event as its fields."""
    name = event.get("event", "?")
    if name == "drain_started":
        return (f"drain started: reads {event.get('target')} from {event.get('first_read_s')} s, "
                f"deadline {event.get('deadline_s')} s")
    if name in ("read_state", "progress"):
        in_flight = event.get("in_flight")
        count = f", {in_flight:g} in flight" if isinstance(in_flight, (int, float)) and in_flight else ""
        return f"read: {event.get('outcome')}{count}" + ("" if name == "read_state" else " (progress)")
    if name == "drain_finished":
        return f"drain finished: {event.get('outcome')} ({event.get('reason')})"
    details = " ".join(f"{k}={_short(v)}" for k, v in event.items() if k not in _HOOK_BOOKKEEPING)
    return f"{name}  {details}".strip()


def _short(value: object) -> str:
    return json.dumps(value, separators=(",", ":")) if not isinstance(value, str) else value


def _cut(text: str) -> str:
    return text if len(text) <= _MAX_DETAIL else text[: _MAX_DETAIL - 1] + "…"


def timeline_rows(report: DeletionReport) -> list[TimelineRow]:
    rows = [TimelineRow(0.0, "kubelet", "Pod deleted: grace %gs, preStop %s" % (report.grace_s, {
        "exec": "hook exec'd", "sleep": "sleep action", "none": "none"}[report.hook_kind]))]
    if report.route_dropped_at is not None:
        rows.append(TimelineRow(report.route_dropped_at, "router", "drops the replica: no new requests"))
    if report.hook_kind == "exec":
        rows += _hook_rows(report)
        if report.hook_abandoned:
            rows.append(TimelineRow(report.grace_s, "kubelet", "hook still running at the grace: abandoned"))
        else:
            rows.append(TimelineRow(report.hook_returned_at, "kubelet",
                                    f"hook returned, exit code {report.hook_exit_code}"))
    if report.load is not None:
        last = report.relative(report.load.last_finished_at)
        if last is not None and last > 0:
            rows.append(TimelineRow(last, "router", "last request completed"))
    rows.append(TimelineRow(report.sigterm_at, "kubelet", "SIGTERM to the engine"))
    if report.sigkill_at is not None:
        rows.append(TimelineRow(report.sigkill_at, "kubelet", "SIGKILL to the engine"))
    rows.append(TimelineRow(report.engine_exited_at, "engine", f"exited, status {report.engine_exit_code}"))
    timed = sorted(((r.at_s, i, r) for i, r in enumerate(rows) if r.at_s is not None))
    return [r for _, _, r in timed] + [r for r in rows if r.at_s is None]


def render_timeline(report: DeletionReport) -> str:
    lines = [f"  {'t (s)':>7}  {'who':<8} what", f"  {'-' * 7}  {'-' * 8} {'-' * 40}"]
    for row in timeline_rows(report):
        at = f"{row.at_s:7.2f}" if row.at_s is not None else f"{'?':>7}"
        lines.append(f"  {at}  {row.actor:<8} {row.what}")
    return "\n".join(lines)


@dataclass(frozen=True)
class DeleteTally:
    """How the requests the delete touched ended: in flight at the delete, or sent after it."""

    touched: int
    completed: int
    cut: int
    rejected: int
    refused: int
    other: int


def delete_tally(report: DeletionReport) -> DeleteTally | None:
    tally: LoadTally | None = report.load
    if tally is None:
        return None
    touched = [r for r in tally.records if r.ended_at >= report.t0]

    def count(outcome: RequestOutcome) -> int:
        return sum(1 for r in touched if r.outcome is outcome)

    return DeleteTally(len(touched), count(RequestOutcome.COMPLETED), count(RequestOutcome.CUT),
                       count(RequestOutcome.REJECTED), count(RequestOutcome.REFUSED), count(RequestOutcome.OTHER))
