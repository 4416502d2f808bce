"""Real engines' scrapes as templates: their families, reshaped for one emulated engine.

A template is the family list of a real idle scrape (emulation/templates/), parsed by
prometheus_client's own parser. Everything here is a pure function from families to families: a
fresh process's values, data-parallel ranks, a role, a model name, multiprocess mode. Live values
are laid over the result at render time (emulation.live_metrics).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

from prometheus_client.parser import text_string_to_metric_families

from emulation import constants
from emulation.engine_config import EngineConfig, EngineKind, Role

# Beside this module, not through importlib.resources: the package must also work as the namespace
# package an editable install made before it had an __init__.py.
TEMPLATES_DIR = Path(__file__).resolve().parent / "templates"

# The real scrapes each emulated engine starts from (see templates/README.md).
VLLM_TEMPLATE = "vllm-0.32.0-cpu-metrics-idle.txt"
SGLANG_TEMPLATES = {
    Role.UNIFIED: "sglang-0.5.23-cpu-metrics-idle.txt",
    Role.PREFILL: "sglang-0.5.23-cpu-metrics-prefill-idle.txt",
    Role.DECODE: "sglang-0.5.23-cpu-metrics-decode-idle.txt",
}

# SGLang's bootstrap queue gauge, and the name releases before May 2026 gave it.
SGLANG_BOOTSTRAP_GAUGE = "sglang:num_prefill_bootstrap_queue_reqs"
SGLANG_LEGACY_BOOTSTRAP_GAUGE = "sglang:num_prefill_prealloc_queue_reqs"

# Families a prometheus multiprocess registry does not have: they come from the default
# registry's process and platform collectors.
_SINGLE_PROCESS_PREFIXES = ("process_", "python_")

# The gauges vLLM's stat logger sets from each engine step's stats, never before the first: in
# multiprocess mode (`--api-server-count` > 1) a replica that has served nothing declares them
# with no series (measured on vLLM 0.32 with `--api-server-count 2`, docs/engines.md).
VLLM_PER_STEP_GAUGES = frozenset({
    "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:num_requests_waiting_by_reason",
    "vllm:kv_cache_usage_perc",
})

_CREATED = "_created"
_CUMULATIVE_TYPES = frozenset({"counter", "histogram", "summary"})


@dataclass(frozen=True)
class TemplateSample:
    name: str
    labels: tuple[tuple[str, str], ...]  # in the scrape's order
    value: float

    def label(self, key: str) -> str | None:
        for k, v in self.labels:
            if k == key:
                return v
        return None

    def with_label(self, key: str, value: str) -> TemplateSample:
        """Set a label, keeping its place, or append it if absent."""
        if self.label(key) is None:
            return TemplateSample(self.name, self.labels + ((key, value),), self.value)
        labels = tuple((k, value if k == key else v) for k, v in self.labels)
        return TemplateSample(self.name, labels, self.value)

    def with_value(self, value: float) -> TemplateSample:
        return TemplateSample(self.name, self.labels, value)


@dataclass(frozen=True)
class TemplateFamily:
    name: str
    type: str
    documentation: str
    unit: str
    samples: tuple[TemplateSample, ...]

    def with_samples(self, samples: Iterable[TemplateSample]) -> TemplateFamily:
        return TemplateFamily(self.name, self.type, self.documentation, self.unit, tuple(samples))

    def renamed(self, name: str) -> TemplateFamily:
        samples = (TemplateSample(name + s.name[len(self.name):], s.labels, s.value)
                   for s in self.samples)
        return TemplateFamily(name, self.type, self.documentation, self.unit, tuple(samples))


Families = tuple[TemplateFamily, ...]


def parse_exposition(text: str) -> Families:
    """Families of a text exposition, each `X_created` gauge folded back into family X.

    prometheus_client keeps `_created` as samples of their counter or histogram and writes them as
    separate gauge families only in the text format; folding them back lets the same families
    render both as text (byte-identical to the scrape) and as OpenMetrics.
    """
    parsed = list(text_string_to_metric_families(text))
    by_name = {f.name: f for f in parsed}
    folded_into: dict[str, list[TemplateSample]] = {}
    families: list[TemplateFamily] = []
    for family in parsed:
        base = family.name[: -len(_CREATED)] if family.name.endswith(_CREATED) else None
        if base is not None and base in by_name and by_name[base].type in _CUMULATIVE_TYPES:
            folded_into.setdefault(base, []).extend(_samples(family))
            continue
        families.append(TemplateFamily(family.name, family.type, family.documentation, family.unit,
                                       _samples(family)))
    return tuple(f.with_samples(_grouped(f.samples + tuple(folded_into.get(f.name, ())))) for f in families)


def _grouped(samples: tuple[TemplateSample, ...]) -> list[TemplateSample]:
    """Each series' samples together (buckets, count, sum, created), as OpenMetrics requires.

    The text format moves `_created` samples out into their own family anyway, so this changes
    nothing there; series keep the order in which they first appear.
    """
    groups: dict[tuple, list[TemplateSample]] = {}
    for sample in samples:
        key = tuple((k, v) for k, v in sample.labels if k not in ("le", "quantile"))
        groups.setdefault(key, []).append(sample)
    return [sample for group in groups.values() for sample in group]


def _samples(family) -> tuple[TemplateSample, ...]:
    return tuple(TemplateSample(s.name, tuple(s.labels.items()), s.value) for s in family.samples)


def load_template(filename: str) -> Families:
    text = (TEMPLATES_DIR / filename).read_text(encoding="utf-8")
    return parse_exposition(text)


def fresh_process(families: Families, start_time_s: float) -> Families:
    """A process that has just started: counters and histograms at zero, created at start."""

    def fresh(family: TemplateFamily, sample: TemplateSample) -> TemplateSample:
        if sample.name.endswith(_CREATED) or sample.name == "process_start_time_seconds":
            return sample.with_value(start_time_s)
        if family.type in _CUMULATIVE_TYPES:
            return sample.with_value(0.0)
        return sample

    return tuple(f.with_samples(fresh(f, s) for s in f.samples) for f in families)


def multiprocess_mode(families: Families) -> Families:
    """What a prometheus multiprocess registry serves: no process/platform families, no _created."""
    return tuple(
        f.with_samples(s for s in f.samples if not s.name.endswith(_CREATED))
        for f in families
        if not f.name.startswith(_SINGLE_PROCESS_PREFIXES)
    )


def map_samples(families: Families, change: Callable[[TemplateSample], Sequence[TemplateSample]]) -> Families:
    return tuple(f.with_samples(out for s in f.samples for out in change(s)) for f in families)


def with_model_name(families: Families, model_name: str) -> Families:
    return map_samples(families, lambda s: [s.with_label("model_name", model_name)]
                       if s.label("model_name") is not None else [s])


def with_vllm_engines(families: Families, dp: int) -> Families:
    """vLLM data parallel: every series with an `engine` label, once per engine rank."""

    def expand(family: TemplateFamily) -> TemplateFamily:
        ranked = [s for s in family.samples if s.label("engine") is not None]
        if not ranked or dp == 1:
            return family
        others = [s for s in family.samples if s.label("engine") is None]
        per_rank = [s.with_label("engine", str(rank)) for rank in range(dp) for s in ranked]
        return family.with_samples(per_rank + others)

    return tuple(expand(f) for f in families)


def with_sglang_dp_ranks(families: Families, dp: int) -> Families:
    """SGLang data parallel: every scheduler series (those with `tp_rank`) gains `dp_rank`."""
    if dp == 1:
        return families
    return map_samples(families, lambda s: [s.with_label("dp_rank", str(rank)) for rank in range(dp)]
                       if s.label("tp_rank") is not None else [s])


def with_pid(families: Families, pid: int) -> Families:
    """SGLang's multiprocess gauges carry the writing process's `pid`: this process's."""
    return map_samples(families, lambda s: [s.with_label("pid", str(pid))]
                       if s.label("pid") is not None else [s])


