"""The real-engine tier's tests: real vLLM and SGLang servers (engines/), installed by `make engines`.

Every module here sets `pytestmark = pytest.mark.engines`, which plain `make test` deselects (pyproject's addopts): the
tier takes minutes to install and its engines a minute each to start. `make test-engines` runs
them; where the tier is not installed each skips with the reason, and under CI=true that skip is
a failure (tests/environment.py): .ci/run installs the tier first.
"""

from __future__ import annotations

import pytest

from engines import tier as tier_module
from engines.servers import RealEngine
from tests.environment import unavailable


@pytest.fixture(scope="session")
def tier() -> tier_module.Tier:
    found = tier_module.installed()
    if isinstance(found, str):
        unavailable(found)
    return found


@pytest.fixture
def vllm(tier):
    with RealEngine.vllm(tier) as engine:
        yield engine


@pytest.fixture
def sglang(tier):
    with RealEngine.sglang(tier) as engine:
        yield engine
