"""Families to bytes, the way the engines' prometheus_client does it: negotiated format, gzip, padding.

The encoder is prometheus_client's own (`choose_encoder`, as its ASGI app uses): text unless the
reader asks for OpenMetrics, exactly as a real engine on this prometheus_client answers. Note that
prometheus_client 0.26 then writes sample names with `:` turned into `_` (while HELP/TYPE keep the
colon), so a reader asking a real engine for OpenMetrics gets no `vllm:` samples at all.

--format openmetrics serves OpenMetrics whatever the reader asks, with names left intact (the
`allow-utf-8` escaping, which is what older prometheus_client versions wrote), so readers can be
tested on a well-formed OpenMetrics body. Padding up to --body-kb is a histogram family rendered
once per incarnation and appended.
"""

from __future__ import annotations

import gzip
import math
from dataclasses import dataclass
from functools import partial
from typing import Iterable

from prometheus_client.exposition import choose_encoder, gzip_accepted
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics import exposition as openmetrics
from prometheus_client.samples import Sample

from emulation.engine_config import EngineConfig, EngineKind, ExpositionFormat
from emulation.template import Families, TemplateFamily, TemplateSample

# --format openmetrics: names intact, and the content type older prometheus_client versions sent.
_FORCED_OPENMETRICS = (partial(openmetrics.generate_latest, escaping=openmetrics.ALLOWUTF8),
                       "application/openmetrics-text; version=1.0.0; charset=utf-8")
_OPENMETRICS_EOF = b"# EOF\n"

# Padding series: named as the emulator's own so nobody mistakes them for an engine's, shaped like
# the engines' latency histograms (same buckets, same labels plus `series`).
PADDING_FAMILY_SUFFIX = "emulation_padding_seconds"
PADDING_DOCUMENTATION = "Series the emulator adds to reach --body-kb; not a real engine metric."
_PADDING_BUCKETS_FROM = {EngineKind.VLLM: "vllm:e2e_request_latency_seconds",
                         EngineKind.SGLANG: "sglang:e2e_request_latency_seconds"}

# A huge body's filler: comment lines, which every text parser skips.
_FILLER_LINE = b"# " + b"x" * 1021 + b"\n"


class _FamiliesCollector:
    """A prometheus_client collector that yields the families it was built with."""

    def __init__(self, metrics: list[Metric]):
        self._metrics = metrics

    def collect(self) -> list[Metric]:
        return self._metrics


def to_metrics(families: Iterable[TemplateFamily]) -> list[Metric]:
    metrics = []
    for family in families:
        metric = Metric(family.name, family.documentation, family.type, family.unit)
        metric.samples = [Sample(s.name, dict(s.labels), s.value, None, None) for s in family.samples]
        metrics.append(metric)
    return metrics


@dataclass(frozen=True)
class Body:
    data: bytes
    content_type: str
    content_encoding: str | None = None


def _encoder(config: EngineConfig, accept: str):
    if config.exposition_format is ExpositionFormat.OPENMETRICS:
        return _FORCED_OPENMETRICS
    return choose_encoder(accept)


def encode(families: Families, config: EngineConfig, accept: str) -> tuple[bytes, str]:
    encoder, content_type = _encoder(config, accept)
    return encoder(_FamiliesCollector(to_metrics(families))), content_type


def splice(main: bytes, extra: bytes) -> bytes:
    """Append `extra` to an exposition, before OpenMetrics' closing `# EOF` if it has one."""
    if main.endswith(_OPENMETRICS_EOF):
        return main[: -len(_OPENMETRICS_EOF)] + extra + _OPENMETRICS_EOF
    return main + extra


def strip_eof(data: bytes) -> bytes:
    return data[: -len(_OPENMETRICS_EOF)] if data.endswith(_OPENMETRICS_EOF) else data


