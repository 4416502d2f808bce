"""Parsing real scrapes: the gauge sets, summing series, detection, what counts as bad, the bounds."""

import time

import pytest

from modeldrain.hook import exposition
from modeldrain.hook.exposition import (
    CANDIDATE_SUBSTRINGS,
    READ_NAMES,
    ExpositionError,
    ParseTimeout,
    parse_whole,
)
from modeldrain.hook.gauges import EngineKind, Role, gauge_set
from modeldrain.hook.work import measure

OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"


def parse(body: bytes, content_type: str = ""):
    """The fast path, with all the time in the world."""
    return exposition.parse(body, content_type, deadline_at=time.monotonic() + 60)


def whole(body: bytes, content_type: str = ""):
    return parse_whole(body, content_type, deadline_at=time.monotonic() + 60)


def load(fixtures_dir, name):
    return (fixtures_dir / name).read_bytes()


def test_vllm_fixtures_idle_and_busy(fixtures_dir):
    idle = parse(load(fixtures_dir, "vllm-0.32.0-cpu-metrics-idle.txt"))
    busy = parse(load(fixtures_dir, "vllm-0.32.0-cpu-metrics-busy.txt"))
    assert idle.kind is EngineKind.VLLM and busy.kind is EngineKind.VLLM
    assert idle.process_start_time == pytest.approx(1.79595940043e9)
    m = measure(busy, gauge_set(EngineKind.VLLM))
    # 16 running + 32 waiting; waiting_by_reason (which repeats waiting) is not added.
    assert m.gauges == {"vllm:num_requests_running": 16.0, "vllm:num_requests_waiting": 32.0}
    assert m.in_flight == 48 and not m.missing and not m.invalid
    assert measure(idle, gauge_set(EngineKind.VLLM)).in_flight == 0


def test_sglang_fixtures_roles_from_engine_type(fixtures_dir):
    unified = parse(load(fixtures_dir, "sglang-0.5.23-cpu-metrics-busy.txt"))
    prefill = parse(load(fixtures_dir, "sglang-0.5.23-cpu-metrics-prefill-idle.txt"))
    decode = parse(load(fixtures_dir, "sglang-0.5.23-cpu-metrics-decode-idle.txt"))
    assert (unified.kind, unified.sglang_role) == (EngineKind.SGLANG, Role.UNIFIED)
    assert prefill.sglang_role is Role.PREFILL and decode.sglang_role is Role.DECODE
    assert unified.process_start_time is None  # multiprocess mode
    assert measure(unified, gauge_set(EngineKind.SGLANG)).in_flight == 28
    m = measure(prefill, gauge_set(EngineKind.SGLANG, Role.PREFILL))
    assert m.in_flight == 0 and not m.missing
    # The prefill set, and the decode queues the server exports too (at zero): every queue counts.
    assert {g.name for g in gauge_set(EngineKind.SGLANG, Role.PREFILL).gauges} < set(m.gauges)
    assert "sglang:num_decode_transfer_queue_reqs" in m.gauges


def test_decode_that_served_nothing_is_an_incomplete_gauge_set(fixtures_dir):
    decode = parse(load(fixtures_dir, "sglang-0.5.23-cpu-metrics-decode-idle.txt"))
    m = measure(decode, gauge_set(EngineKind.SGLANG, Role.DECODE))
    assert set(m.missing) == {
        "sglang:num_running_reqs", "sglang:num_queue_reqs",
        "sglang:num_decode_prealloc_queue_reqs", "sglang:num_decode_transfer_queue_reqs",
    }


def test_requests_waiting_for_their_grammar_are_work_and_an_older_sglang_without_the_gauge_is_complete():
    # SGLang 0.5.23 keeps structured-output requests whose grammar is compiling outside
    # num_queue_reqs (measured: docs/engines.md, "structured"); older releases export no such gauge.
    waiting_for_grammar = (b'sglang:num_running_reqs{engine_type="unified"} 0\n'
                           b'sglang:num_queue_reqs{engine_type="unified"} 0\n'
                           b'sglang:num_grammar_queue_reqs{engine_type="unified"} 3\n')
    m = measure(parse(waiting_for_grammar), gauge_set(EngineKind.SGLANG))
    assert m.in_flight == 3 and not m.missing
    older = b'sglang:num_running_reqs{engine_type="unified"} 0\nsglang:num_queue_reqs{engine_type="unified"} 0\n'
    m = measure(parse(older), gauge_set(EngineKind.SGLANG))
    assert m.in_flight == 0 and not m.missing


