"""What each signal does to a drain: a stop (a final line and its exit code), or nothing.

kubelet itself never signals the hook; what does is a person (Ctrl-C, Ctrl-\\ at a `kubectl exec`
terminal), a runtime or wrapper stopping it (SIGTERM), or something stray. The drain is bounded
by its own deadline, so ignoring a signal costs at most the wait to that deadline, while a drain
ended early sends the engine its SIGTERM with its requests still running. Hence: the signals that
mean "stop" end the drain with a final line; every other catchable signal whose default would end
or freeze the process is ignored, a terminal's SIGHUP among them (its drain is the Pod's, not the
terminal's). Faults (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGSYS, SIGTRAP) keep their default:
a process that faulted has nothing trustworthy left to say. The table is docs/prestop.md's.
"""

from __future__ import annotations

import signal
from types import FrameType

from modeldrain.hook.exitcodes import ExitCode

__all__ = ["IGNORED_SIGNALS", "STOP_SIGNALS", "StopSignals", "Stopped"]

# A signal that ends the drain early: its exit code, the drain's outcome, and the reason it reports.
STOP_SIGNALS = {
    signal.SIGTERM: (ExitCode.TERMINATED, "terminated", "terminated by SIGTERM before the drain finished"),
    signal.SIGINT: (ExitCode.INTERRUPTED, "interrupted", "interrupted by SIGINT before the drain finished"),
    signal.SIGQUIT: (ExitCode.QUIT, "interrupted", "interrupted by SIGQUIT before the drain finished"),
}

# Ignored for the whole drain: by default each would end it without a line (or stop it, past its
# deadline: SIGTSTP, SIGTTIN, SIGTTOU), and none means "stop the drain" here.
IGNORED_SIGNALS = (
    signal.SIGHUP,  # the terminal of a `kubectl exec` closed: the drain goes on, to its own end
    signal.SIGUSR1, signal.SIGUSR2,  # no meaning defined for the hook
    signal.SIGALRM, signal.SIGVTALRM, signal.SIGPROF,  # the hook sets no timers: stray
    signal.SIGPIPE,  # a closed log reader: the write fails and is counted instead (Python's own default)
    signal.SIGIO, signal.SIGPWR, signal.SIGSTKFLT,  # nothing the hook asked for
    signal.SIGXCPU, signal.SIGXFSZ,  # a resource limit: the read or write fails and is handled
    signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU,  # job control would freeze the drain past its deadline
    *range(signal.SIGRTMIN, signal.SIGRTMAX + 1),  # real-time signals: the hook uses none
)


class Stopped(BaseException):
    """A stop signal mid-drain. A BaseException, so no `except Exception` on the read path eats it."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.code, self.outcome, self.reason = STOP_SIGNALS[signal.Signals(signum)]


class StopSignals:
    """The stop signals caught and the others ignored, from the first line of main(). Until the
    drain is ready to be interrupted (inside its try), a stop is only remembered; then it ends the
    drain at once."""

    def __init__(self) -> None:
        self.pending: int | None = None
        self.armed = False

    def install(self) -> None:
        for signum in IGNORED_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)
        for stop in STOP_SIGNALS:
            signal.signal(stop, self._on_signal)

    def arm(self) -> None:
        if self.pending is not None:
            raise Stopped(self.pending)
        self.armed = True

    def ignore(self) -> None:
        """The result is decided: nothing may cut its line."""
        self.armed = False
        for signum in STOP_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.pending is None:
            self.pending = signum
        if self.armed:
            self.armed = False  # one stop per drain: a second signal must not cut the first's final line
            raise Stopped(signum)
