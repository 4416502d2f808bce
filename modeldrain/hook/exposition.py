"""Turn a /metrics body into the few series the drain needs: fast, exact where it decides, bounded.

What the series count as work is work.py's to say (measure); this module only reads them.

The oracle is prometheus-client's own parse of the whole body, then the samples named as the
gauges are. Whatever this module reports idle, that parse reads idle too; busy or incomplete
it reports from the same parser on the lines that matter. It never reads longer than the time
left.

- **Fast path.** vLLM serves ~50 KB idle and 500 KB or more with many LoRA adapters or DP
  ranks, almost all of it histograms never read, and prometheus-client's parser is pure Python
  (~10-15 us a line). So an unanchored substring search (C speed) finds every line that could
  yield a wanted sample: indented, `{__name__="..."}`, `{"..."}` and escaped (`vllm_...`) forms
  included, since a sample's name is text of its own line (but for the text parser's renaming
  of a counter family's samples to name_total, whose stems are searched too). Each run of other
  lines is replaced by what it does to the parser's state (a sample line ends every family; a
  HELP/TYPE comment may start one), and prometheus-client parses what is kept.
- **Idle only from the whole body.** A read that would say idle is confirmed by the full parse
  of the whole body: a body the fast path and the full parser would read differently (a broken
  line elsewhere, a family renamed) is never idle. That costs ~10-30 ms on the real scrapes,
  paid on the two or three idle reads of a drain.
- **Bounded.** Both parsers read an iterator of lines; a wrapper checks the clock and the
  caps before each line (prometheus-client's parse of one line is quadratic in its labels:
  4096 characters keep a line under ~5 ms). Parsing stops at PARSE_SHARE of the time left, since
  a family is built, uninterruptibly, after its last line.
"""

from __future__ import annotations

import io
import math
import re
import time
from dataclasses import dataclass, field
from typing import Iterable, Iterator, TextIO, cast

from prometheus_client.openmetrics.parser import text_fd_to_metric_families as _openmetrics_lines
from prometheus_client.parser import text_fd_to_metric_families as _text_lines

from modeldrain.hook.gauges import (
    ALL_WORK_METRIC_NAMES,
    ENGINE_PREFIXES,
    PROCESS_START_METRIC,
    RESTART_COUNTERS,
    SCHEDULER_HEARTBEATS,
    SGLANG_PP_RANK_LABEL,
    SGLANG_ROLE_LABEL,
    VLLM_ENGINE_LABEL,
    EngineKind,
    Role,
)
from modeldrain.hook.outcome import LabelledSeries, LabelSet
from modeldrain.hook.work import work_value
from modeldrain.hook.work_names import WorkNameError, WorkTypes, refuse_disguised, suspect_line_starts

__all__ = [
    "CANDIDATE_SUBSTRINGS", "CANONICAL", "Exposition", "ExpositionError", "OPENMETRICS_CONTENT_TYPE", "ParseTimeout",
    "READ_NAMES", "parse", "parse_whole",
]

OPENMETRICS_CONTENT_TYPE = "application/openmetrics-text"

# The longest real line (vLLM's cache_config_info) has 1,061 characters and 37 labels; at 4096
# the parser's worst line takes ~5 ms (measured), so a body of them is bounded by the clock.
MAX_LINE_CHARS = 4096
# OpenMetrics parses a sample with a second '{' as a native histogram, with a regex quadratic in
# C (one 50 KB line: 19 s): such a line longer than this is not read.
MAX_NATIVE_HISTOGRAM_LINE_CHARS = 512
# Real bodies have 5-90 candidate lines (50-500 KB); past this the fast path gives way.
MAX_CANDIDATE_LINES = 2048
# Parsing may use this share of the time left: building the last family (a counter's renaming,
# an OpenMetrics histogram's checks) runs after its last line and is measured at under ~15% of it.
PARSE_SHARE = 0.8

# Every name the reader keeps, and the escaped form prometheus-client's OpenMetrics output gives
# names with ':' (sample names only, not their TYPE lines): each maps to the name it counts as.
READ_NAMES = (ALL_WORK_METRIC_NAMES | frozenset(RESTART_COUNTERS.values()) | frozenset(SCHEDULER_HEARTBEATS.values())
              | {PROCESS_START_METRIC})
CANONICAL: dict[str, str] = {**{n: n for n in READ_NAMES}, **{n.replace(":", "_"): n for n in READ_NAMES if ":" in n}}
_KIND_BY_PREFIX = {prefix: kind for kind, prefix in ENGINE_PREFIXES.items()}
_ROLE_BY_LABEL = {"unified": Role.UNIFIED, "null": Role.UNIFIED, "prefill": Role.PREFILL, "decode": Role.DECODE}


