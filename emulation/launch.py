"""Start the emulator under the real engines' command lines, for code that reads /proc/*/cmdline.

The hook finds the engine's kind, role and port from its process's argv. `launch_command` writes
small shims into a directory so the emulator runs as, for instance,

    [python, DIR/bin/vllm, serve, tiny, --port, P]                      (LaunchShape.VLLM_CLI)
    [python, -m, vllm.entrypoints.openai.api_server, --model, tiny, --port, P]  (VLLM_MODULE)
    [python, -m, sglang.launch_server, --model-path, tiny, --port, P, --enable-metrics]  (SGLANG_MODULE)
    [python, DIR/bin/sglang, serve, --model-path, tiny, --port, P, --enable-metrics]   (SGLANG_CLI)

The shims translate the engine flags that matter (port, host, TLS, data parallel, role, shutdown
timeout, model name, batch size) into emulator flags and ignore the rest, as the engines' flags are
many. Emulator-only settings travel in the environment: EMULATOR_ARGS_ENV (extra emulator flags,
shell-quoted), READY_FILE_ENV and STATS_FILE_ENV.
"""

from __future__ import annotations

import argparse
import enum
import logging
import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

READY_FILE_ENV = "MODELDRAIN_EMULATOR_READY_FILE"
STATS_FILE_ENV = "MODELDRAIN_EMULATOR_STATS_FILE"
EMULATOR_ARGS_ENV = "MODELDRAIN_EMULATOR_ARGS"

# Where the real engines listen when no --port is given.
DEFAULT_ENGINE_PORTS = {"vllm": 8000, "sglang": 30000}

_REPO_ROOT = Path(__file__).resolve().parent.parent

log = logging.getLogger(__name__)


class LaunchShape(enum.Enum):
    VLLM_CLI = "vllm-cli"
    VLLM_MODULE = "vllm-module"
    SGLANG_MODULE = "sglang-module"
    SGLANG_CLI = "sglang-cli"

    @property
    def kind(self) -> str:
        return "sglang" if self in (LaunchShape.SGLANG_MODULE, LaunchShape.SGLANG_CLI) else "vllm"


@dataclass(frozen=True)
class LaunchCommand:
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)  # to add to the parent's environment


_SCRIPT = """#!{python}
import sys
sys.path.insert(0, {root!r})
from emulation.launch import run_shim
sys.exit(run_shim({kind!r}, sys.argv[1:]))
"""

_MODULE = """import sys
sys.path.insert(0, {root!r})
from emulation.launch import run_shim
if __name__ == "__main__":
    sys.exit(run_shim({kind!r}, sys.argv[1:]))
"""


def write_shims(directory: Path) -> None:
    """DIR/bin/{vllm,sglang}, and packages vllm.entrypoints.openai.api_server and sglang.launch_server in DIR/lib."""
    bin_dir, lib_dir = directory / "bin", directory / "lib"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for kind in ("vllm", "sglang"):
        script = bin_dir / kind
        script.write_text(_SCRIPT.format(python=sys.executable, root=str(_REPO_ROOT), kind=kind))
        script.chmod(0o755)
    for package, module, kind in (("vllm/entrypoints/openai", "api_server", "vllm"),
                                  ("sglang", "launch_server", "sglang")):
        path = lib_dir / package
        path.mkdir(parents=True, exist_ok=True)
        for part in range(len(package.split("/"))):
            (lib_dir.joinpath(*package.split("/")[: part + 1]) / "__init__.py").touch()
        (path / f"{module}.py").write_text(_MODULE.format(root=str(_REPO_ROOT), kind=kind))


def launch_command(shape: LaunchShape, directory: Path, *, port: int, model: str = "tiny",
                   engine_args: Sequence[str] = ()) -> LaunchCommand:
    """The argv (and environment additions) that start the emulator looking like a real engine.

    `engine_args` are the real engine's flags, e.g. ("--shutdown-timeout", "30") or
    ("--disaggregation-mode", "decode").
    """
    write_shims(directory)
    python = sys.executable
    pythonpath = os.pathsep.join(filter(None, [str(directory / "lib"), os.environ.get("PYTHONPATH")]))
    if shape is LaunchShape.VLLM_CLI:
        argv = [python, str(directory / "bin" / "vllm"), "serve", model, "--port", str(port)]
        return LaunchCommand(tuple(argv) + tuple(engine_args))
    if shape is LaunchShape.SGLANG_CLI:
        argv = [python, str(directory / "bin" / "sglang"), "serve", "--model-path", model, "--port", str(port),
                "--enable-metrics"]
        return LaunchCommand(tuple(argv) + tuple(engine_args))
    if shape is LaunchShape.VLLM_MODULE:
        argv = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", model, "--port", str(port)]
    else:
        argv = [python, "-m", "sglang.launch_server", "--model-path", model, "--port", str(port),
                "--enable-metrics"]
    return LaunchCommand(tuple(argv) + tuple(engine_args), {"PYTHONPATH": pythonpath})


