"""Differential test of SGLang's stale-zero rule (issue 25, item 6): the real reader (fetch, parse,
modeldrain/hook/freshness.py) against an oracle written here from the rule alone.

Hypothesis draws a few reads of an SGLang engine whose work gauges read zero every time, and whose
scheduler heartbeat (`sglang:scheduler_process_cpu_seconds_total`) has, on each read, some of a few
scheduler series (their labels written in any order), in any order in the body, each a finite
value that advanced, stood still or went back, or NaN or +-Inf; or none at all. One EngineReader
reads them in turn from a real server. The oracle, for each read after the first:

- P1 (safety): idle only when every heartbeat series is finite, the read's series are by label set
  exactly the previous read's, and each one grew strictly since it; or when neither read carries the
  heartbeat at all (a release without it: the two reads' rule alone);
- P2 (no blanket refusal): when that holds, the reader does say idle (every body is idle);
- on the first read, idle exactly when every series it carries is finite.

`make test` runs MODELDRAIN_FUZZ_EXAMPLES sequences (default 150); `make fuzz` many more.
"""

from __future__ import annotations

import math
import os

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from emulation.raw_server import RawServer, http_response
from modeldrain.hook.engine import EngineHint
from modeldrain.hook.gauges import EngineKind
from modeldrain.hook.outcome import ReadOutcome
from modeldrain.hook.reader import EngineReader
from modeldrain.hook.settings import ReadConfig
from modeldrain.hook.target import Target

EXAMPLES = int(os.environ.get("MODELDRAIN_FUZZ_EXAMPLES", "150"))
HEARTBEAT = "sglang:scheduler_process_cpu_seconds_total"
IDLE_GAUGES = ('sglang:num_running_reqs{engine_type="unified"} 0\n'
               'sglang:num_queue_reqs{engine_type="unified"} 0\n'
               f"# TYPE {HEARTBEAT} counter\n")
# The schedulers a heartbeat series may belong to: a label set each.
SCHEDULERS = ({"engine_type": "unified", "tp_rank": "0"}, {"engine_type": "unified", "tp_rank": "1"},
              {"engine_type": "unified", "tp_rank": "0", "dp_rank": "1"})
NOT_FINITE = (math.nan, math.inf, -math.inf)

Series = tuple[frozenset[tuple[str, str]], float]  # (label set, value)


def text_value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


@st.composite
def reads(draw) -> list[list[tuple[dict[str, str], float]]]:
    """2 to 4 reads' heartbeat series: (labels in the order written, value), in body order."""
    last: dict[int, float] = {}
    sequence = []
    for _ in range(draw(st.integers(2, 4))):
        present = draw(st.lists(st.sampled_from(range(len(SCHEDULERS))), unique=True, max_size=len(SCHEDULERS)))
        series = []
        for index in present:
            before = last.get(index, draw(st.sampled_from([0.0, 1.5, 40.0])))
            step = draw(st.sampled_from([0.0, 0.25, 1.0, 1.0, 1.0, -1.0]))
            value = draw(st.one_of(st.just(before + step), st.sampled_from(NOT_FINITE)))
            if math.isfinite(value):
                last[index] = value
            labels = list(SCHEDULERS[index].items())
            series.append((dict(draw(st.permutations(labels))), value))
        sequence.append(series)
    return sequence


def body(series: list[tuple[dict[str, str], float]]) -> bytes:
    lines = [f"{HEARTBEAT}{{{','.join(f'{k}={chr(34)}{v}{chr(34)}' for k, v in labels.items())}}} {text_value(value)}\n"
             for labels, value in series]
    return (IDLE_GAUGES + "".join(lines)).encode()


def trusted(previous: list[Series] | None, now: list[Series]) -> bool:
    """The oracle: may this read's zero be taken for idle? (previous None: the reader's first read)"""
    if any(not math.isfinite(value) for _, value in now):
        return False
    if previous is None:
        return True
    if not now and not previous:
        return True  # no heartbeat in either: a release without it
    before = {labels: value for labels, value in previous}
    after = {labels: value for labels, value in now}
    if not now or len(after) != len(now) or set(before) != set(after) or len(before) != len(previous):
        return False
    return all(math.isfinite(before[labels]) and after[labels] > before[labels] for labels in after)


def label_sets(series: list[tuple[dict[str, str], float]]) -> list[Series]:
    return [(frozenset(labels.items()), value) for labels, value in series]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(reads())
def test_the_reader_trusts_a_zero_only_where_every_scheduler_heartbeat_advanced(sequence):
    answers = iter([http_response(body(series)) for series in sequence])
    with RawServer(lambda conn: conn.sendall(next(answers))) as server:
        target = Target("http", server.port, "/metrics", source="flag")
        reader = EngineReader(ReadConfig(target=target, hint=EngineHint(kind=EngineKind.SGLANG, source="flag"),
                                         read_timeout_s=5.0, max_body_bytes=1 << 20))
        outcomes = [reader.read(5.0).outcome for _ in sequence]
    previous: list[Series] | None = None
    for n, (series, outcome) in enumerate(zip(sequence, outcomes)):
        now = label_sets(series)
        assert outcome in (ReadOutcome.IDLE, ReadOutcome.STALE), (n, outcome, sequence)
        assert (outcome is ReadOutcome.IDLE) == trusted(previous, now), (n, outcome, sequence)
        if n:
            event(f"a later read: {outcome.value}")  # both must be common, or the test proves little
        previous = now
