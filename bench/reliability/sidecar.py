"""drain-sidecar against hostile input: the hook's hostile bodies, a token file that is a FIFO,
a visible engine whose --port is '²', and SIGTERM while a read parses a body of maximal cost.

    .venv/bin/python -m bench.reliability.sidecar [--json out.json]

The real sidecar process (tests/sidecar/sidecar_process.py) reads a scripted listener on loopback;
for each body of the hook's catalogue (bench/reliability/cases.py) the listener switches to it and
the controller's GET /v1/work (with the token) asks for a fresh read, while a /healthz goes out
50 ms into that read. A correct sidecar answers 200 with a verdict that is never `idle` unless
the engine is, and never 500; its probes answer meanwhile.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench.reliability import bodies
from bench.reliability.cases import DRAINED, Canned, HostileCase, Stdio, Streamed, scripted_cases
from bench.reliability.hostile import OVERRUN_TOLERANCE_S, TRACEBACK, responder
from bench.reliability.meter import CONTROLLER_TIMEOUT_S, timed_get
from emulation.raw_server import RawServer, canned
from modeldrain.sidecar.app import TOKEN_FILE_WAIT_S
from modeldrain.sidecar.cli import SHUTDOWN_TIMEOUT_S
from tests.sidecar.sidecar_process import SidecarProcess

# The /healthz that goes out while a hostile read runs, this long after the /v1/work.
HEALTHZ_AFTER_S = 0.05
# The sidecar that gets SIGTERM mid-parse lingers at most this long.
LINGER_MAX_S = 1.0
# A sidecar started on a FIFO token file has this long to refuse it before it counts as blocked.
START_REFUSAL_WAIT_S = 20.0


# The figures besides the bodies, each {..., "problems": [...]}.
SINGLE_FIGURES = ("start_with_port_superscript", "unknown_path", "token_swapped_for_fifo", "token_fifo_at_start",
                  "sigterm_mid_parse")


@dataclass
class SidecarAnswer:
    case: str
    group: str
    status: int | None
    verdict: str | None  # /v1/work's read.verdict
    outcome: str | None  # /v1/work's read.outcome
    seconds: float
    healthz_status: int | None
    healthz_ms: float | None
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


def body_cases() -> list[HostileCase]:
    """The catalogue's cases whose only hostility is what the engine answers."""
    return [c for c in scripted_cases() if isinstance(c.served, (Canned, Streamed)) and c.is_drain and not c.args
            and c.stdio is Stdio.PIPES and c.annotations is None and not c.annotations_fifo
            and not c.annotations_link and not c.engine_argv and c.signal is None and not c.descriptors_spent]


def judge_answer(case: HostileCase, status: int | None, verdict: str | None, healthz_status: int | None) -> list[str]:
    problems = []
    if status == 500:
        problems.append("HTTP 500")
    elif status != 200:
        problems.append(f"no read: {'HTTP ' + str(status) if status else 'no answer'}")
    if verdict == "idle" and not case.idle_is_true:
        problems.append("false idle")
    if case.expected == DRAINED and status == 200 and verdict != "idle":
        problems.append(f"{verdict}, expected idle")
    if healthz_status != 200:
        problems.append(f"/healthz: {healthz_status or 'no answer'} during the read")
    return problems


def ask(sidecar: SidecarProcess, case: HostileCase, token: str) -> SidecarAnswer:
    """One fresh read of the case's body through /v1/work, and a /healthz during it."""
    port = sidecar.port
    assert port is not None
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        work = pool.submit(timed_get, port, "/v1/work", {"Authorization": f"Bearer {token}"}, CONTROLLER_TIMEOUT_S)
        time.sleep(HEALTHZ_AFTER_S)
        healthz, _ = timed_get(port, "/healthz", timeout_s=CONTROLLER_TIMEOUT_S)
        attempt, body = work.result()
    verdict = outcome = None
    if attempt.status == 200:
        read = json.loads(body)["read"]
        verdict, outcome = read["verdict"], read["outcome"]
    answer = SidecarAnswer(case.name, case.group, attempt.status, verdict, outcome, round(attempt.seconds, 3),
                           healthz.status, round(healthz.seconds * 1000, 1))
    answer.problems = judge_answer(case, attempt.status, verdict, healthz.status)
    return answer


