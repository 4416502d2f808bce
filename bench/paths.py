"""Where the bench finds what it runs and serves: the checkout, the executables, vLLM's real scrape.

One place, so that every part measures the same files: the static executables `make bundle` writes
under dist/, the console scripts beside the interpreter that runs the bench (.venv/bin under
`make bench`), and the real idle exposition the emulator starts from.
"""

from __future__ import annotations

import sys
from pathlib import Path

from emulation.template import TEMPLATES_DIR, VLLM_TEMPLATE

REPO = Path(__file__).resolve().parents[1]

PRESTOP_BUNDLE = REPO / "dist" / "prestop"
SIDECAR_BUNDLE = REPO / "dist" / "drain-sidecar"
PRESTOP_CONSOLE_SCRIPT = Path(sys.executable).parent / "prestop"
SIDECAR_CONSOLE_SCRIPT = Path(sys.executable).parent / "drain-sidecar"

# vLLM 0.32's /metrics with nothing running (~47 KB): what the cost and attack benches serve.
VLLM_IDLE_SCRAPE = TEMPLATES_DIR / VLLM_TEMPLATE


def prestop_executable() -> Path:
    """The bundle when `make bundle` has built it, else the console script in this virtualenv."""
    return PRESTOP_BUNDLE if PRESTOP_BUNDLE.is_file() else PRESTOP_CONSOLE_SCRIPT