def test_every_series_is_summed_across_dp_engines():
    body = b"""# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 2.0
vllm:num_requests_running{engine="1",model_name="m"} 3.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 0.0
vllm:num_requests_waiting{engine="1",model_name="m"} 4.0
"""
    m = measure(parse(body), gauge_set(EngineKind.VLLM))
    assert m.gauges == {"vllm:num_requests_running": 5.0, "vllm:num_requests_waiting": 4.0}


def test_legacy_prefill_name_satisfies_the_gauge_set():
    body = b"""sglang:num_running_reqs{engine_type="prefill",tp_rank="0"} 0
sglang:num_queue_reqs{engine_type="prefill",tp_rank="0"} 0
sglang:num_prefill_prealloc_queue_reqs{engine_type="prefill",tp_rank="0"} 2
sglang:num_prefill_inflight_queue_reqs{engine_type="prefill",tp_rank="0"} 1
"""
    m = measure(parse(body), gauge_set(EngineKind.SGLANG, Role.PREFILL))
    assert not m.missing and m.in_flight == 3


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-1"])
def test_negative_nan_and_infinite_values_are_invalid(value):
    body = f"vllm:num_requests_running{{engine=\"0\"}} {value}\nvllm:num_requests_waiting{{engine=\"0\"}} 0\n"
    m = measure(parse(body.encode()), gauge_set(EngineKind.VLLM))
    assert m.invalid == ("vllm:num_requests_running",) and m.in_flight is None


def test_openmetrics_is_parsed_by_its_own_grammar():
    body = b"""# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0"} 1.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0"} 2.0
# EOF
"""
    e = parse(body, OPENMETRICS)
    assert measure(e, gauge_set(EngineKind.VLLM)).in_flight == 3
    assert measure(whole(body, OPENMETRICS), gauge_set(EngineKind.VLLM)).in_flight == 3


@pytest.mark.parametrize("body", [
    b"vllm:num_requests_running{engine=\"0\" 1\n",  # unterminated labels
    b"vllm:num_requests_running{engine=\"0\"} one\n",  # not a number
    b"\xff\xfe\x00garbage",  # not UTF-8
])
def test_unparseable_wanted_lines_raise(body):
    with pytest.raises(ExpositionError):
        parse(body)


def test_a_broken_line_elsewhere_leaves_the_fast_path_busy_reads_but_fails_the_whole_body():
    # A malformed line of a family never read: the fast path reads the work lines (busy is busy),
    # but the whole body does not parse, so it cannot be confirmed idle.
    body = b"vllm:some_histogram_bucket{le=oops} 1\nvllm:num_requests_running 0\nvllm:num_requests_waiting 0\n"
    assert measure(parse(body), gauge_set(EngineKind.VLLM)).in_flight == 0
    with pytest.raises(ExpositionError, match="cannot parse exposition"):
        whole(body)


def test_a_label_value_naming_a_gauge_is_not_that_gauge():
    body = b'other_metric{note="vllm:num_requests_running 5"} 1\nvllm:num_requests_running 0\nvllm:num_requests_waiting 0\n'
    assert measure(parse(body), gauge_set(EngineKind.VLLM)).in_flight == 0


def test_body_naming_both_engines_leaves_kind_to_the_caller():
    body = b"vllm:num_requests_running 0\nsglang:num_running_reqs 0\n"
    assert parse(body).kind is None


def test_large_exposition_is_filtered_before_parsing(fixtures_dir):
    base = load(fixtures_dir, "vllm-0.32.0-cpu-metrics-busy.txt")
    # ~500 KB: the busy scrape's histogram lines repeated under other model names.
    hist = b"\n".join(l for l in base.splitlines() if b"_bucket{" in l)
    padding = b"\n".join(hist.replace(b'model_name="tiny"', b'model_name="lora-%d"' % i) for i in range(60))
    body = padding + b"\n" + base
    assert len(body) > 500_000
    m = measure(parse(body), gauge_set(EngineKind.VLLM))
    assert m.in_flight == 48


