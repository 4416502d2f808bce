"""drain-sidecar under load: /v1/work latency and throughput, engine reads per second, RSS; and what one
retirement (the controller's protocol, modeldrain/retirement/client.py) costs the engine.

    .venv/bin/python bench/costs/sidecar_load.py [--seconds 5] [--clients 1,64] [--retirements 5] [--json out.json]

Starts the engine emulator (vLLM, its real ~47 KB idle exposition) and the sidecar on loopback,
then runs one client pausing 250 ms between requests (how the controller reads), and for each
client count that many aiohttp clients in a closed loop (each sends its next request when the last
answer arrives), for the given time each. Engine reads come from the emulator's
own count (GET /control/stats `metrics_reads`), RSS from /proc. Client, sidecar and emulator
share the machine's cores, so the figures are a floor for a sidecar with a core of its own.

Retirements: the reference client's `retire` against an idle single-Pod replica, and against a
leader with one worker whose engine serves no metrics (as on a leader-served replica), each run
`--retirements` times; per retirement, the engine reads, the engine time they took (the sidecar's
own read-duration histogram), the bytes the engine served, the rounds and the wall time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

import aiohttp

from emulation.engine_process import EngineProcess
from modeldrain.retirement import client as retirement
from tests.sidecar.sidecar_process import SidecarProcess, kill_now


def rss_kib(pid: int) -> dict[str, int]:
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0])
    return {"rss_kib": fields["VmRSS"], "peak_rss_kib": fields["VmHWM"]}


def percentile(sorted_values: list[float], q: float) -> float:
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]


async def storm(url: str, clients: int, seconds: float, pause_s: float) -> tuple[list[float], int, set[int]]:
    latencies: list[float] = []
    errors = 0
    seqs: set[int] = set()
    stop_at = time.monotonic() + seconds
    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector) as session:
        async def client():
            nonlocal errors
            while time.monotonic() < stop_at:
                sent_at = time.perf_counter()
                async with session.get(url) as response:
                    body = await response.read()
                latencies.append(time.perf_counter() - sent_at)
                if response.status != 200:
                    errors += 1
                else:
                    seqs.add(json.loads(body)["read"]["seq"])
                if pause_s:
                    await asyncio.sleep(pause_s)
        await asyncio.gather(*(client() for _ in range(clients)))
    return latencies, errors, seqs


def read_seconds(sidecar: SidecarProcess) -> tuple[float, float]:
    """The sidecar's own read-duration histogram: (sum, count)."""
    values = {}
    for line in sidecar.request("GET", "/metrics")[1].decode().splitlines():
        for key in ("_sum", "_count"):
            if line.startswith(f"modeldrain_sidecar_engine_read_duration_seconds{key} "):
                values[key] = float(line.split()[1])
    return values["_sum"], values["_count"]


def run_case(engine: EngineProcess, sidecar: SidecarProcess, clients: int, seconds: float,
             pause_s: float = 0.0) -> dict:
    reads_before = engine.stats()["metrics_reads"]
    sum_before, count_before = read_seconds(sidecar)
    started = time.monotonic()
    latencies, errors, seqs = asyncio.run(storm(f"{sidecar.base_url}/v1/work", clients, seconds, pause_s))
    elapsed_s = time.monotonic() - started
    reads = engine.stats()["metrics_reads"] - reads_before
    sum_after, count_after = read_seconds(sidecar)
    latencies.sort()
    return {
        "clients": clients,
        "pause_ms": round(pause_s * 1000),
        "engine_read_mean_ms": round((sum_after - sum_before) / max(1, count_after - count_before) * 1000, 2),
        "seconds": round(elapsed_s, 2),
        "requests": len(latencies),
        "errors": errors,
        "throughput_rps": round(len(latencies) / elapsed_s, 1),
        "p50_ms": round(percentile(latencies, 0.50) * 1000, 2),
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 2),
        "mean_ms": round(statistics.fmean(latencies) * 1000, 2),
        "engine_reads": reads,
        "engine_reads_per_s": round(reads / elapsed_s, 1),
        "answers_per_read": round(len(latencies) / max(1, len(seqs)), 1),
        **rss_kib(sidecar.pid),
    }


def _member_env(name: str, index: int, size: int) -> dict[str, str]:
    return {"POD_NAMESPACE": "bench", "POD_NAME": name, "POD_UID": f"uid-{name}", "LWS_WORKER_INDEX": str(index),
            "LWS_GROUP_SIZE": str(size), "MEMBER_CONFIGURATION": "rev-1"}


