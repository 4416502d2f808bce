"""An engine's flags as its own argument parser reads them, for the few flags the hook uses.

vLLM and SGLang parse their argv with argparse, so for a flag given twice the last one wins,
and `--flag value` and `--flag=value` mean the same. vLLM's FlexibleArgumentParser also turns
underscores into dashes in a flag's name (up to its first '.': `--max_model_len`), and both
engines read `--config FILE` (a YAML file of flags, exactly the word `--config` followed by the
path) as if its flags came first on the command line: the command line overrides the file.

Underscores are accepted for SGLang too: where SGLang would refuse the spelling it does not
start, and then nothing the hook reads of it matters. What is not followed, and where a warning
says so: argparse's abbreviations (`--por 9000` for `--port`: which are unique depends on the
engine's full flag set), SGLang's SGLANG_CONFIG environment variable, and config file values the
bounded reader cannot follow (hook.flat_yaml).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

from modeldrain.hook.files import SmallFileError, read_small_file

CONFIG_FLAG = "--config"
# The flags the hook reads of an engine's argv: where it serves, and which role it has.
READ_FLAGS = ("--port", "--host", "--uds", "--ssl-certfile", "--disaggregation-mode",
              "--data-parallel-external-lb", "--data-parallel-hybrid-lb", "--kv-transfer-config")
_NAME_UP_TO_DOT = re.compile(r"(?<=^--)[^.=]*")


@dataclass(frozen=True)
class EngineArgs:
    """The engine's flags in the order its parser sees them (the config file's first), names
    with dashes; `warnings` says what of them could not be followed."""

    words: tuple[str, ...]
    warnings: tuple[str, ...] = ()

    @classmethod
    def read(cls, argv: list[str], cwd: str | None = None) -> "EngineArgs":
        """`argv` as /proc shows it; `cwd`: where a relative --config path is found (the
        engine's own working directory, /proc/PID/cwd), None for this process's."""
        warnings: list[str] = []
        words = [_canonical(word) for word in argv]
        if words.count(CONFIG_FLAG) > 1:
            warnings.append("the engine's argv names --config more than once (the engine refuses that): "
                            "its config files are not read")
        elif CONFIG_FLAG in words:
            at = words.index(CONFIG_FLAG)
            path = words[at + 1] if at + 1 < len(words) else None
            del words[at:at + 2]
            if path is not None:
                words = _config_words(path, cwd, warnings) + words
        warnings += _abbreviations(words)
        return cls(tuple(words), tuple(warnings))

    def value(self, *names: str) -> str | None:
        """The value of the last of `names` given (`--flag v` or `--flag=v`); None when none is."""
        found = None
        for i, word in enumerate(self.words):
            for name in names:
                if word == name and i + 1 < len(self.words):
                    found = self.words[i + 1]
                elif word.startswith(name + "="):
                    found = word[len(name) + 1:]
        return found

    def switch(self, names: tuple[str, ...], negation: str) -> str | None:
        """A boolean flag (argparse's BooleanOptionalAction): the word of `names` that turned it
        on when the last of `names` and `negation` given is one of `names`; None when off."""
        state = None
        for word in self.words:
            if word in names:
                state = word
            elif word == negation:
                state = None
        return state


def _canonical(word: str) -> str:
    """vLLM's spelling rule: underscores in a long flag's name become dashes, up to its first '.'."""
    if not word.startswith("--"):
        return word
    return _NAME_UP_TO_DOT.sub(lambda m: m.group(0).replace("_", "-"), word, count=1)


def _config_words(path: str, cwd: str | None, warnings: list[str]) -> list[str]:
    """The config file's flags as the engines turn them into words (vLLM's load_config_file)."""
    # Imported here: its patterns cost ~1.4 ms to compile, and only an engine with --config needs them.
    from modeldrain.hook.flat_yaml import MAX_CONFIG_FILE_BYTES, FlatYamlError, Unfollowed, parse_flat_mapping

    full = os.path.join(cwd, path) if cwd is not None and not os.path.isabs(path) else path
    if not path.endswith((".yaml", ".yml")):
        warnings.append(f"the engine's --config {path} is not a .yaml/.yml file (the engine refuses it): not read")
        return []
    try:
        text = read_small_file(full, MAX_CONFIG_FILE_BYTES).decode("utf-8")
        entries = parse_flat_mapping(text)
    except (SmallFileError, UnicodeDecodeError, FlatYamlError) as exc:
        warnings.append(f"the engine's --config {path} is not read ({exc}): the flags it sets are not known")
        return []
    words: list[str] = []
    for key, value in entries.items():
        flag = _canonical("--" + key)
        if isinstance(value, Unfollowed):
            if flag in READ_FLAGS:
                warnings.append(f"the engine's --config {path}: {key} not followed ({value.why})")
            continue
        if isinstance(value, bool):
            words.append(flag if value else "--no-" + flag[2:])
        elif isinstance(value, list):
            words += [flag, *(str(item) for item in value)] if value else []
        elif isinstance(value, dict):
            words += [flag, json.dumps(value)]
        else:
            words += [flag, str(value)]
    return words


def _abbreviations(words: list[str]) -> list[str]:
    """A word argparse may take for one of the flags the hook reads (a unique prefix of it)."""
    found = []
    for word in words:
        name = word.split("=", 1)[0]
        if len(name) > 3 and name not in READ_FLAGS:
            for flag in READ_FLAGS:
                if flag.startswith(name):
                    found.append(f"the engine's argv has {name}, which its parser may take for {flag}: "
                                 "abbreviations are not followed")
    return found
