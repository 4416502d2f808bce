"""drain-sidecar as a child process on a real socket: start, query, signal, always clean up."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Mapping

# A cold start imports aiohttp, uvloop and prometheus-client: well under a second; 15 s leaves
# room for a loaded 2-core CI box.
START_TIMEOUT_S = 15.0
POLL_STEP_S = 0.02
STOP_WAIT_S = 5.0


def kill_now(engine) -> None:
    """End an emulated engine whose SIGTERM behaviour a test does not study, without its seconds of lag."""
    if engine.alive():
        engine.send_signal(signal.SIGKILL)
        engine.wait(5)


class SidecarProcess:
    def __init__(self, *args: str, env: Mapping[str, str] | None = None, wrapper: tuple[str, ...] = ()):
        """`wrapper`: argv to run the sidecar under (it execs the rest of its argv); it gets the
        directory that must stay writable for the ready file in $SIDECAR_READY_DIR."""
        self._args = args
        self._wrapper = wrapper
        self._dir = Path(tempfile.mkdtemp(prefix="drain-sidecar-"))
        if wrapper:
            os.chmod(self._dir, 0o777)  # the wrapper may drop to another user
        self._ready = self._dir / "ready"
        self._log_path = self._dir / "sidecar.log"
        self._env = dict(os.environ)
        for key in ("POD_NAME", "POD_NAMESPACE", "POD_UID", "MEMBER_CONFIGURATION", "LWS_WORKER_INDEX",
                    "LWS_GROUP_SIZE"):
            self._env.pop(key, None)  # only what a test passes
        self._env.update(env or {})
        self.process: subprocess.Popen | None = None
        self.port: int | None = None

    def start(self) -> "SidecarProcess":
        argv = [*self._wrapper, sys.executable, "-m", "modeldrain.sidecar", "--listen", "127.0.0.1:0",
                "--ready-file", str(self._ready), *self._args]
        self._env["SIDECAR_READY_DIR"] = str(self._dir)
        with open(self._log_path, "wb") as log:
            self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=self._env,
                                            stdin=subprocess.DEVNULL)
        deadline_at = time.monotonic() + START_TIMEOUT_S
        while not self._ready.exists():
            if self.process.poll() is not None:
                raise RuntimeError(f"sidecar exited {self.process.returncode}:\n{self.log_text()}")
            if time.monotonic() > deadline_at:
                self.stop()
                raise RuntimeError(f"sidecar not listening within {START_TIMEOUT_S} s:\n{self.log_text()}")
            time.sleep(POLL_STEP_S)
        self.port = int(self._ready.read_text().strip().rsplit(":", 1)[1])
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None, "not started"
        return self.process.pid

    def stop(self) -> int | None:
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # stop now, no linger
            try:
                self.process.wait(STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def __enter__(self) -> "SidecarProcess":
        return self.start() if self.process is None else self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def log_text(self) -> str:
        try:
            return self._log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def events(self) -> list[dict]:
        out = []
        for line in self.log_text().splitlines():
            if line.startswith("{"):
                out.append(json.loads(line))
        return out

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def send_signal(self, sig: int) -> None:
        assert self.process is not None
        self.process.send_signal(sig)

    def wait(self, timeout_s: float) -> int:
        assert self.process is not None
        return self.process.wait(timeout=timeout_s)

    def request(self, method: str, path: str, headers: Mapping[str, str] | None = None,
                timeout_s: float = 10.0, source: str | None = None) -> tuple[int, bytes, dict[str, str]]:
        """`source`: the loopback address to send from (all of 127/8 is this machine), as another
        client in the cluster would have its own."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout_s,
                                                source_address=(source, 0) if source else None)
        try:
            connection.request(method, path, headers=dict(headers or {}))
            response = connection.getresponse()
            return response.status, response.read(), {k.lower(): v for k, v in response.getheaders()}
        finally:
            connection.close()

    def get_json(self, path: str, headers: Mapping[str, str] | None = None) -> tuple[int, dict]:
        status, body, _ = self.request("GET", path, headers)
        return status, json.loads(body)

    def work(self, headers: Mapping[str, str] | None = None) -> dict:
        status, body = self.get_json("/v1/work", headers)
        assert status == 200, (status, body)
        return body
