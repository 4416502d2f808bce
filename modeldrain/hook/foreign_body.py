"""What a /metrics body that is no engine's looks like, in words a person can act on.

A probe pointed at the wrong port (the sidecar's 8490, a router, an API) still gets an answer;
read as an engine's it shows no work gauge at all, which the drain counts as busy. The words
say what was read instead and why it cannot count, so the first read of a misplaced probe says
so (`prestop check`, the drain's first `read_state`), not the deadline.
"""

from __future__ import annotations

from modeldrain.hook.gauges import ENGINE_PREFIXES, SGLANG_GAUGES, VLLM_GAUGES

__all__ = ["NOT_AN_ENGINE", "not_an_engine"]

# drain-sidecar's own metrics (modeldrain/sidecar/metrics.py) all start with this.
SIDECAR_METRIC_PREFIX = b"modeldrain_sidecar_"
# How far into a body to look for what it is: its first bytes say JSON or HTML.
SNIFF_BYTES = 512
# Every description starts with this: the check's and the drain's warnings look for it.
NOT_AN_ENGINE = "this is not an engine's /metrics"
_ENGINE_PREFIXES = tuple(prefix.encode("ascii") for prefix in ENGINE_PREFIXES.values())
_WORK_GAUGES = ", ".join(g.name for g in VLLM_GAUGES + SGLANG_GAUGES)


def not_an_engine(body: bytes) -> str | None:
    """Why this body is not an engine's /metrics, or None when it names an engine's metrics."""
    if any(prefix in body for prefix in _ENGINE_PREFIXES):
        return None
    head = body[:SNIFF_BYTES].lstrip()
    if head[:1] in (b"{", b"["):
        what = "the body is JSON, not a Prometheus exposition (an API's answer: is the port or path an API's?)"
    elif head[:1] == b"<":
        what = "the body is HTML or XML, not a Prometheus exposition"
    elif SIDECAR_METRIC_PREFIX in body:
        what = ("it looks like drain-sidecar's own (modeldrain_sidecar_* metrics): the port is the sidecar's, "
                "not the engine's (--port, or the prometheus.io/port annotation)")
    elif not head:
        what = "the body is empty"
    else:
        what = f"it has none of any known engine's work gauges ({_WORK_GAUGES})"
    return f"{NOT_AN_ENGINE}: {what}"
