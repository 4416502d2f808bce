"""A real vLLM prefill/decode pair on loopback: a KV producer and a KV consumer over vLLM's
MooncakeConnector (mooncake's TCP transport), and the router that pairs them (engines/kv_proxy.py).

    with VllmPdPair(vllm_pd_installed()) as pair:   # returns once both servers answer /health
        pair.proxy.base_url                          # where a client sends /v1/completions
        pair.prefill, pair.decode                    # RealEngines: what emulation.kubelet.delete_pod takes
        pair.decode_kv_tokens()                      # prompt tokens the decoder pulled, and computed itself

Needs the prefill/decode add-on with its vLLM part (engines/install_pd.sh): mooncake in the tier's
vLLM environment and the one line of vLLM's connector that asked a CPU-only torch for an accelerator.
"""

from __future__ import annotations

import json
import urllib.request

from engines.kv_proxy import KvProxy
from engines.servers import VLLM_ENV, RealEngine, free_port, vllm_argv
from engines.tier import PdAddOn

CONNECTOR = "MooncakeConnector"
PREFILL_ENGINE_ID = "prefill-0"
DECODE_ENGINE_ID = "decode-0"
# Mooncake's transfer engine speaks RDMA by default; TCP needs no device (kv_connector_extra_config).
PROTOCOL = "tcp"
# The transfer engine and the connector's side channel bind the address vLLM's get_ip() finds: this
# one keeps every transfer on loopback.
HOST_IP = "127.0.0.1"
# What the decoder's /metrics says of each request's prompt: pulled from the producer (vLLM 0.32's
# source label of prompt_tokens_by_source) or computed by itself (a failed pull it recomputed, or a
# request that never asked for one).
PULLED_SERIES = 'vllm:prompt_tokens_by_source_total{engine="0",model_name="tiny",source="external_kv_transfer"}'
COMPUTED_SERIES = 'vllm:request_prefill_kv_computed_tokens_sum{engine="0",model_name="tiny"}'


def kv_transfer_config(role: str, engine_id: str) -> str:
    return json.dumps({"kv_connector": CONNECTOR, "kv_role": role, "engine_id": engine_id,
                       "kv_connector_extra_config": {"mooncake_protocol": PROTOCOL}})


def _role_engine(addon: PdAddOn, role: str, engine_id: str, env: dict[str, str]) -> RealEngine:
    port = free_port()
    argv = vllm_argv(addon.tier, port, "--kv-transfer-config", kv_transfer_config(role, engine_id))
    return RealEngine("vllm", argv, port, dict(VLLM_ENV, **env, VLLM_HOST_IP=HOST_IP,
                                                LD_LIBRARY_PATH=addon.library_path))


def metric_values(base_url: str, names: tuple[str, ...]) -> dict[str, float | None]:
    with urllib.request.urlopen(base_url + "/metrics", timeout=10) as response:
        lines = response.read().decode(errors="replace").splitlines()
    found: dict[str, float | None] = dict.fromkeys(names)
    for line in lines:
        series, _, value = line.rpartition(" ")
        if series in found:
            found[series] = float(value)
    return found


class VllmPdPair:
    """Producer and consumer started side by side, then the router; stopped router first."""

    def __init__(self, addon: PdAddOn):
        self.bootstrap_port = free_port()
        self.prefill = _role_engine(addon, "kv_producer", PREFILL_ENGINE_ID,
                                    {"VLLM_MOONCAKE_BOOTSTRAP_PORT": str(self.bootstrap_port)})
        self.decode = _role_engine(addon, "kv_consumer", DECODE_ENGINE_ID, {})
        self.proxy = KvProxy(self.prefill.base_url, self.decode.base_url, PREFILL_ENGINE_ID,
                             f"http://{HOST_IP}:{self.bootstrap_port}")
        self._proxy_started = False

    def start(self) -> VllmPdPair:
        try:
            self.prefill.spawn()
            self.decode.spawn()
            self.prefill.wait_healthy()
            self.decode.wait_healthy()
            self.proxy.start()
            self._proxy_started = True
        except BaseException:
            self.stop()
            raise
        return self

    def decode_kv_tokens(self) -> dict[str, float | None]:
        """The decoder's prompt tokens: `pulled` from the producer, `computed` by itself."""
        values = metric_values(self.decode.base_url, (PULLED_SERIES, COMPUTED_SERIES))
        return {"pulled": values[PULLED_SERIES], "computed": values[COMPUTED_SERIES]}

    def stop(self) -> None:
        if self._proxy_started:
            self.proxy.stop()
            self._proxy_started = False
        for engine in (self.decode, self.prefill):
            engine.stop()

    def __enter__(self) -> VllmPdPair:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
