"""What the storage code must look like (issue 45): SQL as SQL, small modules, the same rooms.

- No statement text is assembled in Python under ``src/skiplock/_backends/``: no ``+`` or
  ``%`` with a string holding an SQL keyword, no ``.format`` / ``.replace`` / ``.join`` on or
  with one, no f-string holding one. A variant is a separate named statement in a ``.sql``
  file, or a switch in SQL. The one escape is ``_backends/sql_files.py``, whose documented
  functions fill in identifiers and literals a statement cannot take as parameters
  (``with_schema``, ``quote_identifier``, ``quote_literal``); no other module is left out of
  the scan. A statement word that may stand in a sentence (``SET``, ``LOCK``, ...) counts where
  it opens a statement or has SQL's shape after it (``STATEMENT_WORDS``).
- No ``.py`` file under ``_backends/`` is over 600 lines.
- ``_backends/postgres/`` and ``_backends/sqlite/`` have the same top-level module names.

Each rule's checker is a plain function run on the real tree and, below, on a synthetic
offender in a temporary file, so a rule that could never fail would be seen.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import pytest

import skiplock

from .helpers import sql_words

BACKENDS = Path(skiplock.__file__).parent / "_backends"

ESCAPE = "sql_files.py"
"""The one module the SQL-text scan leaves out: the documented identifier functions."""

MOST_LINES = 600

SQL_KEYWORD = sql_words(
    "SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|DROP|WITH|FROM|WHERE|JOIN|UNION|BEGIN|PRAGMA|VALUES"
)
"""What makes a string SQL text for the scan of assembly (``sql_word``)."""


def sql_word(text: str) -> str | None:
    """The word that makes ``text`` SQL text, if it is (``SQL_KEYWORD``)."""
    found = SQL_KEYWORD.search(text)
    return next(word for word in found.groups() if word) if found else None


STRING_METHODS = frozenset({"format", "replace", "join"})


def scanned_modules(root: Path = BACKENDS) -> list[Path]:
    """Every ``.py`` file under ``root`` but the escape (``root/sql_files.py``): nothing else
    is left out, whatever its name or folder."""
    return sorted(p for p in root.rglob("*.py") if p != root / ESCAPE)


def _sql_literal(node: ast.AST) -> str | None:
    """The keyword that makes ``node`` a string of SQL text, if it is one: a string constant
    or an f-string whose literal parts hold an SQL keyword."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return sql_word(node.value)
    if isinstance(node, ast.JoinedStr):
        for part in node.values:
            found = _sql_literal(part)
            if found:
                return found
    return None


class _SqlText(ast.NodeVisitor):
    """The places one module assembles SQL text, as (line, what)."""

    def __init__(self) -> None:
        self.found: list[tuple[int, str]] = []
        self.named: dict[str, str] = {}
        """Names bound (anywhere in the module) to an expression holding SQL text, and the
        keyword that made them so: ``A + B`` of two such constants is assembly too."""

    def scan(self, tree: ast.Module) -> list[tuple[int, str]]:
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                keyword = self._holds_sql(node.value)
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if keyword and isinstance(target, ast.Name):
                        self.named[target.id] = keyword
        self.visit(tree)
        first: dict[tuple[int, str], str] = {}
        for line, what in self.found:  # a chain of '+' on one line is one place, said once
            first.setdefault((line, what.partition(" (")[0]), what)
        return sorted((line, what) for (line, _), what in first.items())

    def _holds_sql(self, node: ast.AST) -> str | None:
        for inner in ast.walk(node):
            keyword = _sql_literal(inner)
            if keyword:
                return keyword
        return None

    def _sql(self, node: ast.AST) -> str | None:
        """The keyword if ``node`` is SQL text: a literal, or a name bound to one."""
        if isinstance(node, ast.Name):
            return self.named.get(node.id)
        return _sql_literal(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.Add | ast.Mod):
            for operand in (node.left, node.right):
                keyword = self._sql(operand)
                if keyword:
                    sign = "+" if isinstance(node.op, ast.Add) else "%"
                    self.found.append((node.lineno, f"'{sign}' on SQL text ({keyword})"))
                    break
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.op, ast.Add | ast.Mod):
            keyword = self._sql(node.value) or self._sql(node.target)
            if keyword:
                sign = "+=" if isinstance(node.op, ast.Add) else "%="
                self.found.append((node.lineno, f"'{sign}' on SQL text ({keyword})"))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in STRING_METHODS:
            pieces: list[ast.AST] = [func.value, *node.args, *(k.value for k in node.keywords)]
            for arg in node.args:
                if isinstance(arg, ast.List | ast.Tuple | ast.Set):
                    pieces.extend(arg.elts)
            for piece in pieces:
                keyword = self._sql(piece)
                if keyword:
                    self.found.append((node.lineno, f".{func.attr}() on SQL text ({keyword})"))
                    break
        self.generic_visit(node)

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        keyword = _sql_literal(node)
        if keyword and any(isinstance(v, ast.FormattedValue) for v in node.values):
            self.found.append((node.lineno, f"f-string of SQL text ({keyword})"))
        self.generic_visit(node)


