"""The ways an emulated engine's /metrics (or its listener) can go wrong, switchable at run time.

A misbehaviour is a mode plus its parameters, parsed once from the control API's JSON (or the
--misbehave flag) into a frozen value; the handlers only read it.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Any, Mapping

from emulation import constants


class Misbehaviour(enum.Enum):
    NONE = "none"
    HTTP500 = "http500"  # /metrics answers 500
    REDIRECT = "redirect"  # /metrics answers 302 (by default to an idle-looking exposition)
    HANG = "hang"  # read the request, never answer
    DRIP = "drip"  # headers at once, then the body one byte per interval
    SLOW_HEADERS = "slow-headers"  # the status line and headers drip too
    GARBAGE = "garbage"  # 200 with a body that is not an exposition
    NAN = "nan"  # work gauges read NaN
    NEGATIVE = "negative"  # work gauges read -1
    INF = "inf"  # work gauges read +Inf
    HUGE = "huge"  # 200 with a valid exposition padded to size_mb MB
    MISSING = "missing"  # one work gauge family is absent
    REFUSE = "refuse"  # the listener closes: connections refused (for down_s, or for good)
    RESTART = "restart"  # the listener goes for down_s, then a fresh process answers
    STALE = "stale"  # SGLang: forward passes of interval_s; gauges and heartbeat republished only between them

    def __str__(self) -> str:
        return self.value


# Where a redirect points by default: a path on the same server that serves a valid exposition with
# every work gauge at zero, so a reader that follows redirects is caught concluding "idle".
IDLE_DECOY_PATH = "/elsewhere/metrics"

# The value each distorting mode gives every work gauge.
DISTORTED_VALUES: Mapping[Misbehaviour, float] = {
    Misbehaviour.NAN: math.nan,
    Misbehaviour.NEGATIVE: -1.0,
    Misbehaviour.INF: math.inf,
}

# Modes that act on the listener once, then leave /metrics healthy.
LISTENER_ACTIONS = frozenset({Misbehaviour.REFUSE, Misbehaviour.RESTART})


@dataclass(frozen=True)
class MisbehaviourSetting:
    """A mode and its parameters. Parameters a mode does not use keep their defaults."""

    mode: Misbehaviour = Misbehaviour.NONE
    interval_s: float = constants.DRIP_INTERVAL_S  # drip, slow-headers; stale: the pass length
    size_mb: float = constants.HUGE_BODY_MB  # huge
    gauge: str | None = None  # missing; None: the engine's waiting/queue gauge
    location: str = IDLE_DECOY_PATH  # redirect
    down_s: float | None = None  # refuse (None: for good), restart (None: RESTART_DOWN_S)


class BadMisbehaviour(ValueError):
    """The control request named an unknown mode or a bad parameter."""


_PARAMETERS = {"interval_s": float, "size_mb": float, "gauge": str, "location": str, "down_s": float}


def parse_setting(body: Mapping[str, Any]) -> MisbehaviourSetting:
    """Turn a control request's JSON object into a setting, or raise BadMisbehaviour saying why."""
    if not isinstance(body, Mapping):
        raise BadMisbehaviour('expected a JSON object like {"mode": "hang"}')
    raw_mode = body.get("mode")
    try:
        mode = Misbehaviour(raw_mode)
    except ValueError:
        known = ", ".join(m.value for m in Misbehaviour)
        raise BadMisbehaviour(f"unknown mode {raw_mode!r}; known: {known}") from None
    params: dict[str, Any] = {}
    for key, value in body.items():
        if key == "mode":
            continue
        kind = _PARAMETERS.get(key)
        if kind is None:
            raise BadMisbehaviour(f"unknown parameter {key!r}; known: {', '.join(_PARAMETERS)}")
        if kind is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                raise BadMisbehaviour(f"{key} must be a number >= 0, got {value!r}")
            params[key] = float(value)
        else:
            if not isinstance(value, str) or not value:
                raise BadMisbehaviour(f"{key} must be a non-empty string, got {value!r}")
            params[key] = value
    return MisbehaviourSetting(mode=mode, **params)
