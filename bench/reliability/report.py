"""The `reliability` part's figures (bench/reliability/part.py) as a section of bench/RESULTS.md.

Every table names the command that produced it; the headline table comes first, every run after.
"""

from __future__ import annotations

from typing import Iterable

from bench.reliability.cases import DEADLINE_S, EXIT_RESERVE_S, GRACE_S, ROUTE_WAIT_S
from bench.reliability.hostile import OVERRUN_TOLERANCE_S
from bench.tables import DASH as _DASH
from bench.tables import table as _table
from modeldrain.hook.events import MAX_LINE_BYTES


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def _signed(value: float | None) -> str:
    return _DASH if value is None else f"{value:+.2f}"


def _rate(client: dict) -> str:
    return f"{client['ok']}/{client['requests']}"


def _problems(items: Iterable[str]) -> str:
    found = [p for p in items if p]
    return "**" + "; ".join(found) + "**" if found else "ok"


def section(rel: dict) -> list[str]:
    lines = ["## Reliability under hostile input (issue 12)", "",
             "The real programs, over real sockets, with real signals: every figure below names the command "
             "that reproduces it (`python -m bench.run --parts reliability" + (" --quick" if rel.get("quick") else "")
             + "` reruns them all). A problem is printed in bold; `ok` means the program did what a correct "
             "one does.", ""]
    lines += _headline(rel)
    lines += _hostile_lines(rel["hostile"])
    lines += _sidecar_lines(rel["sidecar"])
    lines += _fuzz_lines(rel["fuzz"])
    lines += _availability_lines(rel["availability"])
    if "drain_route" in rel:  # results from before issue 15 have none
        lines += _drain_route_lines(rel["drain_route"])
    return lines


def _headline(rel: dict) -> list[str]:
    h, s, f, a = rel["hostile"], rel["sidecar"], rel["fuzz"], rel["availability"]
    summary = h["summary"]
    answers = s["answers"]
    bad_status = sum(1 for x in answers if x["status"] == 500)
    sidecar_false_idles = sum(1 for x in answers if "false idle" in x["problems"])
    healthz_max = max((x["healthz_ms"] for x in answers if x["healthz_ms"] is not None), default=None)
    scenarios = a["scenarios"] + ([a["soak"]] if a.get("soak") else [])
    worst = min(((c["success_rate"], name, sc["scenario"]) for sc in scenarios for name, c in sc["clients"].items()),
                default=None)
    rows = [
        ["hostile inputs tried on `prestop`", f"{summary['cases']} cases, {summary['runs']} runs "
         f"({', '.join(h['executables'].values())})", f"`{h['command']}`"],
        ["crashes (a traceback, an undocumented exit, an unsent signal)", str(summary["crashes"]), ""],
        ["false idles (idle while the engine was not)", str(summary["false_idles"]), ""],
        [f"overruns (an exit over {OVERRUN_TOLERANCE_S:g} s past G − reserve)",
         f"{summary['overruns']}; worst lateness of an exit {summary['max_lateness_s']:+.2f} s "
         f"[{summary['max_lateness_case']}]; of a final line, by the hook's own clock, "
         f"{_signed(summary.get('max_own_lateness_s'))} s", ""],
        ["other exits than a correct hook's", str(summary["unexpected_exits"]), ""],
        ["longest log line", f"{summary['longest_log_line']:,} bytes (cap {MAX_LINE_BYTES:,})", ""],
        ["drain-sidecar: the same bodies", f"{len(answers)} bodies: {bad_status} × HTTP 500, {sidecar_false_idles} "
         f"false idles; /healthz during a read ≤ {healthz_max} ms", f"`{s['command']}`"],
        ["fuzz examples run", f"{f['examples_run']:,} ({f['examples_per_property']:,} per property), "
         f"{f['violations']} violations, {f['seconds']:.0f} s", f"`{f['command']}`"],
    ]
    if "drain_route" in rel:
        d = rel["drain_route"]
        outcomes = ", ".join(f"{c['kubelet_status']} {c['kubelet_outcome'] or _DASH}" for c in d["cases"])
        rows.append(["drain-route abuse (pre-answering, shortening, flooding kubelet's call)",
                     f"{len(d['cases'])} cases, {d['false_idles']} false idles, {d['problems']} with a problem; "
                     f"kubelet's call: {outcomes}", f"`{d['command']}`"])
    if worst is not None:
        rows.append(["sidecar availability under flood, slowloris, slot holders",
                     f"lowest success rate {worst[0]:.1%} ({worst[1]}, {worst[2]})", f"`{a['command']}`"])
    if a.get("soak") and a["soak"].get("memory"):
        m = a["soak"]["memory"]
        rows.append([f"sidecar RSS over a {a['soak']['seconds']:g} s soak",
                     f"{m['rss_start_kib'] / 1024:.1f} → max {m['rss_max_kib'] / 1024:.1f} → "
                     f"{m['rss_end_kib'] / 1024:.1f} MiB; slope {m['rss_slope_kib_per_min_second_half']:+.0f} "
                     "KiB/min (second half)", f"`{a['command']}`"])
    return _table(["figure", "measured", "command"], rows, "lll") + [""]


