"""Who is asking, and what they may do: the three roles and the pluggable ways to decide.

An *auth* is any callable from a Starlette ``Request`` to a ``User`` (or a role name, or
None to refuse), sync or async. Built in: ``basic_auth`` (HTTP basic against scrypt hashes
kept in configuration, never passwords), ``proxy_auth`` (a trusted reverse proxy names the
user in a header) and ``no_auth`` (everyone is an anonymous viewer: the default, read-only).

Roles are ordered: ``viewer`` sees everything but payloads and may act on nothing;
``operator`` also reads payloads and pauses, resumes, retries, cancels, requeues and
discards; ``admin`` also sets queue limits and prunes past retention.
"""

from __future__ import annotations

import asyncio
import base64
import enum
import hashlib
import hmac
import inspect
import logging
import math
import secrets
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigurationError

log = logging.getLogger("skiplock.dashboard")


class Role(enum.IntEnum):
    """What a person may do; each role may do everything the ones before it may."""

    VIEWER = 1
    OPERATOR = 2
    ADMIN = 3

    @classmethod
    def parse(cls, value: object, option: str = "role") -> Role:
        if isinstance(value, Role):
            return value
        if isinstance(value, str) and value.upper() in cls.__members__:
            return cls[value.upper()]
        names = ", ".join(r.name.lower() for r in cls)
        raise ConfigurationError(f"{option} {value!r}: must be one of {names}")

    @property
    def label(self) -> str:
        return self.name.lower()


@dataclass(frozen=True, slots=True)
class User:
    """A person as the dashboard knows them: a name (for audit trails) and a role."""

    name: str
    role: Role

    def may(self, role: Role) -> bool:
        return self.role >= role


ANONYMOUS = User("anonymous", Role.VIEWER)

AuthResult = User | Role | str | None
Auth = Callable[[Any], AuthResult | Awaitable[AuthResult]]
"""A callable from a request to who is asking (None refuses the request with 401)."""


async def resolve(auth: Auth, request: Any) -> User | None:
    """Run an auth (sync or async) and read its answer as a User. A bare role is recorded
    under the name of the user the app around signed in (Starlette's ``request.user``, set by
    its AuthenticationMiddleware), else the basic credentials' name, else "anonymous"."""
    answer = auth(request)
    if inspect.isawaitable(answer):
        answer = await answer
    if answer is None or isinstance(answer, User):
        return answer
    role = Role.parse(answer, "the auth callable's answer")
    return User(signed_in_name(request) or "anonymous", role)


def signed_in_name(request: Any) -> str:
    """Who the request says it is (not checked here): the app's signed-in user, else the
    basic credentials' name, else an empty string."""
    scope = getattr(request, "scope", {})
    user = scope.get("user") if isinstance(scope, dict) else None
    if user is not None and getattr(user, "is_authenticated", False):
        name = str(getattr(user, "display_name", "") or getattr(user, "identity", "") or "")
        if name:
            return name
    return _basic_credentials(request.headers.get("authorization", ""))[0]


def no_auth(request: Any) -> User:
    """No authentication: everyone is an anonymous, read-only viewer."""
    return ANONYMOUS


# -- HTTP basic with scrypt hashes ---------------------------------------------------------

_SCRYPT = {"n": 2**14, "r": 8, "p": 1}
"""scrypt's cost (16 MiB, ~50 ms a check): slow enough to make a stolen hash costly to crack,
quick enough for a dashboard (browsers resend basic credentials with every request)."""


def hash_password(password: str) -> str:
    """A salted scrypt hash to keep in configuration: ``scrypt$n$r$p$salt$hash`` (base64).

    From a shell: ``skiplock hash-password`` (it prompts)."""
    if not isinstance(password, str) or not password:
        raise ConfigurationError("password: must be a non-empty string")
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, dklen=32, **_SCRYPT)
    b64 = base64.b64encode
    n, r, p = _SCRYPT["n"], _SCRYPT["r"], _SCRYPT["p"]
    return f"scrypt${n}${r}${p}${b64(salt).decode()}${b64(digest).decode()}"