def _candidate_substrings() -> tuple[str, ...]:
    """What a line must contain to yield a wanted sample in the full parse: the names, and the
    stems of those ending in _total (the text parser renames a counter family's samples to
    name + _total). Only the minimal ones: a line holding a longer one holds the shorter."""
    found = set(CANONICAL)
    found |= {n[: -len("_total")] for n in CANONICAL if n.endswith("_total")}
    return tuple(sorted(c for c in found if not any(o != c and o in c for o in found)))


CANDIDATE_SUBSTRINGS = _candidate_substrings()

# A gap line that is neither blank nor a comment: a sample (or garbage). \s is str.isspace, what
# the parser's strip() removes; lines end at '\n' only, as io.StringIO splits them.
_SAMPLE_LINE = re.compile(r"^[^\S\n]*[^#\s]", re.MULTILINE)
_METADATA_COMMENT = re.compile(r"^[^\S\n]*#[^\n]*(?:HELP|TYPE|UNIT)[^\n]*$", re.MULTILINE)


class ExpositionError(ValueError):
    """The body cannot be read with certainty: not UTF-8, a line over a cap, a parser error."""


class ParseTimeout(ExpositionError):
    """The parse did not finish in the time left."""


@dataclass(frozen=True)
class Sample:
    name: str  # canonical
    value: float  # a value too large for a float is +-inf
    role_label: str | None  # SGLang's engine_type label, when the sample carries one
    # vLLM's `engine` and SGLang's `pp_rank` label on a work gauge's sample, when it carries one.
    engine_label: str | None = None
    pp_rank_label: str | None = None
    labels: LabelSet = ()  # every label, sorted: a series told from its siblings by them, never by position


@dataclass(frozen=True)
class Exposition:
    """The wanted samples of one body: metric name -> values of its series, in body order (a series
    its gauge names as holding no work, as 0: work.work_value)."""

    series: dict[str, tuple[float, ...]]
    kind: EngineKind | None  # from the wanted samples' prefixes, when they name one engine
    sglang_role: Role | None  # from the engine_type label of SGLang's samples, when one role
    whole_body: bool  # read from a full parse of the whole body (the oracle's own reading)
    # Work gauges declared (`# TYPE ... gauge`) with no series, each followed by another family:
    # in prometheus multiprocess mode, a gauge no process has set yet.
    declared_unset: frozenset[str] = frozenset()
    engines: frozenset[str] = frozenset()  # the `engine` label values of vLLM's work series
    # ... and of its request counter's series, which every engine core's logger makes at start
    counter_engines: frozenset[str] = frozenset()
    pp_ranks: frozenset[str] = frozenset()  # the `pp_rank` label values of SGLang's work series
    # The same samples' label sets, name -> labels of each series, in the order of `series`.
    labels: dict[str, tuple[LabelSet, ...]] = field(default_factory=dict)

    @property
    def process_start_time(self) -> float | None:
        values = self.series.get(PROCESS_START_METRIC)
        return values[0] if values and math.isfinite(values[0]) else None

    @property
    def restart_counters(self) -> dict[str, float]:
        """Each present restart counter, summed over its series (finite sums only)."""
        sums = {n: sum(self.series[n]) for n in RESTART_COUNTERS.values() if n in self.series}
        return {n: v for n, v in sums.items() if math.isfinite(v)}

    def heartbeat(self, kind: EngineKind) -> LabelledSeries | None:
        """The engine's scheduler heartbeat series (gauges.SCHEDULER_HEARTBEATS) with their labels, in
        body order; None when the engine has none or the body carries none."""
        name = SCHEDULER_HEARTBEATS.get(kind)
        if name is None or name not in self.series:
            return None
        return tuple(zip(self.labels.get(name, ()), self.series[name], strict=True))


def parse(body: bytes, content_type: str = "", *, deadline_at: float) -> Exposition:
    """The wanted samples, read on the lines that matter (the fast path); raises ExpositionError."""
    text, openmetrics, parse_by = _prepare(body, content_type, deadline_at)
    kept = _kept_lines(text, openmetrics)
    samples, declared = _parse_lines(kept, openmetrics, parse_by)
    if openmetrics:
        # OpenMetrics keeps the first of two samples of one series, the text grammar both: a body
        # whose wanted lines the two read differently is not read with certainty.
        as_text, declared_as_text = _parse_lines([line for line in kept if line != "# EOF\n"], False, parse_by)
        if _series(as_text) != _series(samples) or declared_as_text != declared:
            raise ExpositionError("the OpenMetrics and text grammars read its work lines differently "
                                  "(a series given twice?)")
    return _exposition(samples, declared, whole_body=False)


