"""`drain-sidecar retirement URL [URL...]`: the retirement protocol's verdict for one replica, for people.

Wiring only: the protocol is modeldrain/retirement/client.py (standard library only). It reads every member
once a round until the verdict is final and prints it as one JSON line: exit 0 when the replica may
be deleted, 1 when it is held (refused, or held past --budget), 2 on a usage error. Imports nothing
of the server, so it runs where aiohttp and uvloop are not installed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from modeldrain.hook.exitcodes import ExitCode
from modeldrain.hook.flags import Parser, seconds_arg
from modeldrain.retirement import client as retirement

__all__ = ["run_retirement"]

# People run this by hand: long enough to see a busy replica go idle, short enough to wait for.
DEFAULT_BUDGET_S = 60.0

EPILOG = """\
Each URL is one member Pod's drain-sidecar, http://POD_IP:8490 (/v1/work is added), given for every
member of the replica. --pod names the Pod meant at each URL, in the same order, so an answer from
another Pod at a reused IP holds instead of counting.

output: one JSON line, {"verdict": "delete"|"refuse"|"abort", "reason": CODE, "message": ..., ...};
  a delete names each member Pod by the UID it answered with ("pods"): delete each with
  Preconditions{UID, ResourceVersion} within MAX_AGE s of the verdict, and with no gracePeriodSeconds
  shorter than its own;
  each hold is said on stderr as a JSON line when it begins (a new reason); --trace writes every
  round's decision there instead. The algorithm and every reason
  code: docs/controller.md.

exit codes: 0 the replica may be deleted; 1 held (refused, or still held when --budget ran out);
  2 usage error.
""".replace("MAX_AGE", f"{retirement.MAX_VERDICT_AGE_S:g}")


def retirement_parser(prog: str = "drain-sidecar retirement") -> Parser:
    parser = Parser(prog=prog,
                    description="Run the retirement protocol's read for one replica and print its verdict.",
                    epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("urls", nargs="+", metavar="URL", help="each member's drain-sidecar, http://POD_IP:8490")
    parser.add_argument("--token-file", metavar="FILE", help="the bearer token the sidecars require (re-read each round)")
    parser.add_argument("--pod", action="append", default=[], metavar="NAMESPACE/NAME/UID",
                        help="the Pod meant at each URL, once per URL in the same order")
    parser.add_argument("--budget", type=seconds_arg("--budget", inclusive=False), default=DEFAULT_BUDGET_S,
                        metavar="SECONDS", help=f"hold no longer than this, then abort (default {DEFAULT_BUDGET_S:g})")
    parser.add_argument("--timeout", type=seconds_arg("--timeout", inclusive=False),
                        default=retirement.REQUEST_TIMEOUT_S, metavar="SECONDS",
                        help=f"bound on one request (default {retirement.REQUEST_TIMEOUT_S:g})")
    parser.add_argument("--no-router", dest="router", action="store_false",
                        help="no router drops the replica: its Service endpoint has just been removed, and withdrawal "
                        "waits for its outside connections to be gone (within "
                        f"{retirement.WITHDRAWAL_BUDGET_S:g} s) before the two idle reads")
    parser.add_argument("--trace", action="store_true", help="write each round's decision to stderr")
    return parser


def _pod(text: str) -> retirement.ExpectedPod:
    parts = text.split("/")
    if len(parts) != 3 or not all(parts):
        raise ValueError(f"--pod must be NAMESPACE/NAME/UID, got {text!r}")
    return retirement.ExpectedPod(*parts)


def parse_members(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[retirement.MemberEndpoint]:
    try:
        urls = [retirement.work_url(url) for url in args.urls]
        pods = [_pod(text) for text in args.pod]
    except ValueError as exc:
        parser.error(str(exc))
    if args.token_file is not None:
        try:
            retirement.load_token(args.token_file)
        except OSError as exc:
            parser.error(f"--token-file {args.token_file}: {exc.strerror or exc}")
        except ValueError as exc:
            parser.error(f"--token-file: {exc}")
    if len(set(urls)) != len(urls):
        parser.error("each member's URL once")
    if pods and len(pods) != len(urls):
        parser.error(f"--pod given {len(pods)} time(s) for {len(urls)} URL(s): once per URL or not at all")
    return [retirement.MemberEndpoint(url, pods[i] if pods else None) for i, url in enumerate(urls)]


def run_retirement(argv: list[str], prog: str = "drain-sidecar retirement") -> int:
    parser = retirement_parser(prog)
    args = parser.parse_args(argv)
    members = parse_members(parser, args)
    started_at = time.monotonic()
    rounds = 0

    said: list[retirement.Reason] = []

    def trace(at_s: float, decision: retirement.Decision) -> None:
        nonlocal rounds
        rounds += 1
        line = json.dumps({"at_s": round(at_s, 3), **decision.as_dict()})
        if args.trace:
            print(line, file=sys.stderr, flush=True)
        elif decision.verdict is retirement.RetirementVerdict.HOLD and decision.reason not in said[-1:]:
            # A hold can last the whole budget: its reason is said when it first holds, not at the end.
            said.append(decision.reason)
            print(line, file=sys.stderr, flush=True)

    decision = retirement.retire(members, budget_s=args.budget, token_file=args.token_file,
                                 timeout_s=args.timeout, router=args.router, on_round=trace)
    print(json.dumps({**decision.as_dict(), "rounds": rounds,
                      "elapsed_s": round(time.monotonic() - started_at, 3)}), flush=True)
    return ExitCode.OK if decision.verdict is retirement.RetirementVerdict.DELETE else ExitCode.NOT_CLEARED
