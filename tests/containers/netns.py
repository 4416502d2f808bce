"""Reach a Pod's loopback from the test: threads that live in the Pod's network namespace.

The Pods have only a loopback interface (build/containers.sh: netns none), as a Pod's
containers share one network namespace. A thread that calls setns(2) moves itself alone into
the Pod's namespace; every socket it then creates belongs there, so a test talks to
127.0.0.1:8000 of that Pod while the rest of the process stays on the host. Needs
CAP_SYS_ADMIN (root). Python 3.11 has no os.setns: libc's, through ctypes.
"""

from __future__ import annotations

import ctypes
import http.client
import os
import threading
from typing import Callable, Mapping, TypeVar

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)

T = TypeVar("T")


def enter_netns(netns_path: str) -> None:
    """Move the calling thread into the network namespace at netns_path (/proc/PID/ns/net)."""
    fd = os.open(netns_path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"setns({netns_path}): {os.strerror(errno)}")
    finally:
        os.close(fd)


def call_in_netns(netns_path: str, function: Callable[[], T], timeout_s: float = 60) -> T:
    """Run function() in a new thread inside the namespace, and return what it returned."""
    result: list[T] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            enter_netns(netns_path)
            result.append(function())
        except BaseException as exc:  # handed to the caller below, never lost
            error.append(exc)

    thread = threading.Thread(target=target, name="in-pod", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise TimeoutError(f"no answer from inside the Pod within {timeout_s} s")
    if error:
        raise error[0]
    return result[0]


def http_get(port: int, path: str, headers: Mapping[str, str] | None = None,
             timeout_s: float = 5) -> tuple[int, bytes]:
    """GET http://127.0.0.1:port/path from the calling thread (which must be inside the Pod)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    try:
        connection.request("GET", path, headers=dict(headers or {}))
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()
