"""`prestop`: the preStop exec hook (default), and `prestop check` / `prestop version`.

Only wiring: parse flags into a config, run, print, exit. The logic lives in drain.py,
decision.py and reader.py.
"""

from __future__ import annotations

# The deadline counts from the exec, so the clock is read before anything heavier is imported.
from hook.clock import exec_started_at

_STARTED_AT = exec_started_at()

import argparse  # noqa: E402
import json  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

from hook import __version__  # noqa: E402

EXIT_IDLE = 0
EXIT_BUSY = 1  # `prestop check` only
EXIT_USAGE = 2
EXIT_DEADLINE = 10
EXIT_UNMEASURABLE = 11
EXIT_TERMINATED = 143  # SIGTERM before the drain finished

EXIT_CODES_HELP = """\
exit codes:
  0   drained: the engine read idle twice in a row
  10  deadline (G - exit reserve) reached with work in flight or unknown
  11  nothing to measure: connection refused, HTTP error status or TLS handshake failure
  2   usage error
  143 terminated by SIGTERM before the drain finished

The last line on stdout is one JSON object:
  {"event": "drain_finished", "outcome": "idle"|"deadline"|"unmeasurable",
   "elapsed_s": ..., "in_flight": ..., "reads": ..., "reason": "..."}
Each state change is logged as a JSON line on stderr and, unless --quiet, on the
container's log stream (PID 1's stdout), so that `kubectl logs` shows the drain.

subcommands:
  prestop check    one read now, printed as JSON (exit 0 idle, 1 busy, 11 unmeasurable)
  prestop version  the version and how this executable was built
  prestop install DIR  copy this bundled executable to DIR/prestop (for an init container)
"""

CHECK_EXIT_HELP = "exit codes: 0 idle, 1 busy (or incomplete, timed out, unparseable), 11 unmeasurable, 2 usage error"


class _Terminated(BaseException):
    """SIGTERM mid-drain. A BaseException, so no `except Exception` on the read path can eat it."""


def _on_sigterm(signum, frame):
    raise _Terminated()


def _drain_parser() -> argparse.ArgumentParser:
    from hook.config import add_drain_flags, add_target_flags

    parser = argparse.ArgumentParser(
        prog="prestop",
        description="Hold a deleted LLM-serving Pod's engine until its requests finish: wait for routers "
        "to drop the replica, then poll the engine's loopback /metrics until it reads idle twice or "
        "the deadline G - 5 arrives.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"prestop {__version__}")
    add_drain_flags(parser)
    add_target_flags(parser)
    return parser


def _check_parser() -> argparse.ArgumentParser:
    from hook.config import add_target_flags

    parser = argparse.ArgumentParser(
        prog="prestop check",
        description="Read the engine's work gauges once and print what they say, as JSON.",
        epilog=CHECK_EXIT_HELP,
    )
    add_target_flags(parser)
    return parser


def drain(argv: list[str]) -> int:
    from hook.config import resolve_drain_config
    from hook.drain import run_drain
    from hook.events import EventLog

    args = _drain_parser().parse_args(argv)
    config = resolve_drain_config(args)
    log = EventLog(_STARTED_AT, config.log_mirror)
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        result = run_drain(config, _STARTED_AT, log)
        fields = dict(outcome=result.outcome.value, elapsed_s=result.elapsed_s,
                      in_flight=result.in_flight, reads=result.reads, reason=result.reason)
        code = result.outcome.exit_code
    except _Terminated:
        fields = dict(outcome="deadline", elapsed_s=round(time.monotonic() - _STARTED_AT, 3), in_flight=None, reads=None,
                      reason="terminated by SIGTERM before the drain finished")
        code = EXIT_TERMINATED
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    line = log.emit("drain_finished", **fields, exit_code=code)
    log.close()
    try:
        print(line, flush=True)
    except OSError:
        pass  # stdout closed by the caller: the line is on stderr and the container log already
    return code


def check(argv: list[str]) -> int:
    from hook.config import resolve_read_config
    from hook.outcome import ReadOutcome, read_summary
    from hook.reader import read_work

    config = resolve_read_config(_check_parser().parse_args(argv))
    read = read_work(config.target, config.hint, config.read_timeout_s, config.max_body_bytes)
    report = {"target": config.target.url, "target_source": config.target.source,
              "engine_source": config.hint.source, **read_summary(read), "warnings": list(config.warnings)}
    print(json.dumps(report, indent=2))
    if read.outcome is ReadOutcome.IDLE:
        return EXIT_IDLE
    return EXIT_UNMEASURABLE if read.outcome.ends_drain else EXIT_BUSY


def version(argv: list[str]) -> int:
    from hook.buildinfo import build_description

    if argv:
        print("prestop version: takes no arguments", file=sys.stderr)
        return EXIT_USAGE
    print(f"prestop {__version__} ({build_description()})")
    return 0


def install(argv: list[str]) -> int:
    from hook.install import install as install_bundle

    return install_bundle(argv)


SUBCOMMANDS = {"check": check, "version": version, "install": install}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in SUBCOMMANDS:
        return SUBCOMMANDS[argv[0]](argv[1:])
    return drain(argv)


if __name__ == "__main__":
    sys.exit(main())
