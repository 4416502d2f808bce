"""Shared helpers for the emulation's own tests: one emulated engine per module where it can be."""

from __future__ import annotations

import pytest

from emulation.engine_process import EngineProcess


@pytest.fixture(scope="module")
def vllm():
    """A vLLM emulator shared by a module's tests; each test leaves it with misbehaviour off."""
    with EngineProcess("--kind", "vllm", "--max-running", "2") as engine:
        yield engine


@pytest.fixture
def calm_vllm(vllm):
    yield vllm
    if vllm.alive():
        vllm.misbehave("none")
