"""The bench's results (bench/results.json) as bench/RESULTS.md: tables, each number with its spread.

    python -m bench.report [bench/results.json] [bench/RESULTS.md]   # re-render without re-running
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Callable

from bench.drains import report as report_configurations
from bench.drains.quality import SCENARIOS, Strategy
from bench.engines import configurations_report
from bench.engines import report as engines_report
from bench.fleet import report as fleet_report
from bench.reliability import report as reliability_report
from bench.spread import Spread
from bench.tables import DASH as _DASH
from bench.tables import MIN_SECONDS_DIFFERENCE, Judged, verdict
from bench.tables import count as _count
from bench.tables import metric as _metric
from bench.tables import ms as _ms
from bench.tables import seconds as _seconds
from bench.tables import table as _table
from modeldrain.sidecar.constants import MIN_READ_INTERVAL_S

HERE = Path(__file__).resolve().parent
DEFAULT_JSON = HERE / "results.json"
DEFAULT_MD = HERE / "RESULTS.md"

# Another workload using more than this many cores on average during a part is worth a note.
CONTENTION_NOTE_CORES = 0.25


# --- formatting ------------------------------------------------------------------------------------

def _mib(kib_values: list[float]) -> str:
    return Spread.of([v / 1024 for v in kib_values]).text(1) + " MiB"


def _size(n: int) -> str:
    if n >= 2**20:
        return f"{n / 2**20:.1f} MiB"
    if n >= 2**10:
        return f"{n / 2**10:.0f} KiB"
    return f"{n} B"


# --- drain quality ---------------------------------------------------------------------------------

def _cells(results: dict, grace_s: float, scenario: str, strategy: str) -> list[dict]:
    return [c for c in results["drain"]["cells"] if c["grace_s"] == grace_s and c["scenario"] == scenario
            and c["strategy"] == strategy and not c.get("error")]


def _drain_table(results: dict, grace_s: float) -> list[str]:
    header = ["scenario", "strategy", "completed", "cut", "refused", "engine exit, s", "held idle, s",
              "SIGKILL", "hook exit"]
    rows = []
    for scenario in SCENARIOS:
        for strategy in Strategy:
            cells = _cells(results, grace_s, scenario.name, strategy.value)
            if not cells:
                continue
            killed = sum(1 for c in cells if c["sigkill_at_s"] is not None)
            hook_codes = sorted({str(c["hook_exit_code"]) for c in cells if c["hook_exit_code"] is not None})
            rows.append([scenario.name, strategy.value, _count(_metric(cells, "completed")),
                         _count(_metric(cells, "cut")), _count(_metric(cells, "refused")),
                         _seconds(_metric(cells, "engine_exited_at_s")), _seconds(_metric(cells, "held_idle_s")),
                         f"{killed}/{len(cells)}", "/".join(hook_codes) or _DASH])
    return _table(header, rows, "llrrrrrrr")


# Metric, which way is better, how to show it.
_VERDICT_METRICS = (Judged.key("cut", True, "cut"), Judged.key("completed", False, "completed"),
                    Judged.key("engine_exited_at_s", True, "exit s"), Judged.key("held_idle_s", True, "held s"))


def _verdict_cell(ours: list[dict], theirs: list[dict]) -> str:
    return verdict(ours, theirs, _VERDICT_METRICS)


def _verdict_table(results: dict, grace_s: float) -> list[str]:
    others = [s for s in Strategy if s is not Strategy.PRESTOP]
    rows = []
    for scenario in SCENARIOS:
        ours = _cells(results, grace_s, scenario.name, Strategy.PRESTOP.value)
        if not ours:
            continue
        rows.append([scenario.name] + [_verdict_cell(ours, _cells(results, grace_s, scenario.name, s.value))
                                       for s in others])
    return _table(["scenario"] + [f"prestop vs {s.value}" for s in others], rows, "l" * (len(others) + 1))


def _drain_section(results: dict) -> list[str]:
    drain = results["drain"]
    settings = drain["settings"]
    graces = settings["graces_s"]
    lines = [
        "## Drain quality: prestop against the alternatives",
        "",
        "Each cell is one real Pod deletion: the engine emulator as a process (vLLM, aborting every request "
        "in flight on SIGTERM as vLLM does by default: no answer, and the process stays until those clients hang "
        "up, so under a router that waits, to kubelet's SIGKILL; with none waiting it exits ~0.5 s after SIGTERM, "
        "as the real vLLM did beside it, bench/engines/matrix.py), a router sending it completions "
        "on fresh connections, and the kubelet emulation (`emulation.kubelet.delete_pod`: preStop, SIGTERM when "
        "it returns, SIGKILL when the grace is spent). The router keeps sending for a random "
        f"{settings['route_lag_range_s'][0]:g}–{settings['route_lag_range_s'][1]:g} s after the delete. Every "
        "strategy gets the same scenario with the same seed (arrivals, durations, router lag) in each repeat; "
        "repeats differ in seed.",
        "",
        f"- **no hook**: SIGTERM at the delete. **sleep 5** / **sleep G−5**: Kubernetes' native `sleep` "
        f"preStop action. **prestop**: `{settings['prestop']} --grace G --port P --engine vllm --quiet`"
        f" ({settings['prestop_version']}).",
        f"- {settings['repeats']} repeat(s) per cell, {len(drain['cells'])} deletions, {settings['jobs']} at a time "
        f"(each its own engine and port), {drain['cpu']['wall_s'] / 60:.1f} min.",
        "- Numbers are the median over the repeats, with (min–max) when they differ.",
        "- **completed / cut / refused**: requests in flight at the delete or sent after it: answered in full; "
        "connection closed without a whole answer; connection refused (nothing sent; a router may retry it).",
        "- **engine exit**: seconds from the delete to the engine process's exit (the replica's accelerators "
        "and quota are free from then).",
        "- **held idle**: accelerator time wasted: engine exit − the end of the last request completed after "
        "the delete (− the delete when none was).",
        "- **SIGKILL**: runs in which kubelet had to kill the engine. **hook exit**: prestop's exit codes "
        "(0 drained, 10 deadline, 11 nothing to measure).",
        "",
        "Scenarios:",
        "",
    ]
    lines += _table(["scenario", "load"], ([s.name, s.description] for s in SCENARIOS), "ll")
    lines += [
        "",
        "**The hung engine** is an engine whose API server is wedged (a stuck event loop or a blocked CUDA call "
        "in the serving process): the kernel still accepts connections, but nothing is answered — neither "
        "`/metrics` (the emulator's `hang` misbehaviour) nor completions (every request asks for an hour) — "
        "and its SIGTERM handler never runs (`--on-sigterm ignore`), so only SIGKILL ends it. Hanging "
        "`/metrics` alone while completions carry on and SIGTERM works would be a different fault (a broken "
        "metrics endpoint), not a hung engine.",
        "**Wrong port** is the steady-short load with prestop pointed at a bound port nothing listens on; the "
        "other strategies read no port, so for them it is a second run of steady short.",
        "",
    ]
    for index, grace_s in enumerate(graces):
        lines += [f"### G = {grace_s:g} s{' (headline)' if index == 0 else ''}", ""]
        lines += _drain_table(results, grace_s)
        lines += ["", f"prestop against each alternative at G = {grace_s:g} s (medians shown). Repeats are paired: "
                  "repeat k of every strategy ran the same seed. A metric is named only where prestop's difference "
                  "from the alternative has the same sign in every pair; anything the spread could flip is a tie, "
                  f"and so is a difference in seconds under {MIN_SECONDS_DIFFERENCE:g} s (kubelet counts the hook's "
                  "time in whole seconds, so a hook that gives up at 25.04 s moves SIGKILL from 30.00 to 30.04 s).",
                  ""]
        lines += _verdict_table(results, grace_s)
        lines.append("")
    first_logs = [c["hook_first_log_s"] for c in drain["cells"] if c.get("hook_first_log_s") is not None]
    if first_logs:
        lines += [f"Under the matrix's concurrency, the delete (the hook's exec) to prestop's first log line took "
                  f"{_ms(first_logs)} (median, min–max over {len(first_logs)} hooks); alone, see the cost table "
                  "below.", ""]
    errors = [c for c in drain["cells"] if c.get("error")]
    if errors:
        lines += ["Cells that failed (left out of the tables above):", ""]
        lines += [f"- G={c['grace_s']:g} {c['scenario']} / {c['strategy']} #{c['repeat']}: `{c['error']}`"
                  for c in errors]
        lines.append("")
    return lines


# --- costs -----------------------------------------------------------------------------------------

def _executable_rows(executables: dict, columns: list[tuple[str, Callable[[list], str]]]) -> list[list[str]]:
    """A row per executable: its name, what it carries on disk, then each column's samples rendered
    (a dash where it has none)."""
    rows = []
    for name, e in executables.items():
        fp = e["footprint"]
        disk = _size(fp["bytes"]) + (" + Python" if "parts" in fp else "")
        rows.append([name, disk, *(render(e[key]) if e[key] else _DASH for key, render in columns)])
    return rows


def _executable_notes(executables: dict) -> list[str]:
    """A line per executable: where it is, its version, what it carries on disk, its failed runs."""
    lines = []
    for name, e in executables.items():
        fp = e["footprint"]
        detail = ", ".join(f"{k} {_size(v)}" for k, v in fp.get("parts", {}).items())
        lines.append(f"- **{name}**: `{e['path']}` — {e['version']}. On disk: {_size(fp['bytes'])}"
                     f"{' (' + detail + ')' if detail else ''}; {fp['note']}.")
        if e["failures"]:
            lines.append(f"  - {len(e['failures'])} failed run(s): `{e['failures'][0]}`")
    return lines


def _executables_section(title: str, intro: str, header: list[str], executables: dict,
                         columns: list[tuple[str, Callable[[list], str]]], definitions: str) -> list[str]:
    """A cost table of executables (one row each, after its name and size on disk), a line on each,
    then what each column means."""
    lines = [title, "", intro, ""]
    lines += _table(["executable", "on disk", *header], _executable_rows(executables, columns))
    lines.append("")
    lines += _executable_notes(executables)
    return lines + [definitions, ""]


def _prestop_section(prestop: dict) -> list[str]:
    return _executables_section(
        "### prestop: start-up, memory, size",
        f"{prestop['runs']} runs of each executable, alternating, after one warm-up run each; a whole drain "
        "against a raw listening socket that answers vLLM's real 47 KB idle exposition, `--route-wait 0 "
        f"--interval {prestop['interval_s']:g}`. Median (min–max). Absolute times drift between runs on a "
        "shared or virtual machine; the executables alternate run by run, so their difference within one "
        "run is the comparison to trust.",
        ["exec → first request", "exec → first log line", "peak RSS, largest process", "VmHWM, all its processes"],
        prestop["executables"],
        [("first_request_s", _ms), ("first_log_s", _ms), ("max_rss_kib", _mib), ("session_hwm_kib", _mib)],
        "- *exec → first request*: from just before the exec to the first read's bytes at the socket. "
        "*exec → first log line*: the hook's own `drain_started` elapsed_s, counted from the kernel's "
        "start time of the outermost process. *Peak RSS*: `/usr/bin/time -v` (the largest single process, "
        "in separate runs). *VmHWM, all processes*: the sum over every process of the exec (the bundle "
        "runs staticx's launcher, PyInstaller's bootloader and Python) when the second read arrives.")


def _sidecar_start_section(start: dict) -> list[str]:
    return _executables_section(
        "### drain-sidecar: start-up, memory, size",
        f"{start['runs']} runs of each executable, alternating, after one warm-up run each (bench/costs/sidecar.py): "
        "the sidecar on a free loopback port, `--engine vllm` and an engine port nothing listens on. "
        "Median (min–max).",
        ["exec → listening", "exec → first /healthz", "peak RSS, largest process", "VmHWM, all its processes",
         "PSS, all its processes", "unpacked into TMPDIR"],
        start["executables"],
        [("listening_s", _ms), ("first_answer_s", _ms), ("max_rss_kib", _mib), ("session_hwm_kib", _mib),
         ("session_pss_kib", _mib), ("unpacked_bytes", lambda sizes: _size(int(statistics.median(sizes))))],
        "- *exec → listening*: from just before the exec until a TCP connect to the sidecar's port "
        "succeeds (polled every 2 ms). *exec → first /healthz*: until `GET /healthz` answers 200. "
        "*Peak RSS*: `/usr/bin/time -v` (the largest single process, in separate runs). *VmHWM* and "
        "*PSS, all processes*: summed over every process of the exec (the bundle runs staticx's launcher, "
        "PyInstaller's bootloader and Python) 1 s after it listens. *Unpacked*: what the bundle writes "
        "into TMPDIR at each start and removes at exit.")


def _reading_section(reading: dict) -> list[str]:
    lines = ["### Reading an exposition: the hook's parse against prometheus-client's full parse", "",
             f"One process, {reading['rounds']} rounds, the two alternating (A B, then B A); each timing repeats "
             "its function for ~0.1 s. *hook*: `hook.exposition.parse` + `hook.work.measure` (vLLM's gauge set). *full "
             "parse*: `prometheus_client.parser.text_string_to_metric_families` consumed in full, then the work "
             "gauges summed. Both give the same sum (checked). Median per read (min–max over rounds); the ratio "
             "is taken round by round.", ""]
    header = ["body", "bytes", "lines", "families", "work series", "hook", "full parse", "full parse ÷ hook"]
    rows = []
    for b in reading["bodies"]:
        rows.append([b["body"], f"{b['bytes']:,}", f"{b['lines']:,}", str(b["families"]), str(b["work_series"]),
                     _ms(b["hook_s"], 2), _ms(b["full_parse_s"], 1), Spread.of(b["ratio"]).text(1) + "×"])
    lines += _table(header, rows)
    lines.append("")
    return lines


def _scrape_section(scrape: dict) -> list[str]:
    busy, idle = scrape["busy_interval_s"], scrape["interval_s"]
    lines = ["### A scrape's cost to the engine: prometheus-client rendering vLLM's /metrics", "",
             "A real vLLM answers each read of /metrics on its API server process with prometheus-client's "
             "`generate_latest` over its registry. bench/costs/scrape.py rebuilds that registry from the real "
             "families (real Counter, Gauge, Histogram and Summary objects with the scrape's names, help, labels "
             "and buckets; the process, platform and GC collectors), checks that it renders the same series, and "
             f"times the render: CPU time of the rendering thread, {scrape['rounds']} rounds, median (min–max). "
             f"prestop reads every {busy:g} s while work is in flight (`--busy-interval`), but never more "
             "often than every read's duration / 0.05 (`BUSY_READ_ENGINE_SHARE`), and every "
             f"{idle:g} s otherwise; the last columns are what those reads cost the engine, in cores. Not counted: "
             "the HTTP exchange around the render, and gzip (prestop asks for none).", ""]
    header = ["body", "bytes", "series", "CPU per render", "wall per render", "busy: reads/s", "busy: cost",
              f"idle: {1 / idle:g} read/s"]
    rows = []
    for b in scrape["bodies"]:
        busy_reads = f"{b['busy_reads_per_s']:.2g}" if "busy_reads_per_s" in b else f"{1 / busy:g}"
        rows.append([b["body"], f"{b['bytes']:,}", f"{b['series']:,}", _ms(b["cpu_s"], 2), _ms(b["wall_s"], 2),
                     busy_reads, f"{b['busy_cores']:.3f} cores", f"{b['idle_cores']:.3f} cores"])
    return lines + _table(header, rows) + [""]


def _sidecar_section(sidecar: dict) -> list[str]:
    lines = ["### drain-sidecar under load (bench/costs/sidecar_load.py)", ""]
    if sidecar.get("error"):
        return lines + [f"Failed: `{sidecar['error']}`", ""]
    report = sidecar["report"]
    lines += [f"`{sidecar['command']}`: the engine emulator (vLLM, ~47 KB) and the sidecar on loopback; one "
              "client reading every 250 ms as the controller does, then closed loops of 1 and 64 clients, "
              f"{sidecar['seconds']:g} s each. Client, sidecar and engine share the machine's cores. Sidecar RSS "
              f"at start: {report['sidecar_rss_at_start_kib'] / 1024:.1f} MiB.", ""]
    header = ["clients", "pause", "req/s", "p50", "p99", "engine reads/s", "answers per read", "errors",
              "RSS", "peak RSS"]
    rows = [[str(c["clients"]), f"{c['pause_ms']} ms", f"{c['throughput_rps']:,}", f"{c['p50_ms']} ms",
             f"{c['p99_ms']} ms", str(c["engine_reads_per_s"]), str(c["answers_per_read"]), str(c["errors"]),
             f"{c['rss_kib'] / 1024:.1f} MiB", f"{c['peak_rss_kib'] / 1024:.1f} MiB"] for c in report["cases"]]
    lines += _table(header, rows)
    lines += ["", "One run per case (the script's own design): p50/p99 are over every request of the run. With no "
              f"pause, p50 ≈ {MIN_READ_INTERVAL_S * 1000:.0f} ms is by design: consecutive engine reads start at "
              f"least `MIN_READ_INTERVAL_S` = {MIN_READ_INTERVAL_S:g} s apart (modeldrain/sidecar/constants.py), every answer "
              "waits for a read that started after it was asked, and concurrent askers share one read (answers "
              "per read).", ""]
    if report.get("retirements"):
        lines += _retirement_lines(report["retirements"])
    return lines


def _retirement_lines(cases: list[dict]) -> list[str]:
    times = cases[0]["retirements"]
    lines = ["### A retirement: what the controller costs the engine", "",
             f"The same script: the reference client (`modeldrain/retirement/client.py` `retire`, as `drain-sidecar retirement` "
             f"runs it) retires an idle replica {times} times per shape, each time to its verdict; medians per "
             "retirement. Engine reads are the emulator's own count; read time is the sidecar's read-duration "
             "histogram (fetch and parse of the ~47 KB exposition); a worker's read is of an engine that serves "
             "no metrics (a refused connection).", ""]
    header = ["replica", "verdict", "rounds", "wall time", "engine reads", "read time", "bytes from the engine",
              "worker reads"]
    rows = [[f"{c['case']} ({c['members']} Pod{'s' if c['members'] > 1 else ''})", "/".join(c["verdicts"]),
             f"{c['rounds_median']:g}", f"{c['wall_s_median']} s", f"{c['engine_reads_median']:g}",
             f"{c['engine_read_ms_median']} ms", f"{c['engine_kb_median']} kB", f"{c['worker_reads_median']:g}"]
            for c in cases]
    lines += _table(header, rows)
    lines += ["", "A busy replica costs one more read of each member per round (1.1 s) until it reads idle twice.", ""]
    return lines


# --- the whole ---------------------------------------------------------------------------------------

def _contention_lines(results: dict) -> list[str]:
    lines = []
    for part in ("prestop", "sidecar-start", "reading", "scrape", "sidecar", "reliability", "drain", "configurations"):
        cpu = results.get(part, {}).get("cpu")
        if not cpu:
            continue
        note = ""
        if cpu["others_cores"] > CONTENTION_NOTE_CORES:
            note = " — **other work shared the machine; this part's timings carry that**"
        steal = f" (hypervisor steal {cpu['steal_cores']:.2f})" if "steal_cores" in cpu else ""
        lines.append(f"- {part}: {cpu['wall_s']:.0f} s; this bench used {cpu['ours_cores']:.2f} cores on average, "
                     f"everything else {cpu['others_cores']:.2f}{steal}; load average {cpu['load_average']:g} at "
                     f"its end{note}.")
    return lines


def _rerun_lines(reruns: list[dict]) -> list[str]:
    if not reruns:
        return []
    lines = ["Parts rerun alone since (the numbers below are from each part's latest run):", ""]
    lines += [f"- {', '.join(r['parts'])}: `{r['command']}`, {r['finished']}, {r['wall_s'] / 60:.1f} min"
              for r in reruns]
    return lines + [""]


def _routerless_section(part: dict) -> list[str]:
    before, now, scan = part["before"], part["now"], part["scan"]
    lines = ["## A router-less scale-down of an idle replica (bench/drains/routerless.py)", "",
             f"`{part['command']}`, {part['finished']}: the Pod (engine emulator on `::`, drain-sidecar) and a client "
             "in two network namespaces on a link-local-only veth pair. The client sends "
             f"{now[0]['requests_started']} requests over its keep-alive connections, then stops (the endpoint's removal); the controller runs `retirement.retire(router=False)` "
             "and the engine is stopped at its decision (a request started and not answered by then is cut). Before: the same with a sidecar that cannot count connections "
             "(no evidence, as without connection counting).", ""]
    header = ["", "verdict (reason)", "endpoint removal to decision", "rounds", "requests cut",
              "keep-alives closed by the engine"]
    rows = [["before", f"{before['verdict']} ({before['reason']})", f"{before['decided_s']:.2f} s",
             str(before["rounds"]), str(before["requests_cut"]), str(before["connections_closed_by_engine"])]]
    rows += [[f"now, run {i}", f"{r['verdict']} ({r['reason']})", f"{r['decided_s']:.2f} s", str(r["rounds"]),
              str(r["requests_cut"]), str(r["connections_closed_by_engine"])] for i, r in enumerate(now, 1)]
    lines += _table(header, rows)
    lines += ["", f"Now: deleted {part['now_median_decided_s']:.2f} s (median) after the endpoint's removal: the "
              "engine's 5 s keep-alive timeout, then two connection-free reads and two idle reads in three rounds. "
              f"The connection scan with {scan['connections']:,} loopback connections ({scan['sockets']:,} sockets) "
              f"in the namespace: {scan['median_ms']} ms median, {scan['max_ms']} ms max over {scan['repeats']} "
              "scans, off the event loop.", ""]
    return lines


def _real_engines_section(part: dict) -> list[str]:
    """Real vLLM deletions (bench/engines/deletions.py) beside the emulator's tables above."""
    lines = ["## Real vLLM deletions under load (bench/engines/deletions.py)", "",
             f"`{part['command']}` ({part['engine']}; {part['wall_s'] / 60:.1f} min, load average "
             f"{part['load_average_at_end']} at the end): a fresh real engine per deletion, eight clients sending "
             "6-9 s completions, the replica dropped by the router 3 s after the delete, G = 30 s. *Held idle*: "
             "the engine's exit minus the end of the last request it completed. *Lag*: the last request's end "
             "to prestop's return (its SIGTERM).", ""]
    header = ["strategy", "completed", "cut", "rejected", "refused", "SIGKILL", "SIGTERM at, s", "engine exit, s",
              "held idle, s", "lag, s"]
    rows = [[r["strategy"], str(r["completed"]), str(r["cut"]), str(r["rejected"]), str(r["refused"]),
             "yes" if r["sigkill"] else "no", f"{r['sigterm_at_s']:.2f}",
             _DASH if r["engine_exit_s"] is None else f"{r['engine_exit_s']:.2f}",
             _DASH if r["held_idle_s"] is None else f"{r['held_idle_s']:.2f}",
             _DASH if r["return_lag_s"] is None else f"{r['return_lag_s']:.2f}"] for r in part["runs"]]
    lines += _table(header, rows)
    if part.get("return_lag_median_s") is not None:
        low, high = part["return_lag_range_s"]
        lines += ["", f"prestop's lag from the last request to its return: median {part['return_lag_median_s']:.2f} s "
                  f"({low:.2f}-{high:.2f}) over {sum(r['return_lag_s'] is not None for r in part['runs'])} real "
                  "deletions.", ""]
    return lines


