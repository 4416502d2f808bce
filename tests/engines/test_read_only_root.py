"""The real engines under exactly the filesystem view of each deploy/ manifest whose engine container
has a read-only root (engines/podview.py reads the mounts, env and user from the YAML): each
starts, serves completions and a chat request without one failed write in its log, and a drain
(prestop from the venv, run inside the engine's view with the manifest's env and TMPDIR) works there.

Manifests whose engine containers see the same filesystem share one start per engine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import urllib.request
from pathlib import Path

import pytest

from emulation.kubelet import delete_pod
from emulation.load import LoadGenerator, UniformDurations
from engines.podview import FilesystemView, exec_argv, hook_argv_in, kept_in_home, views_of
from engines.servers import SERVED_MODEL_NAME, RealEngine, completion_body
from tests.conftest import REPO
from tests.e2e.prestop_run import PRESTOP
from tests.environment import require_root

pytestmark = pytest.mark.engines

GRACE_S = 30
# Requests of 3-5 s, four at a time, the sending stopped 3 s after the delete: the engine is busy
# at the delete, and the hook must wait for the last one.
DURATIONS = UniformDurations(3.0, 5.0)
CONCURRENCY = 4
ROUTE_LAG_S = 3.0
REQUEST_TIMEOUT_S = 120.0
# What a refused write leaves in an engine's log (Python's strerror for EROFS and EACCES).
FAILED_WRITE_WORDS = ("Read-only file system", "Permission denied")
# Where each engine puts its cache under HOME (measured: `python -m engines.writes`, docs/engines.md).
# vLLM logs nothing when it cannot make its own, so the directory is what shows that it could.
ENGINE_CACHE = {"vllm": ".cache/vllm", "sglang": ".cache/sglang"}


def read_only_views() -> dict[tuple, list[tuple[Path, int, FilesystemView]]]:
    """deploy/'s engine containers with a read-only root, grouped by the filesystem they see."""
    groups: dict[tuple, list[tuple[Path, int, FilesystemView]]] = {}
    for manifest in sorted((REPO / "deploy").glob("*.yaml")):
        for index, view in enumerate(views_of(manifest)):
            if view.read_only_root:
                groups.setdefault(view.key, []).append((manifest, index, view))
    return groups


GROUPS = list(read_only_views().values())
GROUP_IDS = ["+".join(manifest.stem for manifest, _, _ in group) for group in GROUPS]


def test_the_read_only_manifests_are_found():
    # The init-container layout, the baked one, the routing proxy's engine: at least two views.
    assert len(GROUPS) >= 2, GROUP_IDS


@pytest.mark.parametrize("group", GROUPS, ids=GROUP_IDS)
def test_the_view_is_read_only_but_for_the_manifests_volumes(tmp_path, group):
    """The harness itself: nothing but the emptyDirs (and what an install made in them) takes a write."""
    require_root("a private mount namespace (unshare) and a chroot")
    manifest, index, view = group[0]
    tmpdir = dict(view.env).get("TMPDIR", "/tmp")
    probe = ("for d in / /root /etc /usr " + " ".join([*view.writable_paths(), tmpdir]) +
             '; do if touch "$d/.probe" 2>/dev/null; then echo "$d rw"; else echo "$d ro"; fi; done')
    done = subprocess.run(exec_argv(manifest, index, tmp_path / "stage", ["sh", "-c", probe]),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    seen = dict(line.split() for line in done.stdout.splitlines())
    assert [seen[d] for d in ("/", "/root", "/etc", "/usr")] == ["ro"] * 4, seen
    assert all(seen[d] == "rw" for d in [*view.writable_paths(), tmpdir]), seen


def post(engine: RealEngine, path: str, body: dict) -> int:
    request = urllib.request.Request(engine.base_url + path, json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as response:
        json.loads(response.read())
        return response.status


def proc_root_in_view(engine: RealEngine, tmpdir: str) -> str:
    """A /proc showing the engine alone, made in its own TMPDIR (through /proc/PID/root), where the
    hook, in the engine's view, reads it: the machine's /proc shows every other test's engines."""
    assert engine.process is not None
    pid = engine.process.pid
    proc_root = f"{tmpdir.rstrip('/')}/engine-proc"
    os.mkdir(f"/proc/{pid}/root{proc_root}")
    os.symlink(f"/proc/{pid}", f"/proc/{pid}/root{proc_root}/{pid}")
    return proc_root


def in_a_volume(view: FilesystemView, path: str) -> bool:
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in view.writable_paths())


@pytest.mark.parametrize("kind", ["vllm", "sglang"])
@pytest.mark.parametrize("group", GROUPS, ids=GROUP_IDS)
def test_a_real_engine_serves_and_drains_in_the_manifests_filesystem_view(tier, kind, group):
    require_root("a private mount namespace (unshare) and a chroot")
    manifest, index, view = group[0]
    env = dict(view.env)
    home, tmpdir = env.get("HOME"), env.get("TMPDIR", "/tmp")
    assert home is not None and in_a_volume(view, home), (
        f"{view.source}: HOME is {home!r}, in no writable volume: {kind} writes its caches under it")
    stage = Path(tempfile.mkdtemp(prefix="podview-"))
    engine = getattr(RealEngine, kind)(tier)
    # exec_argv(..., []) ends with `--`: the server's own argv follows.
    engine.wrapped(exec_argv(manifest, index, stage, [], keep_in_home=kept_in_home(tier.root)))
    try:
        with engine:
            assert engine.process is not None
            for _ in range(2):
                assert post(engine, "/v1/completions", {"model": SERVED_MODEL_NAME, "prompt": "hello", "max_tokens": 8}) == 200
            assert post(engine, "/v1/chat/completions", {"model": SERVED_MODEL_NAME, "max_tokens": 8,
                                                         "messages": [{"role": "user", "content": "hi"}]}) == 200
            failed = [line for line in engine.log_tail(10**7).splitlines() if any(w in line for w in FAILED_WRITE_WORDS)]
            assert not failed, f"{kind} in {view.source}: a write was refused:\n" + "\n".join(failed[:20])
            cache = Path(f"/proc/{engine.process.pid}/root{home}", ENGINE_CACHE[kind])
            assert cache.is_dir(), f"{kind} in {view.source}: no {home}/{ENGINE_CACHE[kind]}: its cache went nowhere"

            hook = hook_argv_in(view, engine.process.pid, [PRESTOP, "--grace", str(GRACE_S), "--port", str(engine.port),
                                                          "--proc-root", proc_root_in_view(engine, tmpdir), "--quiet"])
            load = LoadGenerator(engine.base_url, concurrency=CONCURRENCY, durations=DURATIONS, seed=11,
                                 request_body=completion_body(kind)).start()
            report = delete_pod(engine.process, hook, GRACE_S, load=load, route_drop_after_s=ROUTE_LAG_S, hook_env=env)
            described = f"{report.load.summary()}; hook exit {report.hook_exit_code}, stderr:\n{report.hook_stderr[-3000:]}"
            assert report.hook_exit_code == 0 and not report.hook_abandoned, described
            assert report.load.in_flight == 0 and report.completed == report.load.sent >= CONCURRENCY, described
            assert report.sigkill_at is None, described
    finally:
        shutil.rmtree(stage, ignore_errors=True)