def _fake_engine_root(work: Path) -> tuple[subprocess.Popen, Path]:
    """A private /proc showing one real process whose command line is `vllm serve --port ²`."""
    from bench.reliability.hostile import fake_engine

    root = work / "proc"
    root.mkdir()
    engine = fake_engine(work, ("serve", "--port", "\u00b2"))
    (root / str(engine.pid)).symlink_to(f"/proc/{engine.pid}")
    return engine, root


def hostile_bodies(cases: list[HostileCase]) -> dict:
    """The sidecar reading every body, the start with '²' in its /proc, and a token file swapped
    for a FIFO while it runs. A sidecar that does not start is the figure, not an error of the bench."""
    token = secrets.token_hex(16)
    with tempfile.TemporaryDirectory(prefix="bench-sidecar-hostile-") as tmp:
        work = Path(tmp)
        token_file = work / "token"
        token_file.write_text(token + "\n")
        engine, proc_root = _fake_engine_root(work)
        try:
            with RawServer(canned(bodies.http_200(bodies.IDLE_VLLM))) as server:
                sidecar = SidecarProcess("--port", str(server.port), "--token-file", str(token_file),
                                         "--proc-root", str(proc_root))
                try:
                    sidecar.start()
                except RuntimeError as exc:  # it exited, or never listened: its log says why
                    return _did_not_start(str(exc).replace(tmp, "$TMP"))
                with sidecar:
                    assert sidecar.port is not None
                    started, _ = timed_get(sidecar.port, "/healthz")
                    answers = []
                    for case in cases:
                        assert isinstance(case.served, (Canned, Streamed))
                        server.set(responder(case.served))
                        answers.append(ask(sidecar, case, token))
                    not_found = unknown_path_not_echoed(sidecar)
                    swapped = token_swapped_for_a_fifo(sidecar, token_file, token)
                    log = sidecar.log_text()
        finally:
            engine.kill()
            engine.wait()
    return {
        "answers": [a.as_dict() for a in answers],
        "start_with_port_superscript": {"healthz_status": started.status, "problems": [] if started.ok else
                                        [f"/healthz: {started.failure}"]},
        "unknown_path": not_found,
        "token_swapped_for_fifo": swapped,
        "traceback_in_log": TRACEBACK.decode() in log,
    }


def _did_not_start(why: str) -> dict:
    not_run = {"work_status": None, "work_ms": None, "healthz_status": None, "healthz_ms": None,
               "problems": ["not run: the sidecar did not start"]}
    return {"answers": [], "start_with_port_superscript": {"healthz_status": None, "problems": [
        f"crash: did not start: {why[-300:]}"]}, "token_swapped_for_fifo": not_run,
        "unknown_path": {"status": None, "echoed": None, "problems": ["not run: the sidecar did not start"]},
        "traceback_in_log": TRACEBACK.decode() in why}


def unknown_path_not_echoed(sidecar: SidecarProcess) -> dict:
    """A 404 names the way to the routes, never what the client sent (a path is attacker text)."""
    port = sidecar.port
    assert port is not None
    marker = "echo-" + secrets.token_hex(8)
    attempt, body = timed_get(port, f"/{marker}?<script>", timeout_s=CONTROLLER_TIMEOUT_S)
    echoed = marker.encode() in body
    problems = []
    if attempt.status != 404:
        problems.append(f"answered {attempt.status or attempt.failure}, expected 404")
    if echoed:
        problems.append("the 404 echoes the path")
    return {"status": attempt.status, "echoed": echoed, "problems": problems}


def token_swapped_for_a_fifo(sidecar: SidecarProcess, token_file: Path, token: str) -> dict:
    """The token file replaced by a FIFO nobody writes: /v1/* must fail closed (401, or 503 when
    the file does not answer within TOKEN_FILE_WAIT_S), at once; /healthz must not notice."""
    port = sidecar.port
    assert port is not None
    fifo = token_file.with_name("token.fifo")
    os.mkfifo(fifo)
    os.replace(fifo, token_file)
    work, _ = timed_get(port, "/v1/work", {"Authorization": f"Bearer {token}"}, CONTROLLER_TIMEOUT_S)
    healthz, _ = timed_get(port, "/healthz")
    problems = []
    if work.status not in (401, 503):
        problems.append(f"/v1/work: {work.status or work.failure}, expected 401 or 503")
    if work.seconds > TOKEN_FILE_WAIT_S + OVERRUN_TOLERANCE_S:
        problems.append(f"/v1/work took {work.seconds:.2f} s")
    if not healthz.ok:
        problems.append(f"/healthz: {healthz.failure}")
    return {"work_status": work.status, "work_ms": round(work.seconds * 1000, 1), "healthz_status": healthz.status,
            "healthz_ms": round(healthz.seconds * 1000, 1), "problems": problems}


