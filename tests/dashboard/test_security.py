"""The dashboard against a hostile network: the real ``skiplock dashboard`` command on a real
socket, spoken to byte for byte (a raw socket writes the Host and X-Forwarded-For headers a
browser or httpx would never send)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import html
import re
import socket
import ssl
import subprocess
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from click.testing import CliRunner

import skiplock
from skiplock._cli import main
from skiplock.dashboard import auth as auth_module
from skiplock.dashboard import basic_auth, create_app, hash_password

from ..helpers import await_until, free_port
from .conftest import APP, Stack, wait_until


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


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("dash-security")
    the_stack = Stack(f"sqlite:///{tmp / 'jobs.db'}", tmp)
    the_stack.run(the_stack.app.migrate())
    try:
        yield the_stack
    finally:
        the_stack.stop()


@pytest.fixture(scope="module")
def signed(stack: Stack) -> Server:
    """HTTP basic with the three users (any Host: the Host allow-list is tested apart)."""
    users = stack.users_file()
    return Server(stack, "signed", "--users", str(users), "--allowed-host", "*")


def test_a_host_header_cannot_make_a_page_look_like_a_static_file(signed: Server) -> None:
    # starlette before 1.0.1 rebuilt request.url.path from this Host as "/static/": the guard
    # skipped sign-in and the page ran its queries (and failed on the missing user: a 500)
    status, answer = raw(signed.port, "/jobs", {"Host": "a/static/?x="})
    assert status == 401, answer
    assert "Sign in" in answer
    status, _ = raw(signed.port, "/jobs", {"Host": "a/static/?x=", "Authorization": basic("vera")})
    assert status == 200
    status, answer = raw(signed.port, "/static/dashboard.css", {"Host": "a/static/?x="})
    assert status == 200 and "max-age" in answer


async def test_the_guard_decides_on_the_routed_path_even_where_the_url_lies(
    app_file: skiplock.App, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The installed Starlette no longer rebuilds request.url.path from Host, so the test above
    # passes whatever the guard reads. Here request.url is built as Starlette 0.37.2 built it
    # ("scheme://" + Host + path): the guard must still ask for a sign-in.
    from starlette.datastructures import URL
    from starlette.requests import HTTPConnection

    def host_built(self: HTTPConnection) -> URL:
        host = dict(self.scope["headers"]).get(b"host", b"").decode("latin-1")
        return URL(f"{self.scope.get('scheme', 'http')}://{host}{self.scope['path']}")

    monkeypatch.setattr(HTTPConnection, "url", property(host_built))
    auth = basic_auth({"vera": ("viewer", hash_password("arev"))})
    async with serving(create_app(app_file, auth=auth)) as client:
        lying = {"Host": "a/static/?x="}
        probe = await client.get("/", headers=lying)
        assert probe.url.path == "/"  # the path routed is the Overview's
        for path in ("/", "/jobs", "/dead", "/workers"):
            answer = await client.get(path, headers=lying)
            assert answer.status_code == 401, (path, answer.status_code, answer.text[:200])
        signed = await client.get("/jobs", headers={**lying, **credentials("vera", "arev")})
        assert signed.status_code == 200


SECRET = "proxy-secret-0123456789"


@pytest.fixture(scope="module")
def proxied(stack: Stack) -> Server:
    """Proxy sign-in from 127.0.0.1 with the shared secret; the default Host allow-list
    plus dash.example."""
    return Server(
        stack,
        "proxied",
        *("--proxy-header", "X-User", "--proxy-role-header", "X-Role"),
        *("--allowed-host", "dash.example"),
        SKIPLOCK_DASHBOARD_PROXY_SECRET=SECRET,
    )


def test_a_spoofed_forwarded_for_does_not_sign_in(stack: Stack) -> None:
    # the proxy is believed only from 10.9.8.7; the client is 127.0.0.1 and says otherwise
    server = Server(
        stack,
        "far-proxy",
        *("--proxy-header", "X-User", "--proxy-role-header", "X-Role"),
        *("--proxy-trusted", "10.9.8.7"),
        SKIPLOCK_DASHBOARD_PROXY_SECRET=SECRET,
        FORWARDED_ALLOW_IPS="*",  # uvicorn's own proxy headers would believe anyone
    )
    spoof = {"X-Forwarded-For": "10.9.8.7", "X-User": "mallory", "X-Role": "admin"}
    status, answer = server.get("/", **spoof, **{"X-Skiplock-Proxy-Secret": SECRET})
    assert status == 401, answer
    assert ">admin<" not in answer


def test_proxy_sign_in_behind_a_proxy_that_forwards_the_client_address(stack: Stack) -> None:
    # --proxy-headers (for https links behind a TLS proxy): uvicorn takes the client address
    # from X-Forwarded-For, which every proxy sets; the proxy is still the TCP peer, and that
    # is what --proxy-trusted is compared with (it refused every person before)
    server = Server(
        stack,
        "forwarding-proxy",
        *("--proxy-header", "X-User", "--proxy-role-header", "X-Role", "--proxy-headers"),
        SKIPLOCK_DASHBOARD_PROXY_SECRET=SECRET,
    )
    forwarded = {"X-Forwarded-For": "203.0.113.9", "X-Forwarded-Proto": "https"}
    who = {"X-User": "boss", "X-Role": "admin", **forwarded}
    status, page = server.get("/", **who, **{"X-Skiplock-Proxy-Secret": SECRET})
    assert status == 200, page
    assert ">admin<" in page and f'action="https://127.0.0.1:{server.port}/queues/' in page
    assert server.get("/", **who)[0] == 401  # the secret still decides
    assert "203.0.113.9" in server.log()  # the client address is the forwarded one


def test_a_forwarded_for_naming_the_proxy_is_not_the_proxy(stack: Stack) -> None:
    # with --proxy-headers a local client may write X-Forwarded-For (127.0.0.1 is a trusted
    # forwarder by default), and make the client address the proxy's: the TCP peer is not
    server = Server(
        stack,
        "far-forwarding-proxy",
        *("--proxy-header", "X-User", "--proxy-role-header", "X-Role", "--proxy-headers"),
        *("--proxy-trusted", "10.9.8.7"),
        SKIPLOCK_DASHBOARD_PROXY_SECRET=SECRET,
    )
    spoof = {"X-Forwarded-For": "10.9.8.7", "X-User": "mallory", "X-Role": "admin"}
    status, answer = server.get("/", **spoof, **{"X-Skiplock-Proxy-Secret": SECRET})
    assert status == 401, answer


def test_proxy_sign_in_needs_the_shared_secret(proxied: Server) -> None:
    who = {"X-User": "boss", "X-Role": "admin"}
    assert proxied.get("/", **who)[0] == 401
    assert proxied.get("/", **who, **{"X-Skiplock-Proxy-Secret": SECRET[:-1] + "?"})[0] == 401
    status, page = proxied.get("/", **who, **{"X-Skiplock-Proxy-Secret": SECRET})
    assert status == 200 and ">admin<" in page


def test_a_host_not_allowed_gets_400(proxied: Server) -> None:
    signed_in = {"X-User": "boss", "X-Skiplock-Proxy-Secret": SECRET}
    for host in ("evil.example", f"evil.example:{proxied.port}", "127.0.0.1.evil.example"):
        status, answer = raw(proxied.port, "/", {"Host": host, **signed_in})
        assert status == 400, (host, answer)
    for host in (f"localhost:{proxied.port}", "127.0.0.1", f"[::1]:{proxied.port}", "DASH.example"):
        assert raw(proxied.port, "/", {"Host": host, **signed_in})[0] == 200, host


def test_the_proxy_options_are_checked() -> None:
    runner = CliRunner(env={"SKIPLOCK_DASHBOARD_PROXY_SECRET": ""})
    for options, message in (
        (["--proxy-header", "X-User"], "Error: --proxy-header needs --proxy-secret"),
        (["--proxy-header", "X-User", "--proxy-secret", "short"], "at least 16 characters"),
        (["--proxy-secret", SECRET], "Error: --proxy-secret: only with --proxy-header"),
        (["--forwarded-allow-ips", "10.0.0.1"], "only with --proxy-headers"),
        (["--allowed-host", "dash.example:8080"], "without the port"),
    ):
        result = runner.invoke(main, ["dashboard", "tests.apps.dash_app:app", *options])
        assert result.exit_code == 2, (options, result.output)
        assert message in result.output.strip().splitlines()[-1], result.output


# -- sign-in: off the loop, the same work for unknown names, rate-limited ------------------


@pytest.fixture
async def app_file(tmp_path: Path) -> AsyncIterator[skiplock.App]:
    """A SQLite file, for what does not depend on the database (sign-in, TLS, the guard);
    what reads or changes jobs and queues (the audit trail, what a viewer sees, odd queue
    names, dead-letter verbs) uses the suite's ``app``, on both."""
    the_app = skiplock.App(f"sqlite:///{tmp_path / 'jobs.db'}")
    await the_app.migrate()
    yield the_app
    await the_app.close()


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