def parse_whole(body: bytes, content_type: str = "", *, deadline_at: float) -> Exposition:
    """The wanted samples from prometheus-client's parse of the whole body; raises ExpositionError."""
    text, openmetrics, parse_by = _prepare(body, content_type, deadline_at)
    samples, declared = _parse_lines(io.StringIO(text), openmetrics, parse_by)
    return _exposition(samples, declared, whole_body=True)


def _prepare(body: bytes, content_type: str, deadline_at: float) -> tuple[str, bool, float]:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ExpositionError(f"body is not UTF-8 ({exc.reason} at byte {exc.start})") from None
    openmetrics = content_type.split(";", 1)[0].strip().lower() == OPENMETRICS_CONTENT_TYPE
    now = time.monotonic()
    return text, openmetrics, now + max(0.0, deadline_at - now) * PARSE_SHARE


def _kept_lines(text: str, openmetrics: bool) -> list[str]:
    """Candidate lines verbatim; each gap between them reduced to what it does to the parser."""
    starts: set[int] = set()
    for needle in CANDIDATE_SUBSTRINGS:
        at = text.find(needle)
        while at != -1:
            starts.add(text.rfind("\n", 0, at) + 1)
            if len(starts) > MAX_CANDIDATE_LINES:
                raise ExpositionError(f"over {MAX_CANDIDATE_LINES} lines name a work gauge")
            line_end = text.find("\n", at)
            if line_end == -1:
                break
            at = text.find(needle, line_end)
    # A work gauge's name in disguise holds none of the substrings: its lines are kept too, for
    # the parse to read and _parse_lines to refuse (modeldrain/hook/work_names.py).
    starts.update(suspect_line_starts(text, CANDIDATE_SUBSTRINGS))
    if len(starts) > MAX_CANDIDATE_LINES:
        raise ExpositionError(f"over {MAX_CANDIDATE_LINES} lines name a work gauge")
    kept: list[str] = []
    end = len(text)
    eof = ""
    if openmetrics and (text.endswith("\n# EOF\n") or text.endswith("\n# EOF") or text in ("# EOF\n", "# EOF")):
        eof, end = "# EOF\n", text.rfind("# EOF")
    gaps = 0
    position = 0
    for start in sorted(starts):
        if start >= end:
            break
        line_end = text.find("\n", start)
        line_end = len(text) if line_end == -1 else line_end
        gaps = _reduce_gap(text[position:start], openmetrics, kept, gaps)
        kept.append(text[start:line_end] + "\n")
        position = line_end + 1
    _reduce_gap(text[position:end], openmetrics, kept, gaps)
    if eof:
        kept.append(eof)
    return kept


def _reduce_gap(gap: str, openmetrics: bool, kept: list[str], gaps: int) -> int:
    if not gap:
        return gaps
    if _SAMPLE_LINE.search(gap):
        # Any sample line leaves the parser outside every wanted family; a fresh, uniquely named
        # sample does the same (unique for OpenMetrics' check of clashing names). No wanted name
        # ends in part of _count, _sum or _bucket, so it joins none (tests/hook/test_exposition.py).
        gaps += 1
        kept.append(f"__modeldrain_gap_{gaps}__ 0\n")
    elif openmetrics:
        kept.extend(line + "\n" for line in gap.split("\n")[:-1] or [gap])  # blank lines are errors there
    else:
        kept.extend(m.group(0) + "\n" for m in _METADATA_COMMENT.finditer(gap))
    return gaps


def _bounded(lines: Iterable[str], deadline_at: float, openmetrics: bool) -> Iterator[str]:
    """The parser's own lines, with the caps and the clock checked before each, and a work gauge's
    TYPE lines (one, `gauge`): the parser's state is untouched."""
    clock = time.monotonic
    types = WorkTypes()
    for line in lines:
        if "TYPE" in line:
            types.check(line)
        if clock() > deadline_at:
            raise ParseTimeout("parsing did not finish in the time left")
        if len(line) > MAX_LINE_CHARS + 1:  # + its '\n'
            raise ExpositionError(f"a line of {len(line)} characters, over the {MAX_LINE_CHARS} cap")
        if openmetrics and len(line) > MAX_NATIVE_HISTOGRAM_LINE_CHARS and line[:1] != "#" and (
                line.count("{") > 1 or line.find("{") > line.find(" ") >= 0):
            raise ExpositionError("a long OpenMetrics line shaped like a native histogram")
        yield line


