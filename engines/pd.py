"""A real SGLang prefill/decode pair on loopback: a prefill server, a decode server and the router
that pairs them for a client, their KV cache handed over mooncake TCP.

    with PdPair(pd_installed()) as pair:       # returns once all three answer /health
        pair.router.base_url                   # where a client sends /v1/completions
        pair.prefill, pair.decode              # RealEngines: what emulation.kubelet.delete_pod takes

SGLang 0.5.23's own package has no load balancer: its documentation pairs the two with
sglang-router (`--pd-disaggregation`), which sends each request to a prefill and a decode server
at once, with the prefill server's bootstrap address and a room number in the body, and answers
with the decode server's response. Needs the add-on (engines/install_pd.sh).
"""

from __future__ import annotations

import json
import time
import urllib.request

from engines.servers import HEALTH_POLL_S, START_TIMEOUT_S, RealEngine, free_port, sglang_argv
from engines.tier import PdAddOn

# The transfer backend that runs without RDMA hardware (SGLang sets MC_FORCE_TCP for it).
TRANSFER_BACKEND = "mooncake_tcp"
# Inferred from the KV pool, a decode server's retraction backup is a HiCache host pool, whose
# allocation registers pinned memory with CUDA and fails on a CPU-only torch; per-request CPU
# tensors need nothing of CUDA.
DECODE_RETRACTION_BACKUP = "cpu_tensor"
# With overlap scheduling, a prefill server that finds a request's prefix in its radix cache sends
# that prefix early and records a torch.cuda.Event first: on a CPU-only torch the second request of
# a prompt killed the scheduler ("Tried to instantiate dummy base class Event"). Without overlap
# there is no event; the CPU path gains nothing from overlap on 2 cores.
PREFILL_EXTRA = ("--disable-overlap-schedule",)
ROUTER_KIND = "sglang-router"
# Round robin over one server of each role: the default cache_aware policy would tokenize prompts
# with a tokenizer the router would have to load.
ROUTER_POLICY = "round_robin"
# The router polls each worker's /health; SGLang's answers after generating one token (>= 1 s).
ROUTER_HEALTH_INTERVAL_S = 2
# The router's /health answers before its first worker health check: a request then gets 503 (no
# prefill workers available). /readiness counts the workers it has seen healthy.
ROUTER_READINESS_PATH = "/readiness"
PAIR_WORKERS = 2


def _role_engine(addon: PdAddOn, role: str, *extra: str) -> RealEngine:
    port = free_port()
    argv = sglang_argv(addon.tier, port, "--disaggregation-mode", role, "--disaggregation-transfer-backend",
                       TRANSFER_BACKEND, *extra)
    return RealEngine("sglang", argv, port, {"SGLANG_USE_CPU_ENGINE": "1", "LD_LIBRARY_PATH": addon.library_path})


def prefill_engine(addon: PdAddOn) -> tuple[RealEngine, int]:
    """A prefill server and its bootstrap port (where decode servers ask for its KV)."""
    bootstrap_port = free_port()
    return _role_engine(addon, "prefill", "--disaggregation-bootstrap-port", str(bootstrap_port),
                        *PREFILL_EXTRA), bootstrap_port


def decode_engine(addon: PdAddOn) -> RealEngine:
    return _role_engine(addon, "decode", "--disaggregation-decode-retraction-backup", DECODE_RETRACTION_BACKUP)


def router_engine(addon: PdAddOn, prefill: RealEngine, bootstrap_port: int, decode: RealEngine) -> RealEngine:
    port = free_port()
    argv = [str(addon.tier.sglang_python), "-m", "sglang_router.launch_router", "--pd-disaggregation",
            "--prefill", prefill.base_url, str(bootstrap_port), "--decode", decode.base_url,
            "--host", "127.0.0.1", "--port", str(port), "--policy", ROUTER_POLICY,
            "--prometheus-port", str(free_port()), "--prometheus-host", "127.0.0.1",
            "--health-check-interval-secs", str(ROUTER_HEALTH_INTERVAL_S)]
    return RealEngine(ROUTER_KIND, argv, port, {})


class PdPair:
    """Prefill, decode and router, started in that order (the two servers side by side), stopped
    router first; each a session of its own, killed with its helpers on the way out. The router
    exists once started (its ports are picked then)."""

    def __init__(self, addon: PdAddOn):
        self.addon = addon
        self.prefill, self.bootstrap_port = prefill_engine(addon)
        self.decode = decode_engine(addon)
        self._router: RealEngine | None = None

    @property
    def router(self) -> RealEngine:
        assert self._router is not None, "not started"
        return self._router

    def start(self) -> PdPair:
        try:
            self.prefill.spawn()
            self.decode.spawn()
            self.prefill.wait_healthy()
            self.decode.wait_healthy()
            # Its two ports are picked only now: the servers' own listeners (mooncake's, ZMQ's) take
            # ports of their own while they start, and one took a port picked before (measured).
            self._router = router_engine(self.addon, self.prefill, self.bootstrap_port, self.decode)
            self._router.start()
            self._wait_router_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_router_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        seen = "nothing"
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.router.base_url + ROUTER_READINESS_PATH, timeout=5) as response:
                    seen = response.read().decode(errors="replace")
                if json.loads(seen).get("healthy_workers") == PAIR_WORKERS:
                    return
            except (OSError, ValueError) as error:  # 503 while not ready is an HTTPError (OSError)
                seen = str(error)
            time.sleep(HEALTH_POLL_S)
        raise RuntimeError(f"the router did not see both servers healthy within {START_TIMEOUT_S:g} s: {seen}")

    def stop(self) -> None:
        for engine in (self._router, self.decode, self.prefill):
            if engine is not None:
                engine.stop()

    def __enter__(self) -> PdPair:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