def test_openmetrics_with_escaped_sample_names_reads_as_the_gauges():
    # prometheus-client 0.26's OpenMetrics output: TYPE lines keep ':', sample names get '_'.
    body = b"""# HELP vllm:num_requests_running Running.
# TYPE vllm:num_requests_running gauge
vllm_num_requests_running{engine="0",model_name="tiny"} 2.0
# HELP vllm:num_requests_waiting Waiting.
# TYPE vllm:num_requests_waiting gauge
vllm_num_requests_waiting{engine="0",model_name="tiny"} 1.0
# EOF
"""
    e = parse(body, OPENMETRICS)
    assert e.kind is EngineKind.VLLM
    assert measure(e, gauge_set(EngineKind.VLLM)).in_flight == 3


def test_restart_counters_are_read_for_incarnation_evidence(fixtures_dir):
    vllm = parse(load(fixtures_dir, "vllm-0.32.0-cpu-metrics-busy.txt"))
    sglang = parse(load(fixtures_dir, "sglang-0.5.23-cpu-metrics-idle.txt"))
    assert set(vllm.restart_counters) == {"vllm:request_success_total"}
    assert sglang.restart_counters == {"sglang:num_requests_total": 1.0}



# --- the lines the old pre-filter dropped, which prometheus-client reads as the gauges ---

IDLE_HEAD = b"vllm:num_requests_running 0\nvllm:num_requests_waiting 0\n"


@pytest.mark.parametrize("line", [
    b"  vllm:num_requests_running 3\n",  # indented
    b"\tvllm:num_requests_running 3\n",
    b"vllm:num_requests_running 3\r\n",
    b'{__name__="vllm:num_requests_running"} 3\n',  # the name as a label
    b'{"vllm:num_requests_running", engine="1"} 3\n',  # a quoted name
    b'{engine="1", "vllm:num_requests_running"} 3\n',
])
def test_every_form_of_a_work_sample_the_parser_reads_is_read(line):
    for read in (parse, whole):
        m = measure(read(IDLE_HEAD + line), gauge_set(EngineKind.VLLM))
        assert m.in_flight == 3, (read.__name__, line)


def test_a_value_too_large_for_a_float_is_invalid_not_a_crash():
    body = b"vllm:num_requests_running 1" + b"0" * 400 + b"\nvllm:num_requests_waiting 0\n"
    assert measure(parse(body), gauge_set(EngineKind.VLLM)).invalid == ("vllm:num_requests_running",)


@pytest.mark.parametrize("body", [
    b"vllm:num_requests_running 0 1" + b"0" * 400 + b"\nvllm:num_requests_waiting 0\n",  # a timestamp that overflows
    b"x 1 1\nx 2 1e0\nvllm:num_requests_running 0\n# EOF\n",  # AttributeError inside the OpenMetrics parser
])
def test_whatever_the_parser_raises_is_an_exposition_error(body):
    with pytest.raises(ExpositionError):
        whole(body, OPENMETRICS if body.endswith(b"# EOF\n") else "")


def test_a_series_given_twice_is_not_read_with_certainty_in_openmetrics():
    # OpenMetrics keeps the first of two samples of one series, the text grammar both.
    body = b"vllm:num_requests_running 0\nvllm:num_requests_running 4\nvllm:num_requests_waiting 0\n# EOF\n"
    with pytest.raises(ExpositionError, match="grammars read its work lines differently"):
        parse(body, OPENMETRICS)
    assert measure(parse(body[:-6]), gauge_set(EngineKind.VLLM)).in_flight == 4  # text sums both


def test_a_work_gauge_typed_other_than_gauge_is_unparseable_in_both_reads():
    # After "# TYPE W counter" the text parser names W's samples W_total: the gauge's samples would be
    # dropped (and after a line of another family, W's samples are the gauge again). Neither is read.
    for between in (b"", b"other 1\n"):
        body = (b"# TYPE vllm:num_requests_running counter\n" + between
                + b"vllm:num_requests_running 5\nvllm:num_requests_waiting 0\n")
        for read in (parse, whole):
            with pytest.raises(ExpositionError, match="makes the work gauge vllm:num_requests_running 'counter'"):
                read(body)
    for type_ in (b"untyped", b"unknown", b"histogram", b"summary", b"Gauge", b"gauge extra"):
        body = b"# TYPE vllm:num_requests_waiting " + type_ + b"\nvllm:num_requests_waiting 0\nvllm:num_requests_running 0\n"
        for read in (parse, whole):
            with pytest.raises(ExpositionError):
                read(body)


