"""Which gauges count as work in flight: the one definition the hook and the sidecar share.

A replica is idle when every series of every gauge of its engine's set sums to zero, and a
read is complete only when each required gauge of the set is present (an optional gauge, one
that older releases do not export, is summed when present and never makes a read incomplete). Series differ by `engine`,
`model_name`, `tp_rank`, `dp_rank`... and are all summed, but for the series a gauge names as
holding no work (SGLang's HTTP gauge's `/metrics` series counts the scrape reading it).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Mapping

__all__ = [
    "ALL_WORK_METRIC_NAMES", "DEFAULT_METRICS_PATH", "DEFAULT_PORTS", "ENGINE_PREFIXES", "EngineKind", "GAUGE_SETS",
    "GaugeSet", "NOT_WORK_GAUGES", "PROCESS_START_METRIC", "RELEASE_RULES", "RESTART_COUNTERS", "Role",
    "SCHEDULER_HEARTBEATS", "SERIES_FILTERED", "SGLANG_GAUGES", "SGLANG_HTTP_ACTIVE", "SGLANG_HTTP_ACTIVE_GAUGE",
    "SGLANG_HTTP_ROUTE_LABEL", "SGLANG_NOT_WORK_ROUTES", "SGLANG_PP_RANK_LABEL", "SGLANG_ROLE_LABEL",
    "VLLM_ENGINE_LABEL", "VLLM_GAUGES", "WorkGauge", "gauge_set", "gauge_sets_of",
]


class EngineKind(enum.Enum):
    VLLM = "vllm"
    SGLANG = "sglang"


class Role(enum.Enum):
    """What part of the serving a server does: SGLang's --disaggregation-mode.

    vLLM and an SGLang server without disaggregation are UNIFIED (SGLang's flag calls it
    "null", its metrics' engine_type label "unified"; everything here says "unified").
    """

    UNIFIED = "unified"
    PREFILL = "prefill"
    DECODE = "decode"


@dataclass(frozen=True)
class WorkGauge:
    """One gauge of a gauge set. Any of `names` satisfies it (a gauge renamed across releases).

    `optional`: counted when present, but its absence leaves the read complete: a gauge that the
    engine's older releases do not export, whose work those releases count elsewhere or not at all.

    `not_work_label`, `not_work_values`: a series whose label `not_work_label` has one of these
    values holds no work: read as 0 (its gauge is still present, and a negative, NaN or infinite
    value in it still makes the read invalid). A deny-list, so that a value nobody listed counts
    as work (busy, the safe side); a series without the label counts too.

    `overlaps`: counts requests the other gauges count as well (an HTTP layer's count of requests
    the scheduler also holds): the read's in-flight figure is the larger of it and the others'
    sum, not their sum. Whether a read is idle does not depend on it: every gauge must read 0.
    """

    names: tuple[str, ...]
    optional: bool = False
    not_work_label: str = ""
    not_work_values: frozenset[str] = frozenset()
    overlaps: bool = False

    @property
    def name(self) -> str:
        return self.names[0]

    def holds_work(self, labels: Mapping[str, str]) -> bool:
        """Whether a series with these labels counts as work."""
        return not self.not_work_values or labels.get(self.not_work_label) not in self.not_work_values


@dataclass(frozen=True)
class GaugeSet:
    """The work gauges of one engine and role: a complete read carries every required one (what the
    spec calls a complete envelope: "both reads have to carry every expected gauge")."""

    kind: EngineKind
    role: Role
    gauges: tuple[WorkGauge, ...]

    @property
    def metric_names(self) -> frozenset[str]:
        return frozenset(n for g in self.gauges for n in g.names)

    @property
    def required(self) -> tuple[WorkGauge, ...]:
        """The gauges a complete read must have."""
        return tuple(g for g in self.gauges if not g.optional)


def _gauges(*names: str | tuple[str, ...]) -> tuple[WorkGauge, ...]:
    return tuple(WorkGauge(n if isinstance(n, tuple) else (n,)) for n in names)


# vLLM: not vllm:num_requests_waiting_by_reason, which repeats waiting split by reason. V0's
# engine (vllm/engine/metrics.py, the default before 0.8 and selectable through 0.10) also counts
# the requests it preempted to CPU memory in vllm:num_requests_swapped, which neither other gauge
# counts: optional, as V1 has no such gauge. Data parallel's `engine` label: every engine summed.
VLLM_SWAPPED = WorkGauge(("vllm:num_requests_swapped",), optional=True)
VLLM_GAUGES = _gauges("vllm:num_requests_running", "vllm:num_requests_waiting") + (VLLM_SWAPPED,)
# The label vLLM puts on each work series under data parallel: the engine core's index.
VLLM_ENGINE_LABEL = "engine"

# SGLang's structured-output requests wait for their grammar in the grammar manager, outside
# waiting_queue (num_queue_reqs): measured on SGLang 0.5.23, num_grammar_queue_reqs held them
# (docs/engines.md). Optional: releases that predate it (or servers without a grammar backend)
# do not export it.
SGLANG_GRAMMAR_QUEUE = WorkGauge(("sglang:num_grammar_queue_reqs",), optional=True)

# SGLang's HTTP middleware moves this gauge at each request's arrival and when its handler has sent
# the last byte of its response, per route (`endpoint`, the route's path template) and method:
# measured on SGLang 0.5.23, it counted the requests in the tokenizer manager (a unified server's
# scheduler gauges read 0 for 0.59 s with 32 out) and a decode server's requests waiting on the
# prefill side (its gauges read 0 for 7.31 s with 8 out): docs/engines.md. Optional: releases
# before it, and servers started without --enable-metrics' middleware, do not export it.
SGLANG_HTTP_ACTIVE_GAUGE = "sglang:http_requests_active"
SGLANG_HTTP_ROUTE_LABEL = "endpoint"
# The routes of SGLang 0.5.23's http_server.py that hold no client's work: the scrape itself (it
# counts 1 in every body), health and readiness probes (kubelet's, the router's: /health runs a
# one-token generation that takes a second when idle), and the server's and model's info. Every
# other route counts, a generation route or one added later alike.
SGLANG_NOT_WORK_ROUTES = frozenset({
    "/metrics",
    "/health", "/health_generate", "/ready", "/ping",
    "/model_info", "/get_model_info", "/server_info", "/get_server_info",
    "/v1/models", "/v1/models/{model:path}",
})
SGLANG_HTTP_ACTIVE = WorkGauge((SGLANG_HTTP_ACTIVE_GAUGE,), optional=True, not_work_label=SGLANG_HTTP_ROUTE_LABEL,
                               not_work_values=SGLANG_NOT_WORK_ROUTES, overlaps=True)

SGLANG_GAUGES = _gauges("sglang:num_running_reqs", "sglang:num_queue_reqs") + (SGLANG_GRAMMAR_QUEUE, SGLANG_HTTP_ACTIVE)

# SGLang releases before May 2026 name the bootstrap queue "prealloc"; either satisfies it. Releases
# before sgl-project/sglang#5357 (through 0.4.6, docs/compatibility.md) spell the transfer queue
# "infight": either satisfies it too.
SGLANG_PREFILL_GAUGES = SGLANG_GAUGES + _gauges(
    ("sglang:num_prefill_bootstrap_queue_reqs", "sglang:num_prefill_prealloc_queue_reqs"),
    ("sglang:num_prefill_inflight_queue_reqs", "sglang:num_prefill_infight_queue_reqs"),
)
# The label SGLang puts on each scheduler series: its pipeline stage.
SGLANG_PP_RANK_LABEL = "pp_rank"

SGLANG_DECODE_GAUGES = SGLANG_GAUGES + _gauges(
    "sglang:num_decode_prealloc_queue_reqs",
    "sglang:num_decode_transfer_queue_reqs",
)

GAUGE_SETS: dict[tuple[EngineKind, Role], GaugeSet] = {
    (EngineKind.VLLM, Role.UNIFIED): GaugeSet(EngineKind.VLLM, Role.UNIFIED, VLLM_GAUGES),
    (EngineKind.SGLANG, Role.UNIFIED): GaugeSet(EngineKind.SGLANG, Role.UNIFIED, SGLANG_GAUGES),
    (EngineKind.SGLANG, Role.PREFILL): GaugeSet(EngineKind.SGLANG, Role.PREFILL, SGLANG_PREFILL_GAUGES),
    (EngineKind.SGLANG, Role.DECODE): GaugeSet(EngineKind.SGLANG, Role.DECODE, SGLANG_DECODE_GAUGES),
}

# Every name any set reads: what the exposition filter keeps before parsing.
ALL_WORK_METRIC_NAMES: frozenset[str] = frozenset(
    n for s in GAUGE_SETS.values() for n in s.metric_names
)

# Each name of a gauge that leaves some of its series out (WorkGauge.not_work_values): the parse
# asks it of each sample it keeps under that name.
SERIES_FILTERED: dict[str, WorkGauge] = {
    n: g for s in GAUGE_SETS.values() for g in s.gauges if g.not_work_values for n in g.names
}

# Served by a single-process vLLM API server; its change means a new engine process.
PROCESS_START_METRIC = "process_start_time_seconds"

# Counters that only grow within one engine process: one that went backwards means a new
# process (the sidecar's incarnation evidence when there is no start time, as with SGLang).
RESTART_COUNTERS: dict[EngineKind, str] = {
    EngineKind.VLLM: "vllm:request_success_total",
    EngineKind.SGLANG: "sglang:num_requests_total",
}

# A counter each engine scheduler adds to from its own loop, between forward passes, never inside
# one: SGLang 0.5.23 adds its CPU time to it at most once a second, idle or busy
# (scheduler_components/metrics_reporter.py, _record_scheduler_time). Its work gauges are
# republished from the same loop, so a zero read while this counter has not moved since the
# previous read may be one the scheduler has not refreshed (measured: 16 long prompts read 0
# with the counter still; its next advance came with num_queue_reqs 12: docs/engines.md).
SCHEDULER_HEARTBEATS: dict[EngineKind, str] = {
    EngineKind.SGLANG: "sglang:scheduler_process_cpu_seconds_total",
}

# The label SGLang puts on every scheduler series: the role the server runs as.
SGLANG_ROLE_LABEL = "engine_type"

# Metric-name prefixes that identify the engine in an exposition.
ENGINE_PREFIXES: dict[EngineKind, str] = {EngineKind.VLLM: "vllm:", EngineKind.SGLANG: "sglang:"}

# Where each engine listens when nothing says otherwise.
DEFAULT_PORTS: dict[EngineKind, int] = {EngineKind.VLLM: 8000, EngineKind.SGLANG: 30000}
DEFAULT_METRICS_PATH = "/metrics"


def gauge_sets_of(kind: EngineKind) -> list[GaugeSet]:
    """Every role's set of one engine: what an engine of that kind may count as work."""
    return [s for (k, _), s in GAUGE_SETS.items() if k is kind]


def gauge_set(kind: EngineKind, role: Role = Role.UNIFIED) -> GaugeSet:
    """The gauge set for an engine and role. vLLM has no disaggregation role of its own here."""
    if kind is EngineKind.VLLM:
        role = Role.UNIFIED
    return GAUGE_SETS[(kind, role)]


# Gauges the engines define whose names say they count requests, but that hold no work of their
# own: each with the reason (engines/compat.py lists every release's; a gauge neither read nor
# named here makes that release unsupported in docs/compatibility.md).
NOT_WORK_GAUGES: dict[str, str] = {
    "vllm:num_requests_waiting_by_reason": "repeats vllm:num_requests_waiting, split by reason",
    "vllm:num_requests_kv_fetch_by_stage": "repeats vllm:num_requests_waiting, split by the stage of a KV "
                                           "consumer's async load",
    "sglang:num_retracted_reqs": "a count of retractions since the scheduler's last stats line, reset "
                                 "after each; the retracted requests wait in the queue num_queue_reqs counts",
    "sglang:num_paused_reqs": "a count of pauses since the scheduler's last stats line, reset after each; "
                              "the paused requests stay in the batch or queue the other gauges count",
    "sglang:num_running_reqs_offline_batch": "a part of num_running_reqs (its low-priority offline requests), "
                                             "and set to 0 by every release that defines it (0.5.2 to 0.5.10)",
    "sglang:num_decode_deferred_kv_release_reqs": "aborted transfers whose client already has its answer",
    "sglang:num_decode_host_receive_queue_reqs": "a part of the transfer queue num_decode_transfer_queue_reqs "
                                                 "counts (read twice if read)",
}


@dataclass(frozen=True)
class ReleaseRule:
    """A fact about some releases or configurations that changes what their gauges mean."""

    applies: str  # which releases and configurations, in words
    summary: str  # what the hook does there, in a few words (the compatibility table's cell)
    words: str  # what the hook does, and the fix, in a sentence


RELEASE_RULES: dict[str, ReleaseRule] = {
    "vllm_v0_swapped": ReleaseRule(
        "vLLM releases with the V0 engine (VLLM_USE_V1=0)",
        "V0's swapped requests counted",
        "vllm:num_requests_swapped (requests preempted to CPU memory) is summed with running and waiting."),
    "vllm_dp_last_engine_only": ReleaseRule(
        "vLLM before vllm-project/vllm#21257 (0.10.1) with --data-parallel-size > 1",
        "data parallel: held unless every engine's series is there",
        "only the last engine core's gauges are exported, so their sum can read idle while the other engines "
        "work: never read idle, held to the deadline. Fix: vLLM 0.10.1 or newer, or one engine per replica."),
    "vllm_server_load": ReleaseRule(
        "vLLM with --enable-server-load-tracking",
        "with --enable-server-load-tracking, GET /load confirms an idle read",
        "an idle read stays idle only when GET /load also counts 0 (the API server's requests)."),
    "vllm_kv_producer": ReleaseRule(
        "vLLM with --kv-transfer-config kv_role kv_producer or kv_both (a prefill server of a split)",
        "KV producer: held 480 s after the last request",
        "its connector keeps a finished request's KV blocks for the decoder to pull, and no release exports how "
        "many it holds: a zero reads busy until 480 s (vLLM's own send lease) after the last read that showed work "
        "or a request finished, so under G <= 480 s it drains to the deadline. Nothing finished yet: idle at once."),
    "sglang_prefill_infight": ReleaseRule(
        "SGLang before sgl-project/sglang#5357, as a prefill server",
        "reads the \"infight\" spelling",
        "sglang:num_prefill_infight_queue_reqs (sic) counts as the prefill transfer queue."),
    "sglang_pipeline_parallel": ReleaseRule(
        "SGLang with --pp-size > 1 (sgl-project/sglang#32158)",
        "pipeline parallel: held",
        "its gauges undercount running requests under pipeline parallelism, so a zero is no proof of idle: "
        "never read idle, held to the deadline. Fix: run without --pp-size, or with a release that fixes #32158."),
    "sglang_enable_metrics": ReleaseRule(
        "SGLang without --enable-metrics",
        "nothing to measure without --enable-metrics",
        "/metrics answers 404, so the hook ends at once (nothing can be measured) and says to start SGLang "
        "with --enable-metrics; `prestop lint` finds the missing flag in a manifest."),
}