def _parse_hash(stored: str, option: str) -> tuple[dict[str, int], bytes, bytes]:
    try:
        scheme, n, r, p, salt, digest = stored.split("$")
        if scheme != "scrypt":
            raise ValueError(scheme)
        cost = {"n": int(n), "r": int(r), "p": int(p)}
        return cost, base64.b64decode(salt, validate=True), base64.b64decode(digest, validate=True)
    except ValueError:
        raise ConfigurationError(
            f"{option}: not a password hash made by skiplock hash-password (scrypt$n$r$p$salt$hash)"
        ) from None


def verify_password(password: str, stored: str) -> bool:
    """Whether ``password`` matches a ``hash_password`` hash (in constant time)."""
    cost, salt, digest = _parse_hash(stored, "password hash")
    maxmem = 128 * cost["n"] * cost["r"] * cost["p"] + 2**20
    candidate = hashlib.scrypt(
        password.encode(), salt=salt, dklen=len(digest), maxmem=maxmem, **cost
    )
    return hmac.compare_digest(candidate, digest)


SESSION_S = 8 * 3600.0
"""How long a basic sign-in lasts: after it, the next request is answered 401 and the browser
asks for the password again (``basic_auth(session_s=...)``)."""

EXPIRED = "skiplock.sign_in_expired"
"""Set in the ASGI scope of the request that found its sign-in past ``session_s``."""

SIGN_IN_WINDOW_S = 60.0
FAILURES_PER_CLIENT = 20
FAILURES_PER_USER = 10
"""Failed sign-ins allowed in ``SIGN_IN_WINDOW_S`` from one client address, and for one user
name from one client address; past either the answer is 429 with ``Retry-After`` and no hash
is tried."""

GUESSED_PAUSE_S = 1.0
"""How long a sign-in as a name that met ``failures_per_user`` failures from anywhere in the
window waits before its check. Counting failures per name from anywhere and refusing past
them let any stranger lock a person out (ten bad guesses a minute for ``vic`` made ``vic``'s
own sign-in fail 11 times in 12); slowing the name down instead keeps the right password
working while every guess for it costs a second."""


class SignInThrottled(Exception):
    """Too many failed sign-ins: the dashboard answers 429 with ``Retry-After``."""

    def __init__(self, retry_after_s: float, why: str) -> None:
        super().__init__(why)
        self.retry_after_s = max(1, math.ceil(retry_after_s))


class SlidingWindow:
    """Events (failed and in-flight sign-ins...) per key in a sliding window, for a bounded
    number of keys: a flood of made-up user names drops the oldest keys, never grows."""

    MAX_KEYS = 10_000

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self._times: dict[str, deque[float]] = {}

    def wait(self, key: str, limit: int, now: float) -> float:
        """Seconds until ``key`` may try again (0: now)."""
        times = self._times.get(key)
        if times is None:
            return 0.0
        while times and times[0] <= now - self.window_s:
            times.popleft()
        if not times:
            del self._times[key]
            return 0.0
        return times[0] + self.window_s - now if len(times) >= limit else 0.0

    def add(self, key: str, now: float) -> None:
        if key not in self._times and len(self._times) >= self.MAX_KEYS:
            del self._times[next(iter(self._times))]
        self._times.setdefault(key, deque()).append(now)

    def forget(self, key: str, at: float) -> None:
        times = self._times.get(key)
        if times is not None and at in times:
            times.remove(at)


class _Guesses:
    """Failed sign-ins in the window: per client address, per name from one address (past
    either, refused), and per name from anywhere (past it, slowed, never refused)."""

    def __init__(self, per_client: int, per_user: int, window_s: float) -> None:
        self.per_client, self.per_user = per_client, per_user
        self._failures = SlidingWindow(window_s)

    async def admit(self, name: str, client: str, now: float) -> tuple[str, ...]:
        """Let one sign-in be checked, or raise SignInThrottled; it counts as a failure until
        ``succeeded`` says otherwise. The keys it was counted under."""
        failures = self._failures
        keys = (client, f"user {name} from {client}", f"user {name}")
        wait = max(
            failures.wait(keys[0], self.per_client, now),
            failures.wait(keys[1], self.per_user, now),
        )
        if wait:
            log.warning("sign-in refused (too many failures): %r from %s", name, client)
            raise SignInThrottled(wait, f"too many failed sign-ins; try again in {wait:.0f} s")
        guessed = failures.wait(keys[2], self.per_user, now)
        for key in keys:  # counted before the hash: concurrent guesses cannot all slip under
            failures.add(key, now)
        if guessed:  # others guess at this name: slow it down, never lock its owner out
            log.warning("sign-in as %r slowed (guessed at from elsewhere): %s", name, client)
            await asyncio.sleep(GUESSED_PAUSE_S)
        return keys

    def succeeded(self, keys: tuple[str, ...], at: float) -> None:
        for key in keys:
            self._failures.forget(key, at)


