"""The constants several sidecar modules share, named once, each with the reason for its value.

The drain's constants (read timeout, body cap, grace) live in modeldrain/hook/constants.py and are
imported from there; a constant only one module uses lives beside its user.
"""

__all__ = ["MEMBER_CONFIGURATION_ENV", "MIN_READ_INTERVAL_S", "SERVER_HEADER", "work_answer_bound_s"]

# Consecutive engine reads start at least this far apart. Coalescing already keeps one read in
# flight, but a storm of callers would still chain scrapes back to back (each ~5-50 ms of the
# engine's API process rendering its exposition). 10 reads a second at most is ten times the
# hook's own rate, and adds at most 0.1 s to an answer; the controller reads about once a second.
MIN_READ_INTERVAL_S = 0.1

# Slack for the thread hand-off of a read on a loaded node (work_answer_bound_s).
WORK_WAIT_SLACK_S = 1.0


def work_answer_bound_s(read_timeout_s: float) -> float:
    """The longest GET /v1/work waits: the read in flight, then its own (each bounded by the read
    timeout), the spacing between reads, and the hand-off slack; past it the answer is a 504, never
    a stale read. 5.1 s at the default 2 s read timeout; docs/controller.md quotes it, and the
    reference client's request timeout (modeldrain/retirement/client.py) must exceed it."""
    return 2 * read_timeout_s + MIN_READ_INTERVAL_S + WORK_WAIT_SLACK_S

# What the replica was created from (e.g. the LeaderWorkerSet template-revision-hash label): the
# members of one replica must agree on it before the controller trusts its leader's answer.
MEMBER_CONFIGURATION_ENV = "MEMBER_CONFIGURATION"

# Every answer's Server header: our name, not the HTTP library's and its version (which only
# tells a scanner what to try).
SERVER_HEADER = "modeldrain-sidecar"
