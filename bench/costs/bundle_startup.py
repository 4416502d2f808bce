"""Start-up time and memory of prestop executables: the bundle against the console script.

    .venv/bin/python bench/costs/bundle_startup.py --runs 30 \
        bundle=dist/prestop console-script=.venv/bin/prestop

For each executable (NAME=PATH):
  version      wall time of `prestop version`, exec to exit
  first read   exec to the first GET of /metrics arriving at a local server (--route-wait 0)
  memory       at steady state (a drain waiting out its route wait), summed over every process
               of the exec (staticx's launcher, PyInstaller's bootloader, Python): proportional
               set size (shared pages split fairly) and peak RSS (VmHWM), plus the bytes
               unpacked into TMPDIR, which count as memory when TMPDIR is a tmpfs
Times are medians with the 10th-90th percentile range. Results go to stdout as Markdown.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

if __package__ in (None, ""):  # `python bench/costs/bundle_startup.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from modeldrain.hook.bundle import tree_bytes  # noqa: E402

IDLE_BODY = (b'vllm:num_requests_running{engine="0",model_name="tiny"} 0.0\n'
             b'vllm:num_requests_waiting{engine="0",model_name="tiny"} 0.0\n')
SETTLE_S = 1.5  # long past the unpack: every process of the exec is up and idle


class FirstRequestClock:
    """A /metrics server that notes when the first request of each run arrives."""

    def __init__(self):
        self.first_at: float | None = None
        clock = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                if clock.first_at is None:
                    clock.first_at = time.monotonic()
                self.send_response(200)
                self.send_header("Content-Length", str(len(IDLE_BODY)))
                self.end_headers()
                self.wfile.write(IDLE_BODY)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def drain_argv(path: str, port: int, route_wait_s: float) -> list[str]:
    return [path, "--quiet", "--engine", "vllm", "--port", str(port), "--route-wait", str(route_wait_s),
            "--interval", "0.2"]


def time_version(path: str, env: dict) -> float:
    started = time.monotonic()
    subprocess.run([path, "version"], env=env, stdout=subprocess.DEVNULL, check=True)
    return time.monotonic() - started


def time_first_read(path: str, env: dict, clock: FirstRequestClock) -> float:
    clock.first_at = None
    started = time.monotonic()
    subprocess.run(drain_argv(path, clock.port, 0), env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=True)
    assert clock.first_at is not None
    return clock.first_at - started


def _status_kb(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _pss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    return 0


def _session_pids(session_id: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            if int(stat[stat.rindex(b")") + 2 :].split()[3]) == session_id:
                pids.append(int(entry))
    return pids


def measure_memory(path: str, env: dict, port: int) -> dict:
    process = subprocess.Popen(drain_argv(path, port, SETTLE_S + 2), env=env, start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(SETTLE_S)
        pids = _session_pids(process.pid)
        return {
            "processes": len(pids),
            "pss_mib": sum(_pss_kb(p) for p in pids) / 1024,
            "hwm_mib": sum(_status_kb(p, "VmHWM") for p in pids) / 1024,
            "largest_hwm_mib": max(_status_kb(p, "VmHWM") for p in pids) / 1024,
            "tmp_mib": tree_bytes(env["TMPDIR"]) / 2**20,
        }
    finally:
        os.killpg(process.pid, signal.SIGKILL)  # the whole exec: launchers and Python
        process.wait()


def summary(samples: list[float]) -> str:
    ordered = sorted(samples)
    low = ordered[int(0.1 * (len(ordered) - 1))]
    high = ordered[int(round(0.9 * (len(ordered) - 1)))]
    return f"{statistics.median(ordered) * 1000:.0f} ms ({low * 1000:.0f}–{high * 1000:.0f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("executables", nargs="+", metavar="NAME=PATH")
    args = parser.parse_args()
    clock = FirstRequestClock()
    rows = []
    for item in args.executables:
        name, _, path = item.partition("=")
        if not os.access(path, os.X_OK):
            print(f"bundle_startup: {path} is not an executable", file=sys.stderr)
            return 2
        tmp = tempfile.mkdtemp(prefix="bench-unpack-")
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TMPDIR": tmp}
        try:
            time_version(path, env)  # warm the page cache once, as a node that ran it before has
            versions = [time_version(path, env) for _ in range(args.runs)]
            reads = [time_first_read(path, env, clock) for _ in range(args.runs)]
            memory = measure_memory(path, env, clock.port)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        rows.append((name, os.path.getsize(path), versions, reads, memory))

    print(f"{args.runs} runs each; times: median (10th–90th percentile)\n")
    print("| executable | file size | `version`, exec to exit | exec to first read | processes "
          "| PSS, all processes | peak RSS, summed (largest) | unpacked into TMPDIR |")
    print("|---|---|---|---|---|---|---|---|")
    for name, size, versions, reads, m in rows:
        # A console script is a few hundred bytes: what it needs is Python in the image.
        shown = f"{size / 2**20:.1f} MiB" if size >= 2**20 else f"{size} B + Python"
        print(f"| {name} | {shown} | {summary(versions)} | {summary(reads)} | {m['processes']} "
              f"| {m['pss_mib']:.1f} MiB | {m['hwm_mib']:.1f} MiB ({m['largest_hwm_mib']:.1f}) "
              f"| {m['tmp_mib']:.1f} MiB |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
