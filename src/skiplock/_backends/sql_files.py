"""SQL kept as SQL: named statements and numbered migrations read from ``.sql`` files.

Every statement a dialect runs is whole text in a file of its package (``queries/*.sql``),
so it can be read, pasted into ``psql`` or ``sqlite3`` and linted without running Python;
and every released migration is a numbered file (``migrations/NNNN.sql``) that is never
edited again (``tests/backends/test_sql_files.py`` holds each one's checksum).

A statement file holds any number of statements, each opened by a line ``-- name: NAME``;
the text up to the next such line (comments included, surrounding blank lines dropped) is the
statement. A migration file opens with ``-- migration: NAME`` (the name recorded in
``skiplock_migrations``); its number is the file's. In both, ``{s}`` stands for the quoted
schema, the one identifier a statement cannot take as a parameter: ``for_schema`` fills it
in (``quote_identifier``), and no statement is assembled from pieces in Python.

The one escape: what no parameter can hold (a table's name, a list of columns, a pragma's
value, the branches of a compound statement over a run-time set of queues or tables) is a
``{part}`` of a template in a ``.sql`` file, filled in only by the functions here: ``fill``
(each part named), ``repeat`` (a piece numbered ``{i}``), ``each`` (a piece once per row),
``listing`` (identifiers or filled pieces joined) and ``fill_names`` (typed values: a ``str``
quoted as an identifier, an ``int`` or a ``date`` as a literal, ``{s}`` the schema); and what
a statement takes only as a literal, never a parameter (the snapshot ``SET TRANSACTION
SNAPSHOT`` imports), is quoted by ``quote_literal`` and filled by ``fill``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import date
from importlib import resources
from importlib.resources.abc import Traversable
from typing import NamedTuple

NAME_LINE = re.compile(r"^-- name: ([A-Za-z_][A-Za-z0-9_]*)[ \t]*$", re.MULTILINE)
MIGRATION_LINE = re.compile(r"\A-- migration: (.+?)[ \t]*\n")
MIGRATION_FILE = re.compile(r"\A(\d{4})\.sql\Z")
SCHEMA = "{s}"
PLACE = re.compile(r"\{([a-z_]+)\}")


class SqlFileError(ValueError):
    """A statement or migration file that does not say what the loader needs (a bug in the
    package, found when the module is imported)."""


class Migration(NamedTuple):
    """One released migration: its number, its recorded name and its text (a tuple, so a
    reader that unpacks ``(version, name, body)`` reads it as it read the Python list)."""

    version: int
    name: str
    body: str


def parse_statements(text: str, origin: str) -> dict[str, str]:
    """The named statements of one file's text, in order; a repeated or empty one is an
    error naming ``origin``."""
    marks = list(NAME_LINE.finditer(text))
    if not marks:
        raise SqlFileError(f"{origin}: no '-- name: NAME' line")
    if text[: marks[0].start()].strip():
        raise SqlFileError(f"{origin}: text before the first '-- name:' line")
    found: dict[str, str] = {}
    for mark, after in zip(marks, [*marks[1:], None], strict=True):
        name = mark.group(1)
        body = text[mark.end() : after.start() if after else len(text)].strip("\n")
        if not body.strip():
            raise SqlFileError(f"{origin}: statement {name} is empty")
        if name in found:
            raise SqlFileError(f"{origin}: statement {name} is named twice")
        found[name] = body.strip()
    return found


def _folder(package: str, folder: str) -> Traversable:
    return resources.files(package).joinpath(folder)


def load_statements(package: str, folder: str = "queries") -> dict[str, str]:
    """Every named statement in ``package``'s ``folder/*.sql``; a name in two files is an
    error (one source of each statement's name)."""
    found: dict[str, str] = {}
    files = sorted(
        (f for f in _folder(package, folder).iterdir() if f.name.endswith(".sql")),
        key=lambda f: f.name,
    )
    for file in files:
        origin = f"{package}/{folder}/{file.name}"
        for name, body in parse_statements(file.read_text(encoding="utf-8"), origin).items():
            if name in found:
                raise SqlFileError(f"{origin}: statement {name} is named in another file too")
            found[name] = body
    return found


def parse_migration(text: str, version: int, origin: str) -> Migration:
    """One migration file's text: its ``-- migration: NAME`` line, then its body."""
    head = MIGRATION_LINE.match(text)
    if head is None:
        raise SqlFileError(f"{origin}: the first line must be '-- migration: NAME'")
    body = text[head.end() :]
    if not body.strip():
        raise SqlFileError(f"{origin}: the migration is empty")
    return Migration(version, head.group(1), body)


def load_migrations(package: str, folder: str = "migrations") -> list[Migration]:
    """The migrations of ``package``'s ``folder/NNNN.sql``, numbered 1, 2, 3 ... without a
    gap (a missing file would be a migration some databases never get)."""
    migrations: list[Migration] = []
    for file in _folder(package, folder).iterdir():
        if not file.name.endswith(".sql"):
            continue
        number = MIGRATION_FILE.match(file.name)
        if number is None:
            raise SqlFileError(f"{package}/{folder}/{file.name}: not named NNNN.sql")
        origin = f"{package}/{folder}/{file.name}"
        migrations.append(
            parse_migration(file.read_text(encoding="utf-8"), int(number.group(1)), origin)
        )
    migrations.sort(key=lambda m: m.version)
    for expected, migration in enumerate(migrations, start=1):
        if migration.version != expected:
            raise SqlFileError(f"{package}/{folder}: migration {expected:04d}.sql is missing")
    return migrations


def quote_identifier(name: str) -> str:
    """``name`` as a double-quoted SQL identifier (the documented escape: a schema or a
    table name cannot be a parameter)."""
    return '"' + name.replace('"', '""') + '"'


def quote_literal(value: str) -> str:
    """``value`` as a single-quoted SQL string literal, each ``'`` doubled: the documented
    escape for a value a statement takes only as a literal, not as a parameter (the snapshot of
    ``SET TRANSACTION SNAPSHOT``), for ``fill``. A NUL, which no SQL text can hold, is refused;
    the caller checks the value's shape first (what the statement accepts)."""
    if "\0" in value:
        raise SqlFileError(f"a literal cannot hold a NUL: {value!r}")
    return "'" + value.replace("'", "''") + "'"


def with_schema(text: str, schema: str) -> str:
    """``text`` with every ``{s}`` replaced by the quoted ``schema``."""
    return text.replace(SCHEMA, quote_identifier(schema))


def fill(template: str, **parts: str) -> str:
    """``template`` (a statement of a package's ``queries/*.sql``) with each ``{name}`` in it
    replaced by ``parts[name]``: the documented escape for what a statement cannot take as a
    parameter, built only by ``quote_identifier``, ``quote_literal``, ``repeat`` or from another
    template (a table's name, the list of a table's columns, the branches of a compound
    statement over a run-time set of queues or tables, a snapshot's id), or a number's text.
    Every ``{name}`` must be given, and nothing else."""
    wanted = set(PLACE.findall(template))
    if wanted != set(parts):
        raise SqlFileError(f"template parts {sorted(wanted)}, given {sorted(parts)}")
    return PLACE.sub(lambda m: parts[m.group(1)], template)


def repeat(piece: str, count: int, separator: str) -> str:
    """``count`` copies of template ``piece``, each with ``{i}`` filled in by its number
    (0, 1, ...), joined by ``separator``: a compound statement's branches, or the rows of a
    multi-row ``VALUES``, for ``fill``."""
    return separator.join(piece.replace("{i}", str(i)) for i in range(count))


def each(piece: str, separator: str, rows: Iterable[Mapping[str, str]]) -> str:
    """Template ``piece`` filled in (``fill``) once for each of ``rows``, joined by
    ``separator``: one branch or one column of DDL over a run-time set of tables or columns."""
    return separator.join(fill(piece, **row) for row in rows)


def listing(parts: Iterable[str], separator: str = ", ") -> str:
    """``parts`` (identifiers, or pieces already filled in) joined by ``separator``: a list of
    columns, or a trigger's statements, for ``fill``."""
    return separator.join(parts)


Filler = str | int | date | list[str | int]
"""A value ``fill_names`` puts in a template (see there)."""


def fill_names(template: str, schema: str, **values: Filler) -> str:
    """A template over run-time names (a generation's or a day's table, its indexes): ``{s}``
    the quoted ``schema``, and each other ``{name}`` its value: a ``str`` as a quoted
    identifier (a table's or an index's name), an ``int`` as a number literal and a ``date`` as
    its ISO text ``YYYY-MM-DD`` inside the template's own quotes (a partition's bounds, which
    DDL cannot take as parameters); a list, its items so, joined by ``, `` (a table's columns
    read at run time). A placeholder with no value is an error; values the template does not
    name are left unused (one set of names serves a table's templates)."""

    def value(mark: re.Match[str]) -> str:
        name = mark.group(1)
        if name == "s":
            return quote_identifier(schema)
        if name not in values:
            raise SqlFileError(f"no value for {{{name}}} in {template[:60]!r}")
        given = values[name]
        if isinstance(given, list):
            return ", ".join(_one(name, item) for item in given)
        return _one(name, given)

    return PLACE.sub(value, template)


def _one(name: str, given: object) -> str:
    if isinstance(given, bool) or not isinstance(given, (str, int, date)):
        raise SqlFileError(f"{{{name}}}: a str, an int or a date, not {given!r}")
    if isinstance(given, date):
        return given.isoformat()[:10]  # a datetime's date alone
    return str(given) if isinstance(given, int) else quote_identifier(given)
