"""`modeldrain inject FILE...|-`: the manifests written back on stdout with modeldrain added.

For a Helm post-renderer (`helm install ... --post-renderer`), a pipe into `kubectl apply -f -`,
or a kustomize or Argo CD plugin: the input's own documents come out as they went in, except the
workloads whose engine container gains the hook. All or nothing: where any workload is refused,
or any input cannot be read, nothing is written to stdout (a half-injected stream applied would
be worse than none), and each reason is one line on stderr.
"""

from __future__ import annotations

import argparse
import sys
from typing import IO, Any

from modeldrain.hook.exitcodes import ExitCode
from modeldrain.hook.flags import Parser
from modeldrain.inject.pod_changes import Options, Refused
from modeldrain.inject.stream import Change, rewrite
from modeldrain.inject.workloads import NotKubernetes, inject_object
from modeldrain.lint import manifest_files
from modeldrain.lint.manifest_files import UnreadableManifest
from modeldrain.lint.manifest_rules import PRESTOP_IMAGE_NAME, SIDECAR_IMAGE_NAME, image_name, names_a_registry

__all__ = ["run_inject"]

# Where the operator's controller runs, as deploy/'s NetworkPolicies name it.
DEFAULT_CONTROLLER_NAMESPACE = "modeldrain-system"

EPILOG = """\
exit codes: 0 written (workloads with no engine, or two, are left as they are: one line each on stderr);
  1 a workload refused (a preStop of its own, no grace without --grace, a name already taken...):
    one line each on stderr, nothing on stdout;
  2 usage error, or an input that cannot be read: not YAML or JSON, not Kubernetes, past a size,
    depth or alias bound (one line on stderr, nothing on stdout)

Nothing is published to a registry: --image names your own copy of the prestop image, pinned by
digest (registry.example.com/modeldrain/prestop@sha256:...).
"""


def inject_parser(prog: str) -> argparse.ArgumentParser:
    parser = Parser(prog=prog, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
                    description="Add modeldrain's drain hook to the engine container of each workload, "
                                "found by what it runs, and write the manifests back on stdout.")
    parser.add_argument("files", nargs="+", metavar="FILE", help="manifests (YAML or JSON); - for standard input")
    parser.add_argument("--image", required=True,
                        help="the prestop image the init container runs: yours, pinned by digest (required)")
    parser.add_argument("--grace", type=int, metavar="SECONDS",
                        help="terminationGracePeriodSeconds for a Pod template that sets none (one that sets its "
                             "own keeps it); without it, such a workload is refused")
    parser.add_argument("--sidecar", action="store_true",
                        help="add drain-sidecar, its token volume and a NetworkPolicy (always for a LeaderWorkerSet)")
    parser.add_argument("--sidecar-image", help="the drain-sidecar image, with --sidecar (required with it)")
    parser.add_argument("--controller-namespace", default=DEFAULT_CONTROLLER_NAMESPACE,
                        help="the namespace the sidecar's NetworkPolicy admits to port 8490 (default: %(default)s)")
    return parser


def _options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Options:
    if image_name(args.image) != PRESTOP_IMAGE_NAME:
        parser.error(f"--image {args.image}: the image's name must be {PRESTOP_IMAGE_NAME} (any registry, tag or "
                     "digest): `modeldrain lint` knows the install container by it")
    for flag, image in (("--image", args.image), ("--sidecar-image", args.sidecar_image)):
        if image and not names_a_registry(image):
            parser.error(f"{flag} {image}: names no registry, so every node would pull it from Docker Hub, where "
                         "nothing of modeldrain's is published and anyone may hold the namespace: name yours "
                         "(registry.example.com/modeldrain/...@sha256:...), or localhost/ for an image on the node")
    if args.sidecar != bool(args.sidecar_image):
        parser.error("--sidecar and --sidecar-image go together")
    if args.sidecar_image and image_name(args.sidecar_image) != SIDECAR_IMAGE_NAME:
        parser.error(f"--sidecar-image {args.sidecar_image}: the image's name must be {SIDECAR_IMAGE_NAME}")
    if args.grace is not None and args.grace < 1:
        parser.error(f"--grace {args.grace}: a whole number of seconds >= 1")
    return Options(image=args.image, sidecar_image=args.sidecar_image, grace=args.grace)


def run_inject(argv: list[str], prog: str = "modeldrain inject", stdin: IO[bytes] | None = None) -> int:
    parser = inject_parser(prog)
    args = parser.parse_args(argv)
    options = _options(parser, args)
    outputs: list[str] = []
    refusals: list[str] = []
    notes: list[str] = []
    try:
        for path in args.files:
            text = manifest_files.read_text(path, stdin)
            outputs.append(rewrite(path, text, _change(path, options, args.controller_namespace, refusals, notes)))
    except (UnreadableManifest, NotKubernetes) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    for line in notes:
        print(f"{prog}: {line}", file=sys.stderr)
    if refusals:
        for line in refusals:  # one line each, naming its workload; nothing is written for any
            print(f"{prog}: {line}: nothing written", file=sys.stderr)
        return ExitCode.NOT_CLEARED
    for index, output in enumerate(outputs):
        if index and not outputs[index - 1].endswith("\n"):
            sys.stdout.write("\n")
        if index:
            sys.stdout.write("---\n")
        sys.stdout.write(output)
    sys.stdout.flush()
    return ExitCode.OK


def _change(path: str, options: Options, controller_namespace: str, refusals: list[str], notes: list[str]) -> Any:
    name = "<stdin>" if path == manifest_files.STDIN else path

    def change(value: Any, index: int) -> Change:
        try:
            result = inject_object(value, f"{name}[{index}]", options, controller_namespace)
        except Refused as exc:
            refusals.append(str(exc))
            return None
        notes.extend(result.notes)
        return None if result.body is None else (result.body, result.added)

    return change
