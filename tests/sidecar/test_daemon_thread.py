"""run_in_daemon_thread: the value or the exception comes back to the loop, the loop is never
blocked, and a thread still running can neither hold the process's exit nor fail on a closed loop."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time

import pytest

from modeldrain.sidecar.daemon_thread import run_in_daemon_thread


def test_the_value_comes_back_from_a_daemon_thread_of_its_own():
    seen: dict[str, object] = {}

    def work() -> int:
        thread = threading.current_thread()
        seen.update(name=thread.name, daemon=thread.daemon, main=thread is threading.main_thread())
        return 42

    assert asyncio.run(run_in_daemon_thread(work, "test-read")) == 42
    assert seen == {"name": "test-read", "daemon": True, "main": False}


def test_an_exception_is_raised_in_the_awaiting_coroutine():
    def work() -> None:
        raise OSError("the token volume is gone")

    with pytest.raises(OSError, match="token volume"):
        asyncio.run(run_in_daemon_thread(work, "test-error"))


def test_the_loop_keeps_running_while_the_work_blocks():
    async def main() -> int:
        ticks = 0
        task = asyncio.ensure_future(run_in_daemon_thread(lambda: time.sleep(0.5), "test-block"))
        while not task.done():
            ticks += 1
            await asyncio.sleep(0.01)
        await task
        return ticks

    assert asyncio.run(main()) >= 10  # 0.5 s of blocking work, the loop ticked throughout


def test_a_thread_still_blocked_does_not_hold_the_exit_nor_fail_when_the_loop_is_gone():
    script = (
        "import asyncio, time\n"
        "from modeldrain.sidecar.daemon_thread import run_in_daemon_thread\n"
        "async def main():\n"
        "    task = asyncio.ensure_future(run_in_daemon_thread(lambda: time.sleep(1.0), 'hung'))\n"
        "    await asyncio.sleep(0.1)\n"
        "    task.cancel()\n"
        "asyncio.run(main())\n"
        "time.sleep(1.5)  # the thread finishes after its loop closed: it must not raise\n"
        "print('exited cleanly')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "exited cleanly" and "Traceback" not in done.stderr

    hung = ("import asyncio, time\n"
            "from modeldrain.sidecar.daemon_thread import run_in_daemon_thread\n"
            "async def main():\n"
            "    asyncio.ensure_future(run_in_daemon_thread(lambda: time.sleep(60), 'hung'))\n"
            "    await asyncio.sleep(0.1)\n"
            "asyncio.run(main())\n")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", hung], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 20  # not the thread's 60 s: the exit did not wait for it
