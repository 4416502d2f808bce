"""Live values laid over an engine's template: work gauges, request counters, latency histograms.

Which sample follows which count is a table per engine (`VLLM_BINDINGS`, `SGLANG_BINDINGS`); every
other sample keeps its template value. Misbehaviour that distorts the work gauges (nan, negative,
inf, missing) is applied here too, so the exposition stays a plain render of families.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Callable, Mapping

from emulation import constants
from emulation.engine_config import EngineConfig, EngineKind
from emulation.misbehaviour import DISTORTED_VALUES, Misbehaviour, MisbehaviourSetting
from emulation.scheduler import Observation, Phase, RankSnapshot
from emulation.template import (
    SGLANG_BOOTSTRAP_GAUGE,
    SGLANG_LEGACY_BOOTSTRAP_GAUGE,
    EngineTemplate,
    Families,
    TemplateFamily,
    TemplateSample,
)

# The gauges each engine counts its work in flight with: what nan/negative/inf distort and what
# `missing` may drop. The first is what `missing` drops by default (the waiting/queue gauge).
VLLM_WORK_GAUGES = ("vllm:num_requests_waiting", "vllm:num_requests_running")
SGLANG_WORK_GAUGES = (
    "sglang:num_queue_reqs",
    "sglang:num_running_reqs",
    SGLANG_BOOTSTRAP_GAUGE,
    SGLANG_LEGACY_BOOTSTRAP_GAUGE,
    "sglang:num_prefill_inflight_queue_reqs",
    "sglang:num_decode_prealloc_queue_reqs",
    "sglang:num_decode_transfer_queue_reqs",
    "sglang:num_decode_host_receive_queue_reqs",
    "sglang:num_decode_deferred_kv_release_reqs",
    "sglang:num_grammar_queue_reqs",
    constants.SGLANG_HTTP_ACTIVE,  # one series per (endpoint, method) a request has come to
)
WORK_GAUGES = {EngineKind.VLLM: VLLM_WORK_GAUGES, EngineKind.SGLANG: SGLANG_WORK_GAUGES}

# A value getter: the sample being rendered and the rank (or all ranks) it speaks for.
Getter = Callable[[TemplateSample, RankSnapshot], float]


def _phase(phase: Phase) -> Getter:
    return lambda _sample, rank: float(rank.phases[phase])


def _finished(sample: TemplateSample, rank: RankSnapshot) -> float:
    reason = sample.label("finished_reason")
    return float({"stop": rank.completed, "abort": rank.aborted}.get(reason or "", 0))


VLLM_BINDINGS: Mapping[str, Getter] = {
    "vllm:num_requests_running": _phase(Phase.RUNNING),
    "vllm:num_requests_waiting": _phase(Phase.WAITING),
    # Repeats waiting, split by reason; the emulator's only reason is capacity.
    "vllm:num_requests_waiting_by_reason": lambda s, r: float(r.waiting if s.label("reason") == "capacity" else 0),
    "vllm:request_success_total": _finished,
    "vllm:prompt_tokens_total": lambda _s, r: float(r.completed * constants.PROMPT_TOKENS_PER_REQUEST),
    "vllm:generation_tokens_total": lambda _s, r: float(r.completed * constants.GENERATION_TOKENS_PER_REQUEST),
}

SGLANG_BINDINGS: Mapping[str, Getter] = {
    "sglang:num_running_reqs": _phase(Phase.RUNNING),
    "sglang:num_queue_reqs": _phase(Phase.WAITING),
    "sglang:num_grammar_queue_reqs": _phase(Phase.GRAMMAR),
    SGLANG_BOOTSTRAP_GAUGE: _phase(Phase.PREFILL_BOOTSTRAP),
    SGLANG_LEGACY_BOOTSTRAP_GAUGE: _phase(Phase.PREFILL_BOOTSTRAP),
    "sglang:num_prefill_inflight_queue_reqs": _phase(Phase.PREFILL_INFLIGHT),
    "sglang:num_decode_prealloc_queue_reqs": _phase(Phase.DECODE_PREALLOC),
    "sglang:num_decode_transfer_queue_reqs": _phase(Phase.DECODE_TRANSFER),
    "sglang:num_requests_total": lambda _s, r: float(r.received),
    "sglang:scheduler_process_cpu_seconds_total": lambda _s, r: r.heartbeat_s,
    "sglang:prompt_tokens_total": lambda _s, r: float(r.completed * constants.PROMPT_TOKENS_PER_REQUEST),
    "sglang:generation_tokens_total": lambda _s, r: float(r.completed * constants.GENERATION_TOKENS_PER_REQUEST),
}

BINDINGS = {EngineKind.VLLM: VLLM_BINDINGS, EngineKind.SGLANG: SGLANG_BINDINGS}

# Latency histograms that follow finished requests: family name -> which timing it observes.
HISTOGRAM_BINDINGS: Mapping[str, Callable[[Observation], float]] = {
    "vllm:e2e_request_latency_seconds": lambda o: o.total_s,
    "vllm:request_queue_time_seconds": lambda o: o.queue_s,
    "vllm:request_inference_time_seconds": lambda o: o.running_s,
    "sglang:e2e_request_latency_seconds": lambda o: o.total_s,
    "sglang:queue_time_seconds": lambda o: o.queue_s,
}

# The label naming a sample's data-parallel rank, per engine. A sample without it speaks for all
# ranks (an API-server-side series), except SGLang scheduler series without DP, which are rank 0.
RANK_LABEL = {EngineKind.VLLM: "engine", EngineKind.SGLANG: "dp_rank"}


@dataclass(frozen=True)
class EngineSnapshot:
    ranks: tuple[RankSnapshot, ...]
    # A decode server publishes its scheduler families after a first run; vLLM in multiprocess mode
    # its per-step gauges' series (EngineTemplate.unset).
    scheduler_published: bool
    # Requests in a handler now, by (endpoint, method): SGLang's HTTP gauge (emulation/http_active.py).
    http_active: Mapping[tuple[str, str], int] = field(default_factory=dict)

    @property
    def all_ranks(self) -> RankSnapshot:
        phases = {p: sum(r.phases[p] for r in self.ranks) for p in Phase}
        return RankSnapshot(
            phases=phases,
            received=sum(r.received for r in self.ranks),
            completed=sum(r.completed for r in self.ranks),
            aborted=sum(r.aborted for r in self.ranks),
            observations=tuple(o for r in self.ranks for o in r.observations),
            heartbeat_s=max((r.heartbeat_s for r in self.ranks), default=0.0),
        )


def live_families(config: EngineConfig, template: EngineTemplate, snapshot: EngineSnapshot,
                  setting: MisbehaviourSetting) -> Families:
    """The families as they read now."""
    families = template.families + (template.deferred if snapshot.scheduler_published else ())
    bindings = BINDINGS[config.kind]
    all_ranks = snapshot.all_ranks
    work_gauges = WORK_GAUGES[config.kind]
    missing = (setting.gauge or work_gauges[0]) if setting.mode is Misbehaviour.MISSING else None
    distorted = DISTORTED_VALUES.get(setting.mode)

    def rank_of(sample: TemplateSample) -> RankSnapshot:
        label = sample.label(RANK_LABEL[config.kind])
        if label is not None:
            return snapshot.ranks[int(label)]
        if config.kind is EngineKind.SGLANG and sample.label("tp_rank") is not None:
            return snapshot.ranks[0]
        return all_ranks

    out: list[TemplateFamily] = []
    for family in families:
        if family.name == missing:
            continue
        if family.name in template.unset and not snapshot.scheduler_published:
            out.append(family.with_samples(()))
            continue
        if family.name == constants.SGLANG_HTTP_ACTIVE and config.kind is EngineKind.SGLANG and distorted is None:
            out.append(_live_http_active(family, snapshot.http_active))
            continue
        if family.name in HISTOGRAM_BINDINGS:
            out.append(_live_histogram(family, HISTOGRAM_BINDINGS[family.name], rank_of))
            continue
        if distorted is not None and family.name in work_gauges:
            out.append(family.with_samples(s.with_value(distorted) for s in family.samples))
            continue
        if any(s.name in bindings for s in family.samples):
            out.append(family.with_samples(
                s.with_value(bindings[s.name](s, rank_of(s))) if s.name in bindings else s
                for s in family.samples))
            continue
        out.append(family)
    return tuple(out)


def _live_http_active(family: TemplateFamily, active: Mapping[tuple[str, str], int]) -> TemplateFamily:
    """The template's series at the counts now (0 where nothing is in that route), then a series for
    each route a request has come to that the template lacks, as prometheus-client adds one."""

    def key(sample: TemplateSample) -> tuple[str, str]:
        return sample.label("endpoint") or "", sample.label("method") or ""

    known = [s.with_value(float(active.get(key(s), 0))) for s in family.samples]
    present = {key(s) for s in family.samples}
    added = [TemplateSample(family.name, (("endpoint", endpoint), ("method", method)), float(count))
             for (endpoint, method), count in active.items() if (endpoint, method) not in present]
    return family.with_samples(known + added)


def _live_histogram(family: TemplateFamily, timing: Callable[[Observation], float],
                    rank_of: Callable[[TemplateSample], RankSnapshot]) -> TemplateFamily:
    sorted_by_rank: dict[int, list[float]] = {}

    def value(sample: TemplateSample) -> float:
        rank = rank_of(sample)
        values = sorted_by_rank.get(id(rank))
        if values is None:
            values = sorted_by_rank[id(rank)] = sorted(timing(o) for o in rank.observations)
        suffix = sample.name[len(family.name):]
        if suffix == "_bucket":
            le = sample.label("le")
            bound = math.inf if le == "+Inf" else float(le or "nan")
            return float(bisect.bisect_right(values, bound))
        if suffix == "_count":
            return float(len(values))
        if suffix == "_sum":
            return float(sum(values))
        return sample.value  # _created

    return family.with_samples(s.with_value(value(s)) for s in family.samples)
