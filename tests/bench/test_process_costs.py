"""The cost benches' shared measurements, on real processes."""

import subprocess
import sys
from pathlib import Path

import pytest

from bench.costs.process import (
    GNU_TIME,
    ExecutableRuns,
    alternate,
    footprint,
    max_rss_kib,
    session_sum_kib,
    tree_bytes,
    version_line,
)


def test_a_session_sums_the_memory_of_its_own_processes_only(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "import sys, time; sys.stdout.write('up\\n'); "
                              "sys.stdout.flush(); time.sleep(30)"],
                             start_new_session=True, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "up\n"
        hwm = session_sum_kib(child.pid, None, "VmHWM")
        pss = session_sum_kib(child.pid, None, "Pss", source="smaps_rollup")
        assert 1024 < hwm < 512 * 1024 and 0 < pss <= hwm
        assert session_sum_kib(child.pid, child.pid, "VmHWM") == 0  # the one process, left out
    finally:
        child.kill()
        child.wait()
    assert session_sum_kib(child.pid, None, "VmHWM") == 0  # gone: nothing, no error


@pytest.mark.skipif(not GNU_TIME.exists(), reason="/usr/bin/time (Debian's `time` package) is not installed")
def test_the_peak_rss_comes_from_a_real_time_report(tmp_path):
    report = tmp_path / "time.txt"
    subprocess.run([str(GNU_TIME), "-v", "-o", str(report), sys.executable, "-c", "b = bytearray(64 << 20)"],
                   check=True)
    assert max_rss_kib(report) > 64 * 1024
    report.write_text("Command exited with non-zero status 1\n")
    assert max_rss_kib(report) is None


def test_footprint_counts_the_bundle_alone_and_a_script_with_its_packages(tmp_path):
    bundle = tmp_path / "prestop"
    bundle.write_bytes(b"\0" * 1000)
    assert footprint("bundle", bundle, ("hook",)) == {
        "bytes": 1000, "note": "one static file: no Python needed in the image"}
    script = footprint("console script", bundle, ("modeldrain.hook", "no_such_package_here"))
    hook_dir = Path(__file__).resolve().parents[2] / "modeldrain" / "hook"
    assert script["parts"] == {"script": 1000, "modeldrain/hook/": tree_bytes(hook_dir)}
    assert script["bytes"] == 1000 + script["parts"]["modeldrain/hook/"] > 1000


def test_tree_bytes_counts_files_once_and_not_through_links(tmp_path):
    (tmp_path / "a").write_bytes(b"x" * 10)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "b").write_bytes(b"y" * 5)
    (tmp_path / "link").symlink_to(tmp_path / "a")
    assert tree_bytes(tmp_path) == 15 + len(str(tmp_path / "a"))


def test_a_version_that_cannot_run_is_said_not_raised(tmp_path):
    assert version_line(Path(sys.executable), "--version").startswith("Python 3.")
    missing = version_line(tmp_path / "absent", "version")
    assert missing.startswith("(version failed: ") and "absent" in missing


def test_runs_alternate_after_a_warm_up_that_is_not_kept_each_in_its_own_tmpdir_removed_after():
    calls, tmpdirs = [], set()
    all_runs = {"bundle": ExecutableRuns("bundle", "/b"), "console": ExecutableRuns("console", "/c")}

    def timed(runs, env):
        assert Path(env["TMPDIR"]).is_dir()
        tmpdirs.add((runs.name, env["TMPDIR"]))
        runs.failures.append("timed")
        calls.append(("timed", runs.name, runs is all_runs[runs.name]))

    def memory(runs, env, report):
        assert report.exists()
        calls.append(("memory", runs.name, runs is all_runs[runs.name]))

    alternate(all_runs, 2, tmp_prefix="test-alternate", timed=timed, memory=memory)
    warm_up = [("timed", "bundle", False), ("timed", "console", False)]
    rounds = [("timed", "bundle", True), ("timed", "console", True)] * 2
    memory_rounds = [("memory", "bundle", True), ("memory", "console", True)] * 2 if GNU_TIME.exists() else []
    assert calls == warm_up + rounds + memory_rounds
    assert all_runs["bundle"].samples() == {"max_rss_kib": [], "session_hwm_kib": [], "failures": ["timed"] * 2}
    assert len({d for _, d in tmpdirs}) == 2 and not any(Path(d).exists() for _, d in tmpdirs)
