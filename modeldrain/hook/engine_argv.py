"""An engine's flags as its own argument parser reads them, for the few flags the hook uses.

vLLM and SGLang parse their argv with argparse, so the hook asks argparse too: a parser holding
the flags the hook reads (each with its aliases and `--no-` form) reads the engine's words with
`parse_known_args`, and so follows argparse's own rules: the last of a flag given twice wins,
`--flag value` and `--flag=value` mean the same, and a unique prefix is the flag (`--por 31001`
is `--port 31001`). A prefix the hook's parser finds ambiguous, or a flag without its value, is
a word the engine would refuse to start on: the flags are then not known (`unknown`), never
guessed. A running engine accepted every word of its argv, so a prefix of one of these flags
names that flag in the engine too (were it also a prefix of another of the engine's flags, the
engine would have refused it), unless the word is itself another flag of the engine. That is
the one assumption here: such a flag is given to the parser as the flag it is (NEIGHBOURS:
vLLM's `-dp`, for argparse a short-flag prefix of `-dpe`/`-dph`); one not listed there would be
read as the longer flag.

vLLM's FlexibleArgumentParser also turns underscores into dashes in a flag's name (up to its
first '.': `--max_model_len`), gathers the dotted words (`--kv-transfer-config.kv_role X`) into
one JSON value, and both engines read `--config FILE` (exactly the word `--config` followed by
the path) as if its flags came first on the command line: the command line overrides the file.
The file is read with PyYAML as the engines read it (hook.engine_config). Underscores are
accepted for SGLang too: where SGLang would refuse the spelling it does not start, and then
nothing the hook reads of it matters. Not followed, and said in a warning: SGLang's
SGLANG_CONFIG environment variable.
"""

from __future__ import annotations

import argparse
import os
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, NoReturn, Sequence

from modeldrain.hook.files import SmallFileError, read_small_file
from modeldrain.hook.gauges import EngineKind

__all__ = ["EngineArgs"]

CONFIG_FLAG = "--config"
_NAME_UP_TO_DOT = re.compile(r"(?<=^--)[^.=]*")

# The flags the hook reads of each engine's argv, with a value: where it serves and which role it has.
VALUE_FLAGS: Mapping[EngineKind, tuple[str, ...]] = {
    EngineKind.VLLM: ("--port", "--host", "--uds", "--ssl-certfile", "--kv-transfer-config"),
    EngineKind.SGLANG: ("--port", "--host", "--ssl-certfile", "--disaggregation-mode", "--node-rank"),
}
# The boolean flags it reads (argparse's BooleanOptionalAction): the names that turn one on, and its negation.
SWITCHES: Mapping[EngineKind, tuple[tuple[tuple[str, ...], str], ...]] = {
    EngineKind.VLLM: (
        (("--data-parallel-external-lb", "-dpe"), "--no-data-parallel-external-lb"),
        (("--data-parallel-hybrid-lb", "-dph"), "--no-data-parallel-hybrid-lb"),
        (("--enable-server-load-tracking",), "--no-enable-server-load-tracking"),
    ),
    EngineKind.SGLANG: (),
}
# The engine's other flags that argparse would take for a prefix of one above (vLLM's -dp, its
# --data-parallel-size): given to the parser as flags of their own, so that it reads them as the engine does.
NEIGHBOURS: Mapping[EngineKind, tuple[str, ...]] = {EngineKind.VLLM: ("-dp",), EngineKind.SGLANG: ()}


