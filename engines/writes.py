"""What a real engine tries to write in a manifest's filesystem view, measured (docs/engines.md).

    python -m engines.writes deploy/pod-prestop-init-container.yaml vllm     (root; the tier installed)

Starts the engine in the manifest's engine view (engines/podview.py, HOME as a fresh image's) under
`strace -f --seccomp-bpf -Z -e trace=%file` (failed file calls only, into the engine's log), sends
completions and a chat request, then prints every refused write (EROFS, EACCES) once with its
count, and how much each writable volume holds. Exit 0 when it served, 1 when it did not.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from collections import Counter
from pathlib import Path

from engines import tier as tier_module
from engines.podview import exec_argv, kept_in_home, views_of
from engines.servers import SERVED_MODEL_NAME, RealEngine

# Only failed calls (-Z), only file syscalls, filtered in the kernel (--seccomp-bpf): the engine
# starts ~2x slower traced, not ~10x.
STRACE = ["strace", "-f", "--seccomp-bpf", "-Z", "-qq", "-e", "trace=%file", "-e", "signal=none"]
REFUSED = re.compile(r'^(?:\[pid\s+\d+\]\s+)?(\w+)\((.*)\)\s+= -1 (EROFS|EACCES)')
COMPLETIONS = 3
REQUEST_TIMEOUT_S = 120.0
# Enough of each volume's tree to say whose it is (e.g. .cache/sglang/inductor), not every file.
SHOWN_DEPTH = 3
SHOWN_ENTRIES = 20


def post(base_url: str, path: str, body: dict) -> int:
    request = urllib.request.Request(base_url + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as response:
        response.read()
        return response.status


def refused_writes(log: str) -> Counter[str]:
    """`call("path", ...) = EROFS` lines, counted, with the long hex runs (pids, uuids) folded."""
    found: Counter[str] = Counter()
    for line in log.splitlines():
        match = REFUSED.match(line)
        if match:
            found[re.sub(r"[0-9a-f]{8,}", "N", f"{match.group(1)}({match.group(2)[:120]}) {match.group(3)}")] += 1
    return found


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="engines.writes", description=__doc__.splitlines()[0])
    parser.add_argument("manifest", type=Path)
    parser.add_argument("kind", choices=["vllm", "sglang"])
    parser.add_argument("--index", type=int, default=0, help="which engine container of the manifest")
    args = parser.parse_args(argv)
    tier = tier_module.installed()
    if isinstance(tier, str):
        print(f"engines.writes: {tier}", file=sys.stderr)
        return 2
    view = views_of(args.manifest)[args.index]
    stage = Path(tempfile.mkdtemp(prefix="podview-"))
    engine = getattr(RealEngine, args.kind)(tier)
    engine.argv = exec_argv(args.manifest, args.index, stage, [*STRACE, *engine.argv], keep_in_home=kept_in_home(tier.root))
    served = False
    try:
        with engine:
            assert engine.process is not None
            statuses = [post(engine.base_url, "/v1/completions",
                             {"model": SERVED_MODEL_NAME, "prompt": "hello there", "max_tokens": 16})
                        for _ in range(COMPLETIONS)]
            statuses.append(post(engine.base_url, "/v1/chat/completions", {
                "model": SERVED_MODEL_NAME, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}))
            served = all(status == 200 for status in statuses)
            print(f"{args.kind} in {view.source}: healthy after {engine.start_s:.0f} s (traced), answers {statuses}")
            for path in view.writable_paths():
                inside = f"/proc/{engine.process.pid}/root{path}"
                du = subprocess.run(["du", "-sh", inside], capture_output=True, text=True)
                made = sorted(str(p.relative_to(inside)) for p in Path(inside).rglob("*")
                              if len(p.relative_to(inside).parts) <= SHOWN_DEPTH)
                print(f"  {path}: {du.stdout.split()[0] if du.returncode == 0 else du.stderr.strip()}, "
                      f"holds {made[:SHOWN_ENTRIES]}")
    except RuntimeError as error:
        print(f"{args.kind} in {view.source}: did not serve: {str(error).splitlines()[0]}")
        print("  " + "\n  ".join(str(error).strip().splitlines()[-2:]))
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    refused = refused_writes(engine.log_path.read_text(errors="replace"))
    print(f"  refused writes: {len(refused)} distinct" + "".join(f"\n    {n:4d} x {call}" for call, n in refused.most_common()))
    print(f"  log: {engine.log_path}")
    return 0 if served else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
