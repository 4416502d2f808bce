"""The engine emulator as one static executable (build/engine-emulator.spec): the engine of the
container tests' stand-in engine image, which holds no Python, no shell and no libc.

It answers to the real images' commands, so the hook finds the engine in /proc exactly as it
does in a real image:

    vllm serve [MODEL] [--port N] ...                     vllm/vllm-openai's entrypoint
    python3 -m vllm.entrypoints.openai.api_server ...     its older entrypoint
    python3 -m sglang.launch_server ...                   lmsysorg/sglang's command
    sglang serve ...
    /app/llm-d-routing-sidecar -port=N -vllm-port=M ...   a direct decoder's routing proxy

The image holds this file under each of those names (copies, not symlinks: staticx's launcher
passes the program the exec'd file's real path, which a symlink would turn into this file's own
name). Called by any other name it takes the emulator's own flags (`python -m emulation.engine
--help`).
"""

from __future__ import annotations

import os
import sys
from typing import Sequence

ENGINE_MODULES = {"vllm.entrypoints.openai.api_server": "vllm", "sglang.launch_server": "sglang"}
ROUTING_PROXY = "llm-d-routing-sidecar"


def _routing_proxy(args: list[str]) -> int:
    """The proxy's Go-style flags (-port=N, -vllm-port=M; the rest ignored) onto emulation.proxy."""
    import asyncio

    from emulation.proxy import serve

    values = dict(arg.lstrip("-").split("=", 1) for arg in args if arg.startswith("-") and "=" in arg)
    try:
        listen, upstream = int(values.get("port", "8000")), int(values["vllm-port"])
    except (KeyError, ValueError):
        print(f"{ROUTING_PROXY}: needs -port=N and -vllm-port=M, got {args}", file=sys.stderr)
        return 2
    return asyncio.run(serve(upstream, listen, None, host=""))


def main(argv: Sequence[str] | None = None) -> int:
    from emulation.launch import run_shim
    from modeldrain.hook.bundle import executable_path

    argv = list(sys.argv if argv is None else argv)
    # Inside the static executable argv[0] is the unpacked program; the exec'd name is kept here.
    program, rest = os.path.basename(executable_path() or argv[0]), argv[1:]
    if program in ("vllm", "sglang"):
        return run_shim(program, rest)  # `serve` is the shims' subcommand positional
    if program == ROUTING_PROXY:
        return _routing_proxy(rest)
    if program.startswith("python"):
        module = rest[1] if rest[:1] == ["-m"] and len(rest) > 1 else None
        if module not in ENGINE_MODULES:
            print(f"{program}: this image's {program} runs only {', '.join(sorted(ENGINE_MODULES))} "
                  f"with -m", file=sys.stderr)
            return 2
        return run_shim(ENGINE_MODULES[module], rest[2:])
    from emulation.engine import main as engine_main

    return engine_main(rest)


if __name__ == "__main__":
    sys.exit(main())
