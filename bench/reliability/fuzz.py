"""The differential fuzz tests, run with a stated number of examples: examples run, violations, time.

    .venv/bin/python -m bench.reliability.fuzz [--examples 1000] [--json out.json]

Runs the property tests (tests/hook/test_exposition_differential.py: the reader against
prometheus-client's parse of the whole body; tests/hook/test_fetch_differential.py: the fetch
against raw byte streams; tests/hook/test_freshness_differential.py: SGLang's stale-zero rule
against an oracle of its own, issue 25) and the corpus replays in those files, under pytest with Hypothesis'
statistics, and reads the counts Hypothesis itself reports: passing, failing and invalid examples
per property. A violation is a failing example or a failed test; none is expected.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from bench.paths import REPO

TEST_FILES = ("tests/hook/test_exposition_differential.py", "tests/hook/test_fetch_differential.py",
              "tests/hook/test_freshness_differential.py")
# Two workers: the first two property tests dominate the time, on the bench's two cores.
WORKERS = 2
TIMEOUT_S = 3600

# Hypothesis' statistics block, per property test.
_TEST_HEADER = re.compile(r"^(tests/\S+::\S+):\s*$", re.MULTILINE)
_COUNTS = re.compile(r"- (\d+) passing, (\d+) failing, and (\d+) invalid")
_PHASE = re.compile(r"- during (\w+) phase \(([\d.]+) seconds\)")
# pytest's last line, with or without its `=` rule: `3 failed, 17 passed in 21.54s`.
_SUMMARY = re.compile(r"^=*\s*(\d+ \w+(?:, \d+ \w+)*) in ([\d.]+)s", re.MULTILINE)


def command(examples: int) -> list[str]:
    """The pytest invocation, as the report shows it (MODELDRAIN_FUZZ_EXAMPLES set in its environment)."""
    return [".venv/bin/python", "-m", "pytest", "-q", "-n", str(WORKERS), "-p", "no:cacheprovider",
            "--timeout", str(TIMEOUT_S), "--hypothesis-show-statistics", *TEST_FILES]


def parse_statistics(output: str) -> dict[str, dict]:
    """Per property test: passing/failing/invalid examples and seconds, from Hypothesis' statistics."""
    found: dict[str, dict] = {}
    headers = list(_TEST_HEADER.finditer(output))
    for index, header in enumerate(headers):
        end = headers[index + 1].start() if index + 1 < len(headers) else len(output)
        block = output[header.end():end]
        passing = failing = invalid = 0
        seconds = 0.0
        for phase in _PHASE.finditer(block):
            seconds += float(phase.group(2))
        for counts in _COUNTS.finditer(block):
            passing += int(counts.group(1))
            failing += int(counts.group(2))
            invalid += int(counts.group(3))
        found[header.group(1)] = {"passing": passing, "failing": failing, "invalid": invalid,
                                  "seconds": round(seconds, 2)}
    return found


def parse_outcome(output: str) -> dict[str, int]:
    """pytest's last line: `3 failed, 17 passed in 21.54s` -> {"failed": 3, "passed": 17}."""
    matches = list(_SUMMARY.finditer(output))
    if not matches:
        return {}
    counts = {}
    for part in matches[-1].group(1).split(","):
        number, _, word = part.strip().partition(" ")
        if number.isdigit():
            counts[word] = int(number)
    return counts


def measure(examples: int) -> dict:
    argv = command(examples)
    argv[0] = sys.executable  # the interpreter running the bench: .venv's
    env = dict(os.environ, MODELDRAIN_FUZZ_EXAMPLES=str(examples))
    started = time.monotonic()
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=TIMEOUT_S + 60)
    seconds = time.monotonic() - started
    output = (done.stdout + done.stderr).replace(str(REPO) + "/", "")  # paths relative to the repository
    properties = parse_statistics(output)
    tests = parse_outcome(output)
    return {
        "command": f"MODELDRAIN_FUZZ_EXAMPLES={examples} " + " ".join(command(examples)),
        "examples_per_property": examples,
        "properties": properties,
        "examples_run": sum(p["passing"] + p["failing"] for p in properties.values()),
        "failing_examples": sum(p["failing"] for p in properties.values()),
        "tests": tests,
        "violations": sum(p["failing"] for p in properties.values()) + tests.get("failed", 0) + tests.get("error", 0)
        + tests.get("errors", 0),
        "exit_code": done.returncode,
        "seconds": round(seconds, 1),
        "tail": output[-1500:] if done.returncode != 0 else "",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.reliability.fuzz", description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=1000, help="generated inputs per property (default 1000)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    result = measure(args.examples)
    print(json.dumps({k: v for k, v in result.items() if k != "tail"}, indent=1))
    if result["tail"]:
        print(result["tail"], file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0 if result["violations"] == 0 and result["exit_code"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
