"""What a line may call a work gauge: a name in disguise, and the one TYPE a work gauge may have.

prometheus-client's text parser accepts names no engine writes: quoted (`{"name"}`), in a
`__name__` label, or unquoted before `{`, each carrying any character. A work gauge's busy
series named with a zero-width space, a BOM, a soft hyphen or a NUL becomes an unrelated metric
and the rest of the gauge sums to zero; a second `# TYPE` line (the text format allows one per
name) turns a family into a counter whose samples are renamed away. Either would read idle.

The rule: a name that, once the characters no one sees are set aside, *equals* a work gauge's
name (in either spelling the reader reads: `vllm:x` or `vllm_x`), but is not that name, makes the
read unparseable; so does a TYPE line for a work gauge that is not `gauge`, or a second one.
Equality, not a prefix: `vllm:num_requests_waiting_by_reason` is another metric.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Iterable

from modeldrain.hook.gauges import ALL_WORK_METRIC_NAMES

__all__ = ["WorkNameError", "WorkTypes", "refuse_disguised", "suspect_line_starts"]

# The characters set aside, by Unicode general category rather than a list: every "other"
# (Cc control, Cf format: BOM, zero-width space and joiners, word joiner, soft hyphen; Cs, Co,
# Cn), every separator (Zs, Zl, Zp: nothing a name is read by) and the marks drawn on the
# character before (Mn, Me: combining marks, variation selectors, the grapheme joiner).
SET_ASIDE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp", "Mn", "Me"})

# Each work gauge's name as the reader reads it (`vllm:x`, and OpenMetrics' escaped `vllm_x`).
WORK_NAMES: dict[str, str] = {**{n: n for n in ALL_WORK_METRIC_NAMES},
                              **{n.replace(":", "_"): n for n in ALL_WORK_METRIC_NAMES if ":" in n}}

# A character a name in disguise may carry that an ordinary body has none of: anything but
# printable ASCII, and the backslash (the text format's `\n` escape puts a line feed in a name).
# Real scrapes have none, so the search below finds nothing on them.
_SUSPECT = re.compile(r"[^\n\x20-\x5b\x5d-\x7e]")
# The ASCII ones (controls but the line feed, DEL, the backslash), each looked for with one
# memchr-speed `in` before any regex runs over an ASCII body.
_ASCII_SUSPECTS = tuple(chr(c) for c in [*range(0x00, 0x0a), *range(0x0b, 0x20), 0x7f, 0x5c])
# The text grammar's name escapes, and the backslash itself: gone from a line before it is searched.
_ESCAPES = re.compile(r"\\n|\\")

# A TYPE comment as the text parser reads one: after strip(), '#' then any first token, the word
# TYPE, a name (quoted with escapes, or bare), the type (the rest). Whitespace is the parser's
# split set (ASCII), quotes hold whitespace.
_WS = " \t\n\r\x0b\x0c"
_TYPE_LINE = re.compile(rf'#[^{_WS}]*[{_WS}]+TYPE[{_WS}]+((?:"(?:[^"\\]|\\.)*"?|[^{_WS}"])+)(?:[{_WS}]+(.*))?\Z',
                        re.DOTALL)
_NAME_ESCAPE = re.compile(r'\\[\\n"]')
_NAME_UNESCAPED = {"\\\\": "\\", "\\n": "\n", '\\"': '"'}


class WorkNameError(ValueError):
    """A line names a work gauge in a way the reader cannot count with certainty."""


def visible(text: str) -> str:
    """`text` without the characters of SET_ASIDE_CATEGORIES."""
    if text.isascii() and text.isprintable() and " " not in text:
        return text  # printable ASCII: only the space is set aside
    return "".join(c for c in text if unicodedata.category(c) not in SET_ASIDE_CATEGORIES)


def disguised(name: str) -> str | None:
    """The work gauge `name` reads as once set-aside characters are gone, when it is not that name.
    Quotes around it are set aside too: the text parser reads `"name"{} 1` as a name that starts and
    ends with a quote mark, where its writer meant the quoted-name syntax."""
    if name in WORK_NAMES:
        return None
    seen = visible(name)
    if len(seen) >= 2 and seen[0] == seen[-1] == '"':
        seen = seen[1:-1]
    return WORK_NAMES.get(seen)


def refuse_disguised(name: str) -> None:
    """Raise WorkNameError when `name` is a work gauge's in disguise."""
    gauge = disguised(name)
    if gauge is not None:
        hidden = sorted({f"U+{ord(c):04X}" for c in name if unicodedata.category(c) in SET_ASIDE_CATEGORIES})
        raise WorkNameError(f"a metric named {ascii(name)} is the work gauge {gauge} with characters set aside "
                            f"({', '.join(hidden) or 'quotes'}): not counted as either")


def suspect_line_starts(text: str, substrings: Iterable[str]) -> list[int]:
    """Where the lines start that may name a work gauge in disguise: each holds a suspect character
    and, with set-aside characters and escapes gone, one of `substrings`. Over-inclusive on purpose:
    the parser reads each line found, and `refuse_disguised` decides on the name it gives."""
    if text.isascii() and not any(c in text for c in _ASCII_SUSPECTS):
        return []  # the common case: one memchr per suspect, no regex, no line
    wanted = tuple(substrings)
    starts: list[int] = []
    line_end = -1
    for found in _SUSPECT.finditer(text):
        at = found.start()
        if at < line_end:
            continue  # this line was looked at already
        start = text.rfind("\n", 0, at) + 1
        line_end = text.find("\n", at)
        line_end = len(text) if line_end == -1 else line_end
        cleaned = visible(_ESCAPES.sub("", text[start:line_end]))
        if any(s in cleaned for s in wanted):
            starts.append(start)
    return starts


class WorkTypes:
    """The TYPE lines one parse has seen for each work gauge: one, and `gauge`, or the read is refused."""

    def __init__(self) -> None:
        self._seen: set[str] = set()

    def check(self, line: str) -> None:
        """Called with every line that contains 'TYPE'."""
        match = _TYPE_LINE.match(line.strip())
        if match is None:
            return
        token, type_ = match.group(1), (match.group(2) or "")
        name = token[1:-1] if len(token) >= 2 and token[0] == token[-1] == '"' else token
        name = _NAME_ESCAPE.sub(lambda m: _NAME_UNESCAPED[m.group(0)], name)
        refuse_disguised(name)
        gauge = WORK_NAMES.get(name)
        if gauge is None:
            return
        if type_ != "gauge":
            raise WorkNameError(f"a TYPE line makes the work gauge {gauge} {ascii(type_) if type_ else 'typeless'}, "
                                "not a gauge")
        if gauge in self._seen:
            raise WorkNameError(f"a second TYPE line for the work gauge {gauge} (the format allows one per name)")
        self._seen.add(gauge)
