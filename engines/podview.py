"""A deploy/ manifest's filesystem view for a real engine, without containers: what the engine container sees.

    views = views_of(Path("deploy/pod-prestop-init-container.yaml"))   # read from the YAML itself
    argv = exec_argv(views[0], stage_dir, ["vllm", "serve", ...])       # prefix to start the engine in it

`python -m engines.podview exec ...` (root) enters a private mount namespace, builds a root in which
every top-level directory of the machine is bound read-only (/proc, /sys and /dev as a container
runtime gives them), mounts a tmpfs at each emptyDir's mountPath (its sizeLimit as the size, 0777
as kubelet makes them), a read-only tmpfs holding the files of each downwardAPI volume (other
volume kinds: empty and read-only), makes the root itself read-only, chroots into it, takes the
manifest's user if it names one, sets the manifest's env and execs the command: the engine's pid is
the wrapper's. The mounts and env come from the manifest, so the manifests and the tests cannot drift.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import yaml

from modeldrain.hook.install import TMP_MODE, TMP_SUBDIR
from modeldrain.lint.pod_templates import PodTemplate, templates_of

# The container the drain hook sits on in every deploy/ manifest.
ENGINE_CONTAINER = "engine"
PRESTOP_IMAGE = "localhost/modeldrain/prestop:"  # its init containers run `prestop install DIR`
CLONE_NEWNS = 0x00020000  # <linux/sched.h>: a private copy of the mount table
# What a container runtime gives a container as its own, writable (/dev/shm) or the kernel's: bound
# recursively as they are, never made read-only.
KERNEL_DIRS = frozenset({"proc", "sys", "dev"})
# kubelet makes an emptyDir world-writable: any user of the Pod may write there.
EMPTY_DIR_MODE = "0777"
QUANTITY = re.compile(r"^(\d+)(Ki|Mi|Gi|Ti|K|M|G|T)?$")
QUANTITY_FACTOR = {None: 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40,
                   "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}


@dataclass(frozen=True)
class EmptyDir:
    mount_path: str
    size_bytes: int | None  # the emptyDir's sizeLimit; None: unlimited


@dataclass(frozen=True)
class ReadOnlyVolume:
    mount_path: str
    files: tuple[tuple[str, str], ...]  # (relative path, content): a downwardAPI volume's items


@dataclass(frozen=True)
class FilesystemView:
    """What one engine container of one manifest may read and write."""

    source: str  # the template's, e.g. "pod-prestop-init-container.yaml: Pod llm-vllm-init"
    read_only_root: bool
    empty_dirs: tuple[EmptyDir, ...]
    read_only_volumes: tuple[ReadOnlyVolume, ...]
    env: tuple[tuple[str, str], ...]  # the literal `value`s (valueFrom entries need a cluster)
    run_as_user: int | None
    run_as_group: int | None
    working_dir: str | None
    # What the Pod's `prestop install DIR` init containers leave for it: DIR/tmp (1777), the hook's
    # TMPDIR. (The executable they copy is not: the tests run the hook from the venv.)
    installed_tmp_dirs: tuple[str, ...] = ()

    @property
    def key(self) -> tuple:
        """Two views with the same key give an engine the same filesystem: one start covers both."""
        return (self.read_only_root, self.empty_dirs, tuple(v.mount_path for v in self.read_only_volumes),
                self.env, self.run_as_user, self.run_as_group, self.working_dir)

    def writable_paths(self) -> list[str]:
        return [d.mount_path for d in self.empty_dirs]


def parse_quantity(value: Any) -> int:
    match = QUANTITY.match(str(value))
    if match is None:
        raise ValueError(f"sizeLimit {value!r} is not a quantity this harness reads (e.g. 1Gi, 256Mi)")
    return int(match.group(1)) * QUANTITY_FACTOR[match.group(2)]


def downward_files(volume: dict[str, Any], template: PodTemplate) -> tuple[tuple[str, str], ...]:
    """A downwardAPI volume's files as kubelet writes them: `key="value"` lines for a map field."""
    files = []
    for item in volume.get("downwardAPI", {}).get("items", []):
        field = item.get("fieldRef", {}).get("fieldPath")
        values = {"metadata.annotations": template.annotations, "metadata.labels": template.labels}.get(field)
        if values is None:
            content = template.pod_name if field == "metadata.name" else ""
        else:
            content = "".join(f'{key}="{values[key]}"\n' for key in sorted(values))
        files.append((item["path"], content))
    return tuple(files)


