"""The loader of SQL kept as SQL (``_backends/sql_files.py``): what a statement or a
migration file must say, and what it refuses."""

from __future__ import annotations

import hashlib
from importlib import resources

import pytest

from skiplock._backends.postgres import statements as postgres_sql
from skiplock._backends.postgres.storage import reads
from skiplock._backends.sql_files import (
    SqlFileError,
    each,
    fill,
    fill_names,
    listing,
    load_migrations,
    parse_migration,
    parse_statements,
    quote_identifier,
    quote_literal,
    repeat,
    with_schema,
)


def test_statements_are_read_by_name_with_their_comments() -> None:
    text = (
        "-- name: JOB_GET\n-- One job by id.\nSELECT * FROM {s}.skiplock_jobs WHERE id = $1\n\n"
        "-- name: JOB_COUNT\nSELECT count(*)\n  FROM {s}.skiplock_jobs\n"
    )
    assert parse_statements(text, "t.sql") == {
        "JOB_GET": "-- One job by id.\nSELECT * FROM {s}.skiplock_jobs WHERE id = $1",
        "JOB_COUNT": "SELECT count(*)\n  FROM {s}.skiplock_jobs",
    }


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("SELECT 1\n", "no '-- name: NAME' line"),
        ("SELECT 1\n-- name: A\nSELECT 1\n", "text before the first"),
        ("-- name: A\n\n-- name: B\nSELECT 1\n", "statement A is empty"),
        ("-- name: A\nSELECT 1\n-- name: A\nSELECT 2\n", "statement A is named twice"),
    ],
)
def test_a_statement_file_that_says_too_little_is_refused(text: str, says: str) -> None:
    with pytest.raises(SqlFileError, match=says):
        parse_statements(text, "t.sql")


def test_a_migration_keeps_its_recorded_name_and_its_text_as_written() -> None:
    migration = parse_migration("-- migration: signal senders, kept results\nALTER x;\n", 23, "m")
    assert (migration.version, migration.name, migration.body) == (
        23,
        "signal senders, kept results",
        "ALTER x;\n",
    )
    with pytest.raises(SqlFileError, match="first line must be"):
        parse_migration("ALTER x;\n", 1, "m")


def test_the_schema_is_the_one_identifier_filled_in_and_it_is_quoted() -> None:
    assert quote_identifier('a"b') == '"a""b"'
    assert with_schema("SELECT 1 FROM {s}.t", "app") == 'SELECT 1 FROM "app".t'


def test_a_literal_no_parameter_can_hold_is_quoted_and_a_nul_refused() -> None:
    assert quote_literal("00000003-0000001B-1") == "'00000003-0000001B-1'"
    assert quote_literal("a'b") == "'a''b'"
    with pytest.raises(SqlFileError, match="NUL"):
        quote_literal("a\0b")


def test_a_snapshot_is_imported_by_its_statement_and_only_a_snapshots_id() -> None:
    assert reads._import("00000003-0000001B-1") == reads.IMPORT_SNAPSHOT.replace(
        "{snapshot}", "'00000003-0000001B-1'"
    ).replace("{ms}", str(reads.READ_LOCK_TIMEOUT_MS))
    for bad in ("", "1", "00000003-0000001B-1'; DROP TABLE x; --", "0003 -1B"):
        with pytest.raises(ValueError, match="snapshot"):
            reads._import(bad)


