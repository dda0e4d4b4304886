"""The public surface: one curated, sorted ``__all__`` that names everything exported."""

from __future__ import annotations

import asyncio
import os

import pytest

import skiplock


def test_all_is_sorted_and_complete() -> None:
    exported = skiplock.__all__
    assert list(exported) == sorted(exported, key=lambda n: (not n.isupper(), n))
    public = {n for n in vars(skiplock) if not n.startswith("_")}
    # documented modules (all but errors: once imported; prometheus, otel, dashboard: extras)
    public -= {"errors", "testing", "contrib", "prometheus", "otel", "dashboard"}
    assert public == set(exported)
    for name in exported:
        assert getattr(skiplock, name) is not None


def test_error_tree() -> None:
    for name in (
        "ConfigurationError",
        "PayloadError",
        "UnknownTask",
        "JobNotFound",
        "SchemaError",
        "BackendError",
        "JobFailed",
        "JobCancelled",
    ):
        assert issubclass(getattr(skiplock, name), skiplock.SkiplockError)
    assert issubclass(skiplock.PayloadTooLarge, skiplock.PayloadError)
    assert issubclass(skiplock.BackendUnavailable, skiplock.BackendError)
    assert str(skiplock.JobNotFound()) == "job not found"
    assert "ConfigurationError" in (skiplock.errors.__doc__ or "")


def test_app_url_from_argument_environment_or_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SKIPLOCK_DATABASE_URL", raising=False)
    assert skiplock.App().url == "sqlite:///skiplock.db"
    monkeypatch.setenv("SKIPLOCK_DATABASE_URL", "postgresql://u@h/db")
    assert skiplock.App().url == "postgresql://u@h/db"
    assert skiplock.App("sqlite:///x.db").url == "sqlite:///x.db"
    assert os.environ["SKIPLOCK_DATABASE_URL"]


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("mysql://x/y", "unsupported scheme"),
        ("sqlite:///:memory:", "in-memory"),
        ("postgresql://h/db?schema=a;drop", "schema"),
    ],
)
def test_bad_urls_are_configuration_errors(url: str, match: str) -> None:
    with pytest.raises(skiplock.ConfigurationError, match=match):
        skiplock.App(url)


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"queue": ""}, "queue"),
        ({"priority": 1.5}, "priority"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"timeout": -1}, "timeout"),
    ],
)
def test_task_options_are_validated_at_declaration(options: dict[str, object], field: str) -> None:
    app = skiplock.App("sqlite:///x.db")
    with pytest.raises(skiplock.ConfigurationError, match=field):
        app.task(**options)(lambda: None)  # type: ignore[call-overload]


def test_duplicate_task_names_are_refused() -> None:
    app = skiplock.App("sqlite:///x.db")
    app.task(name="same")(lambda: None)
    with pytest.raises(ValueError, match="already registered"):
        app.task(name="same")(lambda: None)


def test_using_validates_and_does_not_change_the_original() -> None:
    app = skiplock.App("sqlite:///x.db")

    @app.task(name="t")
    def t() -> None:
        pass

    copy = t.using(queue="q", priority=3)
    assert (copy.queue, copy.priority, t.queue, t.priority) == ("q", 3, "default", 0)
    import datetime

    with pytest.raises(skiplock.ConfigurationError, match="timezone-aware"):
        t.using(run_after=datetime.datetime(2030, 1, 1))
    with pytest.raises(skiplock.PayloadTooLarge):
        skiplock.App("sqlite:///x.db", max_payload_bytes=10).task(name="u")(lambda s: None).prepare(
            "x" * 20
        )


def test_worker_config_names_the_bad_field() -> None:
    with pytest.raises(skiplock.ConfigurationError, match=r"concurrency=0"):
        skiplock.WorkerConfig(concurrency=0)


async def test_first_callers_racing_share_one_backend(db_url: str) -> None:
    """Twenty coroutines asking for the backend at once open one pool, not twenty (of which
    only the last was kept and the others leaked their connections)."""
    app = skiplock.App(db_url)
    await app.migrate()
    await app.close()
    try:
        backends = await asyncio.gather(*(app.backend() for _ in range(20)))
        assert len({id(b) for b in backends}) == 1
    finally:
        await app.close()