def _view(template: PodTemplate, container: dict[str, Any]) -> FilesystemView:
    volumes = {v["name"]: v for v in template.spec.get("volumes") or []}
    empty_dirs, read_only = [], []
    for mount in container.get("volumeMounts") or []:
        volume = volumes[mount["name"]]
        if "emptyDir" in volume and not mount.get("readOnly"):
            limit = (volume["emptyDir"] or {}).get("sizeLimit")
            empty_dirs.append(EmptyDir(mount["mountPath"], None if limit is None else parse_quantity(limit)))
        elif "emptyDir" in volume or mount.get("readOnly") or "downwardAPI" in volume:
            read_only.append(ReadOnlyVolume(mount["mountPath"], downward_files(volume, template)))
        else:
            raise ValueError(f"{template.source}: volume {mount['name']!r} is neither an emptyDir nor read-only: "
                             "this harness has nothing to mount for it")
    security = {**(template.spec.get("securityContext") or {}), **(container.get("securityContext") or {})}
    env = dict(template.injected_env)
    env.update({e["name"]: str(e["value"]) for e in container.get("env") or [] if "value" in e})
    installs = [c["args"][1] for c in template.spec.get("initContainers") or []
                if c.get("image", "").startswith(PRESTOP_IMAGE) and (c.get("args") or [])[:1] == ["install"]]
    return FilesystemView(template.source, security.get("readOnlyRootFilesystem") is True, tuple(empty_dirs),
                          tuple(read_only), tuple(sorted(env.items())), security.get("runAsUser"),
                          security.get("runAsGroup"), container.get("workingDir"),
                          tuple(f"{d.rstrip('/')}/{TMP_SUBDIR}" for d in installs))


def views_of(path: Path) -> list[FilesystemView]:
    """The engine container's view in every Pod the manifest makes, in its order."""
    with open(path, encoding="utf-8") as f:
        documents = [d for d in yaml.safe_load_all(f) if d is not None]
    return [_view(template, container)
            for document in documents for template in templates_of(document, path.name)
            for container in template.containers() if container.get("name") == ENGINE_CONTAINER]


def exec_argv(manifest: Path, index: int, stage_dir: Path, argv: Sequence[str],
              bind_read_only: Sequence[str] = (), keep_in_home: Sequence[str] = ()) -> list[str]:
    """The command that runs argv in the index-th view of manifest (`bind_read_only`: host paths a
    test seam needs inside, e.g. a --proc-root; stage_dir: an empty directory the caller removes)."""
    seams = [arg for path in bind_read_only for arg in ("--bind-read-only", path)]
    seams += [arg for path in keep_in_home for arg in ("--keep-in-home", path)]
    return [sys.executable, "-m", "engines.podview", "exec", "--manifest", str(manifest), "--index", str(index),
            "--stage", str(stage_dir), *seams, "--", *argv]


def hook_argv_in(view: FilesystemView, engine_pid: int, argv: Sequence[str]) -> list[str]:
    """argv run inside the engine's own view, as an exec hook runs in its container: its mount
    namespace and root (the same emptyDirs), as the manifest's user. The env is the caller's:
    give it the view's (`dict(view.env)`), as kubelet gives the hook the container's."""
    user = [] if view.run_as_user is None else [f"--setuid={view.run_as_user}"]
    group = [] if view.run_as_group is None else [f"--setgid={view.run_as_group}"]
    return ["nsenter", f"--target={engine_pid}", "--mount", "--root", f"--wd={view.working_dir or '/'}",
            *group, *user, *argv]


def kept_in_home(tier_root: Path) -> list[str]:
    """What a fresh image's HOME still holds here: the tier, and the Python installs its venvs
    (and this one) were made from (pyvenv.cfg's `home`), which may live under HOME too."""
    kept = {str(tier_root), sys.base_prefix}
    for cfg in tier_root.glob("*/pyvenv.cfg"):
        for line in cfg.read_text().splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "home":
                kept.add(str(Path(value.strip()).parent))
    home = os.path.expanduser("~")
    return sorted(path for path in kept if Path(path).is_relative_to(home))


def _mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"podview: mount {' '.join(args)}: {done.stderr.strip()}")


def _unshare_mounts() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS) != 0:
        raise SystemExit(f"podview: unshare(CLONE_NEWNS): {os.strerror(ctypes.get_errno())} (run as root)")
    _mount("--make-rprivate", "/")


def _bind_top_level(root: Path, work: Path, stage: Path, wanted: list[str]) -> None:
    """Each of the machine's top-level entries into root; a directory a mountPath needs inside an
    existing one comes from a read-only overlay of that directory with the missing folders."""
    missing_under: dict[str, list[str]] = {}
    for path in wanted:
        top, _, rest = path.strip("/").partition("/")
        if rest and Path("/", top).is_dir() and not Path(path).is_dir():
            missing_under.setdefault(top, []).append(rest)
        elif not Path("/", top).exists():
            (root / top).mkdir(parents=True, exist_ok=True)
    for name in sorted(os.listdir("/")):
        host, inside = Path("/", name), root / name
        if host.is_symlink():
            inside.symlink_to(os.readlink(host))
        elif host.is_dir() and name in missing_under:
            extra = work / "overlay" / name
            for rest in missing_under[name]:
                (extra / rest).mkdir(parents=True, exist_ok=True)
            inside.mkdir()
            _mount("-t", "overlay", "overlay", "-o", f"lowerdir={extra}:{host}", str(inside))
        elif host.is_dir():
            inside.mkdir()
            # The stage lies under one of them (/tmp): a recursive bind would show the view inside itself.
            recursive = name in KERNEL_DIRS or not stage.is_relative_to(host)
            _mount("--rbind" if recursive else "--bind", str(host), str(inside))
            if name not in KERNEL_DIRS:
                _mount("-o", "remount,bind,ro", str(inside))
        elif host.exists():
            inside.touch()
            _mount("--bind", "-o", "ro", str(host), str(inside))
            _mount("-o", "remount,bind,ro", str(inside))