class HashSpy:
    """Counts scrypt calls and the thread each ran on (the real scrypt still runs)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.threads: list[threading.Thread] = []
        real = hashlib.scrypt

        def spy(*args: Any, **kwargs: Any) -> bytes:
            self.threads.append(threading.current_thread())
            return real(*args, **kwargs)

        monkeypatch.setattr(hashlib, "scrypt", spy)

    def take(self) -> int:
        count = len(self.threads)
        self.threads.clear()
        return count


async def test_bad_sign_ins_hash_in_threads_not_on_the_event_loop(
    app_file: skiplock.App, monkeypatch: pytest.MonkeyPatch
) -> None:
    auth = basic_auth({"vera": ("viewer", hash_password("arev"))})
    spy = HashSpy(monkeypatch)
    loop = asyncio.get_running_loop()
    gaps: list[float] = []
    flooding = asyncio.Event()

    async def probe() -> None:  # how long the loop goes without running this task
        last = loop.time()
        while not flooding.is_set():
            await asyncio.sleep(0.002)
            now = loop.time()
            gaps.append(now - last)
            last = now

    async with serving(create_app(app_file, auth=auth)) as client:
        ticker = asyncio.create_task(probe())
        bad = [client.get("/", headers=credentials("vera", f"guess{i}")) for i in range(8)]
        static = client.get("/static/dashboard.css")
        *answers, css = await asyncio.gather(*bad, static)
        flooding.set()
        await ticker
    assert [a.status_code for a in answers] == [401] * 8 and css.status_code == 200
    assert len(spy.threads) == 8
    assert threading.current_thread() not in spy.threads  # every hash ran off the loop's thread
    print(f"\n8 concurrent bad sign-ins: the loop's longest pause {max(gaps) * 1000:.1f} ms")


async def test_unknown_names_cost_a_hash_and_only_successes_are_remembered(
    app_file: skiplock.App, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    auth = basic_auth({"vera": ("viewer", hash_password("arev"))})
    spy = HashSpy(monkeypatch)
    async with serving(create_app(app_file, auth=auth)) as client:
        assert (await client.get("/", headers=credentials("vera", "wrong"))).status_code == 401
        assert spy.take() == 1
        assert (await client.get("/", headers=credentials("nobody", "wrong"))).status_code == 401
        assert spy.take() == 1  # as much work as a known name: no faster "no such user"
        assert (await client.get("/", headers=credentials("vera", "wrong"))).status_code == 401
        assert spy.take() == 1  # a failure is not remembered: each guess costs a hash
        for _ in range(2):
            assert (await client.get("/", headers=credentials("vera", "arev"))).status_code == 200
        assert spy.take() == 1  # a success is: once per person, not per page
        assert (await client.get("/")).status_code == 401
        assert spy.take() == 0  # no credentials at all: the challenge, no hash
    failed = [r.getMessage() for r in caplog.records if "failed sign-in" in r.getMessage()]
    assert failed == [
        "failed sign-in: 'vera' from client 127.0.0.1",
        "failed sign-in: 'nobody' from client 127.0.0.1",
        "failed sign-in: 'vera' from client 127.0.0.1",
    ]


async def test_failed_sign_ins_are_rate_limited_per_user_and_per_client(
    app_file: skiplock.App, monkeypatch: pytest.MonkeyPatch
) -> None:
    users = {n: ("viewer", hash_password(n[::-1])) for n in ("vera", "otto", "ada")}
    auth = basic_auth(users, failures_per_user=3, failures_per_client=5)
    spy = HashSpy(monkeypatch)
    async with serving(create_app(app_file, auth=auth)) as client:
        assert (await client.get("/", headers=credentials("ada", "ada"))).status_code == 200
        for i in range(3):
            assert (await client.get("/", headers=credentials("vera", f"x{i}"))).status_code == 401
        spy.take()
        for password in ("x3", "arev"):  # the right password too, until the window passes
            limited = await client.get("/", headers=credentials("vera", password))
            assert limited.status_code == 429
            assert 1 <= int(limited.headers["Retry-After"]) <= 60
            assert "too many failed sign-ins" in limited.text
        assert spy.take() == 0  # refused before any hash
        for i in range(2):  # otto's own count is fine; the client's reaches 5
            assert (await client.get("/", headers=credentials("otto", f"y{i}"))).status_code == 401
        assert (await client.get("/", headers=credentials("otto", "otto"))).status_code == 429
        # someone already signed in from there is not locked out by the guesses
        assert (await client.get("/", headers=credentials("ada", "ada"))).status_code == 200
    with pytest.raises(skiplock.ConfigurationError, match="failures_per_user 0"):
        basic_auth(users, failures_per_user=0)
    with pytest.raises(skiplock.ConfigurationError, match="window_s nan"):
        basic_auth(users, window_s=float("nan"))


async def test_guesses_from_elsewhere_never_lock_a_person_out(
    app_file: skiplock.App, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attack as it was run: a stranger sends bad guesses for ``vic`` all the time; once
    that made ``vic``'s own sign-in fail 11 times in 12. Now ``vic`` signs in every time
    (each check slowed while the guessing lasts), and the stranger is the one refused."""
    # the pause's length, not its use (raising=False: a release without it fails below)
    monkeypatch.setattr(auth_module, "GUESSED_PAUSE_S", 0.05, raising=False)
    users = {"vic": ("operator", hash_password("civ"))}
    auth = basic_auth(users, failures_per_user=3, failures_per_client=5)
    stranger = httpx.AsyncHTTPTransport(local_address="127.0.0.2")
    async with serving(create_app(app_file, auth=auth)) as vic:
        base = str(vic.base_url)
        async with httpx.AsyncClient(transport=stranger, base_url=base, timeout=60) as mallory:
            answers = []
            for round_ in range(12):
                for i in range(3):
                    guess = credentials("vic", f"guess{round_}.{i}")
                    answers.append((await mallory.get("/", headers=guess)).status_code)
                right = await vic.get("/", headers=credentials("vic", "civ"))
                assert right.status_code == 200, (round_, right.status_code, right.text)
                auth.sign_out(right.request)  # the next round signs in afresh: no cache
    assert answers[:3] == [401] * 3 and set(answers[3:]) == {429}  # the stranger, refused


