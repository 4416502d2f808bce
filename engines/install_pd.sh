#!/usr/bin/env bash
# The prefill/decode add-on of the real-engine tier: what SGLang needs to run a prefill and a decode
# server that hand their KV cache over mooncake TCP on the CPU path.
#
#   engines/install_pd.sh         install into the installed tier (once), print its pd/ directory
#
# It goes into the tier's directory but is not part of its recipe (engines/tier.py hashes
# install.sh, make_model.py and shims/ only): adding it reinstalls nothing. Its own stamp,
# pd/complete, says it is there; a tier installed anew (a changed recipe) starts without it.
#
# - mooncake-transfer-engine-non-cuda goes into the tier's SGLang virtualenv (the transfer engine
#   SGLang's `--disaggregation-transfer-backend mooncake_tcp` imports), and sglang-router, the
#   router SGLang's documentation pairs the two with (`python -m sglang_router.launch_router
#   --pd-disaggregation`): 0.5.23's own package no longer carries a load balancer.
# - The same transfer engine goes into the tier's vLLM virtualenv, for a vLLM prefill/decode pair over
#   MooncakeConnector (engines/vllm_pd.py), with its own stamp (pd/vllm-complete): an add-on installed
#   before it gains it without redoing the SGLang part.
# - Its engine.so links libibverbs.so.1 even when it only speaks TCP. Debian's libibverbs1 and the
#   two libraries it links (libnl-3-200, libnl-route-3-200) are downloaded with apt-get and unpacked
#   with dpkg-deb into pd/root; engines/pd.py puts pd/root's lib directory on LD_LIBRARY_PATH. Nothing
#   is installed on the machine itself.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
PYTHON="${PYTHON:-python3}"
TIER="$("$PYTHON" "$HERE/tier.py" dir)"
PD="$TIER/pd"

if [[ ! -f "$TIER/complete" ]]; then
  echo "engines: the tier is not installed at $TIER (run \`make engines\` first)" >&2
  exit 1
fi
if [[ -f "$PD/complete" && -f "$PD/vllm-complete" ]]; then
  echo "$PD"
  exit 0
fi

MOONCAKE="mooncake-transfer-engine-non-cuda==0.3.13.post1"
# Its only requirement the SGLang environment lacks is itself (pip install --dry-run).
ROUTER="sglang-router==0.3.2"
# libibverbs1's Depends (apt-cache depends libibverbs1) beside libc6 and adduser, which every
# Debian has.
DEBS=(libibverbs1 libnl-3-200 libnl-route-3-200)

if [[ ! -f "$PD/complete" ]]; then
  rm -rf "$PD"
  mkdir -p "$PD/root" "$PD/debs"
  S="$TIER/sglang/bin"
  "$S/pip" install -q --disable-pip-version-check "$MOONCAKE" "$ROUTER"

  # apt-get download needs the package lists; on a fresh machine they may be empty.
  if ! (cd "$PD/debs" && apt-get download -q "${DEBS[@]}") >/dev/null 2>&1; then
    apt-get update -q >/dev/null
    (cd "$PD/debs" && apt-get download -q "${DEBS[@]}")
  fi
  for deb in "$PD"/debs/*.deb; do
    dpkg-deb -x "$deb" "$PD/root"
  done
  # The packages spread their libraries over lib/ and usr/lib/: every directory holding one goes on
  # the path (pd/libdir, one LD_LIBRARY_PATH value).
  LIB="$(find "$PD/root" -name '*.so.*' -printf '%h\n' | sort -u | paste -sd:)"
  [[ -n "$LIB" ]] || { echo "engines: no shared library in the unpacked packages" >&2; exit 1; }
  echo "$LIB" > "$PD/libdir"

  site="$("$S/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  # SGLang's prefill side copies a KV chunk's page indices into pinned host memory and waits on a CUDA
  # event when the sender says it takes host indices, as mooncake's does: on a CPU-only torch the
  # first request kills the prefill scheduler ("pin_memory=True requires a CUDA or other accelerator
  # backend"). Mooncake's sender says so only where CUDA is there; otherwise the indices take the path
  # every other transfer backend takes (kv_to_page_indices). Idempotent: the line is matched exactly.
  conn="$site/sglang/srt/disaggregation/mooncake/conn.py"
  sed -i -E 's/^    supports_host_tensor_indices = True$/    supports_host_tensor_indices = torch.cuda.is_available()/' "$conn"
  grep -q '^    supports_host_tensor_indices = torch.cuda.is_available()$' "$conn" \
    || { echo "engines: the mooncake sender patch no longer applies" >&2; exit 1; }

  # --- check: every library the transfer engine links resolves, and SGLang's mooncake backend imports.
  missing="$(LD_LIBRARY_PATH="$LIB" ldd "$site/mooncake/engine.so" | grep 'not found' || true)"
  [[ -z "$missing" ]] || { echo "engines: mooncake's engine.so still lacks: $missing" >&2; exit 1; }
  LD_LIBRARY_PATH="$LIB" SGLANG_USE_CPU_ENGINE=1 "$S/python" -c \
    'from mooncake.engine import TransferEngine; import sglang.srt.disaggregation.mooncake.conn, sglang_router.launch_router'
  date -u +%FT%TZ > "$PD/complete"
fi
# --- vLLM: the transfer engine in its environment, and one line of its MooncakeConnector.
if [[ ! -f "$PD/vllm-complete" ]]; then
  V="$TIER/vllm/bin"
  # Its requirements beside vLLM's own: msgpack alone (pip install --dry-run).
  "$V/pip" install -q --disable-pip-version-check "$MOONCAKE"
  vsite="$("$V/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  # vLLM 0.32's MooncakeConnectorWorker asks torch for the current accelerator's index before it
  # starts the transfer engine; on a CPU-only torch that raises ("Cannot access accelerator device
  # when none is available") and the worker, then the engine core, dies at start. The index only
  # goes to current_platform.set_device, a no-op on the CPU platform: 0 where there is none.
  # Idempotent: the line is matched exactly.
  mc="$vsite/vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py"
  sed -i -E 's/^        self\.device_id = torch\.accelerator\.current_device_index\(\)$/        self.device_id = torch.accelerator.current_device_index() if torch.accelerator.is_available() else 0/' "$mc"
  grep -q '^        self.device_id = torch.accelerator.current_device_index() if torch.accelerator.is_available() else 0$' "$mc" \
    || { echo "engines: the vLLM MooncakeConnector patch no longer applies" >&2; exit 1; }
  LD_LIBRARY_PATH="$(cat "$PD/libdir")" "$V/python" -c \
    'from mooncake.engine import TransferEngine; import vllm.distributed.kv_transfer.kv_connector.v1.mooncake.mooncake_connector'
  date -u +%FT%TZ > "$PD/vllm-complete"
fi
echo "$PD"
