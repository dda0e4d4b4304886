"""Every ``skiplock`` command's ``--help`` reads well: nothing truncated, no reStructuredText,
``--url`` shown in place of APP, every default shown, durations and times said in words.

Walks the real command tree, so a command added later is held to the same rules."""

from __future__ import annotations

import re
from collections.abc import Iterator

import click
import pytest
from click.testing import CliRunner

from skiplock._cli import main
from skiplock._cli.support import AppCommand, Seconds


def commands(command: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    if isinstance(command, click.Group):
        for name, sub in sorted(command.commands.items()):
            yield from commands(sub, (*path, name))


def lookup(path: tuple[str, ...]) -> click.Command:
    command: click.Command = main
    for name in path:
        assert isinstance(command, click.Group)
        command = command.commands[name]
    return command


PATHS = list(commands(main))
UNSET = getattr(click.core, "UNSET", None)
"""click 8.2+ marks "no default" with a sentinel, not None."""


def help_text(path: tuple[str, ...]) -> str:
    result = CliRunner().invoke(main, [*path, "--help"], terminal_width=80)
    assert result.exit_code == 0, result.output
    return result.output


def test_the_walk_finds_every_command() -> None:
    names = {" ".join(p) for p in PATHS}
    assert {"job list", "dead requeue", "workers", "prune", "task list", "worker"} <= names


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "skiplock")
def test_help_reads_well(path: tuple[str, ...]) -> None:
    text = help_text(path)
    usage = text.splitlines()[0]
    body = text.replace(usage, "")
    assert "..." not in re.sub(r"\[(ARGS|IDS)\]\.\.\.", "", body), text  # no cut-off summary
    assert "``" not in text and not re.search(r"::$", text, re.MULTILINE), text  # no RST
    command = lookup(path)
    if isinstance(command, AppCommand):
        assert "(APP | --url URL)" in usage, usage
    for param in command.params:
        if not isinstance(param, click.Option) or param.hidden or param.name == "help":
            continue
        flag = param.opts[0]
        assert (param.help or "").strip(), f"{' '.join(path)} {flag}: no help"
        default = param.get_default(click.Context(command), call=False)
        # an empty string is "not set" (its help says what happens then), not a default
        defaulted = default not in (None, UNSET, "") and not (param.is_flag and not default)
        if defaulted:
            assert param.show_default, f"{' '.join(path)} {flag}: default not shown"
        if isinstance(param.type, Seconds) or (
            isinstance(param.type, click.types.FloatParamType) and _a_duration(flag)
        ):
            assert "SECONDS" in param.make_metavar(click.Context(command)), flag
            if isinstance(default, float) and default >= 3600:  # 28800.0 is not read at a glance
                said = f"{param.help} {param.show_default}"
                assert re.search(r"\d+ (hour|day)s?\b", said), f"{flag}: {default} s in words"
        if isinstance(param.type, click.DateTime):
            assert "UTC" in (param.help or "") and "e.g." in (param.help or ""), flag
            assert param.metavar and "%" not in param.metavar, flag


def _a_duration(flag: str) -> bool:
    words = ("interval", "timeout", "delay", "lease", "retention", "age", "grace", "window")
    return any(w in flag for w in words)
