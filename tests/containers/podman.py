"""podman in the tests' private store (tests/containers/pod-env.sh made it)."""

from __future__ import annotations

import os
import subprocess
from typing import Mapping


class PodmanError(AssertionError):
    """A podman command failed; the message has its command line and output."""


class Podman:
    def __init__(self, store_env: Mapping[str, str]):
        self.env = {**os.environ, **store_env}

    def run(self, *args: str, timeout_s: float = 60, check: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run(["podman", *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout_s, stdin=subprocess.DEVNULL)
        if check and done.returncode != 0:
            raise PodmanError(f"podman {' '.join(args)}: exit {done.returncode}\n{done.stdout}{done.stderr}")
        return done

    def output(self, *args: str, timeout_s: float = 60) -> str:
        return self.run(*args, timeout_s=timeout_s).stdout.strip()
