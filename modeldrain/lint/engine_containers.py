"""Which container of a Pod runs the engine: recognised by what it runs, with the hook's own rules.

A container runs its `command` plus `args`; without a `command`, its image's entrypoint plus
`args` (only vLLM's published image has one that serves: `vllm serve`). The words are read by
modeldrain/hook/engine.py's `engine_kind`, the one the hook itself uses on /proc, so `vllm serve`,
`python -m vllm.entrypoints...` and `python -m sglang.launch_server` are engines here exactly when
they are to the hook. A shell's `-c` script (`sh -c "cd /models && exec vllm serve ... --port 9000"`)
is split into its simple commands with shlex, the standard library's POSIX shell lexer, and each
is read the same way, leading `exec`, `env` and NAME=value words dropped.
"""

from __future__ import annotations

import posixpath
import shlex
from dataclasses import dataclass
from typing import Any

from modeldrain.hook.engine import engine_kind
from modeldrain.hook.gauges import EngineKind

__all__ = ["EngineRun", "container_argv", "engine_containers", "engine_run"]

SHELLS = frozenset({"sh", "bash", "dash", "ash", "zsh", "ksh"})
# Images whose entrypoint starts the engine when a container gives only `args` (repository, no
# registry or tag): vLLM's published image's ENTRYPOINT is `vllm serve`.
IMAGE_ENTRYPOINTS: dict[str, tuple[str, ...]] = {"vllm/vllm-openai": ("vllm", "serve")}
# What shlex's punctuation_chars splits out (runs of them are one token: `);`): each ends a simple
# command (a redirection's target then reads as a command of its own, never as an engine).
_PUNCTUATION = frozenset("();<>|&")
_WRAPPERS = frozenset({"exec", "env", "nohup"})


@dataclass(frozen=True)
class EngineRun:
    """The engine one container runs: which, and its own argv (a shell's wrapper taken off)."""

    kind: EngineKind
    argv: tuple[str, ...]


def image_repository(image: str) -> str:
    """`docker.io/vllm/vllm-openai:v0.32.0@sha256:...` -> `vllm/vllm-openai`."""
    name = image.split("@", 1)[0]
    slash = name.rfind("/")
    if ":" in name[slash + 1:]:
        name = name[:name.rfind(":")]
    parts = name.split("/")
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        parts = parts[1:]  # a registry host
    return "/".join(parts)


def _strings(value: Any) -> list[str]:
    return [str(item) for item in value] if isinstance(value, list) else []


def container_argv(container: dict[str, Any]) -> list[str]:
    """What the container runs: command + args, or its image's known entrypoint + args."""
    command, args = _strings(container.get("command")), _strings(container.get("args"))
    if command:
        return command + args
    entrypoint = IMAGE_ENTRYPOINTS.get(image_repository(str(container.get("image", ""))))
    return [*entrypoint, *args] if entrypoint else args


def engine_run(container: dict[str, Any]) -> EngineRun | None:
    """The engine a container runs, or None."""
    argv = container_argv(container)
    kind = engine_kind(argv)
    if kind is not None:
        return EngineRun(kind, tuple(argv))
    script = _shell_script(argv)
    if script is None:
        return None
    runs = [EngineRun(kind, tuple(words)) for words in _simple_commands(script)
            if (kind := engine_kind(words)) is not None]
    return runs[-1] if runs else None


def _shell_script(argv: list[str]) -> str | None:
    """The script of `sh -c SCRIPT ...` (also `-ec`, `-lc`, `bash -xc`), else None."""
    if not argv or posixpath.basename(argv[0]) not in SHELLS:
        return None
    words = argv[1:]
    for index, word in enumerate(words):
        if not word.startswith("-") or word in ("-", "--"):
            return None
        if not word.startswith("--") and "c" in word[1:]:
            rest = words[index + 1:]
            while rest and rest[0].startswith("-") and rest[0] not in ("-", "--"):
                rest = rest[1:]
            return rest[0] if rest else None
    return None


def _simple_commands(script: str) -> list[list[str]]:
    """The script's simple commands, each without its leading exec/env/NAME=value words."""
    commands: list[list[str]] = []
    lines = script.replace("\\\n", " ").splitlines()
    for line in lines:
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        current: list[str] = []
        try:
            tokens = list(lexer)
        except ValueError:  # an open quote: a line of a multi-line string, not a command
            continue
        for token in tokens + [";"]:
            if set(token) <= _PUNCTUATION:
                if current:
                    commands.append(_unwrapped(current))
                current = []
            else:
                current.append(token)
    return commands


def _unwrapped(words: list[str]) -> list[str]:
    while words and (words[0] in _WRAPPERS or ("=" in words[0] and words[0].split("=", 1)[0].isidentifier())):
        words = words[1:]
    return words


def engine_containers(containers: list[dict[str, Any]]) -> list[tuple[dict[str, Any], EngineRun]]:
    """Each container that runs an engine, in order."""
    return [(container, run) for container in containers if (run := engine_run(container)) is not None]
