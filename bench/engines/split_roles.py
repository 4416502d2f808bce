"""SGLang prefill/decode over mooncake TCP, measured on the real engine: which gauge of which server
shows a request at each stage, and what `prestop` makes of each server.

    python -m bench.engines.split_roles [--out FILE.json]

Needs the tier and its prefill/decode add-on (`make engines-pd`). It starts a real prefill server,
a real decode server and sglang-router pairing them (engines/pd.py), all on loopback, and:

1. sends bursts through the router while a sampler polls each server's /metrics every
   SAMPLE_INTERVAL_S; for each server it reports every queue gauge's peak, when each first read
   non-zero after the first send, and how long the gauges the hook reads for that server's role
   (modeldrain/hook/gauges.py) summed to zero while the client still had a request out;
2. runs `prestop check` against each server (is its gauge set complete);
3. deletes the decode server under load through emulation.kubelet.delete_pod with prestop (the
   policy drain_started logged, when SIGTERM came, when the engine exited, what was lost), then
   SIGTERMs the idle prefill server and times its exit; then the same with the roles swapped on
   a fresh pair (the prefill server deleted under load, the idle decode server SIGTERMed).

One pair at a time: the 2-core machine runs other suites beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

from bench.engines import command
from bench.engines.lifecycle import (
    LONG_PROMPT,
    ClientRequest,
    Sample,
    completion,
    gauges_of,
    post,
    sample_lines,
    scrape,
)
from emulation.kubelet import delete_pod
from emulation.load import LoadGenerator, UniformDurations
from engines.pd import PdPair
from engines.servers import RealEngine, completion_body, proc_root_of
from modeldrain.hook.gauges import (
    SCHEDULER_HEARTBEATS,
    SGLANG_HTTP_ACTIVE_GAUGE,
    SGLANG_HTTP_ROUTE_LABEL,
    EngineKind,
    Role,
    gauge_set,
)
from tests.e2e.prestop_run import PRESTOP

SAMPLE_INTERVAL_S = 0.05
TAIL_S = 4.0
QUEUE_GAUGES = ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:num_grammar_queue_reqs",
                "sglang:num_prefill_bootstrap_queue_reqs", "sglang:num_prefill_inflight_queue_reqs",
                "sglang:num_decode_prealloc_queue_reqs", "sglang:num_decode_transfer_queue_reqs",
                "sglang:num_decode_host_receive_queue_reqs", "sglang:num_decode_deferred_kv_release_reqs")
# The scheduler's heartbeat: the hook trusts a zero only when it moved since the reader's previous
# read, which an idle poll makes IDLE_READ_GAP_S earlier.
HEARTBEAT = SCHEDULER_HEARTBEATS[EngineKind.SGLANG]
IDLE_READ_GAP_S = 1.0
# SGLang's HTTP middleware gauge, moved on each request's arrival and when its handler returns (not
# on stats ticks): the series of the generation routes, not the scrapes' own /metrics or /health.
GENERATION_ENDPOINTS = ("/generate", "/v1/completions", "/v1/chat/completions")
HTTP_ACTIVE_GENERATION = "http_requests_active(generation routes)"
_ENDPOINT = re.compile(rf'{SGLANG_HTTP_ROUTE_LABEL}="([^"]*)"')


def http_active_generation(body: bytes) -> float:
    total = 0.0
    for name, labels, value in sample_lines(body):
        endpoint = _ENDPOINT.search(labels) if name == SGLANG_HTTP_ACTIVE_GAUGE else None
        if endpoint is not None and endpoint.group(1) in GENERATION_ENDPOINTS:
            total += float(value)
    return total
HOOK_GAUGES = {role: tuple(sorted(gauge_set(EngineKind.SGLANG, role).metric_names))
               for role in (Role.PREFILL, Role.DECODE)}

# The deletions: tests/engines/test_deletions.py's shape (requests of a few seconds, 8 at a time,
# the router dropping the replica 3 s after the delete).
GRACE_S = 30
ROUTE_LAG_S = 3.0
DURATIONS = UniformDurations(4.0, 6.0)
CONCURRENCY = 8
WARM_LOAD_S = 3.0
EXIT_WAIT_S = 60.0


@dataclass(frozen=True)
class Burst:
    name: str
    count: int
    body: dict


BURSTS = (
    Burst("completions", 16, completion(64)),
    Burst("long prompts", 8, completion(8, prompt=LONG_PROMPT)),
)


class Sampler(threading.Thread):
    def __init__(self, engine: RealEngine):
        super().__init__(daemon=True)
        self.engine = engine
        self.samples: list[Sample] = []
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            started = time.monotonic()
            body = scrape(self.engine.port, "/metrics")
            if body is not None:
                gauges = gauges_of(body, (*QUEUE_GAUGES, HEARTBEAT))
                gauges[HTTP_ACTIVE_GENERATION] = http_active_generation(body)
                self.samples.append(Sample((started + time.monotonic()) / 2, gauges, None))
            self._halt.wait(max(0.0, SAMPLE_INTERVAL_S - (time.monotonic() - started)))

    def stop(self) -> list[Sample]:
        self._halt.set()
        self.join()
        return self.samples


def server_view(role: Role, samples: list[Sample], records: list[ClientRequest]) -> dict:
    first_sent = min(r.sent_at for r in records)
    hook = HOOK_GAUGES[role]

    def out_at(t: float) -> int:
        return sum(1 for r in records if r.sent_at <= t and (r.done_at is None or r.done_at > t))

    shown = (*QUEUE_GAUGES, HTTP_ACTIVE_GENERATION)
    peak = {g: max((s.gauges.get(g, 0.0) for s in samples), default=0.0) for g in shown}
    first_seen = {g: round(next(s.t for s in samples if s.gauges.get(g, 0.0) > 0) - first_sent, 2)
                  for g in shown if peak[g] > 0}
    with_http = sum(b.t - a.t for a, b in zip(samples, samples[1:])
                    if out_at(a.t) > 0 and sum(a.gauges.get(g, 0.0) for g in (*hook, HTTP_ACTIVE_GENERATION)) == 0)
    def heartbeat_moved(i: int) -> bool:
        """Would the hook trust this zero: did the heartbeat move since a read IDLE_READ_GAP_S earlier?"""
        now = samples[i]
        earlier = next((s for s in reversed(samples[:i]) if s.t <= now.t - IDLE_READ_GAP_S), None)
        return earlier is not None and now.gauges.get(HEARTBEAT, 0.0) > earlier.gauges.get(HEARTBEAT, 0.0)

    zero_out = trusted = 0.0
    longest = run = 0.0
    for i, (a, b) in enumerate(zip(samples, samples[1:])):
        if out_at(a.t) > 0 and sum(a.gauges.get(g, 0.0) for g in hook) == 0:
            zero_out += b.t - a.t
            run += b.t - a.t
            longest = max(longest, run)
            if heartbeat_moved(i):
                trusted += b.t - a.t
        else:
            run = 0.0
    missing = sorted(g for g in hook if not any(g in s.gauges for s in samples))
    return {"peak": {g: v for g, v in peak.items() if v > 0}, "first_nonzero_s": first_seen,
            "hook_zero_while_out_s": round(zero_out, 2), "hook_zero_longest_s": round(longest, 2),
            "hook_zero_while_out_heartbeat_moved_s": round(trusted, 2),
            "hook_and_http_active_zero_while_out_s": round(with_http, 2),
            "hook_gauges_never_exported": missing, "samples": len(samples)}


def run_burst(pair: PdPair, burst: Burst) -> dict:
    samplers = {Role.PREFILL: Sampler(pair.prefill), Role.DECODE: Sampler(pair.decode)}
    for sampler in samplers.values():
        sampler.start()
    time.sleep(0.5)
    records = [ClientRequest() for _ in range(burst.count)]
    threads = [threading.Thread(target=post, args=(pair.router.port, "/v1/completions", burst.body, r), daemon=True)
               for r in records]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    time.sleep(TAIL_S)
    views = {role.value: server_view(role, s.stop(), records) for role, s in samplers.items()}
    first_sent = min(r.sent_at for r in records)
    return {"burst": burst.name, "requests": burst.count, "completed": sum(r.ok for r in records),
            "errors": sorted({r.error for r in records if r.error})[:3],
            "client_last_done_s": round(max(r.done_at or 0.0 for r in records) - first_sent, 2),
            "servers": views, "loadavg_1m": round(os.getloadavg()[0], 2)}


def prestop_check(engine: RealEngine) -> dict:
    done = subprocess.run([PRESTOP, "check", "--port", str(engine.port), "--proc-root", proc_root_of(engine)],
                          capture_output=True, text=True, timeout=60)
    try:
        said = json.loads(done.stdout)
    except ValueError:
        said = {"stdout": done.stdout[-500:]}
    return {"exit": done.returncode, "said": said, "stderr": done.stderr[-500:]}


def hook_argv(engine: RealEngine) -> list[str]:
    return [PRESTOP, "--grace", str(GRACE_S), "--port", str(engine.port), "--proc-root", proc_root_of(engine),
            "--quiet"]


def delete_under_load(pair: PdPair, engine: RealEngine) -> dict:
    load = LoadGenerator(pair.router.base_url, concurrency=CONCURRENCY, durations=DURATIONS, seed=7,
                         request_body=completion_body("sglang")).start()
    time.sleep(WARM_LOAD_S)
    assert engine.process is not None, "not started"
    report = delete_pod(engine.process, hook_argv(engine), GRACE_S, load=load, route_drop_after_s=ROUTE_LAG_S)
    events = [json.loads(line) for line in report.hook_stderr.splitlines() if line.startswith("{")]
    started: dict = next((e for e in events if e.get("event") == "drain_started"), {})
    tally = report.load
    return {"exit_policy": started.get("exit_policy"), "exit_policy_reason": started.get("exit_policy_reason"),
            "exit_reserve_s": started.get("exit_reserve_s"), "outcome": events[-1].get("outcome") if events else None,
            "hook_exit": report.hook_exit_code, "sigterm_s": round(report.sigterm_at, 2),
            "engine_exit_s": round(report.engine_exited_at, 2),
            "exit_after_sigterm_s": round(report.engine_exited_at - report.sigterm_at, 2),
            "engine_exit_code": report.engine_exit_code, "sigkill": report.sigkill_at is not None,
            "sent": tally.sent if tally else None, "completed": report.completed, "cut": report.cut,
            "rejected": report.rejected, "refused": report.refused, "other": tally.other if tally else None,
            "load": tally.summary() if tally else None, "loadavg_1m": round(os.getloadavg()[0], 2),
            "hook_events": [{k: v for k, v in e.items() if k not in ("ts", "pid")} for e in events]}


def sigterm_idle(engine: RealEngine) -> dict:
    assert engine.process is not None
    sent = time.monotonic()
    engine.process.send_signal(signal.SIGTERM)
    try:
        code = engine.process.wait(EXIT_WAIT_S)
    except subprocess.TimeoutExpired:
        code = None
    return {"exit_after_sigterm_s": round(time.monotonic() - sent, 2), "exit_code": code}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the results as JSON here too")
    parser.add_argument("--bursts-only", action="store_true", help="only the first pair's bursts")
    parser.add_argument("--prefill-deletion-only", action="store_true",
                        help="only the second pair: the prefill server deleted under load")
    args = parser.parse_args(argv)
    addon = command.pd_addon("python -m bench.engines.split_roles")
    results: dict = {"bursts": [], "checks": {}, "deletions": {}}
    if args.prefill_deletion_only:
        with PdPair(addon) as pair:
            results["deletions"]["prefill_under_load"] = delete_under_load(pair, pair.prefill)
        print(json.dumps(results, indent=1))
        return 0
    with PdPair(addon) as pair:
        results["start_s"] = {"prefill": pair.prefill.start_s, "decode": pair.decode.start_s,
                              "router": pair.router.start_s}
        # Before anything is served: the decode server's gauge set as the hook first sees it.
        results["checks"]["decode_before_serving"] = prestop_check(pair.decode)
        results["checks"]["prefill_before_serving"] = prestop_check(pair.prefill)
        for burst in BURSTS:
            results["bursts"].append(run_burst(pair, burst))
            print(json.dumps(results["bursts"][-1]), flush=True)
        if args.bursts_only:
            return 0
        results["checks"]["decode_after_serving"] = prestop_check(pair.decode)
        results["checks"]["prefill_after_serving"] = prestop_check(pair.prefill)
        results["deletions"]["decode_under_load"] = delete_under_load(pair, pair.decode)
        results["deletions"]["prefill_idle_sigterm"] = sigterm_idle(pair.prefill)
    with PdPair(addon) as pair:
        results["deletions"]["prefill_under_load"] = delete_under_load(pair, pair.prefill)
        results["deletions"]["decode_idle_sigterm"] = sigterm_idle(pair.decode)
    print(json.dumps({k: v for k, v in results.items() if k != "bursts"}, indent=1))
    if args.out:
        with open(args.out, "w") as out:
            json.dump(results, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