def _vllm_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vllm", add_help=False)
    parser.add_argument("subcommand", nargs="?")
    parser.add_argument("model_tag", nargs="?")
    parser.add_argument("--model")
    parser.add_argument("--served-model-name")
    parser.add_argument("--host")
    parser.add_argument("--port", type=int, default=DEFAULT_ENGINE_PORTS["vllm"])
    parser.add_argument("--ssl-certfile")
    parser.add_argument("--ssl-keyfile")
    parser.add_argument("--data-parallel-size", "-dp", type=int, default=1)
    parser.add_argument("--api-server-count", type=int)
    parser.add_argument("--shutdown-timeout", type=float, default=0.0)
    parser.add_argument("--max-num-seqs", type=int)
    parser.add_argument("--enable-server-load-tracking", action=argparse.BooleanOptionalAction, default=False)
    # Taken and left: a KV producer's exposition is a unified server's (no vLLM release exports how
    # many blocks its connector keeps for the decoder); the hook reads the role from this argv.
    parser.add_argument("--kv-transfer-config")
    return parser


def _sglang_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sglang.launch_server", add_help=False)
    parser.add_argument("subcommand", nargs="?")  # `sglang serve`
    parser.add_argument("--model-path")
    parser.add_argument("--served-model-name")
    parser.add_argument("--host")
    parser.add_argument("--port", type=int, default=DEFAULT_ENGINE_PORTS["sglang"])
    parser.add_argument("--ssl-certfile")
    parser.add_argument("--ssl-keyfile")
    parser.add_argument("--dp-size", "--dp", type=int, default=1)
    parser.add_argument("--disaggregation-mode", choices=["null", "prefill", "decode"], default="null")
    parser.add_argument("--node-rank", type=int, default=0)
    parser.add_argument("--max-running-requests", type=int)
    parser.add_argument("--enable-metrics", action="store_true")
    return parser


def emulator_args(kind: str, engine_args: Sequence[str]) -> list[str]:
    """Translate a real engine's command line into the emulator's."""
    parser = _vllm_parser() if kind == "vllm" else _sglang_parser()
    known, ignored = parser.parse_known_args(list(engine_args))
    if ignored:
        log.info("%s shim ignores %s", kind, " ".join(ignored))
    out = ["--kind", kind, "--port", str(known.port)]
    if known.host:
        out += ["--host", known.host]
    if known.ssl_certfile and known.ssl_keyfile:
        out += ["--tls-cert", known.ssl_certfile, "--tls-key", known.ssl_keyfile]
    if known.served_model_name:
        out += ["--model-name", known.served_model_name]
    if kind == "vllm":
        out += ["--dp", str(known.data_parallel_size)]
        api_servers = known.api_server_count or known.data_parallel_size  # vLLM's default
        if api_servers > 1:
            out += ["--multiprocess", "--api-servers", str(api_servers)]
        if known.enable_server_load_tracking:
            out.append("--server-load-tracking")
        if known.shutdown_timeout > 0:
            out += ["--shutdown-timeout", str(known.shutdown_timeout)]
        if known.max_num_seqs:
            out += ["--max-running", str(known.max_num_seqs)]
    else:
        out += ["--dp", str(known.dp_size)]
        if known.disaggregation_mode != "null":
            out += ["--role", known.disaggregation_mode]
        if known.max_running_requests:
            out += ["--max-running", str(known.max_running_requests)]
        if not known.enable_metrics:
            out.append("--without-metrics")  # SGLang serves /metrics only with --enable-metrics
        if known.node_rank > 0:
            # A worker node runs schedulers only: no tokenizer manager, so no SIGTERM watchdog to
            # drain; it stops at once (docs/engines.md: a node of rank >= 1 is not the one that drains).
            out += ["--on-sigterm", "abort"]
    return out


def run_shim(kind: str, engine_args: Sequence[str]) -> int:
    """Entry point of the shims: run the emulator with translated flags plus the environment's."""
    from emulation.engine import main  # late: keep the shim's import light until it runs

    argv = emulator_args(kind, engine_args) + shlex.split(os.environ.get(EMULATOR_ARGS_ENV, ""))
    if os.environ.get(READY_FILE_ENV):
        argv += ["--ready-file", os.environ[READY_FILE_ENV]]
    if os.environ.get(STATS_FILE_ENV):
        argv += ["--stats-file", os.environ[STATS_FILE_ENV]]
    return main(argv)
