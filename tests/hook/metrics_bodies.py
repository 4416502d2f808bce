"""Hypothesis strategies: adversarial /metrics bodies made of the real scrapes' lines.

Lines of the real engines' scrapes, mutated the ways prometheus-client reads differently from a
naive reader (whitespace of every kind, the name as a label or quoted, names escaped, CRLF,
truncation, duplicates, garbage, huge and odd numbers, TYPE lines that rename samples), plus
whole scrapes re-rendered as text and OpenMetrics with the work gauges set idle or busy.
"""

from __future__ import annotations

from hypothesis import strategies as st
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest as render_text
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics import exposition as openmetrics_exposition
from prometheus_client.parser import text_string_to_metric_families

from modeldrain.hook.exposition import CANONICAL, READ_NAMES
from modeldrain.hook.gauges import ALL_WORK_METRIC_NAMES
from tests.conftest import SCRAPES

OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"
TEXT = "text/plain; version=0.0.4"

SCRAPE_FILES = sorted(SCRAPES.glob("*.txt"))
SCRAPE_LINES = sorted({line for path in SCRAPE_FILES for line in path.read_text().split("\n") if line})
WANTED_LINES = [line for line in SCRAPE_LINES if any(name in line for name in CANONICAL)]
OTHER_LINES = [line for line in SCRAPE_LINES if line not in WANTED_LINES]
NAMES = sorted(CANONICAL) + ["vllm:request_success", "sglang:num_requests"]

WHITESPACE = st.sampled_from([" ", "  ", "\t", "\r", "\x0b", "\x0c", "\x1c", "\x85", "\u00a0", "\u2028", "\u3000", ""])
VALUES = st.sampled_from([
    "0", "0.0", "-0", "1", "3", "1e0", "+Inf", "-Inf", "NaN", "nan", "Infinity", "-1", "1e400",
    "1" + "0" * 400, "1" + "0" * 5000, "0x10", "1_000", "\uff10", "\u0665", "", "0 1700000000000",
    "0 1" + "0" * 400, "0 junk 5", '0 # {a="b"} 1', "0.0 1e3", "0 1", "1 1e0", "00", "0e0", "+0",
])
LABEL_SETS = st.sampled_from([
    "", "{}", '{a="b"}', '{a="b",}', '{,a="b"}', '{a="b",,c="d"}', '{a="b",a="c"}', '{a="\\x"}',
    '{a="\\"}', '{a="x\\"y"}', '{a="}"}', '{a="{"}', '{engine="0",model_name="tiny"}',
    '{a="b" ', '{"q"="v"}', '{__name__="x"}', '{engine_type="unified"}', '{engine_type="decode"}',
    '{a="vllm:num_requests_running"}',
    # SGLang's HTTP gauge's route label: a route that is not work, one that is, near misses.
    '{endpoint="/metrics",method="GET"}', '{endpoint="/health"}', '{endpoint="/generate",method="POST"}',
    '{endpoint="/metrics ",method="GET"}', '{endpoint="\\/metrics"}', '{"endpoint"="/metrics"}',
    '{endpoint="/metrics",endpoint="/generate"}', '{endpoint="/Metrics"}', '{method="GET"}',
])


# Characters nobody sees (issue 15), by Unicode category as modeldrain/hook/work_names.py sets them aside:
# what a work gauge's name in disguise carries (a line feed would end the line: not one of them).
HIDDEN_CHARACTERS = st.characters(categories=("Cc", "Cf", "Co", "Cn", "Zs", "Zl", "Zp", "Mn", "Me"),
                                  exclude_characters="\n")
# The ones real attacks use, drawn more often than the category's other members.
NAMED_HIDDEN = st.sampled_from(["\ufeff", "\u200b", "\u200c", "\u200d", "\u2060", "\u00ad", "\x00", " ", "\t",
                                "\u00a0", "\ufe0f", "\u034f"])


