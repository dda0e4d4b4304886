"""`make audit`: known vulnerabilities in what pyproject.toml allows and in what .venv holds.

Two audits, both through pip-audit: the lowest set pyproject.toml admits, *resolved* with every
dependency (uv's resolver, each direct requirement at its lowest bound and what those need, for
Python 3.12 so the Django extra counts: a bound that lets a vulnerable release in fails even when
the venv happens to hold a newer one, and so does a dependency the floors bring in), and the
packages installed in the venv this script runs in.

Offline-tolerant on purpose, and plain about it: the registry (for the resolution) or the
vulnerability service (PyPI's JSON API by default, OSV with
``PIP_AUDIT_VULNERABILITY_SERVICE=osv``) may be out of reach, or a registry mirror may not serve
it. pip-audit then either fails to connect or, worse, skips every package and reports nothing
found; both are told apart from a clean audit and said plainly ("audit skipped: ... not
audited"), and the run passes unless ``SKIPLOCK_AUDIT_REQUIRED=1`` asks for a real answer (set it
where the service is known to be reachable). Exit 0: clean or skipped; 1: vulnerable (or skipped
while required); 2: the audit itself could not run. ``SKIPLOCK_AUDIT_RESOLVED`` names a set
resolved earlier (the tests resolve once).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
# A connection failure, as pip-audit (through requests) reports one: not a finding.
_UNREACHABLE = ("ConnectionError", "ConnectTimeout", "ReadTimeout", "ServiceError", "SSLError")


def requirements(pyproject: Path) -> list[Requirement]:
    """Every requirement pyproject.toml states: build system, dependencies and each extra."""
    data = tomllib.loads(pyproject.read_text())
    found = list(data.get("build-system", {}).get("requires", []))
    found += data["project"].get("dependencies", [])
    for extra in data["project"].get("optional-dependencies", {}).values():
        found += extra
    return [Requirement(text) for text in found]


def lower_bounds(pyproject: Path) -> dict[str, str]:
    """The lowest version each package may be installed at: its highest ``>=`` bound anywhere.

    Markers are dropped (Django's bound counts even though this venv's Python skips it).
    """
    bounds: dict[str, str] = {}
    for req in requirements(pyproject):
        name = req.name.lower()
        for spec in req.specifier:
            lower = spec.operator in (">=", "==", "~=")
            if lower and (name not in bounds or Version(spec.version) > Version(bounds[name])):
                bounds[name] = spec.version
    return bounds


@dataclass
class Outcome:
    """What one pip-audit run said, reduced to what the gate needs."""

    what: str
    vulnerable: list[str] = field(default_factory=list)
    audited: int = 0
    skipped: int = 0
    unreachable: str | None = None


def summarize(what: str, report: dict[str, object]) -> Outcome:
    """Read pip-audit's JSON report: vulnerable packages, and how many were really audited."""
    outcome = Outcome(what)
    deps = report.get("dependencies", [])
    assert isinstance(deps, list)
    for dep in deps:
        if dep.get("skip_reason"):
            outcome.skipped += 1
            continue
        outcome.audited += 1
        for vuln in dep.get("vulns", []):
            fixed = ", ".join(vuln.get("fix_versions", [])) or "no fixed release"
            outcome.vulnerable.append(
                f"{dep['name']} {dep.get('version', '?')}: {vuln['id']} (fixed in {fixed})"
            )
    if deps and not outcome.audited:
        # PyPI's JSON API answering 404 for every package (a mirror that serves only the simple
        # index) reads as "not found on PyPI": pip-audit then reports nothing, which is not clean.
        outcome.unreachable = "the vulnerability service knew none of the packages"
    return outcome


def run_pip_audit(what: str, args: list[str]) -> Outcome:
    """Run pip-audit with a JSON report; a connection failure becomes `unreachable`."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        cmd = [sys.executable, "-m", "pip_audit", "-f", "json", "-o", str(out)]
        cmd += ["--progress-spinner", "off", "--timeout", "15", *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if out.exists() and out.stat().st_size:
            return summarize(what, json.loads(out.read_text()))
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        if any(marker in proc.stderr for marker in _UNREACHABLE):
            return Outcome(what, unreachable=last[:300])
        print(proc.stderr, file=sys.stderr)
        raise SystemExit(f"audit: pip-audit failed on {what}: {last}")


LOWEST = "pyproject.toml's lowest resolved set"

RESOLVE_PYTHON = "3.12"
"""The Python the lowest set is resolved for: the oldest that takes every extra (Django's)."""


def resolve_lowest(pyproject: Path, into: Path) -> str | None:
    """Write the lowest set pyproject.toml admits, every extra and dependency resolved and
    pinned, to ``into``; why it could not be resolved, or None."""
    cmd = [
        sys.executable,
        "-m",
        "uv",
        "pip",
        "compile",
        str(pyproject),
        "--all-extras",
        "--resolution",
        "lowest-direct",
        "--python-version",
        RESOLVE_PYTHON,
        "--no-annotate",
        "--no-header",
        "--quiet",
        "--output-file",
        str(into),
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=300)
    except subprocess.TimeoutExpired:
        return "the resolver took over 300 s (is the registry reachable?)"
    if proc.returncode != 0 or not into.exists():
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        return f"uv could not resolve it: {last[:300]}"
    return None


def audit_lowest(pyproject: Path, tmp: Path) -> Outcome:
    """pip-audit over the resolved lowest set (``SKIPLOCK_AUDIT_RESOLVED``, or resolved now)."""
    given = os.environ.get("SKIPLOCK_AUDIT_RESOLVED")
    resolved = Path(given) if given else tmp / "lowest.txt"
    if not given and (why := resolve_lowest(pyproject, resolved)) is not None:
        return Outcome(LOWEST, unreachable=why)
    return run_pip_audit(LOWEST, ["--disable-pip", "--no-deps", "-r", str(resolved)])


def main() -> int:
    pyproject = Path(os.environ.get("SKIPLOCK_AUDIT_PYPROJECT", ROOT / "pyproject.toml"))
    with tempfile.TemporaryDirectory() as tmp:
        outcomes = [
            audit_lowest(pyproject, Path(tmp)),
            run_pip_audit("the installed venv", ["--skip-editable"]),
        ]
    failed = False
    required = os.environ.get("SKIPLOCK_AUDIT_REQUIRED") == "1"
    for outcome in outcomes:
        if outcome.unreachable:
            verdict = "FAILED (SKIPLOCK_AUDIT_REQUIRED=1)" if required else "skipped"
            print(
                f"audit {verdict}: {outcome.what} not audited, the registry or the "
                f"vulnerability service is out of reach from here: {outcome.unreachable}"
            )
            failed |= required
        elif outcome.vulnerable:
            print(f"audit: known vulnerabilities in {outcome.what}:")
            for line in outcome.vulnerable:
                print(f"  {line}")
            failed = True
        else:
            print(
                f"audit: {outcome.what}: no known vulnerabilities "
                f"({outcome.audited} packages audited, {outcome.skipped} skipped)"
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
