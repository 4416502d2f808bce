"""`modeldrain`: the tools around the two programs, for the people who deploy and retire replicas.

    modeldrain lint FILE...         check engine manifests the way deploy/'s are checked
    modeldrain inject FILE...|-     write manifests back with modeldrain added to their engines
    modeldrain retirement URL...    the retirement protocol's verdict for one replica

Wiring only. Each tool lives in its own package (modeldrain/lint/, modeldrain/inject/, modeldrain/retirement/) and is
imported only when named, so one tool's dependencies never stand in another's way.
"""

from __future__ import annotations

import sys
from typing import Callable

from modeldrain.hook.exitcodes import ExitCode

__all__ = ["main"]

USAGE = "usage: modeldrain {lint,inject,retirement} ARGS... (modeldrain TOOL --help)"


def _lint(argv: list[str]) -> int:
    from modeldrain.lint.cli import run_lint

    return run_lint(argv, prog="modeldrain lint")


def _inject(argv: list[str]) -> int:
    from modeldrain.inject.cli import run_inject

    return run_inject(argv, prog="modeldrain inject")


def _retirement(argv: list[str]) -> int:
    from modeldrain.retirement.cli import run_retirement

    return run_retirement(argv, prog="modeldrain retirement")


TOOLS: dict[str, Callable[[list[str]], int]] = {"lint": _lint, "inject": _inject, "retirement": _retirement}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] in (["-h"], ["--help"]):
        print(USAGE)
        return ExitCode.OK
    tool = TOOLS.get(args[0]) if args else None
    if tool is None:
        said = f"unknown tool {args[0]!r}; " if args else ""
        print(f"modeldrain: error: {said}{USAGE}", file=sys.stderr)
        return ExitCode.USAGE
    return tool(args[1:])