# -- what a viewer sees ---------------------------------------------------------------------

LEAKED = "sk_live_do_not_show_4242"


async def test_a_viewer_cannot_confirm_a_key_made_from_arguments(app: skiplock.App) -> None:
    """Keys are made from arguments (a tenant's e-mail): a viewer sees the busiest keys under
    a pseudonym, and may not look jobs up by unique key or correlation id, which would
    confirm a guess at one; an operator may do both."""
    email = "ceo@example.com"

    @app.task(name="sync", queue="tenants", concurrency_key=lambda who: who)
    async def sync(who: str) -> None: ...

    handle = await sync.using(unique_key=email, correlation_id=email).aenqueue(email)
    users = {"vera": ("viewer", hash_password("arev")), "otto": ("operator", hash_password("otto"))}
    viewer, operator = credentials("vera", "arev"), credentials("otto", "otto")
    async with serving(create_app(app, auth=basic_auth(users))) as client:
        overview = await client.get("/", headers=viewer)
        assert overview.status_code == 200 and email not in overview.text
        assert re.search(r"key [0-9a-f]{10}", overview.text)
        assert email in (await client.get("/", headers=operator)).text
        for guess in (email, "nobody@example.com"):
            refused = await client.get("/jobs", params={"find": guess}, headers=viewer)
            assert refused.status_code == 403 and "needs the operator role" in refused.text
        by_id = await client.get("/jobs", params={"find": str(handle.id)}, headers=viewer)
        assert by_id.status_code == 200 and f"/jobs/{handle.id}" in by_id.text
        found = await client.get("/jobs", params={"find": email}, headers=operator)
        assert found.status_code == 200 and f"/jobs/{handle.id}" in found.text