def with_engine_type(families: Families, role: Role) -> Families:
    return map_samples(families, lambda s: [s.with_label("engine_type", role.value)]
                       if s.label("engine_type") is not None else [s])


def with_legacy_prefill_name(families: Families) -> Families:
    return tuple(f.renamed(SGLANG_LEGACY_BOOTSTRAP_GAUGE) if f.name == SGLANG_BOOTSTRAP_GAUGE else f
                 for f in families)


@dataclass(frozen=True)
class EngineTemplate:
    """The families one emulated engine serves.

    `deferred` are the scheduler families a decode server publishes only once its first request
    has run (empty for every other engine).

    `unset` names the families that are declared (their HELP and TYPE lines) but have no series
    until the first request has run: vLLM's per-step gauges in prometheus multiprocess mode, where
    a gauge of `multiprocess_mode="mostrecent"` that no process has set yet has no sample.
    """

    families: Families
    deferred: Families
    unset: frozenset[str] = frozenset()


def engine_template(config: EngineConfig, start_time_s: float, pid: int) -> EngineTemplate:
    """The families a fresh process of this configuration serves, values at their idle defaults."""
    if config.kind is EngineKind.VLLM:
        families = with_vllm_engines(load_template(VLLM_TEMPLATE), config.dp)
        deferred: Families = ()
    else:
        families = load_template(SGLANG_TEMPLATES[config.role])
        deferred = ()
        if config.role is Role.DECODE:
            # A decode server's scheduler families, as a prefill server publishes them.
            present = {f.name for f in families}
            prefill = load_template(SGLANG_TEMPLATES[Role.PREFILL])
            deferred = with_engine_type(tuple(f for f in prefill if f.name not in present), Role.DECODE)
        families = with_sglang_dp_ranks(families, config.dp)
        deferred = with_sglang_dp_ranks(deferred, config.dp)
        if config.legacy_prefill_name:
            families = with_legacy_prefill_name(families)
            deferred = with_legacy_prefill_name(deferred)
        if config.without_http_gauge:
            families = tuple(f for f in families if f.name != constants.SGLANG_HTTP_ACTIVE)

    def shape(fams: Families) -> Families:
        fams = with_pid(with_model_name(fresh_process(fams, start_time_s), config.model_name), pid)
        return multiprocess_mode(fams) if config.multiprocess else fams

    unset = VLLM_PER_STEP_GAUGES if config.kind is EngineKind.VLLM and config.multiprocess else frozenset()
    return EngineTemplate(shape(families), shape(deferred), unset)