def _positive(value: object, option: str, whole: bool) -> None:
    kinds = (int,) if whole else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not 0 < value <= 1e6:
        kind = "a whole number" if whole else "a number"
        raise ConfigurationError(f"basic_auth: {option} {value!r}: must be {kind} above 0")


_HASHING = threading.BoundedSemaphore(2)
"""scrypt checks at once (16 MiB and a core each): a flood of guesses queues here, in
threads, and leaves the event loop and the other core to everyone else."""


def _verify_in_turn(password: str, stored: str) -> bool:
    with _HASHING:
        return verify_password(password, stored)


def _now() -> float:
    return time.monotonic()


def _user_table(users: Mapping[str, tuple[str | Role, str]]) -> dict[str, tuple[Role, str]]:
    table: dict[str, tuple[Role, str]] = {}
    for name, entry in users.items():
        if not isinstance(name, str) or not name or ":" in name:
            raise ConfigurationError(f"user name {name!r}: must be non-empty, without ':'")
        if not isinstance(entry, tuple) or len(entry) != 2:
            raise ConfigurationError(f"user {name!r}: must be (role, password hash)")
        role, stored = entry
        _parse_hash(stored, f"user {name!r}'s password hash")
        table[name] = (Role.parse(role, f"user {name!r}'s role"), stored)
    return table


def basic_auth(
    users: Mapping[str, tuple[str | Role, str]],
    *,
    failures_per_client: int = FAILURES_PER_CLIENT,
    failures_per_user: int = FAILURES_PER_USER,
    window_s: float = SIGN_IN_WINDOW_S,
    session_s: float = SESSION_S,
) -> Auth:
    """HTTP basic: ``{"alice": ("operator", hash_password("..."))}``. A request without
    matching credentials is refused with 401 (the browser then asks for them).

    scrypt runs in a thread, never on the event loop; an unknown name is checked against a
    dummy hash (it answers as slowly as a known one); past ``failures_per_client`` failed
    sign-ins from one address, or ``failures_per_user`` for one name from one address, in
    ``window_s`` seconds the answer is 429. A name that met ``failures_per_user`` failures
    from all addresses together is slowed (``GUESSED_PAUSE_S`` before each check), never
    refused: the right password still signs in. Only successes are remembered (browsers
    resend the credentials with every request: scrypt once per person, not per page), keyed
    by an HMAC under a key of this process; failures are logged on ``skiplock.dashboard``.
    A sign-in lasts ``session_s`` seconds, then the browser is asked again;
    ``auth.sign_out(request)`` (the dashboard's Sign out) forgets the one a request
    carries."""
    table = _user_table(users)
    _positive(failures_per_client, "failures_per_client", True)
    _positive(failures_per_user, "failures_per_user", True)
    _positive(window_s, "window_s", False)
    _positive(session_s, "session_s", False)
    dummy = hash_password(secrets.token_urlsafe(16))  # what an unknown name is checked against
    cache_key = secrets.token_bytes(32)
    signed_in: dict[bytes, tuple[User, float]] = {}  # key -> (who, signed in at)
    guesses = _Guesses(failures_per_client, failures_per_user, float(window_s))

    def session_key(request: Any) -> tuple[str, str, bytes]:
        name, password = _basic_credentials(request.headers.get("authorization", ""))
        key = hmac.new(cache_key, f"{name}\x00{password}".encode(), hashlib.sha256).digest()
        return name, password, key

    async def auth(request: Any) -> User | None:
        name, password, key = session_key(request)
        if not name:
            return None  # no credentials yet: the challenge, not a failed sign-in
        now = _now()
        if (known := signed_in.get(key)) is not None:
            if now - known[1] <= session_s:
                return known[0]
            del signed_in[key]  # expired: this request is refused, the browser asks again
            log.info("sign-in of %r expired after %.0f s", name, session_s)
            request.scope[EXPIRED] = True  # not a refused sign-in for the audit trail
            return None
        client = f"client {request.client.host if request.client else '?'}"
        attempt = await guesses.admit(name, client, now)
        role, stored = table.get(name, (Role.VIEWER, dummy))
        matched = await asyncio.to_thread(_verify_in_turn, password, stored)
        if not matched or name not in table:
            log.warning("failed sign-in: %r from %s", name, client)
            return None
        guesses.succeeded(attempt, now)
        if len(signed_in) >= 1000:
            signed_in.clear()
        signed_in[key] = (User(name, role), now)
        return signed_in[key][0]

    def sign_out(request: Any) -> bool:
        """Forget the sign-in these credentials made (True if there was one)."""
        return signed_in.pop(session_key(request)[2], None) is not None

    auth.sign_out = sign_out  # type: ignore[attr-defined]
    auth.challenge = 'Basic realm="skiplock", charset="UTF-8"'  # type: ignore[attr-defined]
    return auth


