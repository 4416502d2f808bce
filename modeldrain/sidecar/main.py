"""drain-sidecar's entry point: `drain-sidecar retirement ...` runs the reference client; anything else serves.

The dispatch comes before the server's imports, so the retirement command runs without aiohttp or
uvloop (a controller's or an operator's machine need not have them). Serving needs both: they
come with the `sidecar` extra (`pip install modeldrain` alone gives the hook, which an engine's
own Python environment can take without its aiohttp being moved). Without them the server says
in one line what to install, before anything imports aiohttp, instead of a traceback.
"""

from __future__ import annotations

import importlib
import sys

from modeldrain.hook.exitcodes import ExitCode

__all__ = ["main", "missing_server_module"]

RETIREMENT = "retirement"

# What the server imports beyond the hook's core: the `sidecar` extra's packages.
SERVER_MODULES = ("aiohttp", "uvloop")
INSTALL_HINT = "pip install 'modeldrain[sidecar]'"


def missing_server_module() -> str | None:
    """The first server module that cannot be imported, with why; None when all import."""
    for module in SERVER_MODULES:
        try:
            importlib.import_module(module)
        except ImportError as exc:  # missing, or installed without one of its own dependencies
            return f"{module} ({exc})"
    return None


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == [RETIREMENT]:
        from modeldrain.retirement import cli as retirement_cli

        return retirement_cli.run_retirement(args[1:])
    missing = missing_server_module()
    if missing is not None:
        print(f"drain-sidecar: error: cannot import {missing}; install the sidecar's dependencies: "
              f"{INSTALL_HINT}", file=sys.stderr)
        return ExitCode.USAGE
    from modeldrain.sidecar import cli

    return cli.serve_main(args)


if __name__ == "__main__":
    sys.exit(main())
