"""RESULTS.md's "Drain every configuration" section: the four families of bench/drains/configurations.py.

Each table's rows are the cells as they ran (medians over repeats, with min–max); each verdict uses
the paired rule of bench/tables.py, so a difference the spread could flip is a tie.
"""

from __future__ import annotations

import statistics
from typing import Sequence

from bench.drains import leader_worker, return_lag, shutdown_timeout, split_roles
from bench.spread import Spread
from bench.tables import DASH, Judged, count, killed, metric, seconds, table, verdict
from modeldrain.hook.constants import BUSY_POLL_INTERVAL_S, IDLE_CONFIRM_GAP_S, SPLIT_ROLE_EXIT_RESERVE_S

# Issue 10's target for the lag from the last request's end to the hook's return (against a real vLLM).
LAG_TARGET_S = 1.25


def _select(cells: Sequence[dict], **match: object) -> list[dict]:
    return [c for c in cells if not c.get("error") and all(c.get(k) == v for k, v in match.items())]


def _killed(cells: list[dict]) -> str:
    return f"{sum(1 for c in cells if c.get('sigkill_at_s') is not None)}/{len(cells)}"


def _codes(cells: list[dict], key: str = "hook_exit_code") -> str:
    return "/".join(sorted({str(c[key]) for c in cells if c.get(key) is not None})) or DASH


def _optional_seconds(cells: list[dict], key: str) -> str:
    return seconds([float(c[key]) for c in cells if c.get(key) is not None])


# --- SGLang split roles ----------------------------------------------------------------------------

_SPLIT_JUDGED = (Judged(killed, True, "SIGKILL", False), Judged.key("cut", True, "cut"),
                 Judged.key("completed", False, "completed"), Judged.key("engine_exited_at_s", True, "exit s"),
                 Judged.key("held_idle_s", True, "held s"))


def _split_roles(cells: list[dict]) -> list[str]:
    ours = split_roles.Strategy.PRESTOP
    others = [s for s in split_roles.Strategy if s is not ours]
    lines = ["### SGLang prefill and decode: the role reserve", "",
             "An SGLang prefill or decode server keeps serving after SIGTERM (running and new requests), checks "
             "its queue 4 s after the signal and every 5 s after that, and once empty waits 15 s for its split-role "
             "scheduler before it exits (the emulator, `--kind sglang --role prefill|decode`, does all of this). "
             f"**prestop** is `prestop --grace G --port P --engine sglang`: it learns the role from the "
             f"exposition's engine_type label and returns by G − {SPLIT_ROLE_EXIT_RESERVE_S:g}. **prestop "
             f"--exit-reserve {split_roles.OLD_EXIT_RESERVE_S:g}** is the reserve every engine got before (G − 5). "
             "**sleep G−5** runs only idle: its SIGTERM comes too late for any load.", ""]
    lines += table(["scenario", "load"], ([s.name, s.description] for s in split_roles.SCENARIOS), "ll")
    lines.append("")
    header = ["role", "scenario", "strategy", "completed", "cut", "SIGTERM, s", "engine exit, s", "SIGKILL",
              "hook exit", "hook's reserve, s"]
    for grace_s in sorted({c["grace_s"] for c in cells}):
        rows, verdict_rows = [], []
        for role in split_roles.ROLES:
            for scenario in split_roles.SCENARIOS:
                for strategy in scenario.strategies:
                    run = _select(cells, grace_s=grace_s, role=role, scenario=scenario.name, strategy=strategy.value)
                    if not run:
                        continue
                    rows.append([role, scenario.name, strategy.value, count(metric(run, "completed")),
                                 count(metric(run, "cut")), seconds(metric(run, "sigterm_at_s")),
                                 seconds(metric(run, "engine_exited_at_s")), _killed(run), _codes(run),
                                 _codes(run, "hook_exit_reserve_s")])
                mine = _select(cells, grace_s=grace_s, role=role, scenario=scenario.name, strategy=ours.value)
                if mine:
                    verdict_rows.append([role, scenario.name] + [
                        verdict(mine, _select(cells, grace_s=grace_s, role=role, scenario=scenario.name,
                                              strategy=other.value), _SPLIT_JUDGED)
                        if other in scenario.strategies else DASH for other in others])
        if not rows:
            continue
        lines += [f"#### G = {grace_s:g} s", ""] + table(header, rows, "lll" + "r" * 7) + [""]
        lines += [f"prestop against each alternative at G = {grace_s:g} s (paired by seed; SIGKILL counted 1 per run):",
                  ""]
        lines += table(["role", "scenario"] + [f"prestop vs {o.value}" for o in others], verdict_rows,
                       "l" * (len(others) + 2)) + [""]
    return lines


