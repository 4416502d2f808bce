"""drain-sidecar's availability under attack, and its memory over a soak.

    .venv/bin/python -m bench.reliability.availability [--seconds 12] [--soak 120] [--json out.json]

The real sidecar (default --max-connections 64, a token file) reads a scripted engine listener
that serves vLLM's real idle exposition (47 KB). For each scenario an attacker process
(bench/reliability/attack.py, no token) runs while the clients that matter are timed
(bench/reliability/meter.py): the controller's GET /v1/work with the token once a second, and
kubelet's probes GET /healthz and GET /readyz every PROBE_EVERY_S (each a fresh connection, 1 s
timeout as kubelet's default). Per scenario: each client's success rate and p50/p99 latency, the
attacker's own tally, and the sidecar's own counters (connections evicted at the cap, connections
answered 503 over it).

The soak runs every attacker at once, for minutes, and samples the sidecar's RSS and open
descriptors from /proc every few seconds: start, max, end, and the slope over the second half
(the first half holds the warm-up: allocator arenas, aiohttp's buffers).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from bench.paths import REPO, VLLM_IDLE_SCRAPE
from bench.reliability import bodies
from bench.reliability.meter import (
    CONTROLLER_TIMEOUT_S,
    PROBE_TIMEOUT_S,
    PeriodicClient,
    summarize,
    timed_get,
)
from emulation.raw_server import RawServer, canned
from tests.sidecar.sidecar_process import SidecarProcess

CONTROLLER_EVERY_S = 1.0
# More often than kubelet's period (10 s by default, 1 s at least), for enough samples per scenario.
PROBE_EVERY_S = 0.5
# The attacker's connections are up before the clients are timed.
RAMP_S = 1.5
# The shapes of issue 12: 64 keep-alive holders asking every 2 s (every slot of the default cap),
# 200 new connections a second, 64 slowloris connections.
HOLDERS, HOLD_EVERY_S, FLOOD_PER_S, SLOWLORIS = 64, 2.0, 200.0, 64


@dataclass(frozen=True)
class Attack:
    name: str
    hold: int = 0
    flood_per_s: float = 0.0
    slowloris: int = 0

    def argv(self, port: int, seconds: float) -> list[str]:
        return [sys.executable, "-m", "bench.reliability.attack", "--port", str(port), "--seconds", f"{seconds:g}",
                "--hold", str(self.hold), "--hold-every", f"{HOLD_EVERY_S:g}", "--flood", f"{self.flood_per_s:g}",
                "--slowloris", str(self.slowloris)]

    @property
    def description(self) -> str:
        parts = []
        if self.hold:
            parts.append(f"{self.hold} keep-alive connections asking /healthz every {HOLD_EVERY_S:g} s")
        if self.flood_per_s:
            parts.append(f"{self.flood_per_s:g} new connections/s, one /healthz each")
        if self.slowloris:
            parts.append(f"{self.slowloris} slowloris connections (a request head at 1 byte/s)")
        return "; ".join(parts) or "no attacker"


SCENARIOS = (
    Attack("baseline"),
    Attack("keep-alive hold", hold=HOLDERS),
    Attack("connection flood", flood_per_s=FLOOD_PER_S),
    Attack("slowloris", slowloris=SLOWLORIS),
)
MIXED = Attack("all at once", hold=HOLDERS, flood_per_s=FLOOD_PER_S, slowloris=SLOWLORIS)

# The sidecar's own counters the figures read (modeldrain/sidecar/metrics.py).
EVICTED = "modeldrain_sidecar_connections_evicted_total"
REQUESTS = "modeldrain_sidecar_requests_total"


def sidecar_counters(port: int) -> dict[str, float]:
    """Connections evicted at the cap, and requests by route and code, from the sidecar's /metrics."""
    attempt, body = timed_get(port, "/metrics", timeout_s=CONTROLLER_TIMEOUT_S)
    if not attempt.ok:
        raise RuntimeError(f"the sidecar's /metrics: {attempt.failure}")
    counters = {}
    for line in body.decode().splitlines():
        if line.startswith(EVICTED + " ") or line.startswith(REQUESTS + "{"):
            name, _, value = line.rpartition(" ")
            counters[name] = float(value)
    return counters


def counter_deltas(before: dict[str, float], after: dict[str, float]) -> dict[str, int]:
    return {k: int(v - before.get(k, 0.0)) for k, v in after.items() if v - before.get(k, 0.0)}


def _rejected(deltas: dict[str, int]) -> int:
    return sum(v for k, v in deltas.items() if 'route="rejected"' in k)


def _evicted(deltas: dict[str, int]) -> int:
    return deltas.get(EVICTED, 0)