def sql_text_offenders(paths: Iterable[Path], root: Path = BACKENDS) -> list[str]:
    """``path:line: what`` for every place these modules assemble SQL text in Python."""
    found: list[str] = []
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        name = path.relative_to(root.parent)
        found += [f"{name}:{line}: {what}" for line, what in _SqlText().scan(tree)]
    return found


def long_modules(paths: Iterable[Path], root: Path = BACKENDS, most: int = MOST_LINES) -> list[str]:
    """``path: N lines`` for every module over ``most`` lines."""
    found: list[str] = []
    for path in paths:
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > most:
            found.append(f"{path.relative_to(root.parent)}: {lines} lines (over {most})")
    return found


def top_level_modules(package: Path) -> set[str]:
    """The module names directly in ``package``: its ``.py`` files and its subpackages."""
    names = {p.stem for p in package.glob("*.py")}
    names |= {p.name for p in package.iterdir() if (p / "__init__.py").is_file()}
    return names


def unmatched_rooms(first: Path, second: Path) -> list[str]:
    """The top-level module names one package has and the other lacks, as ``package: name``."""
    a, b = top_level_modules(first), top_level_modules(second)
    return [f"{first.name}: {n} (not in {second.name})" for n in sorted(a - b)] + [
        f"{second.name}: {n} (not in {first.name})" for n in sorted(b - a)
    ]


def _report(found: list[str]) -> str:
    for line in found:
        print(line)
    return "\n".join(found)


# -- the tree ---------------------------------------------------------------------------------


def test_the_scan_leaves_out_nothing_but_the_escape() -> None:
    every = sorted(BACKENDS.rglob("*.py"))
    scanned = scanned_modules()
    assert (BACKENDS / ESCAPE).is_file()
    assert set(every) - set(scanned) == {BACKENDS / ESCAPE}
    assert BACKENDS / "protocol.py" in scanned and BACKENDS / "__init__.py" in scanned


def test_no_sql_text_is_assembled_in_python() -> None:
    found = sql_text_offenders(scanned_modules())
    assert not found, _report(found)


def test_no_backend_module_is_over_600_lines() -> None:
    found = long_modules(sorted(BACKENDS.rglob("*.py")))
    assert not found, _report(found)


def test_both_dialect_packages_have_the_same_rooms() -> None:
    postgres, sqlite = BACKENDS / "postgres", BACKENDS / "sqlite"
    if not (postgres / "__init__.py").is_file() or not (sqlite / "__init__.py").is_file():
        pytest.skip(
            "the dialect packages _backends/postgres/ and _backends/sqlite/ are not both there yet"
        )
    found = unmatched_rooms(postgres, sqlite)
    assert not found, _report(found)


# -- each rule can fail -----------------------------------------------------------------------

OFFENDER = """\
PREFIX = "SELECT id FROM jobs"
SCHEMA = "{s}"


def build(table, where, parts, n):
    a = "SELECT id FROM " + table
    b = "DELETE FROM jobs WHERE id = %s" % n
    c = PREFIX + where
    d = "UPDATE {t} SET x = 1".format(t=table)
    e = PREFIX.replace("jobs", table)
    f = " UNION ALL ".join(parts)
    g = f"INSERT INTO {table} VALUES (1)"
    h = "\\n".join(["WITH x AS (SELECT 1)", "SELECT * FROM x"])
    i = "ok"
    i += " WHERE id = 1"
    return a, b, c, d, e, f, g, h, i


def fine(name, n):
    message = f"job {n} is not pending; select another"
    label = "worker " + name
    table = "skiplock_jobs_" + str(n)
    return message, label, table, "%s of %s" % (n, name), ", ".join([name, label])
"""