def _parse_lines(lines: Iterable[str], openmetrics: bool, deadline_at: float) -> tuple[list[Sample], frozenset[str]]:
    """The wanted samples, and the work gauges declared as gauges with no sample (Exposition.declared_unset)."""
    parse_lines = _openmetrics_lines if openmetrics else _text_lines
    samples: list[Sample] = []
    declared: set[str] = set()
    last_family = ""
    ordinary: set[str] = set()  # names already found not to be a work gauge's in disguise
    try:
        # Both parsers iterate what they are given line by line (typed as a file; any iterable works).
        for family in parse_lines(cast(TextIO, _bounded(lines, deadline_at, openmetrics))):
            refuse_disguised(family.name)
            last_family = CANONICAL.get(family.name, family.name)
            if not family.samples and family.type == "gauge" and last_family in ALL_WORK_METRIC_NAMES:
                declared.add(last_family)
            for sample in family.samples:
                name = CANONICAL.get(sample.name)
                if name is not None:
                    samples.append(Sample(name, work_value(name, sample.labels, _as_float(sample.value)),
                                          sample.labels.get(SGLANG_ROLE_LABEL),
                                          sample.labels.get(VLLM_ENGINE_LABEL), sample.labels.get(SGLANG_PP_RANK_LABEL),
                                          tuple(sorted(sample.labels.items()))))
                elif sample.name not in ordinary:
                    refuse_disguised(sample.name)
                    ordinary.add(sample.name)
    except WorkNameError as exc:
        raise ExpositionError(str(exc)) from None
    except ExpositionError:
        raise
    except Exception as exc:  # noqa: BLE001 - ValueError, IndexError, OverflowError, AttributeError, KeyError...
        raise ExpositionError(f"cannot parse exposition: {type(exc).__name__}: {str(exc)[:200]}") from None
    if time.monotonic() > deadline_at:
        raise ParseTimeout("parsing did not finish in the time left")
    # A declaration the body ends on may be one cut before its samples: never read as unset.
    declared.discard(last_family)
    return samples, frozenset(declared)


def _as_float(value: object) -> float:
    """The parser gives a Python int for an integer literal: one past a float's range is +-inf."""
    try:
        return float(value)  # type: ignore[arg-type]
    except OverflowError:
        return math.inf if value > 0 else -math.inf  # type: ignore[operator]


def _series(samples: list[Sample]) -> dict[str, tuple[float, ...]]:
    series: dict[str, list[float]] = {}
    for sample in samples:
        series.setdefault(sample.name, []).append(sample.value)
    return {name: tuple(values) for name, values in series.items()}


def _labels(samples: list[Sample]) -> dict[str, tuple[LabelSet, ...]]:
    labels: dict[str, list[LabelSet]] = {}
    for sample in samples:
        labels.setdefault(sample.name, []).append(sample.labels)
    return {name: tuple(sets) for name, sets in labels.items()}


def _exposition(samples: list[Sample], declared: frozenset[str], *, whole_body: bool) -> Exposition:
    kinds = {kind for prefix, kind in _KIND_BY_PREFIX.items() if any(s.name.startswith(prefix) for s in samples)}
    roles = {_ROLE_BY_LABEL.get(s.role_label or "") for s in samples
             if s.name.startswith(ENGINE_PREFIXES[EngineKind.SGLANG]) and s.role_label}
    roles.discard(None)
    return Exposition(
        series=_series(samples),
        labels=_labels(samples),
        kind=kinds.pop() if len(kinds) == 1 else None,
        sglang_role=roles.pop() if len(roles) == 1 else None,
        whole_body=whole_body,
        declared_unset=declared - {s.name for s in samples},
        engines=frozenset(s.engine_label for s in samples
                          if s.engine_label is not None and s.name in ALL_WORK_METRIC_NAMES
                          and s.name.startswith(ENGINE_PREFIXES[EngineKind.VLLM])),
        counter_engines=frozenset(s.engine_label for s in samples
                                  if s.engine_label is not None and s.name == RESTART_COUNTERS[EngineKind.VLLM]),
        pp_ranks=frozenset(s.pp_rank_label for s in samples
                           if s.pp_rank_label is not None and s.name in ALL_WORK_METRIC_NAMES
                           and s.name.startswith(ENGINE_PREFIXES[EngineKind.SGLANG])),
    )