# --- leader and worker -------------------------------------------------------------------------------

def _leader_worker(cells: list[dict]) -> list[str]:
    lines = ["### A leader and its worker, deleted at once", "",
             "A LeaderWorkerSet deletes a group's Pods together. The leader: an emulated vLLM engine with a real "
             "drain-sidecar in front (a native sidecar: SIGTERM once the leader's engine has exited) and prestop as "
             f"its hook. The worker: an engine that serves no metrics, with one of the hooks below; G = "
             f"{leader_worker.GRACE_S:g} s. **prestop --follow-leader** reads the leader's drain-sidecar "
             "(`/v1/work`); **prestop, own engine only** (`--follow-leader none`) reads its own absent engine, is "
             "refused after the 5 s route wait and returns (exit 11); **no hook**: SIGTERM at the delete.",
             "*After the leader's last request*: the worker's SIGTERM minus the end of the leader's last completed "
             "request (negative: the worker was stopped while the leader still served). *Leader requests running "
             "then*: the leader's requests in flight at the worker's SIGTERM. The emulated leader does not fail when "
             "its worker leaves, so these are counted, not cut; in a real multi-Pod replica, where the worker holds "
             "shards of the model, they would fail.", ""]
    lines += table(["scenario", "load"], ([s.name, s.description] for s in leader_worker.SCENARIOS), "ll")
    lines.append("")
    header = ["scenario", "worker's hook", "worker SIGTERM, s", "after the leader's last request, s",
              "leader requests running then", "worker hook exit", "worker exit, s", "leader completed", "leader cut",
              "leader exit, s"]
    rows = []
    for scenario in leader_worker.SCENARIOS:
        for hook in leader_worker.WorkerHook:
            run = _select(cells, scenario=scenario.name, strategy=hook.value)
            if not run:
                continue
            rows.append([scenario.name, hook.value, seconds(metric(run, "worker_sigterm_at_s")),
                         _optional_seconds(run, "worker_sigterm_after_last_request_s"),
                         count(metric(run, "leader_in_flight_at_worker_sigterm")),
                         _codes(run, "worker_hook_exit_code"), seconds(metric(run, "worker_exited_at_s")),
                         count(metric(run, "completed")), count(metric(run, "cut")),
                         seconds(metric(run, "engine_exited_at_s"))])
    return lines + table(header, rows, "ll" + "r" * 8) + [""]


# --- sleep + --shutdown-timeout ------------------------------------------------------------------------

_TIMEOUT_JUDGED = (Judged.key("cut", True, "cut"), Judged.key("rejected_new", True, "rejected"),
                   Judged.key("failed", True, "failed"), Judged.key("completed", False, "completed"),
                   Judged(killed, True, "SIGKILL", False), Judged.key("engine_exited_at_s", True, "exit s"),
                   Judged.key("held_idle_s", True, "held s"))


