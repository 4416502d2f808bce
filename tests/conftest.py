"""Paths every test package uses."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# The real engines' /metrics scrapes: in the repository once, read by the emulator and the tests.
SCRAPES = REPO / "emulation" / "templates"


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return SCRAPES