SQLITE_MIGRATION_SHA256 = {
    "0001.sql": "ba2f5f49cc958a9ac0d436517f1431406151035c62255ec0f1103e5aba7de512",
    "0002.sql": "300f7cce863bf0d027a391cc66aca8219640c8f8041ec1e3385de9e581cad5a0",
    "0003.sql": "63480cb6475741bd0205f2dd17f4f2590adca4905f193f056abd5ed8ebf229e7",
    "0004.sql": "62109dd231dddd3f78dbbe11ada7d01387667c39588dbefee6628294fc5dc002",
    "0005.sql": "4a0d53f36ce8381427daba4e0bb4438f818d70d61ab0937e1321acb2d1063344",
    "0006.sql": "9b86211569a5cb20e5c93b8fa7e81b4be6357ed9de324107751c2d24c066ac91",
    "0007.sql": "883962e747152a7d5e78ea2b677de093904758d0882be99cd9142335c4be9af3",
    "0008.sql": "34cfc003f656daf82068cd36773fcc75b6be2ed30e55e80e6e9062ac795bf3a1",
    "0009.sql": "2f0ea12fba920b468c3690eada520983b87d2bd72a8274cea9e925ed724c98f2",
    "0010.sql": "a4c97a7f9e5c747e5276f35cdd9f8b0f9225dd6a05e94466acaef860fed8edf5",
    "0011.sql": "001f209ba0defeb5271d46b9802ed87c94ae125f844980a698e2e96193d82d9f",
    "0012.sql": "26156d037c2d4b1650dce2967823464d0b076aa98095bf17bae0f7d3f9dc9107",
    "0013.sql": "b5bcd35a9f988fa90c969cbac0b2fe36864c02c32adc058f59a2876b24fc289c",
    "0014.sql": "da411d69403d6fe8f39c26d40754a907f6b4f808c9dbe82440f5403f1d3a88dc",
    "0015.sql": "c9c4fb0e9a9b8de7986649e0f31599663fc9b29956224e152b5072dc6a2dda3c",
    "0016.sql": "65dd4b6994c1d15aa842c02fa9c31c1ed0e49950a1f55525265d89e6f7e3e764",
    "0017.sql": "64f68b6a602023a5f286b7a4e564d9341ab8b047db1186500d8e250ca96c6b92",
    "0018.sql": "17b7cd3fa509d331817c50f249e24af3a5ac6b1077f460d15552eafc77c869ac",
    "0019.sql": "c9113d9bf64ed1380d18dff85ddc72a8e747930e06bcca585fee8129630edee6",
    "0020.sql": "3101f7229c9ec372f91c42d0ea143e39f4e02918e0ca6944e4fc753267eb764a",
    "0021.sql": "e37e2fff09fc68b458d59faf0601c30f4fa7f913c2d939f30d6209372db53b49",
    "0022.sql": "daac1fcfd9aaac725d873cac8fe23f47f538c9f6cb573474cbf754a42532afc2",
    "0023.sql": "5361196cc731d741bbbc53718af9862167fdda5ef9745f277689d71653997b31",
    "0024.sql": "dc869cc793648b7729c95dc56c3700141a675d5b1e4f38ce7a6e040db0391a17",
    "0025.sql": "ccd40cbc4716a56839a812f35504a123d09f3eb09ad7fc0a507f2dd2e6a7c94e",
    "0026.sql": "43002a9ab60ac61707af496666d189d3ad5ae94c5d35beb120f9f49c02d4913d",
    "0027.sql": "ce10b2dc402a07729c3ee9c0f66a5aba91454ed792e9280c86888a0a8eb9480b",
    "0028.sql": "c483d73ad62ca637cd3b3ceed9e70d82e25f13344c9f07a034346816c7531ea9",
    "0029.sql": "1a63145f64a3f898f8a061e6e0e83211f2bef3fb53810ae1d78e6e31b68d1d49",
    "0030.sql": "7c1eefb7ed3134018881f864e3cf0276076370cb47aff53b6e980eb9e02619e4",
}
"""Every released SQLite migration file's checksum: a released migration is never edited (a
new one is a new file, and its checksum is added here)."""

SQLITE_MIGRATION_NAMES = [
    "initial",
    "cron slots",
    "operations",
    "queue claim index",
    "started mark",
    "results",
    "health numbers and worker registry",
    "trace context",
    "payload version",
    "audit trail",
    "history apart",
    "concurrency keys",
    "unique windows",
    "priority aging",
    "key weights",
    "workflows",
    "workflow sequences",
    "unique scopes",
    "id counters",
    "worker liveness",
    "unreleased waits",
    "key turns",
    "signal senders, kept results",
    "parked jobs keep their keys",
    "key turns end when idle",
    "batch pruned members",
    "live generations (PostgreSQL only)",
    "lanes",
    "database number (PostgreSQL only)",
    "job logs, worker children",
]


def test_no_released_sqlite_migration_file_is_edited() -> None:
    folder = resources.files("skiplock._backends").joinpath("sqlite/migrations")
    found = {
        f.name: hashlib.sha256(f.read_bytes()).hexdigest()
        for f in folder.iterdir()
        if f.name.endswith(".sql")
    }
    assert found == SQLITE_MIGRATION_SHA256