async def test_a_viewer_sees_no_error_message_traceback_or_progress_message(
    app: skiplock.App,
) -> None:
    @app.task(name="charge", queue="payments", max_attempts=1)
    async def charge(card: str) -> None:
        job = skiplock.current_job()
        await job.set_progress(0.5, f"charging {card}")
        raise ValueError(f"card {card} declined")

    handle = await charge.aenqueue(LEAKED)
    await app.drain()
    users = {"vera": ("viewer", hash_password("arev")), "otto": ("operator", hash_password("otto"))}
    viewer, operator = credentials("vera", "arev"), credentials("otto", "otto")
    async with serving(create_app(app, auth=basic_auth(users))) as client:
        for path in (
            "/",
            "/jobs",
            "/jobs?state=dead",
            f"/jobs/{handle.id}",
            "/waiting",
            "/dead",
            "/workers",
        ):
            page = await client.get(path, headers=viewer)
            assert page.status_code == 200, path
            assert LEAKED not in page.text, path
        seen = (await client.get(f"/jobs/{handle.id}", headers=viewer)).text
        assert "hidden" in seen and "ValueError" not in seen
        # nor can a viewer find it out by filtering on the error text
        probe = await client.get("/jobs?state=dead&error=sk_live", headers=viewer)
        assert probe.status_code == 403 and LEAKED not in probe.text
        preview = await client.get("/dead/confirm?action=requeue&error=sk_live", headers=viewer)
        assert preview.status_code == 403
        # nor by guessing a dead-letter group's exact error (1 job or 0 would answer it)
        guess = {"state": "dead", "last_error": f"ValueError: card {LEAKED} declined"}
        exact = await client.get("/jobs", params=guess, headers=viewer)
        assert exact.status_code == 403 and LEAKED not in exact.text
        # an operator sees all of it
        page = (await client.get(f"/jobs/{handle.id}", headers=operator)).text
        assert f"card {LEAKED} declined" in page and "Traceback" in page
        assert f"charging {LEAKED}" in page
        assert LEAKED in (await client.get("/dead", headers=operator)).text
        found = await client.get("/jobs?state=dead&error=sk_live", headers=operator)
        assert found.status_code == 200 and f"card {LEAKED} declined" in found.text


