"""When the hook may return right after the route wait and leave the rest to the engine's own drain.

SGLang keeps serving after SIGTERM (new requests included) and exits once it holds no request
(tokenizer_manager's sigterm_watchdog, docs/engines.md): polling it to idle first buys nothing
its SIGTERM does not do, and costs where its gauge set cannot be read (a decode server that has
served nothing publishes no gauges, so the poll runs to G - 20). So for an SGLang server whose
SIGTERM will drain, `prestop` returns after the route wait (routers lag), whatever its gauges
say. Its SIGTERM is an abort when SGL_FORCE_SHUTDOWN is set or when the server already reports
itself unhealthy (/health not 200 before any SIGTERM); a node of rank >= 1 is a worker, not the
server that drains; a container with another engine beside it is polled, since one engine's drain
does not serve the other's requests. Every one of those facts must be known to follow the engine: an unknown
keeps the full drain, as does every vLLM (its SIGTERM aborts, or with --shutdown-timeout answers
new requests HTTP 500, so the poll is what protects a lagging router's requests).

Pure: the facts come in, a policy and its reason go out; modeldrain/hook/drain.py reads /health (once, beside
the route wait: SGLang's /health generates a token and answers after >= 1 s).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from modeldrain.hook.engine import SGLANG_FORCE_SHUTDOWN_ENV, EngineHint
from modeldrain.hook.gauges import EngineKind

__all__ = ["ExitPolicy", "PolicyChoice", "policy_after_health", "policy_before_health"]

# The /health status of a server that says it is serving.
HEALTHY_STATUS = 200


class ExitPolicy(enum.Enum):
    FULL_DRAIN = "full_drain"  # poll to two idle reads, or the deadline
    FOLLOW_ENGINE_DRAIN = "follow_engine_drain"  # return after the route wait: the engine's SIGTERM drains


@dataclass(frozen=True)
class PolicyChoice:
    policy: ExitPolicy
    reason: str


def full(reason: str) -> PolicyChoice:
    return PolicyChoice(ExitPolicy.FULL_DRAIN, reason)


def policy_before_health(hint: EngineHint, *, following_leader: bool, other_engines: int = 0) -> PolicyChoice | None:
    """The full drain and why, from what the engine's argv and environment say; None when they allow
    following the engine's drain, which its /health must then confirm (policy_after_health).
    `other_engines`: the container's other engine listeners (hook.settings.ReadConfig.others), whose
    requests one engine's own drain does not serve."""
    if following_leader:
        return full("a worker follows its leader's drain-sidecar")
    if other_engines:
        return full(f"{other_engines + 1} engine listeners in this container: one engine's own SIGTERM drain "
                    "does not serve the others' requests, so the poll waits on every one")
    if hint.kind is EngineKind.VLLM:
        return full("vLLM's SIGTERM aborts what is in flight, or with --shutdown-timeout answers new requests "
                    "HTTP 500: the poll to idle protects them")
    if hint.kind is not EngineKind.SGLANG:
        return full("the engine is not known before the first read (no --engine, no engine argv seen)")
    if hint.force_shutdown:
        return full(f"{SGLANG_FORCE_SHUTDOWN_ENV} is set in the engine's environment: its SIGTERM exits "
                    "without draining")
    if hint.force_shutdown is None:
        return full(f"the engine's environment could not be read ({SGLANG_FORCE_SHUTDOWN_ENV} unknown: its "
                    "process is not visible here or runs as another user)")
    if hint.port_unknown is not None:
        return full(f"the engine's port is not known ({hint.port_unknown}): its /health cannot be asked")
    if hint.node_rank is None:
        return full("the engine's --node-rank is not known (its argv was not read, or the value is not a number)")
    if hint.node_rank >= 1:
        return full(f"--node-rank {hint.node_rank}: a worker node of a multi-node server, not the one that drains")
    return None


def policy_after_health(health_status: int | None, detail: str = "") -> PolicyChoice:
    """With the argv and environment allowing it: follow the engine's drain when /health says 200."""
    if health_status == HEALTHY_STATUS:
        return PolicyChoice(ExitPolicy.FOLLOW_ENGINE_DRAIN,
                            "SGLang drains on SIGTERM (it keeps serving, new requests too, and exits once empty): "
                            f"{SGLANG_FORCE_SHUTDOWN_ENV} unset, node rank 0, /health 200 before SIGTERM")
    said = f"answered {health_status}" if health_status is not None else f"did not answer ({detail})"
    return full(f"/health {said} before SIGTERM: SGLang's SIGTERM force-exits a server that is not healthy")