def test_the_sqlite_migrations_are_numbered_one_to_n_with_their_recorded_names() -> None:
    loaded = load_migrations("skiplock._backends", "sqlite/migrations")
    assert [(m.version, m.name) for m in loaded] == list(enumerate(SQLITE_MIGRATION_NAMES, start=1))


def test_a_template_is_filled_only_with_the_parts_it_names() -> None:
    assert fill("SELECT {columns} FROM {table}", columns="a, b", table="t") == "SELECT a, b FROM t"
    assert fill("VALUES {rows}", rows="{kept}") == "VALUES {kept}"  # a part is not read again
    with pytest.raises(SqlFileError, match="template parts"):
        fill("SELECT {columns} FROM {table}", columns="a")
    with pytest.raises(SqlFileError, match="template parts"):
        fill("SELECT 1", table="t")


def test_pieces_are_repeated_and_listed_for_a_template() -> None:
    assert repeat("(:q{i})", 3, ", ") == "(:q0), (:q1), (:q2)"
    rows = [{"table": "a"}, {"table": "b"}]
    assert each("SELECT * FROM {table}", "\nUNION ALL\n", rows) == (
        "SELECT * FROM a\nUNION ALL\nSELECT * FROM b"
    )
    assert listing(["id", "state"]) == "id, state"