@st.composite
def disguised(draw, name: str) -> str:
    """`name` with hidden characters before, inside or after it, or a line feed escaped into it."""
    chars = list(name)
    for _ in range(draw(st.integers(1, 3))):
        hidden = draw(st.one_of(NAMED_HIDDEN, HIDDEN_CHARACTERS, st.just("\\n")))
        chars.insert(draw(st.integers(0, len(chars))), hidden)
    return "".join(chars)


@st.composite
def work_sample(draw) -> str:
    name = draw(st.sampled_from(NAMES))
    if draw(st.integers(0, 5)) == 0:
        name = draw(disguised(name))
    form = draw(st.sampled_from(["plain", "plain", "name_label", "quoted", "quoted_label", "quoted_outside"]))
    labels = draw(LABEL_SETS)
    inner = labels[1:-1] if labels.startswith("{") and labels.endswith("}") else ""
    if form == "plain":
        head = name + labels
    elif form == "name_label":
        head = "{" + ",".join(x for x in [f'__name__="{name}"', inner] if x) + "}"
    elif form == "quoted":
        head = "{" + ",".join(x for x in [f'"{name}"', inner] if x) + "}"
    elif form == "quoted_label":
        head = "{" + ",".join(x for x in [inner, f'"{name}"'] if x) + "}"
    else:
        head = f'"{name}"' + (labels or "{}")
    separator = draw(st.sampled_from([" ", " ", "\t", "  ", "", "\u00a0"]))
    return draw(WHITESPACE) + head + separator + draw(VALUES) + draw(WHITESPACE)


@st.composite
def metadata_line(draw) -> str:
    name = draw(st.sampled_from(NAMES + ["other_metric"]))
    kind = draw(st.sampled_from(["HELP", "TYPE", "UNIT", "HELP", "TYPE"]))
    type_ = draw(st.sampled_from(["gauge", "counter", "histogram", "summary", "untyped", "unknown", "foo", ""]))
    rest = type_ if kind == "TYPE" else draw(st.sampled_from(["doc", "", "a \\n b", "doc TYPE x"]))
    return f"# {kind} {name} {rest}".rstrip() if rest or kind != "TYPE" else f"# TYPE {name}"


def _reformed(line: str) -> list[str]:
    """The same sample, its name given as {__name__="x",...} or {"x",...}."""
    if line.startswith("#") or "{" not in line:
        return [line]
    name, rest = line.split("{", 1)
    close = rest[0] == "}"
    return [f'{{__name__="{name}"{"" if close else ","}{rest}', f'{{"{name}"{"" if close else ","}{rest}']


def mutated(draw, line: str, rate: float = 0.4) -> list[str]:
    if draw(st.floats(0, 1)) >= rate:
        return [line]
    how = draw(st.sampled_from(["lead_ws", "trail_ws", "crlf", "truncate", "dup", "escape_colon",
                                "value", "garbage_suffix", "unicode", "reform", "reform", "counter_type",
                                "disguise"]))
    if how == "disguise":
        name = next((n for n in sorted(CANONICAL, key=len, reverse=True) if n in line), None)
        return [line.replace(name, draw(disguised(name)), 1)] if name else [line]
    if how == "reform":
        return [draw(st.sampled_from(_reformed(line)))]
    if how == "counter_type" and not line.startswith("#"):
        return [f"# TYPE {line.split('{', 1)[0].split(' ', 1)[0]} counter", line]
    if how == "lead_ws":
        return [draw(WHITESPACE) + line]
    if how == "trail_ws":
        return [line + draw(WHITESPACE)]
    if how == "crlf":
        return [line + "\r"]
    if how == "truncate":
        return [line[: draw(st.integers(0, max(0, len(line) - 1)))]]
    if how == "dup":
        return [line, line]
    if how == "escape_colon":
        return [line.replace(":", "_", 1)]
    if how == "value" and not line.startswith("#") and " " in line:
        return [line.rsplit(" ", 1)[0] + " " + draw(VALUES)]
    if how == "garbage_suffix":
        return [line + draw(st.sampled_from([" x", "}", '"', "\\", ' # {a="b"} 1', "\x00"]))]
    if how == "unicode":
        return [line.replace("e", "\u00e9", 1)]
    return [line]


