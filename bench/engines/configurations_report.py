"""RESULTS.md's section for bench/engines/configurations.py --merge: real vLLM with the flags people
scale it with (`--api-server-count 2`, `--data-parallel-size 2`, `--enable-server-load-tracking`),
deleted under load and having served nothing, each deletion beside its emulator twin, and issue 26's
targets judged on the real engine.
"""

from __future__ import annotations

import statistics
from typing import Sequence

from bench.tables import DASH, number, table

PART = "real_engine_configurations"  # its key in bench/results.json

LOAD_FLAG = "--enable-server-load-tracking"
API_SERVERS = "--api-server-count 2"
# Issue 26's targets on the real engine: with /load, the median from the last request's end to the
# hook's return over the deletions under load, and a never-served replica's return after the delete;
# with several API servers, a never-served replica's return (deliverable 3).
LOAD_LAG_TARGET_S = 0.5
LOAD_IDLE_TARGET_S = 5.5
API_SERVERS_IDLE_TARGET_S = 6.5
LOST_KEYS = ("cut", "rejected", "refused", "other")


def lost(row: dict) -> int:
    return sum(int(row.get(k) or 0) for k in LOST_KEYS)


def _of(row: dict | None, key: str) -> float | None:
    return None if row is None else row.get(key)


def _requests(row: dict | None) -> str:
    if row is None:
        return DASH
    return f"{row['completed']}/{row['cut']}/{row['rejected']}/{row['refused']}"


def _hook(row: dict | None) -> str:
    if row is None:
        return DASH
    return f"{row['hook_exit_code']} {row['outcome'] or DASH}" + (", SIGKILL" if row["sigkill"] else "")


def twin_of(rows: Sequence[dict], real: dict) -> dict | None:
    found = [r for r in rows if r["backend"] == "emulator" and r["configuration"] == real["configuration"]
             and r["idle"] == real["idle"] and r["repeat"] == real["repeat"]]
    return found[0] if found else None


def _real(rows: Sequence[dict], configuration: str, idle: bool) -> list[dict]:
    return [r for r in rows if r["backend"] == "real" and r["configuration"] == configuration and r["idle"] == idle]


def _median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def targets(rows: Sequence[dict]) -> list[str]:
    """Each target in words, with the real engine's figures and whether it was met."""
    out = []
    loaded = _real(rows, LOAD_FLAG, idle=False)
    lag = _median([r.get("return_lag_s") for r in loaded])
    if lag is not None:
        whole = all(lost(r) == 0 and r["hook_exit_code"] == 0 for r in loaded)
        met = lag <= LOAD_LAG_TARGET_S and whole
        out.append(f"`{LOAD_FLAG}` under load: the last request's end to the hook's return, median "
                   f"**{lag:.3f} s** over {len(loaded)} deletions ("
                   + ", ".join(number(r.get("return_lag_s"), 3) for r in loaded)
                   + f"; target ≤ {LOAD_LAG_TARGET_S:g} s, nothing cut): " + ("**met**" if met else "**not met**"))
    for configuration, target in ((LOAD_FLAG, LOAD_IDLE_TARGET_S), (API_SERVERS, API_SERVERS_IDLE_TARGET_S)):
        idle = _real(rows, configuration, idle=True)
        if not idle:
            continue
        worst = max(r["hook_return_s"] for r in idle)
        met = worst <= target and all(r["hook_exit_code"] == 0 and r["outcome"] == "idle" for r in idle)
        out.append(f"`{configuration}` having served nothing: the hook returned "
                   + ", ".join(f"{r['hook_return_s']:.3f}" for r in idle)
                   + f" s after the delete (exit {', '.join(str(r['hook_exit_code']) for r in idle)}; target ≤ "
                   f"{target:g} s, exit 0): " + ("**met**" if met else "**not met**"))
    return out