def _fresh_home(root: Path, home: str, keep: Sequence[str]) -> None:
    """An image's HOME holds none of this machine's caches: an empty read-only HOME but for `keep`
    (the tier), so a cache directory an earlier run left here cannot hide a refused mkdir."""
    target = root / home.lstrip("/")
    _mount("-t", "tmpfs", "-o", "mode=0700", "home", str(target))
    for path in keep:
        inside = root / path.lstrip("/")
        inside.mkdir(parents=True, exist_ok=True)
        _mount("--bind", path, str(inside))
        _mount("-o", "remount,bind,ro", str(inside))
    _mount("-o", "remount,ro", str(target))


def enter(view: FilesystemView, stage: Path, bind_read_only: Sequence[str], keep_in_home: Sequence[str] = ()) -> None:
    """Build the view under stage and chroot into it (this process and what it execs)."""
    _unshare_mounts()
    root, work = stage / "root", stage / "work"
    for folder in (root, work):
        folder.mkdir(parents=True, exist_ok=True)
        _mount("-t", "tmpfs", "-o", "mode=0755", "podview", str(folder))
    wanted = [d.mount_path for d in view.empty_dirs] + [v.mount_path for v in view.read_only_volumes]
    _bind_top_level(root, work, stage, wanted)
    if keep_in_home:
        _fresh_home(root, os.path.expanduser("~"), keep_in_home)
    for empty_dir in view.empty_dirs:
        size = "" if empty_dir.size_bytes is None else f",size={empty_dir.size_bytes}"
        _mount("-t", "tmpfs", "-o", f"mode={EMPTY_DIR_MODE}{size}", "emptydir", str(root / empty_dir.mount_path.lstrip("/")))
    for installed in view.installed_tmp_dirs:
        target = root / installed.lstrip("/")
        target.mkdir()
        target.chmod(TMP_MODE)
    for volume in view.read_only_volumes:
        target = root / volume.mount_path.lstrip("/")
        _mount("-t", "tmpfs", "-o", "mode=0755", "volume", str(target))
        for relative, content in volume.files:
            (target / relative).parent.mkdir(parents=True, exist_ok=True)
            (target / relative).write_text(content)
        _mount("-o", "remount,ro", str(target))
    for path in bind_read_only:
        target = root / path.lstrip("/")
        if not target.exists():  # inside an emptyDir (e.g. /tmp); elsewhere already there
            target.parent.mkdir(parents=True, exist_ok=True)
            target.mkdir() if Path(path).is_dir() else target.touch()
        _mount("--bind", path, str(target))
        _mount("-o", "remount,bind,ro", str(target))
    if view.read_only_root:
        _mount("-o", "remount,ro", str(root))
    os.chroot(root)
    os.chdir(view.working_dir or "/")
    if view.run_as_group is not None:
        os.setgroups([])
        os.setgid(view.run_as_group)
    if view.run_as_user is not None:
        os.setuid(view.run_as_user)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="engines.podview", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    show = sub.add_parser("show", help="print each engine container's view")
    show.add_argument("manifest", type=Path)
    run = sub.add_parser("exec", help="run a command in a view (root)")
    run.add_argument("--manifest", type=Path, required=True)
    run.add_argument("--index", type=int, default=0)
    run.add_argument("--stage", type=Path, required=True, help="an empty directory to build the view in")
    run.add_argument("--bind-read-only", action="append", default=[])
    run.add_argument("--keep-in-home", action="append", default=[],
                     help="HOME is empty and read-only but for these (e.g. the tier), as in a fresh image")
    run.add_argument("command_argv", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    views = views_of(args.manifest)
    if args.command == "show":
        for view in views:
            print(view)
        return 0
    command = args.command_argv[1:] if args.command_argv[:1] == ["--"] else args.command_argv
    if not command:
        parser.error("exec: no command after --")
    if not 0 <= args.index < len(views):
        parser.error(f"--index {args.index}: {args.manifest} has {len(views)} engine container(s)")
    view = views[args.index]
    enter(view, args.stage, args.bind_read_only, args.keep_in_home)
    os.execvpe(command[0], command, dict(os.environ, **dict(view.env)))
    return 127  # not reached: execvpe raises or replaces this process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
