"""The documentation site cannot lie: every Python block of its guides runs, every SQL block
of every page runs on PostgreSQL, every ``skiplock`` command line it shows exists, and every
public name and CLI command has a reference entry.

A page's Python blocks run in order in one namespace, as a reader would type them, in a fresh
working directory: on a SQLite file there, and, on a page marked ``<!-- docs-test: postgres
-->``, with ``SKIPLOCK_DATABASE_URL`` naming a database of its own on the test server. Blocks
with top-level ``await`` run on the page's one event loop. Tracebacks name the page and the
line of the Markdown file. The directives are described in ``tests/docs_blocks.py``.

A page's SQL blocks (```` ```sql ````) run in order on one PostgreSQL connection, in a
transaction rolled back at the end (so a block may create roles: none outlives the test), in a
database of their own where skiplock's tables are in the schema ``skiplock`` (on the
connection's search path), holding jobs in every state. A block may not end or begin a
transaction itself.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import os
import re
import subprocess
import sys
import types
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import markdown
import pytest

import skiplock
from skiplock._cli import main as cli

from .backends.helpers import seed_every_state
from .conftest import PG_URL
from .docs_blocks import (
    DOCS,
    SHELLS,
    Block,
    all_commands,
    check_command_line,
    command_lines,
    inline_command_lines,
    page_blocks,
    page_directives,
)

# Pages whose Python is run. The rest (design notes, benchmarks, Django, which needs Django 6
# on Python 3.12 and has its own suite in tests/django) are compiled only.
EXECUTED_DIRS = ("getting-started", "concepts", "guides", "operations", "coming-from")
PAGES = sorted(DOCS.rglob("*.md"))


def _name(page: Path) -> str:
    return str(page.relative_to(DOCS))


def _executed(page: Path) -> bool:
    parts = page.relative_to(DOCS).parts
    return parts[0] in EXECUTED_DIRS or parts == ("index.md",)


RUN_PAGES = [
    p
    for p in PAGES
    if _executed(p)
    and any(
        b.lang == "python" or (b.lang in SHELLS and b.directive == "run") for b in page_blocks(p)
    )
]
SQL_PAGES = [p for p in PAGES if any(b.lang == "sql" for b in page_blocks(p))]
TRANSACTION_CONTROL = re.compile(r"^\s*(BEGIN|START|COMMIT|END|ROLLBACK)\b", re.M | re.I)


def _compile(block: Block, page: Path) -> Any:
    """The block's code, padded so its line numbers are the Markdown file's."""
    source = "\n" * (block.line - 1) + block.code
    return compile(source, str(page), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


@pytest.fixture
def page_database(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """A fresh PostgreSQL database for a page that asks for one (dropped after), else None."""
    page: Path = request.param
    if "postgres" not in page_directives(page):
        yield None
        return
    name = f"docs_{uuid.uuid4().hex[:12]}"
    asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    base = PG_URL.split("?")[0].rsplit("/", 1)[0]
    try:
        yield f"{base}/{name}"
    finally:
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


async def _admin(statement: str) -> None:
    conn = await asyncpg.connect(PG_URL)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


@pytest.mark.parametrize(
    ("page", "page_database"),
    [(p, p) for p in RUN_PAGES],
    ids=map(_name, RUN_PAGES),
    indirect=["page_database"],
)
@pytest.mark.slow
def test_page_examples_run(
    page: Path, page_database: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("SKIPLOCK_DATABASE_URL", raising=False)
    monkeypatch.delenv("SKIPLOCK_TEST_DATABASE_URL", raising=False)
    if page_database is not None:
        monkeypatch.setenv("SKIPLOCK_DATABASE_URL", page_database)
    # the page's namespace is a module's, as a reader's script would be: a dataclass looks
    # its module up in sys.modules (the blocks' annotations are strings, as here)
    page_module = types.ModuleType(f"docs_{page.stem.replace('-', '_')}")
    monkeypatch.setitem(sys.modules, page_module.__name__, page_module)
    namespace: dict[str, Any] = vars(page_module)
    blocks = page_blocks(page)
    modules = [Path(b.argument).stem for b in blocks if b.directive == "file"]
    with asyncio.Runner() as runner:
        try:
            for block in blocks:
                _run_block(block, page, namespace, runner, tmp_path)
        finally:
            written = [sys.modules.pop(m) for m in modules if m in sys.modules]
            made = [*namespace.values(), *(v for m in written for v in vars(m).values())]
            _close_apps(made, runner)


def _run_block(
    block: Block, page: Path, namespace: dict[str, Any], runner: asyncio.Runner, cwd: Path
) -> None:
    if block.directive == "file":
        (cwd / block.argument).write_text(block.code, encoding="utf-8")
    elif block.lang in SHELLS and block.directive == "run":
        _run_shell(block, page, cwd)
    elif block.lang == "python" and block.directive == "skip":
        _compile(block, page)
    elif block.lang == "python":
        code = _compile(block, page)
        if code.co_flags & inspect.CO_COROUTINE:
            runner.run(eval(code, namespace))
        else:
            exec(code, namespace)


def _run_shell(block: Block, page: Path, cwd: Path) -> None:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.code],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, (
        f"{_name(page)}:{block.line}: shell block exited {done.returncode}\n"
        f"{done.stdout}\n{done.stderr}"
    )


def _close_apps(values: list[Any], runner: asyncio.Runner) -> None:
    """Close every App the page made, on its loop and on its sync bridge's loop: the page's
    own names, the modules it wrote, and the app of each task it imported (an enqueue on a
    caller's connection opens the task's app: left open, its pool outlived the loop and the
    collector warned at some later test's teardown)."""
    found = [v for v in values if isinstance(v, skiplock.App)]
    found += [v.app for v in values if isinstance(v, skiplock.Task)]
    for app in {id(a): a for a in found}.values():
        runner.run(app.close())
        loop = app._sync_loop
        if loop is not None:
            asyncio.run_coroutine_threadsafe(app.close(), loop).result(timeout=30)
            loop.call_soon_threadsafe(loop.stop)


@pytest.fixture(scope="module")
def sql_database() -> Iterator[str]:
    """A database of its own with skiplock's tables in the schema ``skiplock``, holding jobs in
    every state (dropped after)."""
    name = f"docs_sql_{uuid.uuid4().hex[:12]}"
    asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    base = PG_URL.split("?")[0].rsplit("/", 1)[0]
    url = f"{base}/{name}"
    try:
        asyncio.run(_seeded(f"{url}?schema=skiplock"))
        yield url
    finally:
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


async def _seeded(url: str) -> None:
    app = skiplock.App(url)
    try:
        await app.migrate()
        await seed_every_state(app)
    finally:
        await app.close()


@pytest.mark.parametrize("page", SQL_PAGES, ids=map(_name, SQL_PAGES))
@pytest.mark.slow
def test_page_sql_runs(page: Path, sql_database: str) -> None:
    asyncio.run(_run_sql(page, sql_database))


async def _run_sql(page: Path, url: str) -> None:
    conn = await asyncpg.connect(url, server_settings={"search_path": "skiplock, public"})
    try:
        transaction = conn.transaction()
        await transaction.start()
        try:
            for block in page_blocks(page):
                if block.lang != "sql" or block.directive == "skip":
                    continue
                assert not TRANSACTION_CONTROL.search(block.code), (
                    f"{_name(page)}:{block.line}: an SQL block runs inside the test's "
                    "transaction: it may not begin or end one"
                )
                try:
                    await conn.execute(block.code)
                except asyncpg.PostgresError as exc:
                    raise AssertionError(f"{_name(page)}:{block.line}: {exc}") from exc
        finally:
            await transaction.rollback()
    finally:
        await conn.close()


@pytest.mark.parametrize("page", PAGES, ids=map(_name, PAGES))
def test_every_python_block_compiles(page: Path) -> None:
    for block in page_blocks(page):
        if block.lang == "python":
            _compile(block, page)


@pytest.mark.parametrize("page", PAGES, ids=map(_name, PAGES))
def test_shell_blocks_name_real_commands_and_options(page: Path) -> None:
    wrong = [
        f"{_name(page)}:{block.line}: {line}: {why}"
        for block in page_blocks(page)
        if block.lang in SHELLS
        for line in command_lines(block)
        if (why := check_command_line(cli, line)) is not None
    ]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("page", PAGES, ids=map(_name, PAGES))
def test_commands_quoted_in_prose_exist(page: Path) -> None:
    wrong = [
        f"{_name(page)}: `{line}`: {why}"
        for line in inline_command_lines(page)
        if (why := check_command_line(cli, line)) is not None
    ]
    assert not wrong, "\n".join(wrong)


def test_cli_reference_documents_every_command() -> None:
    """The CLI page renders the click tree itself (mkdocs-click): every command gets its own
    heading, and every option of the command appears in that command's section."""
    html = markdown.markdown(
        (DOCS / "operations" / "cli.md").read_text(encoding="utf-8"),
        extensions=["attr_list", "mkdocs-click"],
    )
    sections = dict(
        re.findall(r'<h\d[^>]*id="([^"]+)"[^>]*>[^<]*</h\d>(.*?)(?=<h\d|\Z)', html, re.S)
    )
    wrong = []
    for name, options in all_commands(cli).items():
        section = sections.get(name.replace(" ", "-"))
        if section is None:
            wrong.append(f"{name}: no heading")
            continue
        wrong += [f"{name}: {flag} not shown" for flag in options if flag not in section]
    assert not wrong, "operations/cli.md misses:\n" + "\n".join(wrong)


def test_api_reference_documents_every_public_name() -> None:
    text = (DOCS / "reference" / "skiplock.md").read_text(encoding="utf-8")
    missing = [
        name
        for name in skiplock.__all__
        if f"::: skiplock.{name}\n" not in text and f"        - {name}\n" not in text
    ]
    assert not missing, f"public names missing from reference/skiplock.md: {missing}"


def test_django_reference_documents_every_export() -> None:
    """``skiplock.contrib.django`` resolves its names lazily (no Django needed to read them):
    each must be rendered from the module that defines it."""
    from skiplock.contrib import django as contrib_django

    text = (DOCS / "reference" / "django.md").read_text(encoding="utf-8")
    missing = [
        name
        for name, module in contrib_django._EXPORTS.items()
        if f"::: skiplock.contrib.django{module}.{name}\n" not in text
    ]
    assert not missing, f"skiplock.contrib.django names missing from reference/django.md: {missing}"