def _shutdown_timeout(cells: list[dict]) -> list[str]:
    lines = ["### What users run instead: `sleep` + vLLM `--shutdown-timeout`", "",
             "vLLM's `--shutdown-timeout N` turns SIGTERM into a drain: running requests go on, a request that "
             "arrives meanwhile gets HTTP 500, requests still running at N get HTTP 500, then ~7 s of teardown "
             "(measured; the emulator's `--shutdown-timeout`). Two settings seen in use: `sleep 5` + "
             "`--shutdown-timeout 20` at G = 30, and KServe's LLMInferenceService (preStop `sleep 15`, "
             "terminationGracePeriodSeconds 60, `--shutdown-timeout` = G − 15 − 5 = 40 for vLLM ≥ 0.18); each "
             "against prestop on the same engine and prestop on vLLM's default engine (abort on SIGTERM).",
             "*rejected*: HTTP 500 to a request that arrived while the engine drained (the router's late ones). "
             "*failed*: HTTP 500 to a request still running when the timeout ran out. Both are lost to the client "
             "(a router may retry a rejected one).", ""]
    lines += table(["scenario", "load"], ([s.name, s.description] for s in shutdown_timeout.SCENARIOS), "ll")
    lines.append("")
    header = ["scenario", "strategy", "completed", "cut", "rejected", "failed", "refused", "engine exit, s",
              "held idle, s", "SIGKILL", "hook exit"]
    for grace_s, strategies in shutdown_timeout.SETTINGS:
        rows, verdict_rows = [], []
        users, prestops = strategies[0], strategies[1:]
        for scenario in shutdown_timeout.SCENARIOS:
            for strategy in strategies:
                run = _select(cells, grace_s=grace_s, scenario=scenario.name, strategy=strategy.value)
                if run:
                    rows.append([scenario.name, strategy.value] + [count(metric(run, k)) for k in
                                 ("completed", "cut", "rejected_new", "failed", "refused")] +
                                [seconds(metric(run, "engine_exited_at_s")), seconds(metric(run, "held_idle_s")),
                                 _killed(run), _codes(run)])
            theirs = _select(cells, grace_s=grace_s, scenario=scenario.name, strategy=users.value)
            if theirs:
                verdict_rows.append([scenario.name] + [verdict(_select(cells, grace_s=grace_s, scenario=scenario.name,
                                                                       strategy=p.value), theirs, _TIMEOUT_JUDGED)
                                                       for p in prestops])
        if not rows:
            continue
        lines += [f"#### G = {grace_s:g} s", ""] + table(header, rows, "ll" + "r" * 9) + [""]
        lines += [f"Each prestop setting against `{users.value}` at G = {grace_s:g} s (paired by seed):", ""]
        lines += table(["scenario"] + [f"{p.value} vs {users.value}" for p in prestops], verdict_rows,
                       "l" * (len(prestops) + 1)) + [""]
    return lines


# --- return lag ---------------------------------------------------------------------------------------

def _quartiles(values: list[float]) -> str:
    if len(values) < 4:
        return DASH
    q1, _, q3 = statistics.quantiles(values, n=4)
    return f"{q1:.2f}–{q3:.2f}"