# The issue's body: one family of a gauge at zero, then the same name re-typed as a counter holding
# the work. prometheus-client renames the second family's samples to _total: it read idle.
RETYPED = (b"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine=\"0\"} 0\n"
           b"# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting 0\n"
           b"# TYPE vllm:num_requests_running counter\nvllm:num_requests_running{engine=\"1\"} 5\n")


@pytest.mark.parametrize("body", [
    RETYPED,
    RETYPED.replace(b"counter", b"gauge"),  # a second TYPE line, even one saying gauge
    b"# TYPE vllm:num_requests_running gauge\n# TYPE vllm_num_requests_running gauge\n" + IDLE_HEAD,  # either spelling
    b'# TYPE "vllm:num_requests_running" gauge\n#x TYPE vllm:num_requests_running gauge\n' + IDLE_HEAD,
], ids=["retyped-counter", "second-gauge-type", "escaped-spelling", "quoted-and-odd-first-token"])
def test_a_second_type_line_for_a_work_gauge_is_unparseable(body):
    for read in (parse, whole):
        with pytest.raises(ExpositionError, match="TYPE line"):
            read(body)


def test_one_gauge_type_per_work_gauge_and_other_families_types_are_read_as_before(fixtures_dir):
    body = b"# TYPE vllm:num_requests_running gauge\n# TYPE vllm:num_requests_waiting gauge\n" + IDLE_HEAD
    assert measure(whole(body), gauge_set(EngineKind.VLLM)).in_flight == 0
    # A TYPE for a longer name is another metric's: waiting_by_reason is not the waiting gauge.
    other = body + b"# TYPE vllm:num_requests_waiting_by_reason counter\nvllm:num_requests_waiting_by_reason 4\n"
    assert measure(whole(other), gauge_set(EngineKind.VLLM)).in_flight == 0
    for name in ("vllm-0.32.0-cpu-metrics-busy.txt", "sglang-0.5.23-cpu-metrics-busy.txt"):
        whole(load(fixtures_dir, name))  # the real scrapes: one gauge TYPE each


# Characters set aside in a name, each by its Unicode category (modeldrain/hook/work_names.py).
HIDDEN = {"bom": "\ufeff", "zwsp": "\u200b", "zwnj": "\u200c", "zwj": "\u200d", "word-joiner": "\u2060",
          "soft-hyphen": "\u00ad", "nul": "\x00", "bell": "\x07", "del": "\x7f", "nbsp": "\u00a0",
          "variation-selector": "\ufe0f", "combining-grapheme-joiner": "\u034f", "private-use": "\ue000"}


@pytest.mark.parametrize("hidden", list(HIDDEN.values()), ids=list(HIDDEN))
@pytest.mark.parametrize("form", [
    '{{"{name}"}} 5\n', '{{__name__="{name}"}} 5\n', '{name}{{engine="1"}} 5\n', '"{name}"{{}} 5\n',
    '{{engine="1","{name}"}} 5\n',
], ids=["quoted", "name-label", "bare-before-labels", "quoted-outside", "quoted-last"])
@pytest.mark.parametrize("where", ["before", "inside", "after"])
def test_a_work_gauge_named_with_characters_set_aside_is_unparseable_not_absent(hidden, form, where):
    gauge = "vllm:num_requests_running"
    name = {"before": hidden + gauge, "inside": gauge[:9] + hidden + gauge[9:], "after": gauge + hidden}[where]
    disguised = form.format(name=name).encode()
    bodies = [IDLE_HEAD + disguised, disguised + IDLE_HEAD,
              b"vllm:num_requests_running 1\nvllm:num_requests_waiting 0\n" + disguised]  # busy beside it
    for body in bodies:
        for read in (parse, whole):
            try:
                in_flight = measure(read(body), gauge_set(EngineKind.VLLM)).in_flight
            except ExpositionError:
                continue  # what the rule asks (or the parser refusing the line itself)
            # Or the parser strips it as whitespace and the line is the gauge itself: counted.
            assert in_flight is not None and in_flight >= 5, f"{read.__name__} read {body!r}: {in_flight}"


