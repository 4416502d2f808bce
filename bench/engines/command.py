"""What every real-engine bench's command does first and last: find the tier, write its rows.

Without the tier (or its prefill/decode add-on) a command says in one line what to run first and
exits 2, before it starts anything; `make engines` installs the tier in ~6 min from an empty cache.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from typing import Any, NoReturn

from engines import tier as tier_module


def _missing(prog: str, reason: str) -> NoReturn:
    print(f"{prog}: error: {reason}", file=sys.stderr)
    raise SystemExit(2)


def tier(prog: str) -> tier_module.Tier:
    """The installed tier, or one line on stderr naming `make engines` and exit 2."""
    found = tier_module.installed()
    if isinstance(found, str):
        _missing(prog, found)
    return found


def vllm_pd_addon(prog: str) -> tier_module.PdAddOn:
    """The tier's vLLM prefill/decode add-on (mooncake in its vLLM environment), or one line on
    stderr naming what to make first and exit 2."""
    found = tier_module.vllm_pd_installed()
    if isinstance(found, str):
        _missing(prog, found)
    return found


def pd_addon(prog: str) -> tier_module.PdAddOn:
    """The tier's prefill/decode add-on, or one line on stderr naming what to make first and exit 2."""
    found = tier_module.pd_installed()
    if isinstance(found, str):
        _missing(prog, found)
    return found


def keep(rows: list[Any], row: Any) -> None:
    """The row (a dataclass) as a JSON line on stdout at once, so a long run shows each as it ends."""
    print(json.dumps(asdict(row)), flush=True)
    rows.append(row)


def write_rows(path: str | None, rows: list[Any]) -> None:
    """The rows (dataclasses) as a JSON list, where `--out` asked for them."""
    if path:
        with open(path, "w") as f:
            json.dump([asdict(r) for r in rows], f, indent=1)