class _Refused(Exception):
    """argparse's error, which in the engine would have been a refusal to start."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _Refused(message)


class _Switch(argparse.Action):
    """A boolean flag that remembers the word that turned it on (None once negated)."""

    def __init__(self, option_strings: Sequence[str], dest: str, on: bool = True, **kwargs: Any):
        super().__init__(option_strings, dest, nargs=0, **kwargs)
        self.on = on

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        setattr(namespace, self.dest, option_string if self.on else None)


def _dest(flag: str) -> str:
    return "flag_" + flag.lstrip("-").replace("-", "_")


def _parser(kind: EngineKind) -> _Parser:
    parser = _Parser(add_help=False, allow_abbrev=True, prog=kind.value)
    for flag in VALUE_FLAGS[kind]:
        parser.add_argument(flag, dest=_dest(flag))
    for names, negation in SWITCHES[kind]:
        parser.add_argument(*names, dest=_dest(names[0]), action=_Switch)
        parser.add_argument(negation, dest=_dest(names[0]), action=_Switch, on=False)
    for flag in NEIGHBOURS[kind]:
        parser.add_argument(flag, dest=_dest(flag))
    return parser


@dataclass(frozen=True)
class EngineArgs:
    """The engine's flags as its parser reads them; `words`: its argv in the order its parser sees
    them (the config file's first), names with dashes; `warnings` says what of them could not be
    followed; `unknown`, when set, why the flags the command line does not give itself are not known."""

    words: tuple[str, ...]
    warnings: tuple[str, ...] = ()
    unknown: str | None = None
    parsed: Mapping[str, str | None] = field(default_factory=dict)

    @classmethod
    def read(cls, argv: list[str], kind: EngineKind, cwd: str | None = None, cut: str | None = None) -> "EngineArgs":
        """`argv`: the engine's own arguments (after `serve` or the module), as /proc shows them;
        `cwd`: where a relative --config path is found (the engine's own working directory,
        /proc/PID/cwd), None for this process's; `cut`: why argv is not whole (its end unread)."""
        warnings: list[str] = []
        words = [_canonical(word) for word in argv]
        config: list[str] = []
        config_unread = None
        if words.count(CONFIG_FLAG) > 1:
            config_unread = "its argv names --config more than once (the engine refuses that)"
        elif CONFIG_FLAG in words:
            at = words.index(CONFIG_FLAG)
            path = words[at + 1] if at + 1 < len(words) else None
            del words[at:at + 2]
            if path is None:
                config_unread = "its --config names no file (the engine refuses that)"
            else:
                try:
                    negations = {negation for _, negation in SWITCHES[kind]}
                    config = [_canonical(word) for word in _config_words(path, cwd, negations)]
                except ValueError as exc:
                    config_unread = f"its --config {path} is not read: {exc}"
        unknown = cut or config_unread
        if config_unread is not None:
            warnings.append(f"the engine's flags set by its config file are not known: {config_unread}")
        words = config + words
        try:
            parsed = _parse(kind, words)
            if config_unread is not None:
                # Only what the command line gives itself is known: it wins over the file.
                parsed = {dest: value for dest, value in parsed.items() if value is not None}
        except _Refused as exc:
            parsed = {}
            unknown = unknown or f"its parser would refuse its flags ({exc})"
            warnings.append(f"the engine's flags are not known: its parser would refuse them ({exc})")
        if cut is not None:
            parsed = {}  # whatever the unread end says wins over what was read
        return cls(tuple(words), tuple(warnings), unknown, parsed)

    def value(self, *names: str) -> str | None:
        """The value of the flag `names[0]` as the engine's parser reads it; None when not given.
        A name the parser does not hold (a dotted `--kv-transfer-config.kv_role`): the last of
        `names` given (`--flag v` or `--flag=v`), as vLLM gathers them."""
        dest = _dest(names[0])
        if dest in self.parsed or any(_dest(name) == dest for flags in VALUE_FLAGS.values() for name in flags):
            return self.parsed.get(dest)
        found = None
        for i, word in enumerate(self.words):
            for name in names:
                if word == name and i + 1 < len(self.words):
                    found = self.words[i + 1]
                elif word.startswith(name + "="):
                    found = word[len(name) + 1:]
        return found

    def known(self, name: str) -> bool:
        """Whether the flag `name`'s value (or its absence) is known."""
        return self.unknown is None or self.parsed.get(_dest(name)) is not None

    def switch(self, names: tuple[str, ...], negation: str) -> str | None:
        """A boolean flag: the word that turned it on when the last of `names` and `negation` given
        is one of `names`; None when off."""
        return self.parsed.get(_dest(names[0]))


def _parse(kind: EngineKind, words: list[str]) -> dict[str, str | None]:
    """The flags the hook reads, as argparse reads `words`; raises _Refused where argparse would."""
    if kind is EngineKind.VLLM:
        words = _without_dotted(words)
    try:
        namespace, _ = _parser(kind).parse_known_args(words)
    except argparse.ArgumentError as exc:
        raise _Refused(str(exc)) from None
    return {dest: value for dest, value in vars(namespace).items()}


def _without_dotted(words: list[str]) -> list[str]:
    """vLLM's parser takes the dotted words (`--kv-transfer-config.kv_role X`) and their values out
    before argparse sees them (EngineArgs.value reads them from `words`)."""
    out: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        if word.startswith("-") and not (word.startswith("--") and "." not in word):
            name = word.split("=", 1)[0]
            if "." in name:
                skip = "=" not in word
                continue
        out.append(word)
    return out


def _canonical(word: str) -> str:
    """vLLM's spelling rule: underscores in a long flag's name become dashes, up to its first '.'."""
    if not word.startswith("--"):
        return word
    return _NAME_UP_TO_DOT.sub(lambda m: m.group(0).replace("_", "-"), word, count=1)


def _config_words(path: str, cwd: str | None, negations: set[str]) -> list[str]:
    """The config file's flags as the engines turn them into words (vLLM's load_config_file);
    ValueError, in one line, when it cannot be read as the engine reads it."""
    if path.split(".")[-1] not in ("yaml", "yml"):
        raise ValueError("not a .yaml/.yml file (the engine refuses it)")
    # Imported here: PyYAML costs ~13 ms to import, and only an engine with --config needs it.
    from modeldrain.hook.engine_config import MAX_CONFIG_FILE_BYTES, ConfigUnreadable, config_words, load_config

    full = os.path.join(cwd, path) if cwd is not None and not os.path.isabs(path) else path
    try:
        text = read_small_file(full, MAX_CONFIG_FILE_BYTES).decode("utf-8")
        return config_words(load_config(text), negations)
    except (SmallFileError, ConfigUnreadable) as exc:
        raise ValueError(str(exc)) from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 ({exc.reason} at byte {exc.start})") from None
