"""How this prestop was built: a bundle carries a build stamp; a source install says so."""

from __future__ import annotations

import platform
import sys


def build_description() -> str:
    frozen = getattr(sys, "frozen", False)
    how = "bundled executable" if frozen else "Python package"
    return f"{how}, Python {platform.python_version()} on {platform.machine()}"