def test_a_line_feed_escaped_into_a_work_gauges_name_is_unparseable():
    body = IDLE_HEAD + b'{"vllm:num_requests_run\\nning"} 5\n'
    for read in (parse, whole):
        with pytest.raises(ExpositionError, match="U\\+000A"):
            read(body)


def test_a_disguised_type_line_is_unparseable():
    body = '# TYPE "vllm:num_requests_running\u200b" counter\n'.encode() + IDLE_HEAD
    for read in (parse, whole):
        with pytest.raises(ExpositionError, match="U\\+200B"):
            read(body)


@pytest.mark.parametrize("line", [
    b'vllm:num_requests_waiting_by_reason{reason="x"} 3\n',  # a longer name: another metric
    '{"vllm:num_requests_waiting_by_reason\u200b"} 3\n'.encode(),  # in disguise, still another metric
    '{"caf\u00e9"} 1\n'.encode(),  # a visible non-ASCII letter: nobody's work gauge
], ids=["by-reason", "by-reason-disguised", "other-name"])
def test_names_that_are_not_a_work_gauge_once_set_aside_characters_are_gone_are_other_metrics(line):
    for read in (parse, whole):
        assert measure(read(IDLE_HEAD + line), gauge_set(EngineKind.VLLM)).in_flight == 0


def test_a_space_inside_a_work_gauges_name_is_set_aside_too_on_the_idle_confirmation():
    # A separator (Zs) is set aside like the rest; the fast path cannot afford to look for a plain
    # space, so such a line is found by the whole-body parse an idle read needs.
    with pytest.raises(ExpositionError, match="U\\+0020"):
        whole(IDLE_HEAD + b'{"vllm:num_requests_run ning"} 3\n')


def test_an_undetected_sglang_role_still_counts_every_queue_present():
    body = (b'sglang:num_running_reqs 0\nsglang:num_queue_reqs 0\n'
            b'sglang:num_decode_transfer_queue_reqs 2\n')  # no engine_type label: the role is unknown
    m = measure(parse(body), gauge_set(EngineKind.SGLANG, Role.UNIFIED))
    assert not m.missing and m.in_flight == 2 and m.gauges["sglang:num_decode_transfer_queue_reqs"] == 2


def test_a_line_over_the_cap_is_refused_and_a_passed_deadline_is_a_timeout():
    long_line = b'vllm:num_requests_running{a="' + b"x" * 5000 + b'"} 0\n'
    with pytest.raises(ExpositionError, match="over the 4096 cap"):
        parse(long_line)
    with pytest.raises(ParseTimeout):
        exposition.parse(IDLE_HEAD, "", deadline_at=time.monotonic() - 1)


def test_parsing_is_bounded_by_the_time_left_on_adversarial_bodies():
    # Lines at the cap of the shape prometheus-client parses slowest (quadratic in a line's labels),
    # 4 MiB of them: unbounded, seconds; here, the time given and a little.
    line = b'vllm:num_requests_running{' + b",".join(b'l%d="v"' % i for i in range(400))[:4000] + b'} 0\n'
    body = IDLE_HEAD + line * (4 * 1024 * 1024 // len(line))
    for read in (exposition.parse, parse_whole):
        started = time.monotonic()
        with pytest.raises(ParseTimeout):
            read(body, "", deadline_at=started + 0.5)
        assert time.monotonic() - started < 0.75, read.__name__


def test_no_work_name_can_join_another_family_by_its_suffix():
    # The fast path replaces lines between work lines by one sample of a fresh name, which ends any
    # family as a real line would; that is exact only if no read name is another family's suffix form.
    for name in READ_NAMES:
        assert not name.endswith(("_count", "_sum", "_bucket", "_created", "_gcount", "_gsum", "_info")), name
    assert all(any(sub in name for sub in CANDIDATE_SUBSTRINGS) for name in READ_NAMES)
