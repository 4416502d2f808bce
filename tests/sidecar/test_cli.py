"""drain-sidecar as its Pod runs it: a non-root user on a read-only root filesystem."""

from __future__ import annotations

import os
import signal

import pytest

from .sidecar_process import SidecarProcess

pytestmark = pytest.mark.root

NOBODY = 65534

# A private mount namespace whose / is read-only; only the test's ready-file directory stays
# writable (a test convenience: the sidecar itself writes nothing). Then uid/gid 65534 with no
# capability but CAP_DAC_READ_SEARCH, which only lets it read this machine's interpreter under
# /root (mode 0700 here; an image installs it world-readable).
READ_ONLY_NOBODY = (
    "unshare", "--mount", "--propagation", "private", "--",
    "sh", "-c",
    'mount --bind "$SIDECAR_READY_DIR" "$SIDECAR_READY_DIR" && mount -o remount,bind,ro / && cd / && '
    f'exec setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups '
    '--inh-caps=-all,+dac_read_search --ambient-caps=+dac_read_search --bounding-set=-all,+dac_read_search "$@"',
    "sidecar-as-nobody",
)


def _status_field(pid: int, name: str) -> list[str]:
    with open(f"/proc/{pid}/status") as f:
        return next(line.split(":", 1)[1].split() for line in f if line.startswith(name + ":"))


def test_runs_as_nobody_on_a_read_only_root(vllm_engine):
    if os.geteuid() != 0:
        pytest.skip("needs root to make the mount namespace and drop to nobody (CI runs as root)")
    with SidecarProcess("--port", str(vllm_engine.port), "--engine", "vllm", wrapper=READ_ONLY_NOBODY) as sidecar:
        pid = sidecar.process.pid
        assert _status_field(pid, "Uid")[0] == str(NOBODY)
        with open(f"/proc/{pid}/mountinfo") as f:
            root_mount = next(line.split() for line in f if line.split()[4] == "/")
        assert "ro" in root_mount[5].split(",")
        body = sidecar.work()
        assert body["read"]["complete"] and body["read"]["idle"] and body["read"]["outcome"] == "idle"
        sidecar.send_signal(signal.SIGINT)
        assert sidecar.wait(10) == 0
    assert "Traceback" not in sidecar.log_text()
