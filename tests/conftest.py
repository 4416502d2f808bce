"""Paths every test package uses, the suite's one rule for skips (tests/environment.py), and its
empty process table (tests/process_table.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

# Under CI=true a skip is a failure: these hooks apply it to every test and every collector.
from tests.environment import pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401
# No program a test starts reads this machine's process table (tests/process_table.py).
from tests.process_table import pytest_configure, pytest_unconfigure  # noqa: F401

REPO = Path(__file__).resolve().parents[1]
# The real engines' /metrics scrapes: in the repository once, read by the emulator and the tests.
SCRAPES = REPO / "emulation" / "templates"


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return SCRAPES