def test_sql_text_in_python_would_be_found(tmp_path: Path) -> None:
    root = tmp_path / "_backends"
    (root / "postgres").mkdir(parents=True)
    (root / "postgres" / "claim.py").write_text(OFFENDER)
    (root / ESCAPE).write_text('def fill(t, n):\n    return "SELECT " + n\n')
    assert scanned_modules(root) == [root / "postgres" / "claim.py"]
    found = sql_text_offenders(scanned_modules(root), root)
    assert found == [
        "_backends/postgres/claim.py:6: '+' on SQL text (SELECT)",
        "_backends/postgres/claim.py:7: '%' on SQL text (DELETE)",
        "_backends/postgres/claim.py:8: '+' on SQL text (SELECT)",
        "_backends/postgres/claim.py:9: .format() on SQL text (UPDATE)",
        "_backends/postgres/claim.py:10: .replace() on SQL text (SELECT)",
        "_backends/postgres/claim.py:11: .join() on SQL text (UNION)",
        "_backends/postgres/claim.py:12: f-string of SQL text (INSERT)",
        "_backends/postgres/claim.py:13: .join() on SQL text (WITH)",
        "_backends/postgres/claim.py:15: '+=' on SQL text (WHERE)",
    ]
    assert sql_text_offenders([root / ESCAPE], root)  # left out by the listing, not the scan


def test_a_long_module_would_be_found(tmp_path: Path) -> None:
    root = tmp_path / "_backends"
    root.mkdir()
    (root / "long.py").write_text("x = 1\n" * (MOST_LINES + 1))
    (root / "short.py").write_text("x = 1\n" * MOST_LINES)
    assert long_modules(sorted(root.rglob("*.py")), root) == [
        f"_backends/long.py: {MOST_LINES + 1} lines (over {MOST_LINES})"
    ]


def test_rooms_one_dialect_lacks_would_be_found(tmp_path: Path) -> None:
    postgres, sqlite = tmp_path / "postgres", tmp_path / "sqlite"
    for package, modules in ((postgres, ["claim", "wake"]), (sqlite, ["claim", "watch"])):
        (package / "storage").mkdir(parents=True)
        (package / "storage" / "__init__.py").write_text("")
        (package / "queries").mkdir()  # .sql files: not a module
        for module in ["__init__", *modules]:
            (package / f"{module}.py").write_text("")
    assert unmatched_rooms(postgres, sqlite) == [
        "postgres: wake (not in sqlite)",
        "sqlite: watch (not in postgres)",
    ]
    (sqlite / "watch.py").rename(sqlite / "wake.py")
    assert unmatched_rooms(postgres, sqlite) == []


STATEMENT_OFFENDER = """\
def imported(snapshot, ms, table, name):
    quoted = snapshot.replace("'", "''")
    a = f"SET TRANSACTION SNAPSHOT '{quoted}'; SET LOCAL lock_timeout = {ms}"
    b = "LOCK TABLE " + table
    c = "VACUUM (ANALYZE) {t}".format(t=table)
    d = f"NOTIFY {name}"
    e = "SELECT 1; " + f"SET lock_timeout = {ms}"
    return a, b, c, d, e


def fine(table, exc):
    message = f"could not LOCK the table {table}: {exc}"
    hint = f"{exc}: another session holds a lock (a migration, a LOCK TABLE); try again"
    return message, hint, "Set " + table, "show " + table
"""


def test_a_statement_word_opening_sql_would_be_found(tmp_path: Path) -> None:
    root = tmp_path / "_backends"
    (root / "postgres").mkdir(parents=True)
    (root / "postgres" / "reads.py").write_text(STATEMENT_OFFENDER)
    assert sql_text_offenders(scanned_modules(root), root) == [
        "_backends/postgres/reads.py:3: f-string of SQL text (SET)",
        "_backends/postgres/reads.py:4: '+' on SQL text (LOCK)",
        "_backends/postgres/reads.py:5: .format() on SQL text (VACUUM)",
        "_backends/postgres/reads.py:6: f-string of SQL text (NOTIFY)",
        "_backends/postgres/reads.py:7: '+' on SQL text (SELECT)",
        "_backends/postgres/reads.py:7: f-string of SQL text (SET)",
    ]
    sql = ["SET LOCAL lock_timeout = 2000", "x; RESET ALL", "TRUNCATE TABLE {s}.t", "\nSHOW x"]
    sql += ["-- a\nLISTEN skiplock_jobs", "GRANT USAGE ON SCHEMA app TO reader", "COPY t (a) FROM"]
    prose = ["could not LOCK the table", "a LOCK TABLE, a migration", "why we SET it"]
    prose += ["gave up its LOCK.", "took the SHOW on the road", "no EXPLAIN here"]
    prose += ["a TRUNCATE of a segment"]
    dialect = sql_words("SELECT")  # the dialect packages' scan: its clause words, the same rest
    for pattern in (SQL_KEYWORD, dialect):
        assert [text for text in sql if not pattern.search(text)] == []
        assert [text for text in prose if pattern.search(text)] == []
    assert sql_word("ok; SET LOCAL x = 1") == "SET" and sql_word("fine") is None
