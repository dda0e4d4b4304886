"""Reading the documentation site's pages for tests/test_docs.py: fenced code blocks, the
directives that steer how they run, and the ``skiplock`` command lines they show.

Directives are HTML comments, invisible on the rendered page:

- ``<!-- docs-test: skip REASON -->`` right above a fence: the block is only compiled (it needs
  something the suite cannot give it, which REASON names); an SQL block is not run.
- ``<!-- docs-test: file NAME -->`` right above a fence: the block is written to NAME in the
  page's working directory instead of being run (a module a shell block then uses).
- ``<!-- docs-test: run -->`` right above a shell fence: the block runs in bash.
- ``<!-- docs-test: postgres -->`` anywhere: the page runs with ``SKIPLOCK_DATABASE_URL``
  naming a fresh PostgreSQL database on the test server.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import click

DOCS = Path(__file__).resolve().parent.parent / "docs"

_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,})(?P<info>[^`\n]*)$")
_DIRECTIVE = re.compile(r"^\s*<!--\s*docs-test:\s*(?P<verb>[a-z-]+)\s*(?P<arg>.*?)\s*-->\s*$")
SHELLS = {"sh", "bash", "console", "shell"}


@dataclass(frozen=True)
class Block:
    """One fenced code block: its language, its text, the line its code starts on (1-based)
    and the directive written right above it, if any."""

    lang: str
    code: str
    line: int
    directive: str = ""
    argument: str = ""


def page_blocks(path: Path) -> list[Block]:
    """Every fenced block of a page, in order (indented fences, as in lists, included)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opened = _FENCE.match(lines[i])
        if opened is None:
            i += 1
            continue
        indent, fence = len(opened["indent"]), opened["fence"]
        lang = opened["info"].strip().split(" ")[0].lstrip(".{").rstrip("}")
        directive = _DIRECTIVE.match(lines[i - 1]) if i else None
        start, body = i + 1, []
        i += 1
        while i < len(lines) and lines[i].strip() != fence:
            body.append(lines[i][indent:])
            i += 1
        i += 1
        blocks.append(
            Block(
                lang=lang,
                code="\n".join(body) + "\n",
                line=start + 1,
                directive=directive["verb"] if directive else "",
                argument=directive["arg"] if directive else "",
            )
        )
    return blocks


def page_directives(path: Path) -> set[str]:
    """The page-wide directives (``postgres``) a page declares anywhere in it."""
    found = (_DIRECTIVE.match(line) for line in path.read_text(encoding="utf-8").splitlines())
    return {m["verb"] for m in found if m is not None and m["verb"] in {"postgres"}}


def command_lines(block: Block) -> list[str]:
    """The ``skiplock ...`` invocations in a shell block (a leading ``$ `` and trailing
    comments dropped, backslash continuations joined)."""
    joined = block.code.replace("\\\n", " ")
    found = []
    for raw in joined.splitlines():
        line = raw.strip().removeprefix("$ ")
        if line.startswith("skiplock ") or line == "skiplock":
            found.append(line.split("  #")[0].split(" # ")[0].strip())
    return found


def inline_command_lines(path: Path) -> list[str]:
    """The ``skiplock ...`` commands quoted in a page's prose (inline code outside fences),
    except those that list alternatives (``dead list/requeue``, ``queue pause|resume``)."""
    prose = re.sub(
        r"^ *(`{3,}).*?^ *\1 *$", "", path.read_text(encoding="utf-8"), flags=re.S | re.M
    )
    spans = re.findall(r"`(skiplock [^`]+)`", prose)
    return [s for s in spans if not any(mark in s for mark in ("/", "|", "…", "..."))]


def check_command_line(root: click.Group, line: str) -> str | None:
    """Why ``line`` is not a command the CLI has (unknown subcommand or option), else None."""
    words = shlex.split(line)[1:]
    command: click.Command = root
    path = ["skiplock"]
    while isinstance(command, click.Group) and words and not words[0].startswith("-"):
        name = words.pop(0)
        sub = command.commands.get(name)
        if sub is None:
            return f"`{' '.join(path)}` has no command {name!r}"
        command, path = sub, [*path, name]
    if isinstance(command, click.Group) and not words:
        return None  # a group alone prints its help
    known = {"--help"}
    for param in command.params:
        if isinstance(param, click.Option):
            known.update(param.opts)
            known.update(param.secondary_opts)
    for word in words:
        if word.startswith("-") and word != "-":
            flag = word.split("=", 1)[0]
            if flag not in known:
                return f"`{' '.join(path)}` has no option {flag!r}"
    return None


def all_commands(root: click.Group) -> dict[str, list[str]]:
    """Every leaf command's full name (``skiplock job show``...) and its long options."""
    found: dict[str, list[str]] = {}

    def walk(command: click.Command, path: list[str]) -> None:
        if isinstance(command, click.Group):
            for name, sub in sorted(command.commands.items()):
                walk(sub, [*path, name])
        else:
            found[" ".join(path)] = [
                flag
                for param in command.params
                if isinstance(param, click.Option)
                for flag in (*param.opts, *param.secondary_opts)
                if flag.startswith("--")
            ]

    walk(root, ["skiplock"])
    return found
