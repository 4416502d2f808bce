"""`prestop`: the preStop exec hook (default), and `prestop check` / `version` / `install`.

Only wiring: parse flags into a config, run, print, exit. The logic lives in drain.py,
decision.py and reader.py; the exit statuses in exitcodes.py.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import TYPE_CHECKING, Any

from modeldrain.hook import __version__
from modeldrain.hook.exitcodes import ExitCode
from modeldrain.hook.signals import Stopped, StopSignals

if TYPE_CHECKING:
    from modeldrain.hook.events import EventLog
    from modeldrain.hook.rerun import RunMarker
    from modeldrain.hook.settings import DrainConfig

__all__ = ["check_parser", "drain_parser", "main"]

EXIT_CODES_HELP = """\
exit codes:
  0   drained: the engine read idle twice in a row; or it answered and is gone now
      (engine_gone); or, for a worker following its leader, the leader is gone
  10  deadline (G - exit reserve) reached with work in flight or unknown
  11  nothing to measure: refused from the start, HTTP error status or TLS handshake failure
  12  a worker following its leader: the leader never once answered as a drain-sidecar (a wrong
      host, port or token: it is unknown, not gone), and the worker waited to its deadline
  2   usage error
  130 interrupted by SIGINT before the drain finished
  131 interrupted by SIGQUIT before the drain finished
  143 terminated by SIGTERM before the drain finished
  SIGHUP, SIGUSR1/2, SIGALRM, SIGPIPE, SIGTSTP and the other signals that would end or stop
  the process are ignored: the drain runs to its own end (docs/prestop.md, "Signals")

The last line on stdout is one JSON object:
  {"event": "drain_finished", "outcome": "idle"|"deadline"|"unmeasurable"|"engine_gone"|"leader_gone"|
   "leader_unreachable"|"terminated"|"interrupted",
   "elapsed_s": ..., "in_flight": ..., "reads": ..., "reason": "...", "exit_code": ...}
Each state change is logged as a JSON line on stderr and, unless --quiet or run from an
interactive terminal, on the container's log stream (PID 1's stdout), so that `kubectl logs`
shows the drain.

subcommands:
  prestop check    one read now, printed as JSON (exit 0 idle, 1 busy, 11 unmeasurable, 12 the
                   leader does not answer): a worker's check reads its leader, as its drain does
  prestop version  the version and how this executable was built
  prestop install DIR  copy this bundled executable to DIR/prestop (for an init container)
  prestop lint FILE... check Pod templates (JSON; YAML where PyYAML is installed) against the hook
"""

CHECK_EXIT_HELP = ("exit codes: 0 idle, 1 busy (or incomplete, timed out, unparseable), 11 unmeasurable, "
                   "12 a worker's leader does not answer as a drain-sidecar (wrong host, port or token), 2 usage error")

_SIGNALS = StopSignals()


def _ensure_standard_streams() -> None:
    """Give a closed stdin, stdout or stderr /dev/null, so that no file this process opens later
    takes descriptor 0-2 and receives what was meant for the log."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            try:
                opened = os.open(os.devnull, os.O_RDWR)
            except OSError:
                return  # no /dev/null: nothing better to do than go on
            if opened != fd:
                os.dup2(opened, fd)
                os.close(opened)
    if sys.stderr is None:
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115 - fd 2 outlives this object
    if sys.stdout is None:
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115


