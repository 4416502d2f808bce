"""Paths every test package uses."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# The real engines' /metrics scrapes live in the shared folder beside the checkout.
FIXTURES = REPO.parent / "shared" / "fixtures"


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    if not FIXTURES.is_dir():
        pytest.fail(f"real engine scrapes not found at {FIXTURES} (shared/ must sit beside the checkout)")
    return FIXTURES