async def test_a_viewer_sees_no_payload_quoted_by_a_row_skiplock_cannot_read(
    app: skiplock.App,
) -> None:
    # another producer wrote the arguments as an object, not a list: the job page says the row
    # holds a value skiplock did not write, and quotes it to operators only
    from ..backends.helpers import write_raw

    @app.task(name="charge", queue="payments")
    async def charge() -> None:
        pass

    handle = await charge.aenqueue()
    odd = f'{{"card": "{LEAKED}"}}'
    await write_raw(
        app,
        f"UPDATE skiplock_jobs_live SET args = '{odd}' WHERE id = ?",
        f"UPDATE skiplock_jobs SET args = '{odd}' WHERE id = $1",
        handle.id,
    )
    users = {"vera": ("viewer", hash_password("arev")), "otto": ("operator", hash_password("otto"))}
    async with serving(create_app(app, auth=basic_auth(users))) as client:
        seen = await client.get(f"/jobs/{handle.id}", headers=credentials("vera", "arev"))
        assert seen.status_code == 200
        assert LEAKED not in seen.text
        assert "values skiplock did not write: args" in seen.text
        operator = await client.get(f"/jobs/{handle.id}", headers=credentials("otto", "otto"))
        assert LEAKED in operator.text


# -- any name a user may enqueue, any verb a client may post -------------------------------

ODD_QUEUES = ("a/b", "with space", "ünï cødé", "100%", "what?", "#1", "x/pause", "a&b=c")


def pause_actions(page: str) -> dict[str, str]:
    """The Overview's Pause forms: queue name (decoded from the URL) -> the form's action."""
    actions = (html.unescape(a) for a in re.findall(r'action="([^"]+/pause)"', page))
    return {urllib.parse.unquote(a.split("/queues/", 1)[1][: -len("/pause")]): a for a in actions}


async def test_any_queue_name_renders_and_is_acted_on_exactly(app: skiplock.App) -> None:
    @app.task(name="t", queue="plain")
    async def t() -> None:
        pass

    handles = {queue: await t.using(queue=queue).aenqueue() for queue in ODD_QUEUES}
    users = {"ada": ("admin", hash_password("ada"))}
    admin = credentials("ada", "ada")
    async with serving(create_app(app, auth=basic_auth(users))) as client:
        page = await client.get("/", headers=admin)
        assert page.status_code == 200, page.text[-2000:]
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text).group(1)  # type: ignore[union-attr]
        for path in ("/jobs", "/workers", "/dead"):
            assert (await client.get(path, headers=admin)).status_code == 200
        actions = pause_actions(page.text)
        assert set(actions) == {*ODD_QUEUES, "plain"}
        for queue in ODD_QUEUES:
            row = re.escape(f'<tr data-queue="{html.escape(queue)}">')
            listed = re.search(rf'{row}\s*<th scope="row"><a href="([^"]+)"', page.text)
            assert listed, queue
            jobs = await client.get(html.unescape(listed.group(1)), headers=admin)
            assert jobs.status_code == 200, queue
            assert len(re.findall(r'<tr data-job="', jobs.text)) == 1, queue
            job = await client.get(f"/jobs/{handles[queue].id}", headers=admin)
            assert job.status_code == 200 and html.escape(queue) in job.text, queue
            done = await client.post(actions[queue], headers=admin, data={"csrf": csrf})
            assert done.status_code == 303, (queue, done.text)
            paused = {q.name for q in await app.queues() if q.paused}
            assert queue in paused and paused <= set(ODD_QUEUES), (queue, paused)
        assert {q.name for q in await app.queues() if q.paused} == set(ODD_QUEUES)


