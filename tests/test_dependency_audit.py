"""pyproject.toml admits no release with a known vulnerability, and `make audit` says so (issue 22
medium 5, issue 43): a table of the fixed releases the bounds must not drop below, and
tools/audit.py run over the lowest set pyproject.toml admits, resolved with its dependencies by
uv against the real registry, and against a vulnerability service on 127.0.0.1 that speaks OSV's
query API (pip-audit's own client talks to it), answering, failing and out of reach."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from packaging.version import Version

from tests.helpers import free_port

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import audit  # noqa: E402

# The lowest release of each package without a known vulnerability, and why. Lowering a bound in
# pyproject.toml below one of these fails this test.
FIXED = {
    # CVE-2026-54283 (request.form() ignores its limits for urlencoded bodies, 1.3.1),
    # CVE-2026-48710 (Host header poisons request.url.path: the dashboard's sign-in skip),
    # CVE-2026-54282 (request path moves request.url's authority, 1.3.0), CVE-2025-62727 (Range
    # header DoS on /static, 0.49.1), CVE-2025-54121 and CVE-2024-47874 (form parsing DoS).
    "starlette": "1.3.1",
    # CVE-2026-53538/53539 (0.0.30), GHSA-pp6c-gr5w-3c5g (0.0.27), CVE-2026-24486 (0.0.22),
    # CVE-2024-53981 (0.0.18).
    "python-multipart": "0.0.30",
    # CVE-2026-1207/1287/1312 (SQL injection) and three more in 6.0.2; five in 6.0.6; seven
    # fixed in 6.0.7-6.0.8. The floor is the newest 6.0.x (6.0.10).
    "django": "6.0.10",
    # The issue 43 review: 3.1 is past its support; 3.2 is the oldest line still maintained.
    "psycopg": "3.2",
    # CVE-2025-43859: request smuggling; uvicorn admits any h11, so the dashboard names it.
    "h11": "0.16",
    # CVE-2025-27516 (sandbox breakout through |attr), CVE-2024-56201/56326.
    "jinja2": "3.1.6",
    # CVE-2024-24762 below 0.109.1; 0.133 is the first that admits starlette 1.x at all.
    "fastapi": "0.133",
    # CVE-2020-17446 (0.21); 0.31 is the first that reads a connection service (issue 43).
    "asyncpg": "0.31",
    # CVE-2021-41945 (0.20).
    "httpx": "0.27",
    # CVE-2025-47273 (path traversal in PackageIndex, 78.1.1), CVE-2024-6345.
    "setuptools": "78.1.1",
    # CVE-2025-71176 (predictable /tmp/pytest-of-user), fixed in 9.0.3.
    "pytest": "9.0.3",
    # CVE-2025-59288 (browser download without certificate checks; 1.55.1 upstream).
    "playwright": "1.56",
    # CVE-2019-18874 (5.6.6).
    "psutil": "5.9",
    # CVE-2021-40978 (1.2.3).
    "mkdocs": "1.6",
    "pip-audit": "2.10",
    # CVE-2024-3772 (ReDoS in email validation, 2.4.0); the typed extra.
    "pydantic": "2.4",
}


def test_lower_bounds_are_at_least_the_fixed_releases() -> None:
    bounds = audit.lower_bounds(ROOT / "pyproject.toml")
    too_low = {
        name: (bounds.get(name), fixed)
        for name, fixed in FIXED.items()
        if name not in bounds or Version(bounds[name]) < Version(fixed)
    }
    assert not too_low, f"pyproject.toml bound below the fixed release (bound, fixed): {too_low}"


def test_every_occurrence_of_a_package_carries_the_bound() -> None:
    # A package named in two extras must be bounded in both: pip installs the extra it is asked.
    for req in audit.requirements(ROOT / "pyproject.toml"):
        fixed = FIXED.get(req.name.lower())
        if fixed is None:
            continue
        lows = [s.version for s in req.specifier if s.operator == ">="]
        assert lows and Version(max(lows, key=Version)) >= Version(fixed), str(req)


def test_every_requirement_has_a_lower_bound() -> None:
    unbounded = [
        str(req)
        for req in audit.requirements(ROOT / "pyproject.toml")
        if not any(s.operator in (">=", "==", "~=") for s in req.specifier)
        and req.name.lower() != "wheel"
    ]
    assert not unbounded


class _Osv(BaseHTTPRequestHandler):
    """OSV's POST /v1/query: starlette below 1.3.0 is vulnerable, and every release of
    ``flagged`` (none unless a test names one); everything else clean."""

    broken = False
    flagged = ""

    def do_POST(self) -> None:
        query = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.broken:
            self.send_response(503)
            self.end_headers()
            return
        name, version = query["package"]["name"], query["version"]
        body: dict[str, object] = {}
        if name == self.flagged:
            events = [{"introduced": "0"}, {"fixed": "99"}]
            affected = {"package": {"name": name, "ecosystem": "PyPI"}, "ranges": []}
            affected["ranges"] = [{"type": "ECOSYSTEM", "events": events}]
            body = {"vulns": [{"id": f"GHSA-test-{name}", "summary": "x", "affected": [affected]}]}
        elif name == "starlette" and Version(version) < Version("1.3.0"):
            body = {
                "vulns": [
                    {
                        "id": "GHSA-86qp-5c8j-p5mr",
                        "summary": "Host header poisons request.url.path",
                        "affected": [
                            {
                                "package": {"name": "starlette", "ecosystem": "PyPI"},
                                "ranges": [
                                    {
                                        "type": "ECOSYSTEM",
                                        "events": [{"introduced": "0"}, {"fixed": "1.0.1"}],
                                    }
                                ],
                            }
                        ],
                    }
                ]
            }
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def osv() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Osv)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def resolved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pyproject.toml's lowest set, resolved once (against the real registry) for the module."""
    into = tmp_path_factory.mktemp("audit") / "lowest.txt"
    why = audit.resolve_lowest(ROOT / "pyproject.toml", into)
    assert why is None, why
    return into


