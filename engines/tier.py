"""Where the real-engine tier lives: a cache directory outside the source tree, named by the recipe's hash.

    python engines/tier.py dir     the directory this checkout's recipe installs to

Standard library only: engines/install.sh runs it with the machine's python3, before any
virtualenv exists.
"""

from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent

# What the install depends on: a change to any of them installs the tier anew (tier.py and
# servers.py only locate and start it).
RECIPE_FILES = ("install.sh", "make_model.py")
RECIPE_DIRS = ("shims",)

CACHE_ENV = "MODELDRAIN_ENGINES_CACHE"
CACHE_NAME = "modeldrain-engines"
# Long enough to make a clash of two recipes unthinkable, short enough for a readable path.
HASH_CHARS = 16
COMPLETE_STAMP = "complete"
# The prefill/decode add-on (engines/install_pd.sh): inside the tier's directory, outside its recipe.
PD_DIR = "pd"
# One LD_LIBRARY_PATH value: the directories of the libraries it unpacked (libibverbs and its two).
PD_LIBDIR_FILE = "libdir"


def recipe_files() -> list[Path]:
    files = [HERE / name for name in RECIPE_FILES]
    for folder in RECIPE_DIRS:
        files += [p for p in (HERE / folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    return sorted(files, key=lambda p: p.relative_to(HERE).as_posix())


def recipe_hash() -> str:
    digest = hashlib.sha256()
    for path in recipe_files():
        digest.update(path.relative_to(HERE).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:HASH_CHARS]


def cache_root() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / CACHE_NAME


def tier_dir() -> Path:
    return cache_root() / recipe_hash()


@dataclass(frozen=True)
class Tier:
    """An installed tier: each engine's virtualenv and the model both serve."""

    root: Path

    @property
    def vllm_python(self) -> Path:
        return self.root / "vllm" / "bin" / "python"

    @property
    def sglang_python(self) -> Path:
        return self.root / "sglang" / "bin" / "python"

    @property
    def model(self) -> Path:
        return self.root / "model"


def installed() -> Tier | str:
    """The tier this recipe installed, or why there is none (one line)."""
    root = tier_dir()
    if not (root / COMPLETE_STAMP).is_file():
        return f"the real-engine tier is not installed at {root} (run `make engines`)"
    return Tier(root)


@dataclass(frozen=True)
class PdAddOn:
    """The prefill/decode add-on of an installed tier: mooncake and sglang-router in its SGLang
    environment, and the libraries mooncake's engine.so links, unpacked beside them."""

    tier: Tier

    @property
    def root(self) -> Path:
        return self.tier.root / PD_DIR

    @property
    def library_path(self) -> str:
        """LD_LIBRARY_PATH for the SGLang processes that import mooncake."""
        return (self.root / PD_LIBDIR_FILE).read_text().strip()


def pd_installed() -> PdAddOn | str:
    """The prefill/decode add-on, or why there is none (one line)."""
    found = installed()
    if isinstance(found, str):
        return f"{found}; the prefill/decode add-on needs it (then `make engines-pd`)"
    root = found.root / PD_DIR
    if not (root / COMPLETE_STAMP).is_file() or not (root / PD_LIBDIR_FILE).is_file():
        return f"the prefill/decode add-on is not installed in {root} (run `make engines-pd`)"
    return PdAddOn(found)


def main(argv: list[str]) -> int:
    if argv != ["dir"]:
        print("usage: tier.py dir", file=sys.stderr)
        return 2
    print(tier_dir())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
