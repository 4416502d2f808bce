"""The emulated engine as a child process: start, reach, misbehave, signal, and always clean up.

    with EngineProcess("--kind", "sglang", "--max-running", "4") as engine:
        engine.get("/metrics")
        engine.misbehave("hang")
        engine.send_signal(signal.SIGTERM)
        engine.wait(10)
        engine.final_stats()

Start-up is a handshake: the emulator writes its bound port to a ready file, then /health must
answer. The child dies with the thread that started it (see emulation.children), and `stop()` runs
from the context manager, from an atexit hook and on garbage collection, so no test leaves one behind.
"""

from __future__ import annotations

import atexit
import http.client
import json
import os
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import weakref
from pathlib import Path
from typing import Mapping, Sequence

from emulation import constants
from emulation.children import die_with_parent_preexec, stop_process
from emulation.launch import EMULATOR_ARGS_ENV, READY_FILE_ENV, STATS_FILE_ENV, LaunchShape, launch_command


class EngineStartError(RuntimeError):
    """The emulator exited or stayed silent during start-up; the message carries its log."""


_LIVE: "weakref.WeakSet[EngineProcess]" = weakref.WeakSet()


@atexit.register
def _stop_all_live() -> None:
    for engine in list(_LIVE):
        engine.stop()


def free_port(host: str = "127.0.0.1") -> int:
    """A port free right now (another process may take it before it is used: rare on loopback)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


class EngineProcess:
    def __init__(self, *engine_args: str, launch: LaunchShape | None = None,
                 launch_engine_args: Sequence[str] = (), env: Mapping[str, str] | None = None,
                 ca_file: Path | None = None, start_timeout_s: float = constants.ENGINE_START_TIMEOUT_S,
                 die_with_parent: bool = True):
        """`engine_args`: emulator flags (see `python -m emulation.engine --help`).

        With `launch`, the emulator runs under that real engine's command line (emulation.launch),
        with `launch_engine_args` as that engine's own flags and `engine_args` as extra emulator
        flags passed through the environment. `ca_file` verifies a TLS engine's certificate.
        `die_with_parent`: the kernel kills the engine when the thread that started it exits; turn it
        off when starting engines from short-lived worker threads (then only stop() and atexit reap it).
        """
        self._engine_args = tuple(engine_args)
        self._launch = launch
        self._launch_engine_args = tuple(launch_engine_args)
        self._extra_env = dict(env or {})
        self._ca_file = ca_file
        self._start_timeout_s = start_timeout_s
        self._die_with_parent = die_with_parent
        self._dir = Path(tempfile.mkdtemp(prefix="emulated-engine-"))
        self._ready_file = self._dir / "ready"
        self._stats_file = self._dir / "stats.json"
        self._log_path = self._dir / "engine.log"
        self._final_stats: dict | None = None
        self._final_log: str | None = None
        self.process: subprocess.Popen | None = None
        self.port: int | None = None
        self.argv: tuple[str, ...] = ()

    # --- start and stop --------------------------------------------------------------------------

    def _command(self) -> tuple[list[str], dict[str, str]]:
        env = dict(os.environ, **self._extra_env)
        if self._launch is None:
            argv = [sys.executable, "-m", "emulation.engine", "--ready-file", str(self._ready_file),
                    "--stats-file", str(self._stats_file), *self._engine_args]
            return argv, env
        command = launch_command(self._launch, self._dir / "shims", port=free_port(),
                                 engine_args=self._launch_engine_args)
        env.update(command.env)
        env[READY_FILE_ENV] = str(self._ready_file)
        env[STATS_FILE_ENV] = str(self._stats_file)
        env[EMULATOR_ARGS_ENV] = shlex.join(self._engine_args)
        return list(command.argv), env

    def start(self) -> EngineProcess:
        argv, env = self._command()
        self.argv = tuple(argv)
        with open(self._log_path, "wb") as log_file:
            self.process = subprocess.Popen(argv, stdout=log_file, stderr=subprocess.STDOUT, env=env,
                                            stdin=subprocess.DEVNULL,
                                            preexec_fn=die_with_parent_preexec() if self._die_with_parent else None)
        _LIVE.add(self)
        try:
            self._await_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _await_ready(self) -> None:
        deadline_at = time.monotonic() + self._start_timeout_s
        while not self._ready_file.exists():
            self._check_alive_before(deadline_at, "write its ready file")
            time.sleep(constants.POLL_STEP_S)
        self.port = int(self._ready_file.read_text().strip())
        last_answer = "no answer yet"
        while True:
            self._check_alive_before(deadline_at, "answer /health", last_answer)
            try:
                status = self.get("/health", timeout_s=constants.HEALTH_PROBE_TIMEOUT_S)[0]
            except OSError as exc:  # not answering yet: what this loop waits out
                last_answer = f"last try: {exc!r}"
            else:
                if status == 200:
                    return
                last_answer = f"last answer: HTTP {status}"
            time.sleep(constants.POLL_STEP_S)

    def _check_alive_before(self, deadline_at: float, what: str, detail: str = "") -> None:
        assert self.process is not None
        if self.process.poll() is not None:
            raise EngineStartError(f"emulated engine exited with {self.process.returncode} before it "
                                   f"could {what}; argv {self.argv}\n{self.log_text()}")
        if time.monotonic() > deadline_at:
            raise EngineStartError(f"emulated engine did not {what} within {self._start_timeout_s} s "
                                   f"({detail or 'no detail'}); argv {self.argv}\n{self.log_text()}")

    def stop(self) -> int | None:
        """Make sure it is gone, keep its stats and log, remove its files.

        SIGINT, not SIGTERM: the emulator exits on it at once (writing its stats), where SIGTERM
        would run the engine's shutdown (seconds of draining); SIGKILL if it does not go.
        """
        code = None
        if self.process is not None:
            code = stop_process(self.process, constants.TEARDOWN_TERM_WAIT_S, signal.SIGINT)
        if self._dir.exists():
            self._final_stats = self._read_stats()
            self._final_log = self._read_log()
            shutil.rmtree(self._dir, ignore_errors=True)
        _LIVE.discard(self)
        return code

    def __enter__(self) -> EngineProcess:
        return self.start() if self.process is None else self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def __del__(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()

    # --- the process -----------------------------------------------------------------------------

    @property
    def pid(self) -> int:
        assert self.process is not None, "not started"
        return self.process.pid

    def send_signal(self, sig: int = signal.SIGTERM) -> None:
        assert self.process is not None, "not started"
        self.process.send_signal(sig)

    def wait(self, timeout_s: float | None = None) -> int:
        """Its exit status (negative: killed by that signal); raises subprocess.TimeoutExpired."""
        assert self.process is not None, "not started"
        return self.process.wait(timeout=timeout_s)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def final_stats(self) -> dict | None:
        """What it wrote at exit; None if it never exited cleanly (SIGKILL) or has not exited yet."""
        if self._dir.exists():
            return self._read_stats()
        return self._final_stats

    def log_text(self) -> str:
        return self._read_log() if self._dir.exists() else (self._final_log or "")

    def _read_stats(self) -> dict | None:
        try:
            return json.loads(self._stats_file.read_text())
        except FileNotFoundError:
            return None

    def _read_log(self) -> str:
        try:
            return self._log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    # --- HTTP ------------------------------------------------------------------------------------

    @property
    def tls(self) -> bool:
        return "--tls-cert" in self._engine_args or "--ssl-certfile" in self._launch_engine_args

    @property
    def base_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def connection(self, timeout_s: float = constants.TEST_REQUEST_TIMEOUT_S) -> http.client.HTTPConnection:
        assert self.port is not None, "not started"
        if self.tls:
            context = ssl.create_default_context(cafile=str(self._ca_file) if self._ca_file else None)
            if self._ca_file is None:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            return http.client.HTTPSConnection("127.0.0.1", self.port, timeout=timeout_s, context=context)
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout_s)

    def request(self, method: str, path: str, body: dict | None = None, timeout_s: float = constants.TEST_REQUEST_TIMEOUT_S,
                headers: Mapping[str, str] | None = None) -> tuple[int, bytes, dict[str, str]]:
        """One request on a fresh connection: (status, body, headers). Raises OSError subclasses."""
        connection = self.connection(timeout_s)
        try:
            payload = json.dumps(body).encode() if body is not None else None
            all_headers = {"Content-Type": "application/json"} if payload is not None else {}
            all_headers.update(headers or {})
            connection.request(method, path, body=payload, headers=all_headers)
            response = connection.getresponse()
            return response.status, response.read(), dict(response.getheaders())
        finally:
            connection.close()

    def get(self, path: str, timeout_s: float = constants.TEST_REQUEST_TIMEOUT_S) -> tuple[int, bytes]:
        status, data, _ = self.request("GET", path, timeout_s=timeout_s)
        return status, data

    def metrics_text(self, timeout_s: float = constants.TEST_REQUEST_TIMEOUT_S) -> str:
        status, data = self.get("/metrics", timeout_s)
        if status != 200:
            raise RuntimeError(f"/metrics answered {status}")
        return data.decode()

    def stats(self) -> dict:
        status, data = self.get("/control/stats")
        if status != 200:
            raise RuntimeError(f"/control/stats answered {status}: {data[:200]!r}")
        return json.loads(data)

    def misbehave(self, mode: str, **params: object) -> None:
        status, data, _ = self.request("POST", "/control/misbehave", {"mode": mode, **params})
        if status != 200:
            raise RuntimeError(f"/control/misbehave {mode}: {status} {data[:200]!r}")