def drain_parser() -> argparse.ArgumentParser:
    from modeldrain.hook.config import add_drain_flags, add_target_flags
    from modeldrain.hook.flags import Parser

    parser = Parser(
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


def check_parser() -> argparse.ArgumentParser:
    from modeldrain.hook.config import add_leader_flags, add_target_flags
    from modeldrain.hook.flags import Parser

    parser = Parser(
        prog="prestop check",
        description="Read the engine's work gauges once and print what they say, as JSON; a worker "
        "following its leader reads the leader's drain-sidecar instead, as its drain would.",
        epilog=CHECK_EXIT_HELP,
    )
    add_target_flags(parser)
    add_leader_flags(parser)
    return parser


def drain_command(argv: list[str]) -> int:
    from modeldrain.hook.clock import exec_started_at
    from modeldrain.hook.events import EventLog, Sink, mirror_for

    log: EventLog | None = None
    marker: RunMarker | None = None
    fields: dict[str, Any]
    # The deadline counts from the exec (kubelet's grace clock), read from /proc, not from now. A
    # stop signal meanwhile is only remembered (not armed yet), so even an early stop's final line
    # counts its elapsed time from the exec.
    started_at = exec_started_at()
    report_port = 0  # the local drain-sidecar told of this drain (hook.sidecar_report); 0: none
    drain_id = ""
    held_s: float | None = None
    try:
        _SIGNALS.arm()
        from modeldrain.hook import sidecar_report
        from modeldrain.hook.config import resolve_drain_config
        from modeldrain.hook.drain import run_drain

        args = drain_parser().parse_args(argv)
        mirror_path, mirror_off = mirror_for(None if args.quiet else args.log_mirror)
        log = EventLog("prestop", started_at=started_at, mirror_path=mirror_path, mirror_off=mirror_off)
        _remove_leftovers(log)
        config, marker = _begin_run(resolve_drain_config(args), argv, started_at)
        report_port, drain_id = args.sidecar_report, sidecar_report.new_drain_id()
        if report_port:
            sidecar_report.post_in_background(report_port, sidecar_report.started_message(drain_id, config.grace_s))
        result = run_drain(config, started_at, log)
        code = result.outcome.exit_code
        fields = dict(result.fields())
        held_s = result.held_after_last_busy_s
    except Stopped as stop:
        code = stop.code
        fields = dict(outcome=stop.outcome, in_flight=None, reads=None, reason=stop.reason, exit_code=int(code))
    finally:
        _SIGNALS.ignore()
        if marker is not None:
            from modeldrain.hook.rerun import finish

            finish(marker)
    if log is None:
        log = EventLog("prestop", started_at=started_at)
    elapsed_s = round(time.monotonic() - started_at, 3)
    line = log.emit("drain_finished", **fields, log_lines_dropped=log.dropped)
    log.close()
    stdout = Sink.for_stream(1, "stdout")
    stdout.write((line + "\n").encode("ascii"))
    stdout.close()
    if report_port:  # after the drain's own line: a stuck sidecar delays nothing but the exit, by 0.1 s at most
        from modeldrain.hook import sidecar_report

        sidecar_report.post(report_port, sidecar_report.finished_message(
            drain_id, outcome=str(fields["outcome"]), exit_code=int(code), elapsed_s=elapsed_s,
            held_after_last_busy_s=held_s, in_flight=fields["in_flight"]))
    return code


def _begin_run(config: DrainConfig, argv: list[str], started_at: float) -> tuple[DrainConfig, RunMarker]:
    """Leave this run's marker; an earlier unfinished run in this container already served part
    of the route wait (modeldrain/hook/rerun.py)."""
    import dataclasses
    import time

    from modeldrain.hook.rerun import begin, container_key

    target = config.leader.target.url if config.leader is not None else config.read.target.url
    now_boot = time.clock_gettime(time.CLOCK_BOOTTIME)
    started_boot = now_boot - (time.monotonic() - started_at)
    marker = begin(container_key(argv, target), started_boot, config.grace_s, now_boot_s=now_boot)
    if marker.problem:
        config = dataclasses.replace(config, warnings=config.warnings + (
            f"{marker.problem}: were kubelet to run this hook again in this container (it restarted mid-drain), "
            "that run would wait its route wait again",))
    if marker.first is not None:
        served_s = started_boot - marker.first.started_boot_s
        config = dataclasses.replace(config, rerun_of=marker.first,
                                     route_wait_s=max(0.0, config.route_wait_s - served_s))
    return config, marker


def _remove_leftovers(log: EventLog) -> None:
    """A bundle killed mid-unpack by an earlier SIGKILL or early SIGTERM left its files in the
    temp dir (an emptyDir survives container restarts): remove them, in the route wait."""
    from modeldrain.hook.bundle import remove_stale_unpack_dirs

    removed, freed = remove_stale_unpack_dirs()
    if removed:
        log.emit("stale_unpack_dirs_removed", paths=removed, bytes=freed)


def check_command(argv: list[str]) -> int:
    from modeldrain.hook.config import resolve_leader, resolve_read_config
    from modeldrain.hook.foreign_body import NOT_AN_ENGINE
    from modeldrain.hook.outcome import ReadOutcome, read_fields
    from modeldrain.hook.reader import EngineReader

    args = check_parser().parse_args(argv)
    config = resolve_read_config(args)
    warnings = list(config.warnings)
    leader = resolve_leader(args, os.environ, warnings)
    if leader is not None:
        return _check_leader(leader, config.read_timeout_s, warnings)
    # The drain's own reader: where the drain would move to the engine's own --port, so does the check.
    reader = EngineReader(config, warnings.append)
    read = reader.read(config.read_timeout_s)
    if read.detail.startswith(NOT_AN_ENGINE):
        warnings.append(read.detail.split("; ", 1)[0])
    report = {"target": reader.target.url, "target_source": reader.target.source,
              "engine_source": config.hint.source, **read_fields(read),
              "process_start_time": read.process_start_time, "restart_counters": dict(read.restart_counters),
              "warnings": warnings}
    print(json.dumps(report, indent=2))
    if read.outcome is ReadOutcome.IDLE:
        return ExitCode.OK
    return ExitCode.UNMEASURABLE if read.outcome.ends_drain else ExitCode.NOT_CLEARED


def _check_leader(leader: Any, timeout_s: float, warnings: list[str]) -> int:
    """A worker's check: one read of its leader with the drain's own reader (the same URL, token
    file and rules). A leader that does not answer as a drain-sidecar is what its drain would wait
    on to the deadline and end as leader_unreachable: exit 12, with a one-line reason on stderr."""
    from modeldrain.hook.leader import LeaderReader
    from modeldrain.hook.outcome import ReadOutcome, read_fields

    read = LeaderReader(leader).read(timeout_s)
    report = {"target": leader.target.url, "target_source": f"the leader's drain-sidecar, from {leader.source}",
              "leader_answered": read.leader_answered, **read_fields(read), "warnings": warnings}
    print(json.dumps(report, indent=2))
    if not read.leader_answered:
        print(f"prestop check: the leader {leader.target.url} does not answer as a drain-sidecar: {read.detail}",
              file=sys.stderr)
        return ExitCode.LEADER_UNREACHABLE
    if read.outcome is ReadOutcome.IDLE:
        return ExitCode.OK
    return ExitCode.UNMEASURABLE if read.outcome.ends_drain else ExitCode.NOT_CLEARED


def version_command(argv: list[str]) -> int:
    from modeldrain.hook.bundle import build_description

    if argv:
        print("prestop version: takes no arguments", file=sys.stderr)
        return ExitCode.USAGE
    print(f"prestop {__version__} ({build_description()})")
    return ExitCode.OK


def install_command(argv: list[str]) -> int:
    from modeldrain.hook.install import install as install_bundle

    return install_bundle(argv)


def lint_command(argv: list[str]) -> int:
    """`prestop lint` is `modeldrain lint`, kept under its old name where the package is installed.
    The static executable leaves the authoring tools out: nothing on the drain path needs them."""
    try:
        from modeldrain.lint.cli import run_lint
    except ImportError:
        print("prestop lint: not in the static executable; run `modeldrain lint`, the console script of "
              "modeldrain's wheel (docs/prestop.md, \"modeldrain lint\")", file=sys.stderr)
        return ExitCode.USAGE
    return run_lint(argv)


SUBCOMMANDS = {"check": check_command, "version": version_command, "install": install_command, "lint": lint_command}


def _mistyped_subcommand(argv: list[str]) -> str | None:
    """`prestop chek`: the drain takes no positional argument, so a word that is close to a
    subcommand's name is a typo of it; the usage error names the one meant."""
    import difflib

    if not argv or argv[0].startswith("-"):
        return None
    close = difflib.get_close_matches(argv[0], SUBCOMMANDS, n=1)
    if not close:
        return None
    return f"prestop: error: unknown subcommand {argv[0]!r}; did you mean {close[0]!r}? (see prestop --help)"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    subcommand = SUBCOMMANDS.get(argv[0]) if argv else None
    if subcommand is None and (mistyped := _mistyped_subcommand(argv)) is not None:
        print(mistyped, file=sys.stderr)
        return ExitCode.USAGE
    if subcommand is None:
        # First, before anything that can take time: a stop signal must end in a drain_finished
        # line, and no other signal may end the drain (modeldrain/hook/signals.py).
        _SIGNALS.install()
    _ensure_standard_streams()
    if subcommand is not None:
        return subcommand(argv[1:])  # one-shot commands: a signal simply ends them
    return drain_command(argv)
