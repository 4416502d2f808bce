"""The skip rule (tests/environment.py): a laptop skips with the reason, CI=true fails instead."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import REPO

SAMPLE = textwrap.dedent('''
    import pytest
    from tests.environment import require_executable

    def test_skips_by_call():
        pytest.skip("needs a unicorn")

    @pytest.mark.skipif(True, reason="needs a marker's unicorn")
    def test_skips_by_marker():
        pass

    def test_skips_by_helper():
        require_executable("no-such-tool-anywhere", "to prove the helper")

    def test_passes():
        pass

    @pytest.mark.xfail(reason="a known failure is not a skip", strict=True)
    def test_xfails():
        assert False
''')

MODULE_SKIP = 'import pytest\npytest.skip("needs a whole module of unicorns", allow_module_level=True)\n'


def run_sample(tmp_path, ci: str | None, source: str = SAMPLE) -> tuple[int, str, dict[str, int]]:
    (tmp_path / "test_sample.py").write_text(source)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    env["PYTHONPATH"] = str(REPO)
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # only the rule under test: fast, and nothing else
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.environment", "-p", "no:cacheprovider",
         "-q", "-rA", "--rootdir", str(tmp_path), "-c", os.devnull, str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    summary = done.stdout.strip().splitlines()[-1]
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", summary)}
    return done.returncode, done.stdout, counts


@pytest.mark.parametrize("ci", [None, "false"])
def test_outside_ci_a_missing_prerequisite_is_a_skip_with_its_reason(tmp_path, ci):
    code, out, counts = run_sample(tmp_path, ci)
    assert code == 0, out
    assert counts == {"passed": 1, "skipped": 3, "xfailed": 1}, out
    for reason in ("needs a unicorn", "needs a marker's unicorn", "needs `no-such-tool-anywhere`"):
        assert reason in out


@pytest.mark.parametrize("ci", ["true", "TRUE"])
def test_under_ci_every_skip_is_a_failure_that_says_why(tmp_path, ci):
    code, out, counts = run_sample(tmp_path, ci)
    assert code == 1, out
    # A skip in the call fails the test; a skipif marker acts at set-up, so it reads as an error.
    assert counts == {"failed": 2, "error": 1, "passed": 1, "xfailed": 1}, out  # the pass, xfail stand
    for reason in ("needs a unicorn", "needs a marker's unicorn", "needs `no-such-tool-anywhere`"):
        assert f"skipped under CI=true, where every test must run: {reason}" in out


def test_a_module_that_skips_itself_skips_outside_ci_and_stops_the_run_under_ci(tmp_path):
    code, out, counts = run_sample(tmp_path, None, MODULE_SKIP)
    assert (code, counts) == (5, {"skipped": 1}), out  # 5: no test ran, none failed
    code, out, counts = run_sample(tmp_path, "true", MODULE_SKIP)
    assert code == 2 and counts == {"error": 1}, out  # a collection error: pytest stops there
    assert "skipped under CI=true, where every test must run: needs a whole module of unicorns" in out
