"""Parsers for the values people type: flags, annotations and environment variables.

Every program here (prestop, drain-sidecar, the emulated engine) takes its numbers, ports and
paths through these, so one value is accepted or refused with the same words everywhere. Each
parser raises ValueError with a message that names the value; `arg()` turns one into an
argparse `type=` so a bad flag is a one-line usage error (exit 2), never a traceback.

Numbers are matched as ASCII before conversion: `str.isdigit()` accepts characters such as
'²' that `int()` refuses, and a float such as 1e10 seconds overflows the clock functions that
sleep on it.
"""

from __future__ import annotations

import argparse
import math
import re
from typing import Callable, NoReturn, TypeVar

from modeldrain.hook.exitcodes import ExitCode
from modeldrain.hook.gauges import EngineKind, Role

__all__ = [
    "MAX_SECONDS", "Parser", "arg", "parse_engine", "parse_listen", "parse_path", "parse_port", "parse_role",
    "parse_scheme", "parse_seconds", "parse_whole_number", "seconds_arg", "whole_number_arg",
]

T = TypeVar("T")

# Longer than any Pod's grace or any sensible wait (11.5 days), short enough that every
# clock and sleep function takes it.
MAX_SECONDS = 1_000_000.0

# A count is at most this many digits: a larger one is a typo, not a configuration.
_MAX_DIGITS = 9
_WHOLE_NUMBER = re.compile(r"[0-9]{1,%d}" % _MAX_DIGITS)
_SCHEMES = ("http", "https")
# SGLang's flag spells a unified server "null"; the JSON and the logs say "unified".
_ROLE_ALIASES = {"null": Role.UNIFIED}


def parse_seconds(text: str, *, what: str, minimum: float = 0.0, inclusive: bool = True,
                  maximum: float = MAX_SECONDS) -> float:
    """A finite number of seconds within [minimum, maximum] (minimum excluded unless inclusive)."""
    try:
        value = float(str(text).strip())
    except ValueError:
        raise ValueError(f"{what} must be a number of seconds, got {text!r}") from None
    low_ok = value >= minimum if inclusive else value > minimum
    if not math.isfinite(value) or not low_ok or value > maximum:
        low = f">= {minimum:g}" if inclusive else f"> {minimum:g}"
        raise ValueError(f"{what} must be a number of seconds {low} and <= {maximum:.0f}, got {text!r}")
    return value


def parse_whole_number(text: str, *, what: str, minimum: int = 0, maximum: int | None = None) -> int:
    """A decimal whole number (ASCII digits only) within [minimum, maximum]."""
    digits = str(text).strip()
    if not _WHOLE_NUMBER.fullmatch(digits) or not minimum <= int(digits) <= (maximum or int(digits)):
        upper = f" and <= {maximum}" if maximum is not None else ""
        raise ValueError(f"{what} must be a whole number >= {minimum}{upper}, got {text!r}")
    return int(digits)


def parse_port(text: str, *, what: str = "port", allow_zero: bool = False) -> int:
    """A TCP port, 1-65535 (0, "any free port", only where allow_zero)."""
    return parse_whole_number(text, what=what, minimum=0 if allow_zero else 1, maximum=65535)


def parse_path(text: str, *, what: str = "path") -> str:
    """An absolute request path of printable ASCII: nothing that could split or re-encode the request line."""
    if not text.startswith("/"):
        raise ValueError(f"{what} must start with '/', got {text!r}")
    if not all(0x21 <= ord(c) <= 0x7E for c in text):
        raise ValueError(f"{what} must be printable ASCII without spaces (percent-encode the rest), got {text!r}")
    return text


def parse_scheme(text: str, *, what: str = "scheme") -> str:
    scheme = text.strip().lower()
    if scheme not in _SCHEMES:
        raise ValueError(f"{what} must be http or https, got {text!r}")
    return scheme


def parse_engine(text: str) -> EngineKind:
    try:
        return EngineKind(text.strip().lower())
    except ValueError:
        raise ValueError(f"engine must be vllm or sglang, got {text!r}") from None


def parse_role(text: str) -> Role:
    value = text.strip().lower()
    if value in _ROLE_ALIASES:
        return _ROLE_ALIASES[value]
    try:
        return Role(value)
    except ValueError:
        raise ValueError(f"disaggregation mode must be null (unified), prefill or decode, got {text!r}") from None


def parse_listen(text: str) -> tuple[str, int]:
    """HOST:PORT, [IPv6]:PORT or :PORT (every address); port 0 picks a free one."""
    host, sep, port_text = text.rpartition(":")
    if not sep:
        raise ValueError(f"--listen must be HOST:PORT or :PORT, got {text!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if any(c.isspace() for c in host) or "[" in host or "]" in host:
        raise ValueError(f"--listen has a malformed host in {text!r}")
    return host, parse_port(port_text, what="--listen port", allow_zero=True)


class Parser(argparse.ArgumentParser):
    """argparse whose usage error is one line: what is wrong, and where the flags are explained."""

    def error(self, message: str) -> NoReturn:
        # argparse says "argument --grace: --grace must be ...": name the flag once.
        message = re.sub(r"^argument (\S+): (?=\1 )", "", message)
        self.exit(ExitCode.USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def arg(parse: Callable[[str], T]) -> Callable[[str], T]:
    """The parser as an argparse `type=`: its ValueError becomes argparse's one-line usage error."""

    def parse_flag(text: str) -> T:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse_flag.__name__ = getattr(parse, "__name__", "value")
    return parse_flag


def seconds_arg(flag: str, *, minimum: float = 0.0, inclusive: bool = True) -> Callable[[str], float]:
    return arg(lambda text: parse_seconds(text, what=flag, minimum=minimum, inclusive=inclusive))


def whole_number_arg(flag: str, *, minimum: int = 0, maximum: int | None = None) -> Callable[[str], int]:
    return arg(lambda text: parse_whole_number(text, what=flag, minimum=minimum, maximum=maximum))
