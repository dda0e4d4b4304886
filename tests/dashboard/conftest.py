"""A live dashboard for the browser tests: the real ``skiplock dashboard`` command serving
tests/apps/dash_app.py on a real database (a SQLite file, then a PostgreSQL schema), signed
in through HTTP basic as a viewer, an operator and an admin, with a real ``skiplock worker``
started when a test needs one; and one Chromium (Debian's, through Playwright) per module.

Screenshots go to a temporary folder, or to ``$SKIPLOCK_SCREENSHOTS`` when set (``make
screenshots`` sets it to docs/images: the pictures in the docs are these).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

import skiplock
from skiplock.dashboard import hash_password

from ..apps import dash_app
from ..conftest import PG_URL
from ..helpers import await_until, free_port, pg_admin, wait_until

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.apps.dash_app:app"
CHROMIUM = os.environ.get("SKIPLOCK_TEST_CHROMIUM", "/usr/bin/chromium")
PASSWORDS = {"vera": "viewer", "otto": "operator", "ada": "admin"}
"""User name -> role; each one's password is its name reversed."""


class Stack:
    """The database, the dashboard process, and (on demand) a worker process."""

    def __init__(self, url: str, tmp: Path) -> None:
        self.url, self.tmp = url, tmp
        self.flag = tmp / "gateway-up"
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.env = {
            **os.environ,
            "SKIPLOCK_DATABASE_URL": url,
            "SKIPLOCK_TEST_FLAG": str(self.flag),
            "SKIPLOCK_TEST_LOG": str(tmp / "jobs.log"),
            # the tests' apps, then the test run's own path (PYTHONPATH=src: this tree's
            # skiplock, not the one a venv's editable install points at), as helpers.Cli does
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
            ),
        }
        self.app = skiplock.App(url)
        self.app.tasks.update(dash_app.app.tasks)  # the served app's, on this database
        self.app.schedules.update(dash_app.app.schedules)

    def run(self, coro: Any) -> Any:
        """Run a coroutine on the test's app, on a fresh loop in a thread of its own (the
        main thread's loop belongs to Playwright's sync API); the app reopens each time."""

        async def closing() -> Any:
            try:
                return await coro
            finally:
                await self.app.close()

        with ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, closing()).result()

    @staticmethod
    def run_alone(coro: Any) -> Any:
        with ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, coro).result()

    def users_file(self) -> Path:
        path = self.tmp / "users.toml"
        lines = [
            f'[users.{name}]\nrole = "{role}"\npassword = "{hash_password(name[::-1])}"\n'
            for name, role in PASSWORDS.items()
        ]
        path.write_text("\n".join(lines))
        return path

    def start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        with (self.tmp / f"{name}.out").open("wb") as log:  # the child keeps its own copy
            proc = subprocess.Popen(
                [sys.executable, "-m", "skiplock", *args],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.procs[name] = proc
        return proc

    def start_dashboard(self) -> None:
        users = self.users_file()
        self.start(
            "dashboard",
            "dashboard",
            APP,
            "--port",
            str(self.port),
            "--users",
            str(users),
            "--refresh",
            "0.5",
            "--sample-every",
            "1",
        )

        def up() -> bool:
            if self.procs["dashboard"].poll() is not None:
                raise AssertionError(self.output("dashboard"))
            try:
                with urllib.request.urlopen(f"{self.base}/static/dashboard.css", timeout=1):
                    return True
            except (urllib.error.URLError, OSError):
                return False

        wait_until(up, "the dashboard to listen")

    def start_worker(self) -> None:
        if "worker" not in self.procs:
            self.start(
                "worker",
                "worker",
                APP,
                "--queues",
                "work",
                "--concurrency",
                "4",
                "--poll-interval",
                "0.2",
            )

    def output(self, name: str) -> str:
        return (self.tmp / f"{name}.out").read_text(errors="replace")

    def stop(self) -> None:
        for proc in self.procs.values():
            proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp(f"dash-{request.param}")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    if request.param == "sqlite":
        url = f"sqlite:///{tmp / 'jobs.db'}"
    else:
        Stack.run_alone(pg_admin(f'CREATE SCHEMA "{schema}"'))
        url = f"{PG_URL}{'&' if '?' in PG_URL else '?'}schema={schema}"
    the_stack = Stack(url, tmp)
    the_stack.run(the_stack.app.migrate())
    the_stack.start_dashboard()
    try:
        yield the_stack
    finally:
        the_stack.stop()
        if request.param == "postgres":
            Stack.run_alone(pg_admin(f'DROP SCHEMA "{schema}" CASCADE'))


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One Chromium for the module's tests (both databases). Not per session: while
    Playwright's sync API runs, the main thread counts as inside an event loop, which
    would break every async test after it."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (.ci/run does it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where screenshots go: $SKIPLOCK_SCREENSHOTS (docs/images), else a temporary folder."""
    target = os.environ.get("SKIPLOCK_SCREENSHOTS")
    path = Path(target) if target else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


class Pages:
    """Opens a signed-in page as a given user (or as nobody)."""

    def __init__(self, browser: Any, stack: Stack) -> None:
        self.browser, self.stack = browser, stack
        self.contexts: list[Any] = []

    def as_user(self, name: str | None, *, dark: bool = False) -> Any:
        credentials = {"username": name, "password": name[::-1]} if name else None
        context = self.browser.new_context(
            base_url=self.stack.base,
            http_credentials=credentials,
            viewport={"width": 1280, "height": 760},
            color_scheme="dark" if dark else "light",
        )
        self.contexts.append(context)
        page = context.new_page()
        page.on("dialog", lambda dialog: dialog.accept())  # data-confirm's window.confirm
        return page

    def close(self) -> None:
        for context in self.contexts:
            context.close()


@pytest.fixture
def pages(browser: Any, stack: Stack) -> Iterator[Pages]:
    opened = Pages(browser, stack)
    try:
        yield opened
    finally:
        opened.close()


def save(page: Any, shots: Path, name: str, stack: Stack, *, full_page: bool = True) -> None:
    """A screenshot per page; the SQLite run's are the ones kept for the docs."""
    if "sqlite" in stack.url:
        page.screenshot(path=str(shots / f"dashboard-{name}.png"), full_page=full_page)


# -- speaking to a served dashboard (test_security, test_floods, test_refusals) ------------


def raw(port: int, path: str, headers: dict[str, str], method: str = "GET") -> tuple[int, str]:
    """One HTTP/1.1 request with exactly these headers; the status and the whole answer."""
    lines = [f"{method} {path} HTTP/1.1", *(f"{k}: {v}" for k, v in headers.items())]
    lines += ["Connection: close", "Content-Length: 0", "", ""]
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall("\r\n".join(lines).encode("latin-1"))
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    answer = b"".join(chunks).decode("utf-8", errors="replace")
    return int(answer.split(" ", 2)[1]), answer


def basic(name: str) -> str:
    return "Basic " + base64.b64encode(f"{name}:{name[::-1]}".encode()).decode()


class Server:
    """A ``skiplock dashboard`` process with the given options, on a migrated SQLite file."""

    def __init__(
        self, stack: Stack, name: str, *options: str, tls: ssl.SSLContext | None = None, **env: str
    ) -> None:
        self.stack, self.name, self.tls = stack, name, tls
        self.port = free_port()
        saved = stack.env
        stack.env = {**saved, **env}
        try:
            self.proc = stack.start(name, "dashboard", APP, "--port", str(self.port), *options)
        finally:
            stack.env = saved
        wait_until(self._up, f"the {name} dashboard to listen")

    def _up(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(self.stack.output(self.name))
        scheme = "https" if self.tls else "http"
        url = f"{scheme}://127.0.0.1:{self.port}/static/dashboard.css"
        try:
            with urllib.request.urlopen(url, timeout=1, context=self.tls):
                return True
        except (urllib.error.URLError, OSError):
            return False

    def get(self, path: str, **headers: str) -> tuple[int, str]:
        return raw(self.port, path, {"Host": f"127.0.0.1:{self.port}", **headers})

    def log(self) -> str:
        return self.stack.output(self.name)


@contextlib.asynccontextmanager
async def serving(web: Any) -> AsyncIterator[httpx.AsyncClient]:
    """uvicorn serving ``web`` on a real socket in this test's loop, and a client of it."""
    port = free_port()
    config = uvicorn.Config(web, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    await await_until(lambda: server.started, "uvicorn to listen")
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            yield client
    finally:
        server.should_exit = True
        await task


def credentials(name: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{name}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


async def form_token(client: httpx.AsyncClient, headers: dict[str, str], path: str = "/") -> str:
    page = (await client.get(path, headers=headers)).text
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert found, page[-500:]
    return found.group(1)


__all__ = [
    "Pages",
    "Server",
    "Stack",
    "basic",
    "credentials",
    "form_token",
    "raw",
    "save",
    "serving",
    "shutil",
    "wait_until",
]