def retirement_case(name: str, engine: EngineProcess, sidecars: list[SidecarProcess], times: int) -> dict:
    """`times` retirements of one replica; the cost per retirement, read off the engine and the sidecars."""
    members = [retirement.MemberEndpoint(s.base_url, retirement.ExpectedPod("bench", f"{name}-{i}", f"uid-{name}-{i}"))
               for i, s in enumerate(sidecars)]
    leader = sidecars[0]
    body_bytes = leader.work()["read"]["body_bytes"]
    runs = []
    for _ in range(times):
        reads_before = engine.stats()["metrics_reads"]
        sums_before = [read_seconds(s) for s in sidecars]
        rounds = 0

        def count(_at_s: float, _decision: retirement.Decision) -> None:
            nonlocal rounds
            rounds += 1
        started = time.monotonic()
        decision = retirement.retire(members, budget_s=30.0, on_round=count)
        wall_s = time.monotonic() - started
        reads = engine.stats()["metrics_reads"] - reads_before
        sums_after = [read_seconds(s) for s in sidecars]
        runs.append({
            "verdict": decision.verdict.value,
            "rounds": rounds,
            "wall_s": wall_s,
            "engine_reads": reads,
            "engine_read_ms": (sums_after[0][0] - sums_before[0][0]) * 1000,
            "worker_reads": sum(after[1] - before[1] for before, after in zip(sums_before[1:], sums_after[1:])),
        })
    return {
        "case": name,
        "members": len(sidecars),
        "retirements": times,
        "verdicts": sorted({r["verdict"] for r in runs}),
        "rounds_median": statistics.median(r["rounds"] for r in runs),
        "wall_s_median": round(statistics.median(r["wall_s"] for r in runs), 2),
        "engine_reads_median": statistics.median(r["engine_reads"] for r in runs),
        "engine_read_ms_median": round(statistics.median(r["engine_read_ms"] for r in runs), 2),
        "engine_kb_median": round(statistics.median(r["engine_reads"] for r in runs) * body_bytes / 1000, 1),
        "worker_reads_median": statistics.median(r["worker_reads"] for r in runs),
    }


def run_retirements(times: int) -> list[dict]:
    cases = []
    with EngineProcess("--kind", "vllm") as engine:
        with SidecarProcess("--port", str(engine.port), "--engine", "vllm", env=_member_env("single-0", 0, 1)) as one:
            cases.append(retirement_case("single", engine, [one], times))
        with EngineProcess("--kind", "vllm") as silent:  # a port that refuses: the worker serves no metrics
            nowhere = silent.port
            kill_now(silent)
        with SidecarProcess("--port", str(engine.port), "--engine", "vllm", env=_member_env("group-0", 0, 2)) as lead, \
                SidecarProcess("--port", str(nowhere), "--engine", "vllm", env=_member_env("group-1", 1, 2)) as worker:
            cases.append(retirement_case("group", engine, [lead, worker], times))
        kill_now(engine)
    return cases


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="per client count (default 5)")
    parser.add_argument("--clients", default="1,64", help="comma-separated client counts (default 1,64)")
    parser.add_argument("--retirements", type=int, default=5, help="retirements per replica shape (default 5)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    counts = [int(c) for c in args.clients.split(",")]
    results = []
    with EngineProcess("--kind", "vllm") as engine, SidecarProcess("--port", str(engine.port)) as sidecar:
        idle_rss = rss_kib(sidecar.pid)
        sidecar.work()  # warm: first read, imports on the read path
        # As the controller reads: one client, a pause between reads longer than the read spacing.
        results.append(run_case(engine, sidecar, 1, args.seconds, pause_s=0.25))
        for clients in counts:  # closed loops: each client asks again as soon as it has its answer
            results.append(run_case(engine, sidecar, clients, args.seconds))
        kill_now(engine)
    retirements = run_retirements(args.retirements)
    report = {"sidecar_rss_at_start_kib": idle_rss["rss_kib"], "cases": results, "retirements": retirements}
    print(f"sidecar RSS at start: {idle_rss['rss_kib'] / 1024:.1f} MiB")
    print(f"{'clients':>7} {'pause':>6} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'reads/s':>8} {'ans/read':>8} "
          f"{'errors':>6} {'RSS MiB':>8} {'peak MiB':>8} {'read ms':>8}")
    for r in results:
        print(f"{r['clients']:>7} {r['pause_ms']:>6} {r['throughput_rps']:>8} {r['p50_ms']:>8} {r['p99_ms']:>8} "
              f"{r['engine_reads_per_s']:>8} {r['answers_per_read']:>8} {r['errors']:>6} "
              f"{r['rss_kib'] / 1024:>8.1f} {r['peak_rss_kib'] / 1024:>8.1f} {r['engine_read_mean_ms']:>8}")
    print(f"{'replica':>8} {'members':>7} {'rounds':>6} {'wall s':>6} {'reads':>5} {'read ms':>7} {'kB':>6} "
          f"{'worker':>6}")
    for r in retirements:
        print(f"{r['case']:>8} {r['members']:>7} {r['rounds_median']:>6} {r['wall_s_median']:>6} "
              f"{r['engine_reads_median']:>5} {r['engine_read_ms_median']:>7} {r['engine_kb_median']:>6} "
              f"{r['worker_reads_median']:>6}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    deleted = all(r["verdicts"] == ["delete"] for r in retirements)
    return 0 if all(r["errors"] == 0 for r in results) and deleted else 1


if __name__ == "__main__":
    sys.exit(main())
