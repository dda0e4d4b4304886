"""PostgreSQL's workflow release is whole text in two statements: a completion batch releases
what it can in its own statement (JOB_SET_STATE_AND_RELEASE, completion.sql), and
RELEASE_SUCCEEDED (workflow.sql) releases the rest in chunks. Each stays one statement you can
paste into psql (no SQL assembled in Python, no include directive), so the release is written
twice; this test holds the two copies equal, bound for bound, so neither can drift.
docs/design.md ("The release, written twice and held equal") says why not a SQL function."""

from __future__ import annotations

import re

import pytest

from skiplock._backends.sql_files import load_statements

PACKAGE = "skiplock._backends.postgres"

FIRST_CTE = ", todo AS ("
LAST_CTE = "), woken AS ("

BOUNDS = {
    # what each statement's parameters mean in the shared release
    "JOB_SET_STATE_AND_RELEASE": {
        "$8": "NOW",
        "$16": "CHUNK",
        "$15": "WAKE_CHANNEL",
        "$17": "LANE",
    },
    "RELEASE_SUCCEEDED": {"$3": "NOW", "$4": "CHUNK", "$2": "WAKE_CHANNEL", "$5": "LANE"},
}


def release_of(text: str, bounds: dict[str, str]) -> str:
    """The statement's release: its CTEs from ``todo`` to ``woken`` (whole), each parameter
    named by its meaning. Fails if the statement holds a parameter it was not told of."""
    start = text.index(FIRST_CTE)
    end = text.index("\n", text.index(LAST_CTE) + len(LAST_CTE))
    end = text.index("\n)", end) + 2  # woken's own body, to its closing parenthesis
    release = text[start:end]
    used = set(re.findall(r"\$\d+", release))
    assert used <= set(bounds), f"parameters {sorted(used - set(bounds))} not named"
    return re.sub(r"\$\d+\b", lambda m: bounds[m.group(0)], release)


def statements() -> dict[str, str]:
    return load_statements(PACKAGE)


def test_the_release_is_the_same_in_both_statements() -> None:
    found = statements()
    copies = {name: release_of(found[name], bounds) for name, bounds in BOUNDS.items()}
    completion, chunked = copies.values()
    assert completion == chunked
    for name in ("todo", "resolved", "kept", "wlocked", "counted", "z", "stale", "pm", "r"):
        assert f"{name} AS (" in completion  # the whole release, not a prefix of it


@pytest.mark.parametrize("name", sorted(BOUNDS))
def test_an_edit_to_one_copy_is_caught(name: str) -> None:
    """The comparison can fail: a change to one copy alone (a lock order, a bound)."""
    found = statements()
    edited = dict(found)
    edited[name] = found[name].replace("ORDER BY w.job_id FOR UPDATE OF w", "FOR UPDATE OF w")
    assert edited[name] != found[name]
    copies = [release_of(edited[n], b) for n, b in BOUNDS.items()]
    assert copies[0] != copies[1]
