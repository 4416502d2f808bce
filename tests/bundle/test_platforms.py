"""Which architectures `make bundle` / `make images` build (PLATFORMS), and where the arm64 root
is cached: the default is amd64 alone (so `make test` never waits on an emulated build), and the
arm64 root lives outside the tree (a fresh clone reuses it). Dry runs: nothing is built."""

from __future__ import annotations

import os
import subprocess

from tests.conftest import REPO

ARM64_ROOT_SCRIPT = REPO / "build" / "arm64-root.sh"


def make_dry_run(*args: str) -> subprocess.CompletedProcess:
    # -B: print every recipe, whatever is already built here.
    return subprocess.run(["make", "-n", "-B", *args], cwd=REPO, capture_output=True, text=True, timeout=60)


def recipe_lines(done: subprocess.CompletedProcess, script: str) -> list[str]:
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if line.startswith(script)]


def test_the_default_builds_amd64_only():
    assert recipe_lines(make_dry_run("bundle"), "build/bundle.sh") == [
        "build/bundle.sh --arch amd64 prestop", "build/bundle.sh --arch amd64 drain-sidecar"]
    assert recipe_lines(make_dry_run("images"), "build/images.sh") == [
        "build/images.sh prestop dist/images/prestop.tar",
        "build/images.sh drain-sidecar dist/images/drain-sidecar.tar"]


def test_platforms_adds_the_arm64_twins_and_one_index_per_image():
    both = "PLATFORMS=linux/amd64,linux/arm64"
    assert sorted(recipe_lines(make_dry_run("bundle", both), "build/bundle.sh")) == sorted([
        "build/bundle.sh --arch amd64 prestop", "build/bundle.sh --arch amd64 drain-sidecar",
        "build/bundle.sh --arch arm64 prestop", "build/bundle.sh --arch arm64 drain-sidecar"])
    assert recipe_lines(make_dry_run("images", both), "build/images.sh") == [
        "build/images.sh --platforms linux/amd64,linux/arm64 prestop dist/images/multiarch/prestop.tar",
        "build/images.sh --platforms linux/amd64,linux/arm64 drain-sidecar dist/images/multiarch/drain-sidecar.tar"]


def test_an_unknown_platform_is_refused_in_one_line():
    done = make_dry_run("bundle", "PLATFORMS=linux/amd64,linux/s390x")
    assert done.returncode != 0
    assert "PLATFORMS: unknown platform linux/s390x (linux/amd64, linux/arm64)" in done.stderr


def arm64_root_path(**env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k not in ("MODELDRAIN_ARM64_CACHE", "XDG_CACHE_HOME")}
    done = subprocess.run([str(ARM64_ROOT_SCRIPT), "--path"], env={**base, **env}, capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_arm64_root_is_cached_outside_the_tree(tmp_path):
    assert arm64_root_path(MODELDRAIN_ARM64_CACHE=str(tmp_path / "c")) == str(tmp_path / "c" / "bookworm-root")
    assert arm64_root_path(XDG_CACHE_HOME=str(tmp_path)) == str(tmp_path / "modeldrain-arm64" / "bookworm-root")
    default = arm64_root_path(HOME=str(tmp_path))
    assert default == str(tmp_path / ".cache" / "modeldrain-arm64" / "bookworm-root")
    assert not default.startswith(str(REPO))


def test_bundle_refuses_an_unknown_architecture():
    done = subprocess.run([str(REPO / "build" / "bundle.sh"), "--check", "--arch", "riscv64"], capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 2 and done.stderr.startswith("usage: build/bundle.sh")
