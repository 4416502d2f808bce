"""The suite's one rule for the process table: a program a test starts sees no engine there
unless the test shows it one.

`prestop` and `drain-sidecar` read the engine's argv (its kind, role and port) from /proc. In a
Pod that is the Pod's own engine; on a test machine /proc shows every engine that runs there at
that moment, other tests' and other people's, and a test would read one of those instead: a
refused read became idle through another engine's --port, a vLLM read became an SGLang one. So
for the whole session MODELDRAIN_PROC_ROOT points both programs at an empty directory; a test
that studies the argv reading passes --proc-root with a tree of its own (tests/e2e's
container_proc, tests/sidecar's proc_with). tests/conftest.py installs these hooks.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

from modeldrain.hook.engine import PROC_ROOT_ENV

# Readable by all: a test that drops the sidecar to another user still gives it an empty table.
EMPTY_TABLE_MODE = 0o755


def pytest_configure(config: pytest.Config) -> None:
    empty = tempfile.mkdtemp(prefix="no-processes-")
    os.chmod(empty, EMPTY_TABLE_MODE)
    os.environ[PROC_ROOT_ENV] = empty


def pytest_unconfigure(config: pytest.Config) -> None:
    empty = os.environ.pop(PROC_ROOT_ENV, None)
    if empty:
        shutil.rmtree(empty, ignore_errors=True)


def empty_process_table() -> str:
    """The empty directory this session's programs read as /proc (for an environment built from scratch)."""
    return os.environ[PROC_ROOT_ENV]