def _hostile_lines(h: dict) -> list[str]:
    names = list(h["executables"])
    lines = ["### prestop against hostile input", "",
             f"`{h['command']}`. Each run is one exec with a short window: `--grace {GRACE_S:g} --exit-reserve "
             f"{EXIT_RESERVE_S:g} --route-wait {ROUTE_WAIT_S:g}`, so its deadline is {DEADLINE_S:g} s after the exec "
             "(for `prestop check`, the read timeout). *Late* is its exit, timed by the bench from just before the "
             "exec, minus that deadline (negative: it returned earlier); *own* is its final line's `elapsed_s` (its "
             "own clock, from the kernel's record of its exec) minus the deadline: when it decided, before its "
             "process's teardown and the scheduler. The expected exit is a correct hook's, "
             "from the truth of the case (what the engine serves, or for the corpus, prometheus-client's parse of "
             "the whole body), never from what the hook did. The engine emulator's rows hold two requests in "
             "flight. *No descriptor left* lowers the hook's RLIMIT_NOFILE to its lowest free descriptor once it "
             "has logged its first line: its connect fails with EMFILE while the engine listens, as it does with "
             "the node's ephemeral ports exhausted (EADDRNOTAVAIL), which cannot be produced safely on a shared "
             "machine. −15: killed by SIGTERM before its handler was installed (documented in modeldrain/hook/bundle.py; the "
             "bundle's next start removes what its launchers left in $TMPDIR).", ""]
    groups = h["summary"].get("by_group", {})
    if groups:
        lines += ["Per class of input:", ""]
        lines += _table(["class", "cases", "runs", "crashes", "false idles", "overruns"],
                        ([_cell(g), str(c["cases"]), str(c["runs"]), str(c["crashes"]), str(c["false_idles"]),
                          str(c["overruns"])] for g, c in groups.items()), "lrrrrr")
        lines.append("")
    by_case: dict[str, dict[str, dict]] = {}
    order: list[str] = []
    for run in h["runs"]:
        if run["case"] not in by_case:
            order.append(run["case"])
            by_case[run["case"]] = {}
        by_case[run["case"]][run["executable"]] = run
    header = ["group", "case", "expected"]
    for name in names:
        header += [f"{h['executables'][name]} exit", "late, s", "own, s"]
    header += ["what the hook said", "problems"]
    rows = []
    for case in order:
        runs = by_case[case]
        first = next(iter(runs.values()))
        row = [first["group"], _cell(case), "/".join(str(c) for c in first["expected"])]
        for name in names:
            run = runs.get(name)
            row += ([str(run["exit_code"]), f"{run['lateness_s']:+.2f}", _signed(run.get("own_lateness_s"))] if run
                    else [_DASH, _DASH, _DASH])
        said = f"{first['outcome'] or _DASH}: {first['detail']}" if first["detail"] else (first["outcome"] or _DASH)
        left = [f"{n}: {r['temp_left']} left in $TMPDIR" for n, r in runs.items() if r["temp_left"]]
        row += [_cell(said[:160] + ("; " + "; ".join(left) if left else "")),
                _problems(f"{n}: {p}" for n, r in runs.items() for p in r["problems"])]
        rows.append(row)
    lines += _table(header, rows, "llr" + "rrr" * len(names) + "ll")
    return lines + [""] + _class_lines(h["runs"])


