"""What a test needs from the machine, and the one rule for when the machine lacks it.

A laptop (no root, no podman, no Debian mirror) skips such a test with the reason. CI sets
CI=true (as GitHub Actions, GitLab CI and most others do), and there a skip is a failure: CI is
where root, apt, debootstrap and podman exist, so CI must keep proving what only it can run.
The rule is enforced for every skip, wherever it comes from, by the report hooks below, which
tests/conftest.py installs; the helpers only give each skip a reason that says what is missing.
"""

from __future__ import annotations

import os
import platform
import shutil
from typing import Any, Generator, NoReturn

import pytest

CI_ENV = "CI"


def in_ci() -> bool:
    """CI=true (any case), the convention CI services set."""
    return os.environ.get(CI_ENV, "").strip().lower() == "true"


def unavailable(reason: str) -> NoReturn:
    """Skip with `reason` (under CI=true the report hooks turn it into a failure)."""
    pytest.skip(reason)


def require_root(why: str) -> None:
    if os.geteuid() != 0:
        unavailable(f"needs root ({why}); CI runs as root")


def require_x86_64(why: str) -> None:
    if platform.machine() != "x86_64":
        unavailable(f"needs x86_64 ({why}), this is {platform.machine()}")


def require_executable(name: str, why: str) -> str:
    found = shutil.which(name)
    if found is None:
        unavailable(f"needs `{name}` ({why}) on PATH")
    return found


def _skip_reason(longrepr: Any) -> str:
    # A skip's longrepr is (path, line, "Skipped: reason").
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def _fail_skip_under_ci(report: pytest.TestReport | pytest.CollectReport) -> None:
    if report.skipped and in_ci() and not hasattr(report, "wasxfail"):
        reason = _skip_reason(report.longrepr)
        report.outcome = "failed"
        report.longrepr = (f"skipped under {CI_ENV}=true, where every test must run: {reason} "
                           f"(unset {CI_ENV} to skip it on this machine)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    _fail_skip_under_ci(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, None]:
    outcome = yield
    _fail_skip_under_ci(outcome.get_result())