class Sampler:
    """The sidecar's VmRSS and open descriptors every `every_s`, from /proc, on a thread."""

    def __init__(self, pid: int, every_s: float) -> None:
        self._pid, self._every_s = pid, every_s
        self.samples: list[tuple[float, int, int]] = []  # (seconds since start, RSS KiB, descriptors)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)
        self._started = time.monotonic()

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def _run(self) -> None:
        while True:
            descriptors = len(os.listdir(f"/proc/{self._pid}/fd"))
            self.samples.append((time.monotonic() - self._started, rss_kib(self._pid), descriptors))
            if self._stop.wait(self._every_s):
                return

    def stop(self) -> list[tuple[float, int, int]]:
        self._stop.set()
        self._thread.join()
        return self.samples


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def slope_per_min(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, value) points, in value per minute; 0 for fewer than 2."""
    if len(points) < 2:
        return 0.0
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    spread = sum((t - mean_t) ** 2 for t, _ in points)
    if spread == 0:
        return 0.0
    return sum((t - mean_t) * (v - mean_v) for t, v in points) / spread * 60


def run_attack(sidecar: SidecarProcess, token: str, attack: Attack, seconds: float,
               sample_every_s: float | None = None) -> dict:
    """`attack` for `seconds` (after its ramp) while the controller and the probes are timed."""
    port = sidecar.port
    assert port is not None
    before = sidecar_counters(port)
    with tempfile.TemporaryDirectory(prefix="bench-attack-") as tmp:
        tally_file = Path(tmp) / "tally.json"
        attacker = None
        if attack.hold or attack.flood_per_s or attack.slowloris:
            attacker = subprocess.Popen([*attack.argv(port, RAMP_S + seconds + 0.5), "--json", str(tally_file)],
                                        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                        stdin=subprocess.DEVNULL)
            time.sleep(RAMP_S)
        sampler = Sampler(sidecar.pid, sample_every_s).start() if sample_every_s else None
        clients = {
            "controller /v1/work": PeriodicClient(port, "/v1/work", CONTROLLER_EVERY_S, CONTROLLER_TIMEOUT_S,
                                                  {"Authorization": f"Bearer {token}"}).start(),
            "kubelet /healthz": PeriodicClient(port, "/healthz", PROBE_EVERY_S, PROBE_TIMEOUT_S).start(),
            "kubelet /readyz": PeriodicClient(port, "/readyz", PROBE_EVERY_S, PROBE_TIMEOUT_S).start(),
        }
        time.sleep(seconds)
        measured = {name: summarize(client.stop()) for name, client in clients.items()}
        samples = sampler.stop() if sampler else []
        tally: dict = {}
        if attacker is not None:
            _, err = attacker.communicate(timeout=60)
            if attacker.returncode != 0 or not tally_file.exists():
                raise RuntimeError(f"attacker exited {attacker.returncode}: {err.decode(errors='replace')[-500:]}")
            tally = json.loads(tally_file.read_text())
    deltas = counter_deltas(before, sidecar_counters(port))
    result = {"scenario": attack.name, "attack": attack.description, "seconds": seconds, "clients": measured,
              "attacker": tally, "sidecar_counters": deltas, "evicted": _evicted(deltas),
              "rejected_503": _rejected(deltas)}
    if samples:
        result["memory"] = memory_figures(samples)
    return result


def memory_figures(samples: list[tuple[float, int, int]]) -> dict:
    second_half = [s for s in samples if s[0] >= samples[-1][0] / 2]
    return {
        "samples": len(samples),
        "every_s": round(samples[1][0] - samples[0][0], 2) if len(samples) > 1 else None,
        "rss_start_kib": samples[0][1], "rss_max_kib": max(s[1] for s in samples), "rss_end_kib": samples[-1][1],
        "rss_slope_kib_per_min_second_half": round(slope_per_min([(t, r) for t, r, _ in second_half]), 1),
        "fds_start": samples[0][2], "fds_max": max(s[2] for s in samples), "fds_end": samples[-1][2],
        "series": [[round(t, 1), r, d] for t, r, d in samples],
    }


def measure(seconds: float, soak_s: float, sample_every_s: float) -> dict:
    token = secrets.token_hex(16)
    body = VLLM_IDLE_SCRAPE.read_bytes()
    with tempfile.TemporaryDirectory(prefix="bench-availability-") as tmp:
        token_file = Path(tmp) / "token"
        token_file.write_text(token + "\n")
        (Path(tmp) / "proc").mkdir()
        with RawServer(canned(bodies.http_200(body))) as engine, \
                SidecarProcess("--port", str(engine.port), "--token-file", str(token_file), "--engine", "vllm",
                               "--proc-root", str(Path(tmp) / "proc")) as sidecar:
            rss_at_start = rss_kib(sidecar.pid)
            scenarios = [run_attack(sidecar, token, attack, seconds) for attack in SCENARIOS]
            soak = run_attack(sidecar, token, MIXED, soak_s, sample_every_s) if soak_s > 0 else None
            log = sidecar.log_text()
    return {"seconds": seconds, "controller_every_s": CONTROLLER_EVERY_S, "probe_every_s": PROBE_EVERY_S,
            "probe_timeout_s": PROBE_TIMEOUT_S, "controller_timeout_s": CONTROLLER_TIMEOUT_S,
            "sidecar_rss_at_start_kib": rss_at_start, "scenarios": scenarios, "soak": soak,
            "traceback_in_log": "Traceback (most recent call last)" in log}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.reliability.availability",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=12.0, help="timed seconds per scenario (default 12)")
    parser.add_argument("--soak", type=float, default=120.0, help="seconds of the soak, every attacker at once "
                        "(default 120; 0: none)")
    parser.add_argument("--sample-every", type=float, default=3.0, help="seconds between RSS samples (default 3)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    result = measure(args.seconds, args.soak, args.sample_every)
    for s in result["scenarios"] + ([result["soak"]] if result["soak"] else []):
        print(f"{s['scenario']}: evicted {s['evicted']}, rejected 503 {s['rejected_503']}")
        for name, c in s["clients"].items():
            print(f"  {name:22} {c['ok']}/{c['requests']} ok  p50 {c['p50_ms']} ms  p99 {c['p99_ms']} ms  "
                  f"{c['failures'] or ''}")
        if "memory" in s:
            m = {k: v for k, v in s["memory"].items() if k != "series"}
            print(f"  memory {m}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
