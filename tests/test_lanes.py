"""The lanes' directory: its checks, its routing rule and its stable hash (skiplock._lanes)."""

from __future__ import annotations

import collections

import pytest

from skiplock._lanes import (
    DEFAULT,
    ID_SPAN,
    MAX_DATABASE_NUMBER,
    Database,
    Directory,
    Split,
    database_of_id,
    jump_hash,
    key_hash,
)
from skiplock.errors import ConfigurationError

B = Database("postgresql://127.0.0.1/b", number=1)
C = Database("postgresql://127.0.0.1/c", number=2)


def directory() -> Directory:
    return Directory(
        databases={"b": B, "c": C},
        lanes={"eu": "b", "hot-0": DEFAULT, "hot-1": "b", "hot-2": "c"},
        routes={"email": "eu", "hot": Split("hot-0", "hot-1", "hot-2")},
    )


def test_the_rule_task_lane_then_queue_route_then_default() -> None:
    d = directory()
    assert d.lane_for("email") == "eu"
    assert d.lane_for("email", task_lane="hot-0") == "hot-0"  # the task's own lane first
    assert d.lane_for("unrouted") == DEFAULT
    assert d.database_of("eu") == "b" and d.database_of(DEFAULT) == DEFAULT
    assert d.database_of("hot-2") == "c"


def test_a_split_keeps_a_key_in_one_lane_and_spreads_the_keys() -> None:
    d = directory()
    for key in ("tenant-1", "acme", "ünïcode"):
        assert len({d.lane_for("hot", key=key) for _ in range(20)}) == 1
    spread = collections.Counter(d.lane_for("hot", key=f"k{i}") for i in range(30_000))
    assert set(spread) == {"hot-0", "hot-1", "hot-2"}
    assert all(9_000 < n < 11_000 for n in spread.values()), spread
    # a job with no key goes to any of the split's lanes
    assert {d.lane_for("hot") for _ in range(200)} == {"hot-0", "hot-1", "hot-2"}


def test_the_hash_is_the_same_in_every_release() -> None:
    """Routing must not change under a running queue: these values are the rule's, for ever
    (a changed hash would move every tenant to another lane, its order and limits with it)."""
    assert key_hash("acme") == 3469556990258029185
    assert [jump_hash(key_hash("acme"), n) for n in range(1, 8)] == [0, 0, 0, 0, 4, 4, 4]
    assert [Split("a", "b", "c").pick(k) for k in ("tenant-1", "tenant-2", "acme")] == [
        "c",
        "b",
        "a",
    ]


def test_growing_a_split_by_one_lane_moves_only_its_share_of_the_keys() -> None:
    keys = [key_hash(f"k{i}") for i in range(20_000)]
    for n in (2, 4, 8):
        moved = [k for k in keys if jump_hash(k, n) != jump_hash(k, n + 1)]
        assert all(jump_hash(k, n + 1) == n for k in moved)  # only into the new lane
        assert abs(len(moved) / len(keys) - 1 / (n + 1)) < 0.02


def test_an_id_names_its_database() -> None:
    d = directory()
    assert database_of_id(12) == 0 and d.name_of_id(12) == DEFAULT
    assert d.name_of_id(ID_SPAN + 5) == "b" and d.name_of_id(2 * ID_SPAN) == "c"
    assert MAX_DATABASE_NUMBER * ID_SPAN + ID_SPAN < 2**53  # exact in JavaScript too
    with pytest.raises(ConfigurationError, match="database number 7"):
        d.name_of_id(7 * ID_SPAN)


def test_a_worker_serves_the_lanes_living_on_its_database_and_those_draining_away() -> None:
    d = directory()
    assert d.lanes_served(DEFAULT) == (DEFAULT, "hot-0")
    assert d.lanes_served("b") == (DEFAULT, "eu", "hot-1")  # an unrouted job there still runs
    moving = Directory(
        databases={"b": B}, lanes={"eu": "b"}, routes={"email": "eu"}, draining={"eu": DEFAULT}
    )
    assert moving.lanes_served(DEFAULT) == (DEFAULT, "eu")  # drains what is left there
    assert moving.lanes_served("b") == (DEFAULT, "eu")
    assert moving.lane_for("email") == "eu" and moving.database_of("eu") == "b"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"databases": {"default": B}}, "'default' is the App's own database"),
        ({"databases": {"b": "postgresql://x/b"}}, r"must be a skiplock.Database\(url"),
        ({"databases": {"b": B, "c": Database(C.url, 1)}}, "both have number 1"),
        ({"databases": {"bad name": B}}, "databases name='bad name': must be 1 to 63"),
        ({"lanes": {"eu": "nowhere"}}, r"lanes\['eu'\]='nowhere': no such database"),
        ({"routes": {"email": "eu"}}, "lane 'eu' is not in lanes="),
        ({"routes": {"q": Split("x", "y")}}, "lane 'x' is not in lanes="),
        ({"draining": {"eu": DEFAULT}, "lanes": {"eu": DEFAULT}}, "already lives there"),
    ],
)
def test_a_bad_directory_is_refused_with_what_to_do(kwargs: dict, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ConfigurationError, match=message):
        Directory(**kwargs)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Database("sqlite:///x.db", 1), "must be a postgresql:// URL"),
        (lambda: Database("postgresql://x/b", 0), "0 is the App's own database"),
        (lambda: Database("postgresql://x/b", 900), "between 1 and 899"),
        (lambda: Database("postgresql://x/b", True), "must be an int"),
        (lambda: Split("a"), "at least two lanes"),
        (lambda: Split("a", "a"), "appears twice"),
        (lambda: Split("a", ""), "must be 1 to 63"),
    ],
)
def test_bad_parts_are_refused(make: object, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        make()  # type: ignore[operator]


def test_a_lane_a_task_names_must_be_known() -> None:
    d = directory()
    assert d.check_lane("lane", "eu") == "eu"
    with pytest.raises(ConfigurationError, match="lane 'asia' is not in lanes="):
        d.check_lane("lane", "asia")
