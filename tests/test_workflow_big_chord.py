"""The chord of issue 42 past jsonb's real limit, on PostgreSQL with real worker processes:
40 members of 7 MB each, whose list of results (280 MB) is past jsonb's 256 MiB (the issue's
was 1,100 results of 250 kB: the same limit, crossed here in a few seconds). Its release used
to fail in every worker, and the sweep's error exited every worker within seconds, again and
again. Now the body fails alone (PayloadTooLarge: its size summed, the list never built),
and both workers serve on.

Only PostgreSQL: the limit is jsonb's (SQLite's bound is the same check, at small size, in
tests/test_workflow_limits.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from skiplock import JobFailed, JobState, chord

from .apps import chord_app
from .helpers import Cli

APP = "tests.apps.chord_app:app"
MEMBERS = 40
JSONB_MOST = 268_435_455
"""The most bytes of elements one jsonb array holds (PostgreSQL's JENTRY_OFFLENMASK)."""

pytestmark = pytest.mark.slow


async def test_a_chord_past_jsonbs_limit_fails_its_body_alone_and_every_worker_serves_on(
    pg_url: str, tmp_path: Path
) -> None:
    cli = Cli(pg_url, tmp_path, APP)
    assert cli.run("migrate", APP).returncode == 0
    chord_app.app.url = pg_url
    app = chord_app.app
    try:
        members = [chord_app.big.s(n) for n in range(MEMBERS)]
        handle = await chord(members, chord_app.count.s()).aenqueue()
        body = handle.ids[-1]
        workers = [cli.start("--concurrency", "20", "--maintenance-interval", "0.5")]
        workers.append(cli.start("--concurrency", "20", "--maintenance-interval", "0.5"))
        try:
            await handle.result(timeout=60)
        except JobFailed as exc:
            assert "over max_payload_bytes" in str(exc)
        except TimeoutError:
            exits = [w.poll() for w in workers]
            tails = [cli.output(i)[-600:] for i in range(len(cli.procs))]
            pytest.fail(f"the body never finished; worker exit codes {exits}: {tails}")
        else:
            pytest.fail("the body ran")
        record = await app.get_job(body)
        assert record.state is JobState.DEAD
        message = record.errors[-1]["message"]
        assert record.errors[-1]["type"] == "PayloadTooLarge"
        assert f"the list of its {MEMBERS} parents' results is " in message
        size = int(message.split(" results is ")[1].split(" bytes")[0])
        assert size > JSONB_MOST  # past jsonb's limit: building it would have failed
        # the workers serve on: a job enqueued now runs, and nothing is left waiting
        assert await (await chord_app.plain.aenqueue(7)).result(timeout=30) == 7
        assert [w.poll() for w in workers] == [None, None], [cli.output(i) for i in (0, 1)]
        assert await app.waiting_jobs() == []
        waiting = cli.run("job", "waiting", APP)
        assert waiting.returncode == 0, waiting.stderr
        assert str(body) not in waiting.stdout
        counts = await app.counts()
        assert counts["succeeded"] == MEMBERS + 1 and counts["dead"] == 1
    finally:
        cli.stop_all()
        await app.close()