@st.composite
def assembled_bodies(draw) -> tuple[bytes, str]:
    """Bodies assembled line by line: mostly real lines, some of them mutated, some odd ones."""
    openmetrics = draw(st.booleans())
    if draw(st.integers(0, 9)) == 0:  # a whole real scrape, a few lines changed
        lines = draw(st.sampled_from(SCRAPE_FILES)).read_text().split("\n")[:-1]
        for _ in range(draw(st.integers(0, 4))):
            i = draw(st.integers(0, len(lines) - 1))
            lines[i:i + 1] = mutated(draw, lines[i], 1.0) if draw(st.booleans()) else [draw(work_sample())]
    else:
        lines = []
        rate = draw(st.sampled_from([0.0, 0.03, 0.1, 0.4]))  # how adversarial this body is
        for _ in range(draw(st.integers(1, 40))):
            if draw(st.floats(0, 1)) >= rate:
                source = OTHER_LINES if draw(st.booleans()) else WANTED_LINES
                lines += mutated(draw, draw(st.sampled_from(source)), rate)
                continue
            odd = draw(st.sampled_from(["work", "meta", "blank", "comment", "garbage"]))
            if odd == "work":
                lines.append(draw(work_sample()))
            elif odd == "meta":
                lines.append(draw(metadata_line()))
            elif odd == "blank":
                lines.append(draw(st.sampled_from(["", " ", "\t", "\r"])))
            elif odd == "comment":
                lines.append(draw(st.sampled_from(["# hello", "#", "# HELP", "# TYPE", "#  TYPE x gauge",
                                                   "# the TYPE of it", '# "a b" TYPE', "# EOF"])))
            else:
                lines.append(draw(st.text(alphabet=st.sampled_from(list('ab:_{}"=, #\\\t01.e+-\u00e9\r')), max_size=30)))
    if openmetrics and draw(st.integers(0, 4)):
        lines = [line for line in lines if line != "# EOF"] + ["# EOF"]
    text = "\n".join(lines) + draw(st.sampled_from(["\n", "\n", "", "\n\n"]))
    if draw(st.integers(0, 19)) == 0:
        text = text.replace("\n", "\r\n")
    return text.encode("utf-8"), OPENMETRICS if openmetrics else TEXT


class _Families:
    def __init__(self, families: list[Metric]):
        self.families = families

    def collect(self) -> list[Metric]:
        return self.families


def _rendered() -> list[tuple[list[str], bool]]:
    """The idle scrapes as they are, and re-rendered as OpenMetrics with names intact and escaped."""
    out = []
    for name in ("vllm-0.32.0-cpu-metrics-idle.txt", "sglang-0.5.23-cpu-metrics-idle.txt",
                 "sglang-0.5.23-cpu-metrics-prefill-idle.txt"):
        text = (SCRAPES / name).read_text()
        families = []
        for family in text_string_to_metric_families(text):
            if family.name.endswith("_created"):
                continue  # OpenMetrics derives these from counters; keeping them clashes
            metric = Metric(family.name, family.documentation, family.type, family.unit)
            metric.samples.extend(family.samples)
            families.append(metric)
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Families(families))
        out.append((text.split("\n")[:-1], False))
        out.append((render_text(registry).decode().split("\n")[:-1], False))
        out.append((openmetrics_exposition.generate_latest(registry, escaping=openmetrics_exposition.ALLOWUTF8)
                    .decode().split("\n")[:-1], True))
    return out


RENDERED = _rendered()


