"""dist/drain-sidecar, the sidecar's static executable: it serves as the Python package does,
with aiohttp and uvloop inside and nothing of the test bed."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from modeldrain.hook.engine import PROC_ROOT_ENV
from tests.builds import make
from tests.process_table import empty_process_table

from .conftest import TOOLCHAIN_BIN, Build, elf_machine

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

START_TIMEOUT_S = 20  # natively; plus the build's start allowance (under qemu)


def start(build: Build, sidecar_bundle: Path, tmp_path: Path, *args: str) -> tuple[subprocess.Popen, int]:
    ready = tmp_path / "ready"
    unpack = tmp_path / "unpack"
    unpack.mkdir()
    env = {"PATH": "/usr/bin:/bin", "TMPDIR": str(unpack), PROC_ROOT_ENV: empty_process_table()}
    process = subprocess.Popen([str(sidecar_bundle), "--listen", "127.0.0.1:0", "--ready-file", str(ready), *args],
                               env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline_at = time.monotonic() + START_TIMEOUT_S + build.start_allowance_s
    while not ready.exists():
        assert process.poll() is None, process.communicate()[0]
        assert time.monotonic() < deadline_at, "not listening in time"
        time.sleep(0.02)
    return process, int(ready.read_text().rsplit(":", 1)[1])


def test_serves_the_engines_work_and_stops_cleanly(build, sidecar_bundle, engine, tmp_path):
    process, port = start(build, sidecar_bundle, tmp_path, "--engine", "vllm", "--port", str(engine.port))
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/work", timeout=10) as response:
            work = json.load(response)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/openapi.json", timeout=10) as response:
            spec = json.load(response)  # a data file inside the bundle, read with importlib.resources
        process.send_signal(signal.SIGINT)  # stop now, no linger
        output, _ = process.communicate(timeout=20)
    finally:
        process.kill()
    assert work["read"]["outcome"] == "idle" and work["read"]["complete"], work
    assert spec["openapi"].startswith("3.")
    assert process.returncode == 0, output
    events = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    assert [e["event"] for e in events if e["event"] in ("listening", "stopped")] == ["listening", "stopped"]
    assert "Traceback" not in output
    assert list((tmp_path / "unpack").iterdir()) == []  # staticx and PyInstaller both cleaned up


def test_is_static_and_holds_its_http_stack_but_not_the_test_bed(build, sidecar_bundle):
    with open(sidecar_bundle, "rb") as f:
        head = f.read(4096)
    assert head[:4] == b"\x7fELF"
    assert elf_machine(head) == build.elf_machine
    assert build.loader not in head  # no program interpreter: static
    make("bundle", arch="amd64")  # its toolchain's archive viewer reads either architecture's
    listing = subprocess.run([str(TOOLCHAIN_BIN / "pyi-archive_viewer"), "--list", "--recursive", "--brief",
                              str(build.onefile("drain-sidecar"))], capture_output=True, text=True, timeout=60, check=True).stdout
    for inside in ("aiohttp", "uvloop", "modeldrain.sidecar.cli", "modeldrain.hook.reader", "prometheus_client", "modeldrain/sidecar/openapi.json"):
        assert inside in listing, inside
    for excluded in ("emulation", "tests.", "bench"):
        assert excluded not in listing, excluded
