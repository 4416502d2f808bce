"""What the engine's own command says, from its argv in /proc or from the sidecar's flags."""

import asyncio

import pytest

from modeldrain.hook.engine import EngineHint, hint_from_argv
from modeldrain.hook.gauges import EngineKind, Role
from modeldrain.sidecar.command import CommandSource, CommandWatch, EngineCommand, engine_command


def cmdline(*argv: str) -> EngineHint:
    hint = hint_from_argv(list(argv))
    assert hint is not None
    return hint


NOTHING = EngineHint()


@pytest.mark.parametrize("flags, proc, expected", [
    (NOTHING, NOTHING, EngineCommand(CommandSource.NONE, None, ())),
    (EngineHint(kind=EngineKind.VLLM), NOTHING, EngineCommand(CommandSource.FLAG, False, ())),
    (EngineHint(kind=EngineKind.SGLANG, role=Role.PREFILL), NOTHING,
     EngineCommand(CommandSource.FLAG, True, ("flag: --disaggregation-mode=prefill",))),
    (EngineHint(role=Role.UNIFIED), NOTHING, EngineCommand(CommandSource.FLAG, False, ())),
    (NOTHING, cmdline("python3", "-m", "sglang.launch_server", "--disaggregation-mode", "decode"),
     EngineCommand(CommandSource.CMDLINE, True, ("cmdline: --disaggregation-mode=decode",))),
    (NOTHING, cmdline("vllm", "serve", "m", "--data-parallel-hybrid-lb"),
     EngineCommand(CommandSource.CMDLINE, True, ("cmdline: --data-parallel-hybrid-lb",))),
    (NOTHING, cmdline("vllm", "serve", "m"), EngineCommand(CommandSource.CMDLINE, False, ())),
    # Either source's mark counts: a refusal holds the replica, so the cautious answer wins.
    (EngineHint(kind=EngineKind.VLLM, role=Role.DECODE), cmdline("vllm", "serve", "m"),
     EngineCommand(CommandSource.CMDLINE, True, ("flag: --disaggregation-mode=decode",))),
])
def test_the_command_and_where_it_was_read(flags, proc, expected):
    assert engine_command(flags, proc) == expected


def _proc(root, argv):
    (root / "41").mkdir(parents=True)
    (root / "41" / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")


def test_proc_is_scanned_again_until_the_engine_shows_then_kept(tmp_path):
    asyncio.run(_scanned_again_until_the_engine_shows_then_kept(tmp_path))


async def _scanned_again_until_the_engine_shows_then_kept(tmp_path):
    now = [0.0]
    watch = CommandWatch(EngineHint(source="flag"), str(tmp_path), rescan_interval_s=1.0, clock=lambda: now[0])
    assert (await watch.current()).source is CommandSource.NONE
    _proc(tmp_path, ["python3", "-m", "sglang.launch_server", "--disaggregation-mode=prefill"])
    now[0] = 0.5
    assert (await watch.current()).source is CommandSource.NONE  # not yet: at most one scan a second
    now[0] = 1.0
    assert await watch.current() == EngineCommand(CommandSource.CMDLINE, True, ("cmdline: --disaggregation-mode=prefill",))
    (tmp_path / "41" / "cmdline").unlink()  # the engine restarts: its container's command is the same
    now[0] = 5.0
    assert (await watch.current()).source is CommandSource.CMDLINE