def _audit(url: str, resolved: Path | None, **env: str) -> subprocess.CompletedProcess[str]:
    full = {
        **os.environ,
        "PIP_AUDIT_VULNERABILITY_SERVICE": "osv",
        "PIP_AUDIT_OSV_URL": url,
        **({"SKIPLOCK_AUDIT_RESOLVED": str(resolved)} if resolved else {}),
        **env,
    }
    return subprocess.run(
        [sys.executable, str(ROOT / "tools" / "audit.py")],
        capture_output=True,
        text=True,
        env=full,
        timeout=400,
        check=False,
    )


def _url(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/v1/query"


@pytest.mark.slow
def test_audit_passes_today_s_bounds(osv: ThreadingHTTPServer, resolved: Path) -> None:
    proc = _audit(_url(osv), resolved)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "pyproject.toml's lowest resolved set: no known vulnerabilities" in proc.stdout
    pins = resolved.read_text()
    assert "starlette==1.3.1" in pins and "django==6.0.10" in pins  # the floors, resolved
    assert "anyio==" in pins  # and what they bring in, which pyproject.toml never names


@pytest.mark.slow
def test_audit_finds_a_vulnerable_dependency_the_floors_bring_in(
    osv: ThreadingHTTPServer, resolved: Path
) -> None:
    _Osv.flagged = "anyio"  # starlette's and httpx's, named nowhere in pyproject.toml
    try:
        proc = _audit(_url(osv), resolved)
    finally:
        _Osv.flagged = ""
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "known vulnerabilities in pyproject.toml's lowest resolved set" in proc.stdout
    assert "GHSA-test-anyio" in proc.stdout


@pytest.mark.slow
def test_audit_fails_a_bound_that_admits_a_vulnerable_release(
    osv: ThreadingHTTPServer, tmp_path: Path
) -> None:
    old = (ROOT / "pyproject.toml").read_text().replace('"starlette>=1.3.1"', '"starlette>=0.37"')
    (tmp_path / "pyproject.toml").write_text(old)
    proc = _audit(_url(osv), None, SKIPLOCK_AUDIT_PYPROJECT=str(tmp_path / "pyproject.toml"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert re.search(
        r"starlette 0\.\d+\.\d+: GHSA-86qp-5c8j-p5mr \(fixed in 1\.0\.1\)", proc.stdout
    )


@pytest.mark.slow
def test_audit_out_of_reach_says_so_and_passes(resolved: Path) -> None:
    proc = _audit(f"http://127.0.0.1:{free_port()}/v1/query", resolved)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "audit skipped: pyproject.toml's lowest resolved set not audited" in proc.stdout


UNREACHABLE_INDEX = {"UV_NO_CACHE": "1", "UV_HTTP_RETRIES": "0"}
"""uv on a refused index: no cache, and no retries (its default three, with backoff, only make
the refusal slower: what is said is the same)."""


@pytest.mark.slow
def test_a_registry_out_of_reach_says_so(osv: ThreadingHTTPServer) -> None:
    away = f"http://127.0.0.1:{free_port()}/simple"
    proc = _audit(_url(osv), None, UV_INDEX_URL=away, UV_DEFAULT_INDEX=away, **UNREACHABLE_INDEX)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "audit skipped: pyproject.toml's lowest resolved set not audited" in proc.stdout
    assert "uv could not resolve it" in proc.stdout
    proc = _audit(
        _url(osv), None, UV_DEFAULT_INDEX=away, SKIPLOCK_AUDIT_REQUIRED="1", **UNREACHABLE_INDEX
    )
    assert proc.returncode == 1 and "FAILED (SKIPLOCK_AUDIT_REQUIRED=1)" in proc.stdout


@pytest.mark.slow
def test_audit_out_of_reach_fails_when_required(resolved: Path) -> None:
    proc = _audit(f"http://127.0.0.1:{free_port()}/v1/query", resolved, SKIPLOCK_AUDIT_REQUIRED="1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAILED (SKIPLOCK_AUDIT_REQUIRED=1)" in proc.stdout


@pytest.mark.slow
def test_audit_a_failing_service_is_not_a_clean_audit(
    osv: ThreadingHTTPServer, resolved: Path
) -> None:
    _Osv.broken = True
    try:
        proc = _audit(_url(osv), resolved)
    finally:
        _Osv.broken = False
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no known vulnerabilities" not in proc.stdout
    assert "audit skipped" in proc.stdout


def test_a_service_that_knows_no_package_is_not_a_clean_audit() -> None:
    # What PyPI's JSON API answers through a mirror that serves only the simple index (here).
    report = {
        "dependencies": [
            {"name": "starlette", "skip_reason": "Dependency not found on PyPI"},
            {"name": "jinja2", "skip_reason": "Dependency not found on PyPI"},
        ]
    }
    outcome = audit.summarize("x", report)
    assert outcome.unreachable and not outcome.vulnerable