def token_fifo_at_start() -> dict:
    """drain-sidecar started with --token-file naming a FIFO: a usage error (exit 2), not a hang."""
    with tempfile.TemporaryDirectory(prefix="bench-sidecar-fifo-") as tmp:
        fifo = Path(tmp) / "token"
        os.mkfifo(fifo)
        (Path(tmp) / "proc").mkdir()
        argv = [sys.executable, "-m", "modeldrain.sidecar", "--listen", "127.0.0.1:0", "--token-file", str(fifo),
                "--port", "9", "--proc-root", str(Path(tmp) / "proc")]
        started = time.monotonic()
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=START_REFUSAL_WAIT_S,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return {"exit_code": None, "seconds": START_REFUSAL_WAIT_S,
                    "problems": [f"blocked: still running after {START_REFUSAL_WAIT_S:g} s"]}
    seconds = time.monotonic() - started
    problems = []
    if done.returncode != 2:
        problems.append(f"exit {done.returncode}, expected 2")
    if TRACEBACK.decode() in done.stderr:
        problems.append("crash: a traceback")
    message = done.stderr.strip()[-300:].replace(tmp, "$TMP")  # no path of this machine in the figures
    return {"exit_code": done.returncode, "seconds": round(seconds, 3), "message": message,
            "problems": problems}


def sigterm_mid_parse() -> dict:
    """SIGTERM while a /v1/work read parses a body of maximal cost, --linger-max 1: the sidecar
    exits within the linger and aiohttp's two shutdown waits, whatever its read thread is doing."""
    heavy = bodies.heavy_idle_body(2_300_000, bodies.labels_to_fill(bodies.LINE_CAP_CHARS - 6))
    bound_s = LINGER_MAX_S + 2 * SHUTDOWN_TIMEOUT_S
    with tempfile.TemporaryDirectory(prefix="bench-sidecar-term-") as tmp:
        (Path(tmp) / "proc").mkdir()
        with RawServer(canned(bodies.http_200(heavy))) as server, \
                SidecarProcess("--port", str(server.port), "--linger-max", f"{LINGER_MAX_S:g}",
                               "--proc-root", str(Path(tmp) / "proc")) as sidecar, \
                concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            assert sidecar.port is not None
            pool.submit(timed_get, sidecar.port, "/v1/work", None, CONTROLLER_TIMEOUT_S)
            time.sleep(0.3)  # the read is parsing
            signalled = time.monotonic()
            sidecar.send_signal(signal.SIGTERM)
            try:
                code: int | None = sidecar.wait(bound_s + 30)
            except subprocess.TimeoutExpired:
                code = None
            seconds = time.monotonic() - signalled
            log = sidecar.log_text()
    problems = []
    if code != 0:
        problems.append(f"exit {code}, expected 0")
    if seconds > bound_s + OVERRUN_TOLERANCE_S:
        problems.append(f"overrun: exited {seconds:.2f} s after SIGTERM, bound {bound_s:g} s")
    if TRACEBACK.decode() in log:
        problems.append("crash: a traceback")
    return {"exit_code": code, "seconds": round(seconds, 3), "bound_s": bound_s, "body_bytes": len(heavy),
            "problems": problems}


def measure() -> dict:
    result = hostile_bodies(body_cases())
    result["token_fifo_at_start"] = token_fifo_at_start()
    result["sigterm_mid_parse"] = sigterm_mid_parse()
    return result


def problems_of(result: dict) -> list[str]:
    """Every problem of the sidecar's figures, prefixed by where it was seen."""
    found = [f"{a['case']}: {p}" for a in result["answers"] for p in a["problems"]]
    for key in SINGLE_FIGURES:
        found += [f"{key}: {p}" for p in result[key]["problems"]]
    if result["traceback_in_log"]:
        found.append("a traceback in the sidecar's log")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.reliability.sidecar", description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    result = measure()
    for a in result["answers"]:
        print(f"{a['status']} {a['verdict'] or '-':13} {a['seconds']:6.2f} s  healthz {a['healthz_ms']} ms  "
              f"{a['case']}: {'; '.join(a['problems']) or 'ok'}")
    for key in SINGLE_FIGURES:
        print(key, json.dumps(result[key]))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 1 if problems_of(result) else 0


if __name__ == "__main__":
    sys.exit(main())