async def test_an_unknown_dead_letter_verb_is_refused(app: skiplock.App) -> None:
    @app.task(name="doomed", queue="q", max_attempts=1)
    async def doomed() -> None:
        raise ValueError("no")

    await doomed.aenqueue()
    await app.drain()
    users = {"otto": ("operator", hash_password("otto"))}
    operator = credentials("otto", "otto")
    async with serving(create_app(app, auth=basic_auth(users))) as client:
        page = await client.get("/dead/confirm?action=discard", headers=operator)
        token = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text).group(1)  # type: ignore[union-attr]
        for verb in ("delete", "Requeue", "requeue2", "discard/x"):
            refused = await client.post(
                f"/dead/{verb}", headers=operator, data={"csrf": token, "confirm": "yes"}
            )
            assert refused.status_code in (404, 405), (verb, refused.status_code)
    assert await app.count_jobs(skiplock.JobState.DEAD) == 1  # nothing discarded


# -- TLS, sign-out, session expiry ---------------------------------------------------------


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1, made by the test."""
    tmp = tmp_path_factory.mktemp("tls")
    cert, key = tmp / "cert.pem", tmp / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"),
            *("-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def test_the_dashboard_serves_https_with_a_certificate(
    stack: Stack, certificate: tuple[Path, Path], signed: Server
) -> None:
    cert, key = certificate
    users = stack.users_file()
    context = ssl.create_default_context(cafile=str(cert))
    options = ("--users", str(users), "--certfile", str(cert), "--keyfile", str(key))
    server = Server(stack, "tls", *options, tls=context)
    with httpx.Client(verify=context, base_url=f"https://127.0.0.1:{server.port}") as client:
        page = client.get("/", headers=credentials("vera", "arev"))
        assert page.status_code == 200 and ">viewer<" in page.text
        assert page.headers["strict-transport-security"] == "max-age=31536000"
        out = client.get("/signout", headers=credentials("vera", "arev"))
        assert out.status_code == 401 and "; secure" in out.headers["set-cookie"].lower()
    with httpx.Client(base_url=f"http://127.0.0.1:{signed.port}") as plain:  # no TLS: neither
        page = plain.get("/", headers=credentials("vera", "arev"))
        assert page.status_code == 200 and "strict-transport-security" not in page.headers
        out = plain.get("/signout", headers=credentials("vera", "arev"))
        assert "secure" not in out.headers["set-cookie"].lower()
    with pytest.raises(httpx.RemoteProtocolError):  # plain HTTP on the TLS port
        httpx.get(f"http://127.0.0.1:{server.port}/", timeout=10)
    assert f"skiplock dashboard on https://127.0.0.1:{server.port}" in server.log()


async def test_a_short_csrf_key_is_refused(app_file: skiplock.App, tmp_path: Path) -> None:
    with pytest.raises(skiplock.ConfigurationError, match="at least 32"):
        create_app(app_file, secret="x" * 31)
    create_app(app_file, secret="x" * 32)
    result = CliRunner().invoke(
        main,
        ["dashboard", APP, "--port", str(free_port())],
        env={"SKIPLOCK_DASHBOARD_SECRET": "hunter2", "SKIPLOCK_DATABASE_URL": str(app_file.url)},
    )
    assert result.exit_code != 0
    assert "SKIPLOCK_DASHBOARD_SECRET: the CSRF key is 7 bytes; it must be at least 32" in (
        result.output
    )
    assert "Traceback" not in result.output


def test_tls_options_and_the_plaintext_warning(
    tmp_path: Path, certificate: tuple[Path, Path]
) -> None:
    cert, key = certificate
    users = tmp_path / "users.toml"
    users.write_text(f'[users.vera]\nrole = "viewer"\npassword = "{hash_password("arev")}"\n')
    # a database not migrated: the command stops right after its checks, before listening
    runner = CliRunner(env={"SKIPLOCK_DATABASE_URL": f"sqlite:///{tmp_path / 'new.db'}"})
    base = ["dashboard", "tests.apps.dash_app:app", "--users", str(users)]
    half = runner.invoke(main, [*base, "--certfile", str(cert)])
    assert half.exit_code == 2
    assert "Error: --certfile and --keyfile: give both" in half.output
    swapped = runner.invoke(main, [*base, "--certfile", str(key), "--keyfile", str(cert)])
    assert (
        swapped.exit_code == 2 and f"Error: --certfile {key} / --keyfile {cert}:" in swapped.output
    )
    wide = runner.invoke(main, [*base, "--host", "0.0.0.0"])
    assert "--users on 0.0.0.0 without TLS: passwords cross the network" in wide.output
    with_tls = runner.invoke(
        main, [*base, "--host", "0.0.0.0", "--certfile", str(cert), "--keyfile", str(key)]
    )
    assert "without TLS" not in with_tls.output
    local = runner.invoke(main, base)
    assert "without TLS" not in local.output


async def test_sign_out_forgets_the_sign_in_and_sessions_expire(
    app_file: skiplock.App, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [1000.0]
    monkeypatch.setattr(auth_module, "_now", lambda: clock[0])
    users = {"vera": ("viewer", hash_password("arev"))}
    auth = basic_auth(users, session_s=3600)
    spy = HashSpy(monkeypatch)
    vera = credentials("vera", "arev")
    async with serving(create_app(app_file, auth=auth)) as client:
        page = await client.get("/", headers=vera)
        assert page.status_code == 200
        assert re.search(r'<a href="[^"]+/signout">Sign out</a>', page.text)
        assert spy.take() == 1
        out = await client.get("/signout", headers=vera)
        assert out.status_code == 401 and out.headers["WWW-Authenticate"].startswith("Basic")
        assert "Signed out" in out.text
        assert "skiplock_signed_out=1" in out.headers["set-cookie"]
        # typed into the prompt the sign-out raised: checked anew, back to the Overview
        again = await client.get("/signout", headers=vera)
        assert again.status_code == 303 and again.headers["location"].endswith("/")
        assert spy.take() == 1  # the sign-in was forgotten: checked again
        assert (await client.get("/", headers=vera)).status_code == 200
        assert "skiplock_signed_out" not in client.cookies
        # signed out again, then in through the Overview's prompt: the next Sign out works
        assert (await client.get("/signout", headers=vera)).status_code == 401
        assert (await client.get("/", headers=vera)).status_code == 200
        assert "skiplock_signed_out" not in client.cookies
        assert (await client.get("/signout", headers=vera)).status_code == 401
        assert (await client.get("/", headers=vera)).status_code == 200
        spy.take()
        clock[0] += 3599
        assert (await client.get("/", headers=vera)).status_code == 200
        assert spy.take() == 0  # within the session: remembered
        clock[0] += 2
        expired = await client.get("/", headers=vera)
        assert expired.status_code == 401 and "WWW-Authenticate" in expired.headers
        assert spy.take() == 0
        assert (await client.get("/", headers=vera)).status_code == 200  # asked, answered
        assert spy.take() == 1
    assert await app_file.audit_trail() == []  # neither a sign-out nor an expiry is a refusal
    with pytest.raises(skiplock.ConfigurationError, match="session_s 0"):
        basic_auth(users, session_s=0)


# -- the audit trail -----------------------------------------------------------------------


async def test_every_person_action_refusal_and_failed_sign_in_is_stored(
    app: skiplock.App,
) -> None:
    @app.task(name="audited", queue="ledger", max_attempts=1)
    async def audited() -> None:
        raise ValueError("no")

    handle = await audited.aenqueue()
    await app.drain()
    users = {n: (r, hash_password(n[::-1])) for n, r in PEOPLE.items()}
    operator, admin = credentials("otto", "otto"), credentials("ada", "ada")
    async with serving(create_app(app, auth=basic_auth(users))) as client:
        op_token = await form_token(client, operator)
        admin_token = await form_token(client, admin)

        async def post(path: str, headers: dict[str, str], **form: str) -> int:
            answer = await client.post(path, headers=headers, data=form)
            return answer.status_code

        assert await post("/queues/ledger/pause", operator, csrf=op_token) == 303
        assert await post("/queues/ledger/resume", operator, csrf=op_token) == 303
        assert await post("/queues/ledger/limits", admin, csrf=admin_token, max_depth="9") == 303
        retention = {"finished_days": "30", "dead_days": "30"}
        assert await post("/prune", admin, csrf=admin_token, **retention) == 303
        assert await post(f"/jobs/{handle.id}/retry", operator, csrf=op_token) == 303
        assert await post("/queues/ledger/limits", operator, csrf=op_token) == 403  # role
        assert await post("/queues/ledger/pause", operator, csrf="forged") == 403  # CSRF
        assert (await client.get("/", headers=credentials("otto", "guess"))).status_code == 401
        assert (await client.get("/", headers=credentials("mallory", "x"))).status_code == 401
    await app.pause_task("audited", who="ops-bot")  # from code, as the CLI does
    trail = [(e.who, e.what, e.target) for e in reversed(await app.audit_trail())]
    assert trail == [
        ("otto via dashboard", "pause queue", "queue ledger"),
        ("otto via dashboard", "resume queue", "queue ledger"),
        ("ada via dashboard", "set queue limits", "queue ledger"),
        ("ada via dashboard", "prune", "jobs"),
        ("otto via dashboard", "retry", f"job {handle.id}"),
        ("otto via dashboard", "refused queue limits", "/queues/ledger/limits"),
        ("otto via dashboard", "refused pause queue", "/queues/ledger/pause"),
        ("otto", "sign-in refused", "client 127.0.0.1"),
        ("mallory", "sign-in refused", "client 127.0.0.1"),
        ("ops-bot", "pause task", "task audited"),
    ]
    details = {e.what: e.detail for e in await app.audit_trail()}
    assert details["set queue limits"] == (
        "max_depth=9 max_running=None rate_per_s=None aging_s=None"
    )
    assert details["refused queue limits"] == "needs the admin role"
    assert details["refused pause queue"] == "CSRF token missing or wrong"
    page = await app.audit_trail(limit=3)
    older = await app.audit_trail(limit=100, before_id=page[-1].id)
    assert [e.id for e in page + older] == [e.id for e in await app.audit_trail()]
    with pytest.raises(skiplock.ConfigurationError, match="what"):
        await app.record_action("")


async def test_a_role_only_auth_records_the_signed_in_user(app_file: skiplock.App) -> None:
    from starlette.applications import Starlette
    from starlette.authentication import AuthCredentials, AuthenticationBackend, SimpleUser
    from starlette.middleware import Middleware
    from starlette.middleware.authentication import AuthenticationMiddleware
    from starlette.routing import Mount

    class Header(AuthenticationBackend):  # the parent app's own sign-in
        async def authenticate(self, conn: Any) -> tuple[AuthCredentials, SimpleUser] | None:
            name = conn.headers.get("x-parent-user")
            return (AuthCredentials(["authenticated"]), SimpleUser(name)) if name else None

    @app_file.task(name="t", queue="ledger")
    async def t() -> None:
        pass

    def operators(request: Any) -> str | None:
        return "operator" if request.user.is_authenticated else None

    dash = create_app(app_file, auth=operators)
    parent = Starlette(
        routes=[Mount("/ops", dash)],
        middleware=[Middleware(AuthenticationMiddleware, backend=Header())],
    )
    async with serving(parent) as client:
        who = {"x-parent-user": "grace"}
        token = await form_token(client, who, "/ops/")
        paused = await client.post("/ops/queues/ledger/pause", headers=who, data={"csrf": token})
        assert paused.status_code == 303
        page = (await client.get("/ops/", headers=who)).text
        assert 'grace · <b class="role-operator">operator</b>' in page
    [entry] = await app_file.audit_trail()
    assert (entry.who, entry.what) == ("grace via dashboard", "pause queue")


PEOPLE = {"vera": "viewer", "otto": "operator", "ada": "admin"}


async def form_token(client: httpx.AsyncClient, headers: dict[str, str], path: str = "/") -> str:
    page = (await client.get(path, headers=headers)).text
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert found, page[-500:]
    return found.group(1)


async def test_a_flood_of_refused_sign_ins_stores_at_most_a_minutes_cap(
    app_file: skiplock.App,
) -> None:
    from skiplock.dashboard import proxy_auth
    from skiplock.dashboard.app import REFUSED_SIGN_INS_STORED

    far = proxy_auth("X-User", trusted=["10.0.0.1"], secret="s" * 16)  # never this client
    async with serving(create_app(app_file, auth=far)) as client:
        for i in range(REFUSED_SIGN_INS_STORED + 5):
            assert (await client.get("/", headers={"X-User": f"u{i}"})).status_code == 401
        assert (await client.get("/")).status_code == 401  # named nobody: not a sign-in
    trail = await app_file.audit_trail(limit=1000)
    assert len(trail) == REFUSED_SIGN_INS_STORED
    assert {e.what for e in trail} == {"sign-in refused"}
    assert trail[-1].who == "u0"