def _class_lines(runs: list[dict]) -> list[str]:
    """Per class of hostile input (a case's group): cases, runs, crashes, false idles, overruns."""
    groups: dict[str, list[dict]] = {}
    for run in runs:
        groups.setdefault(run["group"], []).append(run)

    def count(items: list[dict], prefix: str) -> str:
        return str(sum(1 for r in items if any(p.startswith(prefix) for p in r["problems"])))

    rows = [[group, str(len({r["case"] for r in items})), str(len(items)), count(items, "crash"),
             count(items, "false idle"), count(items, "overrun")] for group, items in groups.items()]
    return ["Per class:", ""] + _table(["class", "cases", "runs", "crashes", "false idles", "overruns"], rows,
                                       "lrrrrr") + [""]


def _sidecar_lines(s: dict) -> list[str]:
    lines = ["### drain-sidecar against hostile input", "",
             f"`{s['command']}`: the real sidecar (with a token file, and a /proc showing a real process "
             "`vllm serve --port ²`) reading a scripted listener that serves each body in turn; per body, the "
             "controller's GET /v1/work and a /healthz sent 50 ms into that read.", ""]
    rows = [[_cell(a["case"]), str(a["status"]), f"{a['verdict']} ({a['outcome']})" if a["verdict"] else _DASH,
             f"{a['seconds']:.2f}", f"{a['healthz_ms']}", _problems(a["problems"])] for a in s["answers"]]
    lines += _table(["body", "/v1/work", "verdict (outcome)", "seconds", "/healthz meanwhile, ms", "problems"],
                    rows, "lrlrrl")
    start, swapped, fifo, term, unknown = (s["start_with_port_superscript"], s["token_swapped_for_fifo"],
                                           s["token_fifo_at_start"], s["sigterm_mid_parse"], s["unknown_path"])
    lines += ["",
              f"- Started with a visible engine whose `--port` is `²`: /healthz {start['healthz_status']} — "
              f"{_problems(start['problems'])}.",
              f"- An unknown path: {unknown['status']}, the path {'**echoed**' if unknown['echoed'] else 'not echoed'} "
              f"— {_problems(unknown['problems'])}.",
              f"- Token file swapped for a FIFO while running: /v1/work {swapped['work_status']} in "
              f"{swapped['work_ms']} ms (fails closed), /healthz {swapped['healthz_status']} in "
              f"{swapped['healthz_ms']} ms — {_problems(swapped['problems'])}.",
              f"- `--token-file` a FIFO at start: exit {fifo['exit_code']} in {fifo['seconds']} s "
              f"(`{_cell(fifo.get('message', ''))}`) — {_problems(fifo['problems'])}.",
              f"- SIGTERM while a read parses a {term['body_bytes'] / 1e6:.1f} MB body of lines at the cap, "
              f"`--linger-max 1`: exit {term['exit_code']} {term['seconds']} s after the signal (bound "
              f"{term['bound_s']:g} s: the linger and aiohttp's two shutdown waits) — {_problems(term['problems'])}.",
              f"- A traceback in the sidecar's log: {'**yes**' if s['traceback_in_log'] else 'none'}.", ""]
    return lines


def _fuzz_lines(f: dict) -> list[str]:
    lines = ["### Differential fuzzing", "",
             f"`{f['command']}` ({f['seconds']:.0f} s; pytest: "
             f"{', '.join(f'{v} {k}' for k, v in f['tests'].items()) or 'no summary'}). Counts are Hypothesis' own "
             "statistics; the corpus of bodies and streams that once broke a reader is replayed by the same files. "
             "A violation is a failing example or a failed test.", ""]
    rows = [[f"`{name.split('::')[-1]}`", f"{p['passing']:,}", str(p["failing"]), str(p["invalid"]),
             f"{p['seconds']:.1f}"] for name, p in f["properties"].items()]
    lines += _table(["property", "passing examples", "failing", "invalid (filtered)", "generate s"], rows, "lrrrr")
    lines += ["", f"Violations: {f['violations']}." + (f" Exit {f['exit_code']}." if f["exit_code"] else ""), ""]
    return lines


