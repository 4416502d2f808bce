"""SGLang's publishing as the emulator models it (emulation/stats_ticks.py), on an injected clock."""

from emulation.misbehaviour import Misbehaviour, MisbehaviourSetting
from emulation.scheduler import Phase, RankSnapshot
from emulation.stats_ticks import StatsTicks


def rank(running: int) -> tuple[RankSnapshot, ...]:
    return (RankSnapshot({p: (running if p is Phase.RUNNING else 0) for p in Phase}, running, 0, 0, ()),)


NONE = MisbehaviourSetting()
STALE = MisbehaviourSetting(mode=Misbehaviour.STALE, interval_s=3.0)


def test_the_heartbeat_steps_once_a_second_with_live_gauges():
    ticks = StatsTicks(started_at=100.0)
    assert ticks.view(rank(2), NONE, 100.5).heartbeat_s == 0.0
    seen = ticks.view(rank(3), NONE, 102.2)
    assert seen.heartbeat_s == 2.0 and seen.ranks[0].running == 3


def test_a_long_pass_holds_gauges_and_heartbeat_until_it_ends():
    ticks = StatsTicks(started_at=100.0)
    held = ticks.view(rank(0), STALE, 110.0)  # the pass begins: what is there now is published
    inside = ticks.view(rank(4), STALE, 112.9)
    assert inside == held and inside.ranks[0].running == 0 and inside.heartbeat_s == 10.0
    ended = ticks.view(rank(4), STALE, 113.1)  # the pass ended at 113: both move together
    assert ended.ranks[0].running == 4 and ended.heartbeat_s == 13.0
    assert ticks.view(rank(1), NONE, 113.5).ranks[0].running == 1  # off again: live
