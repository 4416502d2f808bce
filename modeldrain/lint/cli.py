"""`prestop lint FILE...`: check your own engine manifests the way deploy/'s are checked.

Reads every Pod template of each file (a Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, Job,
LeaderWorkerSet, or a `kubectl get -o json` List of them) and prints one line per finding, naming
the file, the object, the container and the field (modeldrain/lint/manifest_rules.py holds the rules).

JSON needs nothing beyond the standard library. YAML (multi-document included) needs PyYAML, which
the static executable does not carry (docs/prestop.md, "prestop lint", says why and what it
costs): where it is not installed, a YAML file is refused naming the two ways out.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from modeldrain.hook.exitcodes import ExitCode
from modeldrain.hook.flags import Parser, seconds_arg
from modeldrain.lint import manifest_files
from modeldrain.lint.manifest_rules import Finding, lint
from modeldrain.lint.pod_templates import NotAManifest, PodTemplate, templates_of

__all__ = ["run_lint"]

EPILOG = """\
exit codes: 0 every Pod template agrees (hook, grace, annotations, TMPDIR, token);
  1 at least one finding (one line each on stdout: FILE: KIND NAME: container C: FIELD: what is wrong);
  2 usage error, or a file that cannot be read or parsed (one line on stderr)

JSON is always read (`kubectl get deployment NAME -o json > d.json`); YAML needs PyYAML installed
(the console script's environment: pip install pyyaml). The static executable reads JSON only.
"""

class UnreadableFile(Exception):
    """A file that cannot be read or parsed: a usage error naming the file."""


def lint_parser(prog: str = "prestop lint") -> argparse.ArgumentParser:
    parser = Parser(prog=prog, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
                    description="Check that each Pod template's hook, grace, annotations, TMPDIR and token agree.")
    parser.add_argument("files", nargs="+", metavar="FILE", help="manifests: JSON, or YAML (one or more documents)")
    parser.add_argument("--longest-request", type=seconds_arg("--longest-request", inclusive=False), metavar="SECONDS",
                        help="also find each Pod whose grace is too short to finish a request this long "
                             "(docs/prestop.md, \"Choosing G\")")
    return parser


def documents_in(path: str) -> list[Any]:
    """Every document of one file, parsed within modeldrain/lint/manifest_files.py's bounds; raises
    UnreadableFile naming the file."""
    try:
        return manifest_files.load_documents(path, manifest_files.read_text(path))
    except manifest_files.UnreadableManifest as exc:
        raise UnreadableFile(str(exc)) from None


def templates_in(path: str) -> list[PodTemplate]:
    out: list[PodTemplate] = []
    for index, document in enumerate(documents_in(path)):
        try:
            out.extend(templates_of(document, f"{path}[{index}]"))
        except NotAManifest as exc:
            raise UnreadableFile(str(exc)) from None
    return out


def run_lint(argv: list[str], prog: str = "prestop lint") -> int:
    parser = lint_parser(prog)
    args = parser.parse_args(argv)
    findings: list[Finding] = []
    templates = 0
    try:
        for path in args.files:
            for template in templates_in(path):
                templates += 1
                findings.extend(lint(template, args.longest_request))
    except UnreadableFile as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    if templates == 0:
        print(f"{prog}: no Pod template in " + ", ".join(args.files) + " (no Pod, Deployment, StatefulSet, "
              "DaemonSet, ReplicaSet, Job or LeaderWorkerSet)", file=sys.stderr)
        return ExitCode.USAGE
    for finding in findings:
        print(finding)
    print(f"{prog}: {templates} Pod template(s), {len(findings)} finding(s)", file=sys.stderr)
    return ExitCode.NOT_CLEARED if findings else ExitCode.OK