def _availability_lines(a: dict) -> list[str]:
    lines = ["### drain-sidecar availability under attack, and its memory over a soak", "",
             f"`{a['command']}`: the real sidecar (default `--max-connections` 64, a token file) reading a scripted "
             "engine that serves vLLM's real idle exposition. An attacker process with no token "
             "(`bench/reliability/attack.py`) runs each scenario while the controller reads /v1/work with the token "
             f"every {a['controller_every_s']:g} s ({a['controller_timeout_s']:g} s timeout) and kubelet's probes "
             f"read /healthz and /readyz every {a['probe_every_s']:g} s ({a['probe_timeout_s']:g} s timeout, "
             "kubelet's default), each a fresh connection. Success: a 200 within the timeout; p50/p99 over every "
             f"request. *Evicted* and *503* are the sidecar's own counters over the scenario. RSS at start: "
             f"{a['sidecar_rss_at_start_kib'] / 1024:.1f} MiB.", ""]
    rows = []
    scenarios = a["scenarios"] + ([a["soak"]] if a.get("soak") else [])
    for sc in scenarios:
        for index, (name, c) in enumerate(sc["clients"].items()):
            failures = ", ".join(f"{k} × {v}" for k, v in c["failures"].items())
            head = [f"{sc['scenario']} ({sc['seconds']:g} s)", _cell(sc["attack"])] if index == 0 else ["", ""]
            counters = [str(sc["evicted"]), str(sc["rejected_503"])] if index == 0 else ["", ""]
            rows.append(head + [name, _rate(c), f"{c['p50_ms']}", f"{c['p99_ms']}", failures or _DASH] + counters)
    lines += _table(["scenario", "attacker", "client", "ok", "p50 ms", "p99 ms", "failures", "evicted", "503"],
                    rows, "lllrrrlrr")
    lines.append("")
    attackers = [(sc["scenario"], sc["attacker"]) for sc in scenarios if sc["attacker"]]
    if attackers:
        lines += ["What the attacker itself got (connections opened; answers by status; connections the sidecar "
                  "closed under it):", ""]
        for scenario, tally in attackers:
            parts = [f"{kind}: {t['opened']:,} opened, answers {t['answers'] or '{}'}, {t['closed_by_server']:,} "
                     f"closed by the sidecar" for kind, t in tally.items() if t["opened"]]
            lines.append(f"- {scenario}: " + "; ".join(parts))
        lines.append("")
    soak = a.get("soak")
    if soak and soak.get("memory"):
        m = soak["memory"]
        lines += [f"Soak: {soak['seconds']:g} s of every attacker at once, RSS and open descriptors sampled every "
                  f"{m['every_s']} s from /proc ({m['samples']} samples): RSS {m['rss_start_kib'] / 1024:.1f} MiB at "
                  f"its start, {m['rss_max_kib'] / 1024:.1f} MiB at most, {m['rss_end_kib'] / 1024:.1f} MiB at its "
                  "end; least-squares slope over the second half "
                  f"{m['rss_slope_kib_per_min_second_half']:+.0f} KiB/min. "
                  f"Open descriptors {m['fds_start']} → max {m['fds_max']} → {m['fds_end']}.", ""]
    if a.get("traceback_in_log"):
        lines += ["**A traceback appeared in the sidecar's log.**", ""]
    return lines


def _drain_route_lines(d: dict) -> list[str]:
    lines = ["### Abuse of GET /v1/drain (issue 15)", "",
             f"`{d['command']}`: the real sidecar (no token: the route takes none) reading the engine emulator; "
             "kubelet calls from 127.0.0.1, strangers from other loopback addresses, as a node and other Pods do. "
             "*In flight* is the engine's own count right after kubelet's answer: an idle answer while it is above "
             "0 is a false idle. A correct answer takes at least kubelet's own route wait and two idle reads, and a "
             "deadline comes at its own G − 5.", ""]
    rows = [[_cell(c["case"]), _cell(c["attack"]), str(c["kubelet_status"]), c["kubelet_outcome"] or _DASH,
             f"{c['kubelet_seconds']:.2f}", _DASH if c["in_flight_at_answer"] is None else f"{c['in_flight_at_answer']:g}",
             ", ".join(f"{k} × {v}" for k, v in c["strangers"].items()) or _DASH, _problems(c["problems"])]
            for c in d["cases"]]
    lines += _table(["case", "attack", "kubelet's status", "outcome", "seconds", "in flight", "strangers got",
                     "problems"], rows, "llrlrrll")
    lines += ["", f"False idles: {d['false_idles']}. A traceback in the sidecar's log: "
              f"{'**yes**' if d['traceback_in_log'] else 'none'}.", ""]
    return lines