def render(results: dict) -> str:
    meta = results["meta"]
    lines = [
        "# modeldrain benchmarks",
        "",
        f"Written by `{meta['command']}` (what `make bench` runs), {meta['finished']}; the run took "
        f"{meta['wall_s'] / 60:.1f} min.",
        "",
        f"Machine: {meta['nproc']} CPUs (`nproc`), {meta['cpu_model']}, Python {meta['python']}, "
        f"{meta['platform']}.",
        "",
        *_rerun_lines(meta.get("reruns", [])),
        "CPU use per part, from /proc/stat (what else ran on the machine meanwhile):",
        "",
        *_contention_lines(results),
        "",
    ]
    if "drain" in results:
        lines += _drain_section(results)
    if "configurations" in results:
        lines += report_configurations.render(results["configurations"])
    if "routerless" in results:
        lines += _routerless_section(results["routerless"])
    if "real_engines" in results:
        lines += _real_engines_section(results["real_engines"])
    if engines_report.PART in results:
        lines += engines_report.render(results[engines_report.PART])
    if configurations_report.PART in results:
        lines += configurations_report.render(results[configurations_report.PART])
    if "fleet" in results:
        lines += fleet_report.render(results["fleet"])
    lines += ["## Cost of every part", ""]
    if "prestop" in results:
        lines += _prestop_section(results["prestop"])
    if "sidecar-start" in results:
        lines += _sidecar_start_section(results["sidecar-start"])
    if "reading" in results:
        lines += _reading_section(results["reading"])
    if "scrape" in results:
        lines += _scrape_section(results["scrape"])
    if "sidecar" in results:
        lines += _sidecar_section(results["sidecar"])
    if "reliability" in results:
        lines += reliability_report.section(results["reliability"])
    return "\n".join(lines).rstrip() + "\n"


def write(results: dict, json_path: Path, md_path: Path) -> None:
    """The raw numbers, then the Markdown rendered from them."""
    json_path.write_text(json.dumps(results, indent=1) + "\n")
    md_path.write_text(render(results))


def merge(part: str, figures: dict) -> None:
    """One part's figures into the record, RESULTS.md rendered again: how a bench run outside
    `make bench` (the real engines', the router-less scale-down) adds its section."""
    results = json.loads(DEFAULT_JSON.read_text())
    results[part] = figures
    write(results, DEFAULT_JSON, DEFAULT_MD)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    source = Path(argv[0]) if argv else DEFAULT_JSON
    target = Path(argv[1]) if len(argv) > 1 else DEFAULT_MD
    target.write_text(render(json.loads(source.read_text())))
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
