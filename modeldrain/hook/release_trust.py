"""Where an engine's gauges cannot prove idle, and the one case where a gauge with no series reads zero.

Some releases and configurations export work gauges that do not tell the truth
(gauges.RELEASE_RULES, docs/compatibility.md): vLLM's data parallel before vllm-project/vllm#21257
exports only the last engine core's gauges, SGLang's pipeline parallelism undercounts running
requests (sgl-project/sglang#32158). There a zero is no proof of idle: the read is held busy,
with the rule and its fix in words. The engine cores a vLLM body speaks for are the `engine`
values of its work gauges and of its request counter (each engine's logger makes the counter's
series at start; in multiprocess mode a gauge its engine has not set yet has no series); they must
be as many as the argv's data parallel gives this API server, or 0..n-1 when the argv is not
seen (so a lone rank of an external balancer, without its argv, is held).

A vLLM front end with `--api-server-count` > 1 serves /metrics in prometheus multiprocess mode.
There a gauge of `multiprocess_mode="mostrecent"` that no process has set has no sample: its
`# TYPE` line and nothing more, which single-process mode renders as the gauge's initial 0. vLLM
sets its work gauges from the first engine step's stats, so a replica that has served nothing
declares them with no series. Read as zero only on evidence that this is that case, never a cut
or odd body: a vLLM body, every required work gauge present or declared as a gauge with another
family after it (exposition.Exposition.declared_unset), no `process_start_time_seconds` (which
single-process mode always serves), and vLLM's request counter present and at 0 (nothing has
finished: a replica that has served would have set its gauges). The read is still confirmed like
every idle read (the whole body parsed, a second read a second later).
"""

from __future__ import annotations

from modeldrain.hook.engine import EngineHint
from modeldrain.hook.exposition import Exposition
from modeldrain.hook.gauges import PROCESS_START_METRIC, RELEASE_RULES, RESTART_COUNTERS, EngineKind
from modeldrain.hook.work import Measure

__all__ = ["start_words", "unset_refusal", "untrusted"]

DATA_PARALLEL_RULE = "vllm_dp_last_engine_only"
PIPELINE_PARALLEL_RULE = "sglang_pipeline_parallel"
KV_PRODUCER_RULE = "vllm_kv_producer"


def _rule(key: str) -> str:
    rule = RELEASE_RULES[key]
    return f"{rule.applies}: {rule.words}"


def untrusted(kind: EngineKind, hint: EngineHint, parsed: Exposition) -> str | None:
    """Why these gauges cannot show idle on this release and configuration; None when they can."""
    if kind is EngineKind.SGLANG:
        stages = hint.pipeline_parallel_size
        if (stages is not None and stages > 1) or parsed.pp_ranks - {"0"}:
            return _rule(PIPELINE_PARALLEL_RULE)
        return None
    if not parsed.engines:
        return None  # no series (the never-served case) or no `engine` label: one engine core
    # An engine core that has not stepped yet has no gauge series in multiprocess mode, but its
    # logger made its counters at start; before #21257 only the last engine's logger is left.
    engines = parsed.engines | parsed.counter_engines
    expected = hint.data_parallel_engines
    if expected is not None:
        missing = expected - len(engines)
    else:  # no argv: the engine cores must be 0..n-1 (an external balancer's rank needs the argv)
        missing = len(set(map(str, range(len(engines)))) - engines)
    if missing > 0:
        return f"{_rule(DATA_PARALLEL_RULE)} (series for engine {', '.join(sorted(engines))} only)"
    return None


def start_words(hint: EngineHint) -> tuple[str, ...]:
    """What the engine's argv already says of its gauges, for drain_started."""
    words = []
    if hint.kind is EngineKind.SGLANG and (hint.pipeline_parallel_size or 1) > 1:
        words.append(_rule(PIPELINE_PARALLEL_RULE))
    if hint.kind is EngineKind.VLLM and (hint.data_parallel_engines or 1) > 1:
        words.append(f"{hint.data_parallel_engines} data-parallel engine cores: every engine's series must be "
                     f"there, or the read is held ({_rule(DATA_PARALLEL_RULE)})")
    if hint.kind is EngineKind.VLLM and hint.kv_producer is not None:
        words.append(f"a KV producer ({hint.kv_producer}): {_rule(KV_PRODUCER_RULE)}")
    return tuple(words)


def unset_refusal(kind: EngineKind, parsed: Exposition, measured: Measure) -> str | None:
    """Why the declared-but-unset gauges of `measured` cannot read zero; None when they read zero."""
    unset = ", ".join(measured.unset)
    if kind is not EngineKind.VLLM:
        return f"{unset} declared with no series (only vLLM's multiprocess mode declares a gauge it has not set)"
    if measured.missing:
        return f"{unset} declared with no series, and the rest incomplete"
    if PROCESS_START_METRIC in parsed.series:
        return f"{unset} declared with no series, in a single-process body (process_start_time_seconds)"
    counter = RESTART_COUNTERS[EngineKind.VLLM]
    finished = parsed.restart_counters.get(counter)
    if finished is None:
        return f"{unset} declared with no series, and no {counter} to show nothing has been served"
    if finished != 0:
        return f"{unset} declared with no series after {finished:g} requests finished: not a fresh replica"
    return None
