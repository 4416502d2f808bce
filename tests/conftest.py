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


# The arm64 executables' tests run under qemu, several times slower than native: `make test`
# leaves them out (deselected, not skipped: under CI=true a skip is a failure), `make
# test-arm64` runs them with --arm64 (docs/build.md).
ARM64_OPTION = "--arm64"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(ARM64_OPTION, action="store_true",
                     help="also run the tests marked arm64 (the arm64 executables under qemu)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption(ARM64_OPTION):
        return
    deselected = [item for item in items if item.get_closest_marker("arm64") is not None]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if item.get_closest_marker("arm64") is None]