def disagreements(rows: Sequence[dict]) -> list[str]:
    """Where a twin behaved unlike its real deletion: lost requests on one side, another hook exit or
    outcome, a SIGKILL on one side."""
    out = []
    for real in (r for r in rows if r["backend"] == "real"):
        twin = twin_of(rows, real)
        if twin is None:
            continue
        name = f"{real['configuration']}{' (never served)' if real['idle'] else ''}, repeat {real['repeat'] + 1}"
        if (lost(real) == 0) != (lost(twin) == 0):
            out.append(f"{name}: requests lost real {lost(real)}, emulated {lost(twin)}")
        if (real["hook_exit_code"], real["outcome"]) != (twin["hook_exit_code"], twin["outcome"]):
            out.append(f"{name}: the hook ended {_hook(real)} on the real engine, {_hook(twin)} on the emulator")
        if real["sigkill"] != twin["sigkill"]:
            out.append(f"{name}: SIGKILL on the {'real engine' if real['sigkill'] else 'emulator'} only")
    return out


def render(part: dict) -> list[str]:
    rows = part["rows"]
    real_rows = [r for r in rows if r["backend"] == "real"]
    starts = sorted(r["start_s"] for r in real_rows if r.get("start_s"))
    speeds = sorted(1000 * r["seconds_per_token"] for r in real_rows if r.get("seconds_per_token"))
    low, high = part["durations_s"]
    lines = ["## Real vLLM serving configurations beside the emulator (bench/engines/configurations.py)", "",
             f"`{part['command']}` ({part['engine']}): {len(real_rows)} deletions of real vLLM, a fresh engine "
             "each, one at a time, then each again on its emulator twin (the emulator launched under the same vLLM "
             f"command line, the same seed and hook); {part['wall_s'] / 60:.1f} min, load average "
             f"{part['load_average_after_real']} when the real deletions ended (each row's own is in "
             f"bench/results.json). G = {part['grace_s']:g} s. Under load: {part['concurrency']} clients sending "
             f"{low:g}–{high:g} s completions, the router dropping the replica {part['route_lag_s']:g} s after the "
             "delete; never served: deleted as soon as /health answered. The hook sees the engine's process alone, "
             "as in its Pod."
             + (f" Real start-up to /health: {starts[len(starts) // 2]:.0f} s ({starts[0]:.0f}–{starts[-1]:.0f})."
                if starts else "")
             + (f" A real engine's requests ask for max_tokens at its speed measured just before its load (8 requests "
                f"at once): {speeds[0]:.1f}–{speeds[-1]:.1f} ms a token, so they run about as long as asked."
                if speeds else ""), "",
             "*Requests*: completed/cut/rejected/refused. *Last end*: the last request's end after the delete, s. "
             "*Return*: the hook's return (kubelet's SIGTERM) after the delete, s. *Lag*: return minus last end. "
             "*Hook*: prestop's exit code and outcome.", ""]
    header = ["configuration", "repeat", "requests: real", "emulated", "last end: real", "emulated",
              "return: real", "emulated", "lag: real", "emulated", "hook: real", "emulated"]
    loaded = []
    for real in (r for r in real_rows if not r["idle"]):
        twin = twin_of(rows, real)
        loaded.append([f"`{real['configuration']}`", str(real["repeat"] + 1), _requests(real), _requests(twin),
                       number(real.get("last_request_done_s"), 2), number(_of(twin, "last_request_done_s"), 2),
                       number(real["hook_return_s"], 2), number(_of(twin, "hook_return_s"), 2),
                       number(real.get("return_lag_s"), 2), number(_of(twin, "return_lag_s"), 2),
                       _hook(real), _hook(twin)])
    if loaded:
        lines += ["### Deleted under load", "", *table(header, loaded, "lrllrrrrrrll"), ""]
    idle_rows = []
    for real in (r for r in real_rows if r["idle"]):
        twin = twin_of(rows, real)
        idle_rows.append([f"`{real['configuration']}`", str(real["repeat"] + 1), number(real["hook_return_s"], 2),
                          number(_of(twin, "hook_return_s"), 2), _hook(real), _hook(twin),
                          str(real["engine_exit_code"])])
    if idle_rows:
        lines += ["### Deleted having served nothing", "",
                  *table(["configuration", "repeat", "return: real", "emulated", "hook: real", "emulated",
                          "real engine's exit"], idle_rows, "lrrrllr"), ""]
    lines += ["Issue 26's targets, on the real engine:", "", *(f"- {t}" for t in targets(rows)), ""]
    differ = disagreements(rows)
    lines += ["Where a twin disagreed with its real deletion (requests lost on one side only, another hook exit or "
              "outcome, a SIGKILL on one side): " + ("none." if not differ else ""), "", *(f"- {d}" for d in differ)]
    return lines + ([""] if differ else [])
