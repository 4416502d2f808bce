"""Real vLLM in one serving configuration (its flags), deleted with prestop: what the hook returns
on a replica that has served nothing, or how long after the last request it returns under load,
and what `/metrics` and `GET /load` say while requests run.

    .venv/bin/python -m bench.engines.configurations --idle --repeats 3 -- --api-server-count 2
    .venv/bin/python -m bench.engines.configurations --repeats 3 -- --enable-server-load-tracking
    .venv/bin/python -m bench.engines.configurations --sample -- --api-server-count 2 --enable-server-load-tracking

Needs the real-engine tier (`make engines`). Every deletion starts a fresh engine. `--idle`: the
engine is deleted as soon as /health answers, having served nothing; the figure is the hook's
return after the delete. Otherwise the load is the tier's smoke load (tests/engines/test_deletions.py):
eight clients sending 6-9 s completions, the replica dropped 3 s after the delete; the figure is
the hook's return after the last request ended. `--sample`: no deletion; 8 requests sent at once
and `/metrics`' work gauges and `/load` read every 0.15 s (each on a new connection) until they end.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from bench.engines import command
from bench.engines.lifecycle import scrape
from bench.paths import PRESTOP_CONSOLE_SCRIPT
from emulation.kubelet import delete_pod
from emulation.load import LoadGenerator, UniformDurations
from engines import tier as tier_module
from engines.servers import RealEngine, completion_body, proc_root_of

PRESTOP = str(PRESTOP_CONSOLE_SCRIPT)
GRACE_S = 30
ROUTE_LAG_S = 3.0
DURATIONS = UniformDurations(6.0, 9.0)
CONCURRENCY = 8
WARM_LOAD_S = 3.0
SAMPLE_EVERY_S = 0.15
WORK_GAUGES = ("vllm:num_requests_running", "vllm:num_requests_waiting")


def hook_events(stderr: str) -> list[dict]:
    return [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]


def one_deletion(tier: tier_module.Tier, flags: list[str], idle: bool, seed: int) -> dict:
    with RealEngine.vllm(tier, *flags) as engine:
        load = None
        if not idle:
            load = LoadGenerator(engine.base_url, concurrency=CONCURRENCY, durations=DURATIONS, seed=seed,
                                 request_body=completion_body(engine.kind)).start()
            time.sleep(WARM_LOAD_S)
        hook = [PRESTOP, "--grace", str(GRACE_S), "--port", str(engine.port), "--proc-root", proc_root_of(engine),
                "--quiet"]
        assert engine.process is not None
        report = delete_pod(engine.process, hook, GRACE_S, load=load,
                            route_drop_after_s=None if idle else ROUTE_LAG_S)
        start_s = engine.start_s
    events = hook_events(report.hook_stderr)
    row = {"flags": flags, "idle": idle, "start_s": round(start_s or 0.0, 1), "hook_exit_code": report.hook_exit_code,
           "outcome": events[-1].get("outcome") if events else None, "hook_return_s": round(report.sigterm_at, 3),
           "engine_exit_code": report.engine_exit_code, "sigkill": report.sigkill_at is not None,
           "idle_details": sorted({e["detail"] for e in events if e.get("event") in ("read_state", "progress")
                                   and e.get("outcome") == "idle"})}
    if report.load is not None:
        last_done = report.relative(report.load.last_finished_at)
        row.update(load=report.load.summary(), last_request_done_s=None if last_done is None else round(last_done, 3),
                   return_lag_s=None if last_done is None else round(report.sigterm_at - last_done, 3))
    return row


def work_lines(body: bytes) -> list[str]:
    return [line for line in body.decode(errors="replace").splitlines()
            if line.split("{", 1)[0].split(" ", 1)[0] in WORK_GAUGES]


def sample(tier: tier_module.Tier, flags: list[str]) -> dict:
    with RealEngine.vllm(tier, *flags) as engine:
        idle = scrape(engine.port, "/metrics") or b""
        load = LoadGenerator(engine.base_url, concurrency=CONCURRENCY, durations=DURATIONS, seed=7,
                             max_requests=CONCURRENCY, request_body=completion_body(engine.kind)).start()
        started = time.monotonic()
        while load.tally().in_flight == 0 and time.monotonic() - started < 10:
            time.sleep(0.02)
        samples = []
        while load.tally().in_flight:
            body = scrape(engine.port, "/metrics") or b""
            answer = scrape(engine.port, "/load")
            samples.append({"t": round(time.monotonic() - started, 2), "in_flight": load.tally().in_flight,
                            "work": work_lines(body), "load": None if answer is None else answer.decode()})
            time.sleep(SAMPLE_EVERY_S)
        tally = load.wait(timeout_s=60)
        after = scrape(engine.port, "/metrics") or b""
    return {"flags": flags, "never_served_work_lines": work_lines(idle) + [
        line for line in idle.decode(errors="replace").splitlines()
        if line.startswith(("# TYPE vllm:num_requests_running", "# TYPE vllm:num_requests_waiting"))],
        "samples": samples, "load": tally.summary(), "served_work_lines": work_lines(after)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.engines.configurations", description=__doc__.split("\n\n")[0])
    parser.add_argument("--idle", action="store_true", help="delete the replica having served nothing")
    parser.add_argument("--sample", action="store_true", help="read /metrics and /load under 8 requests; no deletion")
    parser.add_argument("--repeats", type=int, default=3, help="deletions, each a fresh engine (default 3)")
    parser.add_argument("--json", type=Path, help="write the rows here")
    parser.add_argument("flags", nargs="*", help="vLLM's flags, after --")
    args = parser.parse_args(argv)
    tier = command.tier("python -m bench.engines.configurations")
    if args.sample:
        result: dict = sample(tier, args.flags)
    else:
        rows = []
        for index in range(args.repeats):
            rows.append(one_deletion(tier, args.flags, args.idle, seed=7 + index))
            print(json.dumps(rows[-1]), flush=True)
        figure = "hook_return_s" if args.idle else "return_lag_s"
        figures = [r[figure] for r in rows if r.get(figure) is not None]
        result = {"rows": rows, "figure": figure, "median_s": statistics.median(figures) if figures else None}
    text = json.dumps(result, indent=1)
    if args.json:
        args.json.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
