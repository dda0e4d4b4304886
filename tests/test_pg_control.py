"""The one place the suite finds how to restart PostgreSQL (test_outage, test_soak): no
Debian-only path in the tests themselves. Nothing here restarts anything."""

from __future__ import annotations

import pytest

from .conftest import PG_RESTART_ENV, cluster_on_port, pg_control_commands

LSCLUSTERS = """\
14  main    5433 down   postgres /var/lib/postgresql/14/main /var/log/postgresql/a.log
15  main    5432 online postgres /var/lib/postgresql/15/main /var/log/postgresql/b.log
"""


def nowhere(_name: str) -> str | None:
    return None


def test_the_cluster_serving_the_test_port_is_chosen() -> None:
    assert cluster_on_port(LSCLUSTERS, 5432) == ("15", "main")
    assert cluster_on_port(LSCLUSTERS, 5433) == ("14", "main")
    assert cluster_on_port(LSCLUSTERS, 6000) is None


def test_the_environment_variable_wins() -> None:
    env = {PG_RESTART_ENV: "sudo systemctl restart 'postgresql@16-main'", "PGDATA": "/x"}
    restart, start = pg_control_commands(env)
    assert restart == ["sudo", "systemctl", "restart", "postgresql@16-main"] and start is None


def test_without_pg_lsclusters_pg_ctl_restarts_pgdata() -> None:
    restart, start = pg_control_commands({"PGDATA": "/data/pg"}, which=nowhere)
    assert restart == ["pg_ctl", "-D", "/data/pg", "-w", "restart"]
    assert start == ["pg_ctl", "-D", "/data/pg", "-w", "start"]


def test_with_no_way_to_restart_the_test_says_what_to_set() -> None:
    with pytest.raises(pytest.fail.Exception, match=PG_RESTART_ENV):
        pg_control_commands({}, which=nowhere)
