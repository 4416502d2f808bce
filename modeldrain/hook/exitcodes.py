"""Every exit status the project's programs end with, named once.

`prestop` (drain, check, version, install) and `drain-sidecar` share one table, so a status
means one thing wherever it appears: a script, kubelet's event, or the operator's runbook.
Nothing exits with a number that is not here.
"""

from __future__ import annotations

import enum

__all__ = ["ExitCode"]


class ExitCode(enum.IntEnum):
    OK = 0  # drained idle; a check read idle; installed; stopped cleanly
    # The answer is "not now", whichever command asked: `prestop check` read something other than
    # idle; `prestop lint` found a disagreement; `drain-sidecar retirement` held, refused or aborted.
    NOT_CLEARED = 1
    USAGE = 2  # a bad flag or argument: the message names it (argparse's own status)
    LISTEN_FAILED = 3  # drain-sidecar: cannot listen on --listen
    DEADLINE = 10  # the drain reached G - exit reserve with work in flight or unknown
    UNMEASURABLE = 11  # nothing to measure: refused, HTTP error status, TLS handshake failure
    LEADER_UNREACHABLE = 12  # a worker's leader never answered as a drain-sidecar (wrong host, port or token)
    INTERRUPTED = 130  # SIGINT before the drain finished (128 + 2)
    QUIT = 131  # SIGQUIT before the drain finished (128 + 3)
    TERMINATED = 143  # SIGTERM before the drain finished (128 + 15)