def padding_family(config: EngineConfig, template: Families, series: int) -> TemplateFamily:
    """`series` zero-valued histogram series with the engine's latency buckets and labels."""
    name = config.metric_prefix + PADDING_FAMILY_SUFFIX
    source = next((f for f in template if f.name == _PADDING_BUCKETS_FROM[config.kind]), None)
    found = [s.label("le") for s in source.samples if s.name.endswith("_bucket")] if source else []
    bounds: list[str] = list(dict.fromkeys(b for b in found if b is not None)) or ["+Inf"]
    base: tuple[tuple[str, str], ...]
    if config.kind is EngineKind.VLLM:
        base = (("engine", "0"), ("model_name", config.model_name))
    else:
        base = (("engine_type", config.role.value), ("model_name", config.model_name))
    samples: list[TemplateSample] = []
    for index in range(series):
        labels = base + (("series", str(index)),)
        samples += [TemplateSample(name + "_bucket", labels + (("le", le),), 0.0) for le in bounds]
        samples += [TemplateSample(name + "_count", labels, 0.0), TemplateSample(name + "_sum", labels, 0.0)]
    return TemplateFamily(name, "histogram", PADDING_DOCUMENTATION, "", tuple(samples))


def restrict(families: Families, sample_names: frozenset[str]) -> Families:
    """What prometheus_client's restricted registry serves: samples of those names, non-empty families."""
    kept = (f.with_samples(s for s in f.samples if s.name in sample_names) for f in families)
    return tuple(f for f in kept if f.samples)


class Renderer:
    """Renders an engine's families; holds the padding, fixed for one incarnation."""

    def __init__(self, config: EngineConfig, idle_families: Families):
        self._config = config
        self._padding: TemplateFamily | None = None
        self._padding_bytes: dict[str, bytes] = {}
        if config.body_kb is not None:
            natural, _ = encode(idle_families, config, "")
            need = config.body_kb * 1024 - len(natural)
            if need > 0:
                self._padding = self._padding_of_size(idle_families, need)

    def _padding_of_size(self, idle_families: Families, need: int) -> TemplateFamily:
        """Enough series for `need` bytes: a guess from one series, then one correction (series
        grow longer with their index)."""
        one = len(strip_eof(encode((padding_family(self._config, idle_families, 1),), self._config, "")[0]))
        series = max(1, math.ceil(need / one))
        for _ in range(2):
            family = padding_family(self._config, idle_families, series)
            size = len(strip_eof(encode((family,), self._config, "")[0]))
            series = max(1, round(series * need / size))
        return padding_family(self._config, idle_families, series)

    def _padding_for(self, accept: str) -> bytes:
        if self._padding is None:
            return b""
        _, content_type = _encoder(self._config, accept)
        cached = self._padding_bytes.get(content_type)
        if cached is None:
            data, _ = encode((self._padding,), self._config, accept)
            cached = self._padding_bytes[content_type] = strip_eof(data)
        return cached

    def render(self, families: Families, accept: str, accept_encoding: str, fill_to_bytes: int = 0,
               only_samples: frozenset[str] | None = None) -> Body:
        """The body for a reader's Accept headers, filled with comments to `fill_to_bytes` (`huge`).

        `only_samples` is prometheus_client's `?name[]=` filter: only samples of those names (and
        no padding, which stands for families the reader did not ask for). A filled body is never
        gzipped: its point is its size on the wire.
        """
        if only_samples is not None:
            families = restrict(families, only_samples)
        data, content_type = encode(families, self._config, accept)
        if only_samples is None:
            data = splice(data, self._padding_for(accept))
        if fill_to_bytes > len(data):
            lines = (fill_to_bytes - len(data)) // len(_FILLER_LINE) + 1
            return Body(splice(data, _FILLER_LINE * lines), content_type)
        if gzip_accepted(accept_encoding):
            return Body(gzip.compress(data, compresslevel=1), content_type, "gzip")
        return Body(data, content_type)