def test_every_sql_file_is_package_data() -> None:
    """A wheel carries only what ``[tool.setuptools.package-data]`` names: a ``.sql`` file no
    glob matches would be missing from an installed skiplock (the editable install used by
    the tests would not show it)."""
    import tomllib
    from fnmatch import fnmatch
    from pathlib import Path

    import skiplock

    root = Path(skiplock.__file__).parent
    pyproject = tomllib.loads((root.parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
    globs = pyproject["tool"]["setuptools"]["package-data"]["skiplock"]
    files = [p.relative_to(root).as_posix() for p in root.rglob("*.sql")]
    assert files, "no .sql file found under the package"
    missed = [
        f for f in files if not any(fnmatch(f, g) and f.count("/") == g.count("/") for g in globs)
    ]
    assert missed == []


POSTGRES_MIGRATIONS = resources.files("skiplock._backends").joinpath("postgres/migrations")

POSTGRES_RELEASED = {
    "0001.sql": "4b9baf8fd93f224c510483752a49e8da630d90ba50a7ecde0ee06b5e007e82ba",
    "0002.sql": "bc86d1e469b91af586fd175de19296e3f1c3d6b8e11387f72bd811e3c66e7cf8",
    "0003.sql": "ed3027d626d63905c51da138451b4a989c7272581a972c802c384e5ff14b043d",
    "0004.sql": "e9c63c348d4278c19c7cf6ddcafe24bdcc6f727f30a0628a930081adf046f3c3",
    "0005.sql": "999575e3a18a5718e4e26509a49fd0a2ecc0e9254f4b4e53dea5fc97590dcd73",
    "0006.sql": "d9c66897add3acb9287bc4e550185398ac6c851cf039d880efa1f65285b50caa",
    "0007.sql": "1443ac707e509872c6f9864a2226a49caeae5018107d654ad29eb1b95cad8f6f",
    "0008.sql": "916a2746d0bf126de7c1c7b12c1f2e24b88ba335d511a3168f5c062c98c0caab",
    "0009.sql": "5b35f8aa9ccb4ddf4b1bdf803d93b89d82f3ebc2e8ec7629091cc134cb595f45",
    "0010.sql": "732695bf73bcbbfc83da46caec6bd08271618f4f82508bd14c3f40b963ef1ae0",
    "0011.sql": "1905a04804936fb7bf0b106686829cec73e47f2ce0adf2cf1c4cb866655a4f26",
    "0012.sql": "2b208ae366633843f6690abe8b8caa92b547646db29d9434b434212687cf969c",
    "0013.sql": "e83ccd3a3c60e47927200af62b0193ff4b17930b3c259ecd41fccfbe85d7a6c7",
    "0014.sql": "abac9edfc0a1c92889011153b4deb674c8971dd1d9635bd92f6d3a8c91091aef",
    "0015.sql": "88a50aa8771d76558e02277aea9e63c92fb106635bb21808bed027982d7ca81a",
    "0016.sql": "6b22031701e65cee4daf0431123f2bcc76eea37b10a788d746dd941bd823dba8",
    "0017.sql": "9d8ceec240c02b85a9e60b46cc431391f46a65e23d41e3d02cd3aadba00dbfd6",
    "0018.sql": "856ff6b5679c00d658d7aea401fc6b20e9d95f13206bdae659222b7297fb7ff4",
    "0019.sql": "3fed9c5688fdd8ae55976ce3065b551e6b6a242792eeb40be87d095dfed20c4e",
    "0020.sql": "cf563f3bb417aaf04d2c7363711b8696c400927bfea083376d67b7e05a81ff55",
    "0021.sql": "bfc5e3dbd3de4bc2a3284e426d166f17673aea1f36b68eac1b6e052d96cab336",
    "0022.sql": "7907a82b00ff46bf148ef1655e4cd147b9733c5c5fdea25f8ceaea052616c9c3",
    "0023.sql": "9151b862448d93015abefeee01c9580d25a8494860d2116c9f2a98e0d8b8f844",
    "0024.sql": "933b2ab14333ddc793c64decaa14f4c4c2fb12ab93316e58c9c839ce729bfe2c",
    "0025.sql": "45cb8bd3e9b71cf48eb7cddbd471cc188f86874b7ec2e900414c25171b3d92f3",
    "0026.sql": "af8b4e578d347019e91cc6ac18dcfa2795002bc4ad998a0de3ef2f520ac26179",
    "0027.sql": "966cd697bae5e3a4f301da159501f092ce612b5d6953775c7c3d2e56787987fd",
    "0028.sql": "f2b6217fd511bb7dea2725a5fc14b1b6820983931bceadaaf22d18dd330995d5",
    "0029.sql": "145ec93b82387d87bb11837cbab54ab44b55e177aff7b7771a6e77d2c9f48421",
    "0030.sql": "956068333f241c6ffa39b7dd1407bd021f569609738187e1a86ca27db2f33513",
}
"""The sha256 of every released PostgreSQL migration file: a released migration is never
edited (a database that ran it would not run it again); a change is a new file."""


def test_no_released_postgres_migration_is_edited() -> None:
    found = {
        f.name: hashlib.sha256(f.read_bytes()).hexdigest()
        for f in POSTGRES_MIGRATIONS.iterdir()
        if f.name.endswith(".sql")
    }
    assert {name: found.get(name) for name in POSTGRES_RELEASED} == POSTGRES_RELEASED


def test_postgres_migrations_are_numbered_one_to_the_last_with_their_recorded_names() -> None:
    names = [
        (1, "initial"),
        (2, "cron slots"),
        (3, "operations"),
        (4, "queue claim index"),
        (5, "started mark"),
        (6, "results"),
        (7, "health numbers and worker registry"),
        (8, "trace context"),
        (9, "payload version"),
        (10, "audit trail"),
        (11, "partitioned storage"),
        (12, "live segments"),
        (13, "concurrency keys"),
        (14, "unique windows"),
        (15, "priority aging"),
        (16, "key weights"),
        (17, "workflows"),
        (18, "workflow sequences"),
        (19, "unique scopes"),
        (20, "worker liveness"),
        (21, "unreleased waits"),
        (22, "key turns"),
        (23, "signal senders, kept results"),
        (24, "parked jobs keep their keys"),
        (25, "key turns end when idle"),
        (26, "batch pruned members"),
        (27, "live generations"),
        (28, "lanes"),
        (29, "database number"),
        (30, "job logs, worker children"),
    ]
    assert [(m.version, m.name) for m in postgres_sql.MIGRATIONS] == names
    assert [m.version for m in postgres_sql.MIGRATIONS] == list(range(1, 31))


def test_a_template_takes_names_as_quoted_identifiers_and_numbers_as_literals() -> None:
    template = "CREATE TABLE {s}.{table} PARTITION OF {s}.{wrapper} FOR VALUES IN ({segment})"
    filled = fill_names(template, "app", table="t16", wrapper="t16_p", segment=16, unused="x")
    assert filled == 'CREATE TABLE "app"."t16" PARTITION OF "app"."t16_p" FOR VALUES IN (16)'
    with pytest.raises(SqlFileError, match=r"no value for \{wrapper\}"):
        fill_names(template, "app", table="t16", segment=16)
    with pytest.raises(SqlFileError, match="not True"):
        fill_names(template, "app", table="t16", wrapper="w", segment=True)
