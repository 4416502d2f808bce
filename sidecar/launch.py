"""`drain-sidecar`'s entry point: one line naming what to install when the sidecar's
dependencies are missing, then the CLI.

`pip install modeldrain` gives the hook alone (prometheus-client): the engine's own Python
environment may take it without its aiohttp being moved. The sidecar's aiohttp and uvloop come
with the extra, `pip install 'modeldrain[sidecar]'`; without them `drain-sidecar` says so here,
before anything imports aiohttp, instead of a traceback.
"""

from __future__ import annotations

import importlib
import sys

from hook.exitcodes import ExitCode

# The distributions the `sidecar` extra installs, by the module each provides.
REQUIRED_MODULES = ("aiohttp", "uvloop")
INSTALL_HINT = "pip install 'modeldrain[sidecar]'"


def missing_dependency() -> str | None:
    """The first required module that cannot be imported, with why; None when all import."""
    for module in REQUIRED_MODULES:
        try:
            importlib.import_module(module)
        except ImportError as exc:  # missing, or installed without one of its own dependencies
            return f"{module} ({exc})"
    return None


def main(argv: list[str] | None = None) -> int:
    missing = missing_dependency()
    if missing is not None:
        print(f"drain-sidecar: error: cannot import {missing}; install the sidecar's dependencies: "
              f"{INSTALL_HINT}", file=sys.stderr)
        return ExitCode.USAGE
    from sidecar.cli import main as cli_main  # imports aiohttp: only once it is known to be there

    return cli_main(argv)