def _basic_credentials(header: str) -> tuple[str, str]:
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic":
        return "", ""
    try:
        name, _, password = base64.b64decode(encoded, validate=True).decode().partition(":")
    except (ValueError, UnicodeDecodeError):
        return "", ""
    return name, password


# -- a trusted reverse proxy ---------------------------------------------------------------


PROXY_SECRET_HEADER = "X-Skiplock-Proxy-Secret"
"""The header in which the proxy proves it is the proxy (``proxy_auth(secret=...)``)."""

PEER = "skiplock.peer"
"""The ASGI scope key holding the TCP peer's ``(host, port)``, kept by ``skiplock dashboard
--proxy-headers`` before uvicorn's proxy headers replace ``client`` with the address
``X-Forwarded-For`` names: ``proxy_auth``'s trusted addresses are the proxy's, the peer."""


def _peer(request: Any) -> str:
    scope = getattr(request, "scope", {})
    kept = scope.get(PEER) if isinstance(scope, dict) else None
    if kept:
        return str(kept[0])
    return request.client.host if request.client else ""


def proxy_auth(
    user_header: str = "X-Forwarded-User",
    *,
    role_header: str | None = None,
    roles: Mapping[str, str | Role] | None = None,
    default_role: str | Role = Role.VIEWER,
    trusted: Iterable[str] = ("127.0.0.1", "::1"),
    secret: str | None = None,
    secret_header: str = PROXY_SECRET_HEADER,
) -> Auth:
    """A reverse proxy that authenticates people names them in ``user_header``; it is
    believed only from the ``trusted`` addresses and, when ``secret`` is given, only
    when it also sends ``secret`` in ``secret_header`` (compared in constant time). A request
    failing either, or without the user header, is refused. The role comes from
    ``role_header`` if given, else from ``roles`` by user name, else ``default_role``.

    The proxy must *overwrite* the user, role and secret headers on every request (never pass
    a client's own through): whatever reaches the dashboard in them is believed. The address
    compared is the TCP peer: ``skiplock dashboard --proxy-headers`` keeps it (``PEER``) when
    uvicorn rewrites the client address from ``X-Forwarded-For``. Served another way with
    proxy headers on, the rewritten address is compared; a secret holds even then."""
    role_of = {name: Role.parse(r, f"roles[{name!r}]") for name, r in (roles or {}).items()}
    fallback = Role.parse(default_role, "default_role")
    allowed = frozenset(trusted)
    if secret is not None and (not isinstance(secret, str) or len(secret) < 16):
        raise ConfigurationError("proxy secret: must be a string of at least 16 characters")
    expected = secret.encode() if secret is not None else None

    def auth(request: Any) -> User | None:
        name = request.headers.get(user_header, "").strip()
        if _peer(request) not in allowed or not name:
            return None
        if expected is not None:
            given = request.headers.get(secret_header, "").encode("latin-1", "replace")
            if not hmac.compare_digest(given, expected):
                return None
        role = role_of.get(name, fallback)
        if role_header and request.headers.get(role_header):
            role = Role.parse(request.headers[role_header].strip(), role_header)
        return User(name, role)

    auth.user_header = user_header  # type: ignore[attr-defined]  # for the audit of refusals
    return auth