@st.composite
def near_valid_bodies(draw) -> tuple[bytes, str]:
    """Bodies the oracle mostly accepts: real scrapes with the work gauges set, then a few edits."""
    lines, openmetrics = draw(st.sampled_from(RENDERED))
    lines = list(lines)
    for i, line in enumerate(lines):
        if not line.startswith("#") and line.split("{")[0].split(" ")[0] in READ_NAMES:
            lines[i] = line.rsplit(" ", 1)[0] + " " + draw(st.sampled_from(["0.0", "0.0", "0.0", "0", "1.0", "2"]))
    for _ in range(draw(st.sampled_from([0, 0, 1, 1, 2, 3]))):
        i = draw(st.integers(0, len(lines) - 1))
        edit = draw(st.integers(0, 3))
        if edit == 0:
            lines[i:i + 1] = mutated(draw, lines[i], 1.0)
        elif edit == 1:
            if draw(st.booleans()):
                lines.insert(i, draw(work_sample()))
            else:  # a counter TYPE renames the next samples, unless a line in between ends the family
                name = draw(st.sampled_from(NAMES))
                between = draw(st.sampled_from(["", "# c", "# HELP", "# the TYPE of it", "other 1",
                                                "# HELP other d", "# TYPE other gauge", " "]))
                lines[i:i] = [f"# TYPE {name} counter"] + ([between] if between else []) + \
                    [f"{name}{draw(LABEL_SETS)} " + draw(st.sampled_from(["0", "5"]))]
        elif edit == 2:
            lines.insert(i, draw(metadata_line()))
        else:  # a wanted line copied elsewhere: a family split, a series twice
            lines.insert(i, draw(st.sampled_from([line for line in lines if any(n in line for n in NAMES)])))
    return ("\n".join(lines) + "\n").encode("utf-8"), OPENMETRICS if openmetrics else TEXT


WORK_GAUGE_NAMES = sorted(n for n in CANONICAL if CANONICAL[n] in ALL_WORK_METRIC_NAMES)


@st.composite
def hidden_work(draw) -> list[str]:
    """Lines that hide a busy series of a work gauge from prometheus-client's parse (issue 15): its
    name in disguise in any form the parser takes, or its family typed again (as a counter, say)."""
    name = draw(st.sampled_from(WORK_GAUGE_NAMES))
    labels = draw(st.sampled_from(['engine="9"', 'engine="9",model_name="m"', ""]))
    value = draw(st.sampled_from(["1", "4", "0"]))
    how = draw(st.sampled_from(["quoted", "name_label", "bare_with_labels", "quoted_outside", "retyped",
                                "retyped", "typed_disguised"]))
    hidden = draw(disguised(name))
    if how == "quoted":
        return ["{" + ",".join(x for x in [f'"{hidden}"', labels] if x) + "} " + value]
    if how == "name_label":
        return ["{" + ",".join(x for x in [f'__name__="{hidden}"', labels] if x) + "} " + value]
    if how == "bare_with_labels":
        return [f"{hidden}{{{labels}}} {value}"]
    if how == "quoted_outside":
        return [f'"{name}"{{{labels}}} {value}']
    type_ = draw(st.sampled_from(["counter", "gauge", "untyped", "summary", "histogram", "unknown", "info"]))
    between = draw(st.sampled_from([[], ["other_metric 1"], ["# HELP other d"]]))
    if how == "retyped":
        return between + [f"# TYPE {name} {type_}", f"{name}{{{labels}}} {value}"]
    return between + [f'# TYPE "{hidden}" {type_}', "{" + ",".join(x for x in [f'"{hidden}"', labels] if x) + "} "
                      + value]


@st.composite
def hiding_bodies(draw) -> tuple[bytes, str]:
    """A real scrape with its work gauges at zero and a busy series hidden somewhere: never idle."""
    lines, openmetrics = draw(st.sampled_from([r for r in RENDERED if not r[1]]))
    lines = [line.rsplit(" ", 1)[0] + " 0.0" if not line.startswith("#") and
             line.split("{")[0].split(" ")[0] in READ_NAMES else line for line in lines]
    at = draw(st.integers(0, len(lines)))
    while at < len(lines) and lines[at - 1:at] and lines[at - 1].startswith("# "):
        at += 1  # not between a family's TYPE line and its samples
    lines[at:at] = draw(hidden_work())
    return ("\n".join(lines) + "\n").encode("utf-8"), TEXT


def bodies() -> st.SearchStrategy[tuple[bytes, str]]:
    return st.one_of(assembled_bodies(), near_valid_bodies(), hiding_bodies())