def _return_lag(cells: list[dict]) -> list[str]:
    lines = ["### The last request's end to the hook's return", "",
             "prestop returns after two consecutive complete idle reads, the second at least "
             f"{IDLE_CONFIRM_GAP_S:g} s after the first; while work is in flight it reads every `--busy-interval` "
             f"(default {BUSY_POLL_INTERVAL_S:g} s; 1 s before). Busy: a vLLM engine under 4 req/s of 0.5–3 s until "
             "the router drops it, plus 3 requests drawn to end 6–12 s after the delete (after the route wait, so "
             "the cadence decides). *Lag*: the hook's return minus the end of the last completed request, both on "
             "the bench's clock. Repeats are paired by seed (the same load at both cadences); the poll's phase "
             "against the last end is not seeded, so it is compared as a distribution.", ""]
    header = ["scenario", "cadence", "deletions", "lag, median", "lag, quartiles", "lag, min–max",
              "reads per drain", "hook return, s"]
    rows = []
    for scenario in ("busy", "idle"):
        for cadence in return_lag.Cadence:
            run = _select(cells, scenario=scenario, strategy=cadence.value)
            if not run:
                continue
            lags = [float(c["lag_s"]) for c in run if c.get("lag_s") is not None]
            spread = Spread.of(lags) if lags else None
            rows.append([scenario, cadence.value, str(len(run)), f"{spread.median:.2f} s" if spread else DASH,
                         _quartiles(lags), f"{spread.low:.2f}–{spread.high:.2f}" if spread else DASH,
                         count([float(c["hook_reads"]) for c in run if c.get("hook_reads") is not None] or [0.0]),
                         seconds(metric(run, "hook_returned_at_s"), 2)])
    lines += table(header, rows, "ll" + "r" * 6) + [""]
    new = {c["repeat"]: c for c in _select(cells, scenario="busy", strategy=return_lag.Cadence.NEW.value)}
    old = {c["repeat"]: c for c in _select(cells, scenario="busy", strategy=return_lag.Cadence.OLD.value)}
    pairs = [(new[r]["lag_s"], old[r]["lag_s"]) for r in sorted(new.keys() & old.keys())
             if new[r].get("lag_s") is not None and old[r].get("lag_s") is not None]
    if pairs:
        shorter = sum(1 for a, b in pairs if a < b)
        median_new = statistics.median(a for a, _ in pairs)
        lines += [f"The new cadence's lag was the shorter in {shorter} of {len(pairs)} paired deletions. Issue 10's "
                  f"target is a median lag ≤ {LAG_TARGET_S:g} s against a real vLLM; here it is "
                  f"{median_new:.2f} s against the emulator ({'within' if median_new <= LAG_TARGET_S else 'over'} "
                  "the target). This is the engine emulator on loopback, not a real vLLM: a real engine's /metrics "
                  "read under load may take longer, and that time adds to the lag.", ""]
    return lines


# --- the section ---------------------------------------------------------------------------------------

def _concurrency(cells: list[dict], settings: dict) -> str:
    lag_cells = sum(1 for c in cells if c.get("family") == return_lag.FAMILY)
    if "lag_jobs" not in settings or not lag_cells:  # results from before the lag had its own pool
        return f"{settings['jobs']} at a time"
    return (f"{len(cells) - lag_cells} of them {settings['jobs']} at a time, then the {lag_cells} return-lag "
            f"ones (a timing) {settings['lag_jobs']} at a time")


def render(part: dict) -> list[str]:
    cells = part["cells"]
    settings = part["settings"]
    lines = ["## Drain every configuration", "",
             "The same machinery as the drain matrix (each cell one real Pod deletion: engine emulator processes, a "
             "router load on fresh connections, kubelet's emulation, prestop as a real process), for the "
             "configurations issue 10 names. Every prestop here also gets `--quiet --proc-root` at an empty "
             "directory: in a Pod the hook sees only its own container's processes, while this machine's /proc "
             "shows every emulated engine and test running here, whose command lines the hook would otherwise "
             "take for its engine's (its kind, role and port). "
             f"{len(cells)} deletions, {_concurrency(cells, settings)}, {part['cpu']['wall_s'] / 60:.1f} min. "
             "Repeats per cell: " + ", ".join(f"{k} {v}" for k, v in settings["repeats"].items()) + "; each "
             "repeat its own seed, the same for every strategy. Numbers are medians over the repeats, with "
             "(min–max) when they differ.", ""]
    family = {f: [c for c in cells if c.get("family") == f] for f in
              (split_roles.FAMILY, leader_worker.FAMILY, shutdown_timeout.FAMILY, return_lag.FAMILY)}
    if family[split_roles.FAMILY]:
        lines += _split_roles(family[split_roles.FAMILY])
    if family[leader_worker.FAMILY]:
        lines += _leader_worker(family[leader_worker.FAMILY])
    if family[shutdown_timeout.FAMILY]:
        lines += _shutdown_timeout(family[shutdown_timeout.FAMILY])
    if family[return_lag.FAMILY]:
        lines += _return_lag(family[return_lag.FAMILY])
    errors = [c for c in cells if c.get("error")]
    if errors:
        lines += ["Deletions that failed (left out of the tables above):", ""]
        lines += [f"- {' / '.join(str(v) for k, v in c.items() if k in ('family', 'role', 'grace_s', 'scenario', 'strategy', 'repeat'))}: "
                  f"`{c['error']}`" for c in errors]
        lines.append("")
    return lines
