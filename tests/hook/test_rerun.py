"""The run marker: an earlier unfinished run in the same container, within its grace, and nothing else."""

from __future__ import annotations

import json
import os

from modeldrain.hook.rerun import begin, container_key, finish


def test_a_first_run_leaves_a_marker_and_a_second_finds_it(tmp_path):
    first = begin("key", 1000.0, 30.0, directory=str(tmp_path), now_boot_s=1000.5, pid=4242)
    assert first.first is None and first.path is not None and os.path.exists(first.path)
    second = begin("key", 1003.0, 30.0, directory=str(tmp_path), now_boot_s=1003.1, pid=4343)
    assert second.first is not None and (second.first.pid, second.first.started_boot_s) == (4242, 1000.0)
    assert second.first.running is False  # no process 4242 started at boot second 1000 here
    third = begin("key", 1004.0, 30.0, directory=str(tmp_path), now_boot_s=1004.1, pid=4444)
    assert third.first is not None and third.first.pid == 4242  # still measured from the first
    finish(third)
    assert not os.listdir(tmp_path)
    finish(second)  # gone already: nothing to do, nothing raised


def test_a_marker_older_than_its_grace_or_of_another_key_is_no_earlier_run(tmp_path):
    old = begin("key", 1000.0, 30.0, directory=str(tmp_path), now_boot_s=1000.5, pid=1)
    assert begin("key", 1031.0, 30.0, directory=str(tmp_path), now_boot_s=1031.0, pid=2).first is None
    assert old.path is not None
    with open(old.path, "w") as f:
        json.dump({"key": "another", "pid": 1, "started_boot_s": 1030.0, "started_at_unix": 0, "grace_s": 30}, f)
    assert begin("key", 1031.0, 30.0, directory=str(tmp_path), now_boot_s=1031.0, pid=3).first is None


def test_a_marker_that_is_not_ours_to_read_is_no_earlier_run(tmp_path):
    first = begin("key", 1000.0, 30.0, directory=str(tmp_path), now_boot_s=1000.0, pid=1)
    assert first.path is not None
    with open(first.path, "w") as f:
        f.write("{not json")
    assert begin("key", 1001.0, 30.0, directory=str(tmp_path), now_boot_s=1001.0, pid=2).first is None


def test_an_unwritable_directory_costs_only_the_marker(tmp_path):
    marker = begin("key", 1000.0, 30.0, directory=str(tmp_path / "missing"), now_boot_s=1000.0, pid=1)
    assert marker.path is None and marker.first is None and "cannot keep the run marker" in marker.problem
    finish(marker)


def test_the_key_tells_command_lines_and_targets_apart():
    base = container_key(["--grace", "30"], "http://127.0.0.1:8000/metrics")
    assert base == container_key(["--grace", "30"], "http://127.0.0.1:8000/metrics")
    assert base != container_key(["--grace", "31"], "http://127.0.0.1:8000/metrics")
    assert base != container_key(["--grace", "30"], "http://127.0.0.1:30000/metrics")
