"""A real vLLM or SGLang server of the installed tier, as a child process on a loopback port.

    with RealEngine.vllm(tier) as engine:      # returns once /health answers 200
        engine.base_url, engine.process         # what emulation.kubelet.delete_pod takes

Each server runs in a session of its own, so the engine's helper processes (vLLM's engine core,
SGLang's scheduler and detokenizer) end with it: a test that fails leaves nothing behind.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Protocol, Sequence

from engines.tier import Tier

SERVED_MODEL_NAME = "tiny"
# Room for the long-prompt rows of bench/engines/lifecycle.py and for requests of a few seconds
# (~3 ms a token on the tiny model): the model itself has 4096 positions.
MAX_MODEL_LEN = 2048
# SGLang's KV pool in tokens: 16 requests of up to MAX_MODEL_LEN (2 KB a token on the tiny model:
# 64 MB). At 4096 (ENGINES.md's recipe) only two long requests ran at once and the rest queued.
SGLANG_MAX_TOTAL_TOKENS = 16 * MAX_MODEL_LEN
# Start-up measured at 45-60 s (vLLM) and 25-31 s (SGLang) on an idle 2-core machine; a loaded one
# (parallel test suites, a second engine) takes longer.
START_TIMEOUT_S = 300.0
HEALTH_POLL_S = 0.5
# After the test is done with it: SIGTERM, then SIGKILL to the whole session after this long.
STOP_WAIT_S = 30.0

# Offline, on the CPU, with one thread per process: what ENGINES.md's measurements ran with.
COMMON_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1",
              "TOKENIZERS_PARALLELISM": "false"}
VLLM_ENV = {"VLLM_TARGET_DEVICE": "cpu", "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind",
            "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
SGLANG_ENV = {"SGLANG_USE_CPU_ENGINE": "1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def vllm_argv(tier: Tier, port: int, *extra: str, executable: Path | None = None) -> list[str]:
    """`executable`: another release's `vllm` (engines/install_older.sh); the tier's by default."""
    # --enforce-eager skips ~45 s of compilation; float32 because the CPU path has no fast bf16 here.
    return [str(executable or tier.vllm_python.with_name("vllm")), "serve", str(tier.model), "--served-model-name",
            SERVED_MODEL_NAME, "--host", "127.0.0.1", "--port", str(port), "--enforce-eager",
            "--max-model-len", str(MAX_MODEL_LEN), "--dtype", "float32", "--max-num-seqs", "16", *extra]


def sglang_argv(tier: Tier, port: int, *extra: str) -> list[str]:
    return [str(tier.sglang_python), "-m", "sglang.launch_server", "--model-path", str(tier.model),
            "--served-model-name", SERVED_MODEL_NAME, "--host", "127.0.0.1", "--port", str(port),
            "--device", "cpu", "--enable-metrics", "--attention-backend", "torch_native",
            "--sampling-backend", "pytorch", "--mem-fraction-static", "0.05", "--max-total-tokens",
            str(SGLANG_MAX_TOTAL_TOKENS),
            "--context-length", str(MAX_MODEL_LEN), "--disable-cuda-graph", *extra]


class RealEngine:
    def __init__(self, kind: str, argv: Sequence[str], port: int, env: dict[str, str]):
        self.kind = kind
        self.argv = list(argv)
        self.port = port
        self._env = dict(os.environ, **COMMON_ENV, **env)
        self._log = tempfile.NamedTemporaryFile(prefix=f"{kind}-", suffix=".log", delete=False)
        self.process: subprocess.Popen | None = None
        self.start_s: float | None = None  # how long until /health answered 200
        self._spawned_at = 0.0

    @classmethod
    def vllm(cls, tier: Tier, *extra: str, env: dict[str, str] | None = None,
             executable: Path | None = None) -> RealEngine:
        port = free_port()
        return cls("vllm", vllm_argv(tier, port, *extra, executable=executable), port, dict(VLLM_ENV, **(env or {})))

    @classmethod
    def sglang(cls, tier: Tier, *extra: str, env: dict[str, str] | None = None) -> RealEngine:
        port = free_port()
        return cls("sglang", sglang_argv(tier, port, *extra), port, dict(SGLANG_ENV, **(env or {})))

    def wrapped(self, prefix: Sequence[str]) -> RealEngine:
        """Started through prefix (e.g. engines.podview's exec_argv): it execs the server, so the pid is the server's."""
        self.argv = [*prefix, *self.argv]
        return self

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return Path(self._log.name)

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def start(self) -> RealEngine:
        return self.spawn().wait_healthy()

    def spawn(self) -> RealEngine:
        """Start the process and return at once (wait_healthy waits): two servers start side by side."""
        self._spawned_at = time.monotonic()
        self.process = subprocess.Popen(self.argv, stdout=self._log, stderr=subprocess.STDOUT, env=self._env,
                                        stdin=subprocess.DEVNULL, start_new_session=True)
        return self

    def wait_healthy(self) -> RealEngine:
        assert self.process is not None, "not spawned"
        while not self._healthy():
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.kind} exited {self.process.returncode} before /health:\n{self.log_tail()}")
            if time.monotonic() - self._spawned_at > START_TIMEOUT_S:
                self.stop()
                raise RuntimeError(f"{self.kind} not healthy within {START_TIMEOUT_S:g} s:\n{self.log_tail()}")
            time.sleep(HEALTH_POLL_S)
        self.start_s = time.monotonic() - self._spawned_at
        return self

    def _healthy(self) -> bool:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        try:
            connection.request("GET", "/health")
            return connection.getresponse().status == 200
        except OSError:
            return False
        finally:
            connection.close()

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL to the whole session: nothing of the engine outlives the test."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)  # the session: helpers included
        except ProcessLookupError:
            pass
        if self.process.poll() is None:
            self.process.wait(STOP_WAIT_S)
        return self.process.returncode

    def __enter__(self) -> RealEngine:
        return self.start() if self.process is None else self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


class Started(Protocol):
    process: subprocess.Popen | None


def proc_root_of(engine: Started) -> str:
    """A /proc that shows only this engine's server process: what the hook sees in its own Pod.

    The machine's /proc shows every engine other tests run; the hook reads the engine's argv (its
    kind, role, port, flags) from the processes it sees, so it is shown this one alone.
    """
    assert engine.process is not None, "not started"
    root = tempfile.mkdtemp(prefix="engine-proc-")
    os.symlink(f"/proc/{engine.process.pid}", os.path.join(root, str(engine.process.pid)))
    return root


# How long one request's token takes, eight requests at a time on a loaded 2-core machine (read
# off the engines' logs while the tests ran): vLLM's CPU path ~4 ms, SGLang's torch_native path
# ~30 ms. It turns a wanted duration into max_tokens, near enough to shape a drain's load.
SECONDS_PER_TOKEN = {"vllm": 0.005, "sglang": 0.03}
PROMPT = "the replica drains its queue before the pod goes away"


def completion_body(kind: str, max_model_len: int = MAX_MODEL_LEN,
                    seconds_per_token: float | None = None) -> Callable[[float, bool], dict]:
    """/v1/completions bodies that run about duration_s on `kind`: ignore_eos holds each to its
    max_tokens (random weights would otherwise stop at a random end-of-sequence token), within the
    engine's `max_model_len` less room for the prompt. `seconds_per_token`: measured on this engine
    (measure_seconds_per_token), else the figure above."""
    seconds_per_token = seconds_per_token or SECONDS_PER_TOKEN[kind]

    def body(duration_s: float, stream: bool) -> dict:
        tokens = max(1, min(max_model_len - 64, round(duration_s / seconds_per_token)))
        return {"model": SERVED_MODEL_NAME, "prompt": PROMPT, "max_tokens": tokens, "ignore_eos": True,
                "temperature": 0.0, "stream": stream}

    return body


# A batch like the bench's loads (~8 in flight), long enough that start-up costs of a request
# (tokenizing, scheduling, the HTTP round trip) weigh little against its decode steps.
SPEED_BATCH = 8
SPEED_TOKENS = 128


def measure_seconds_per_token(engine: RealEngine, batch: int = SPEED_BATCH, tokens: int = SPEED_TOKENS) -> float:
    """One token's time for a request among `batch` running at once on this engine, as it runs now
    (the machine's load included): what turns a wanted duration into max_tokens."""
    body = json.dumps({"model": SERVED_MODEL_NAME, "prompt": PROMPT, "max_tokens": tokens, "ignore_eos": True,
                       "temperature": 0.0})
    times: list[float] = []
    errors: list[str] = []

    def one() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", engine.port, timeout=START_TIMEOUT_S)
        started = time.monotonic()
        try:
            connection.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
            response = connection.getresponse()
            response.read()
            if response.status != 200:
                errors.append(f"HTTP {response.status}")
            times.append(time.monotonic() - started)
        except OSError as exc:
            errors.append(str(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=one) for _ in range(batch)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors or not times:
        raise RuntimeError(f"{engine.kind}: the speed probe failed: {'; '.join(errors) or 'no answer'}")
    return statistics.median(times) / tokens
