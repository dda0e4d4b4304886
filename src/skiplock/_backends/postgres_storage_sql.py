"""PostgreSQL's storage shape: the job table split by state into partitions, and the DDL that
keeps the history partitions ahead of time and drops the expired ones.

Why (docs/design.md, "Storage"): every job used to be one row updated in place and kept for its
retention, so the table the claims walked also held every finished job, and a vacuum of it read
all of its indexes: stock autovacuum could not keep up with the churn, and pruning was a delete
of each row. Now ``skiplock_jobs`` is a table partitioned by ``state``:

- ``skiplock_jobs_live`` (pending, running): the only rows claims, heartbeats and completions
  touch; small, so its vacuum is cheap, and vacuumed eagerly (its own autovacuum settings);
- ``skiplock_jobs_done`` (succeeded, cancelled), itself partitioned by ``finished_at`` into one
  partition a day (UTC) and a default: a job moves there when it finishes (PostgreSQL's row
  movement: the UPDATE to a final state deletes it from the live partition and inserts it
  here), is never updated again by a worker, and leaves with its whole day's partition;
- ``skiplock_jobs_dead`` (dead): kept longer (its own retention) and acted on by people.

Queries name ``skiplock_jobs`` with literal states, so the planner prunes to the partitions they
can touch and locks only those: a claim never locks, and so never waits on, a history partition.

Unique keys live in ``skiplock_keys`` (a unique index cannot span partitions keyed by another
column): a row for every key a live job holds, or a succeeded job that asked to keep it. Triggers
on the partitions, firing only for rows that have a key, take and release it, so every way a job
changes state (a worker, a person, a user's own SQL) keeps the table true.
"""

from __future__ import annotations

_LIVE_INDEXES = (
    "CREATE INDEX skiplock_jobs_pending_idx ON {s}.skiplock_jobs_live (priority DESC, run_at, id)\n"
    """    WHERE state = 'pending';
CREATE INDEX skiplock_jobs_queue_pending_idx
    ON {s}.skiplock_jobs_live (queue, priority DESC, run_at, id) WHERE state = 'pending';
CREATE INDEX skiplock_jobs_lease_idx ON {s}.skiplock_jobs_live (lease_expires_at)
    WHERE state = 'running';
CREATE INDEX skiplock_jobs_live_reclaimed_idx ON {s}.skiplock_jobs_live (reclaimed_at)
    WHERE reclaimed_at IS NOT NULL;
"""
)
"""The live partition's claim, lease and reclaim indexes, as migrations 11 and 12 make them."""

MIGRATION_PARTITIONS = (
    r"""
-- Storage by state (postgres_storage_sql.py, docs/design.md "Storage"). Measured on a 10 M-row
-- table: see docs/operations.md, "Upgrading to partitioned storage".
LOCK TABLE {s}.skiplock_jobs IN ACCESS EXCLUSIVE MODE;
ALTER TABLE {s}.skiplock_jobs RENAME TO skiplock_jobs_v10;
ALTER INDEX {s}.skiplock_jobs_pkey RENAME TO skiplock_jobs_v10_pkey;
ALTER INDEX {s}.skiplock_jobs_unique_idx RENAME TO skiplock_jobs_v10_unique_idx;
ALTER INDEX {s}.skiplock_jobs_finished_idx RENAME TO skiplock_jobs_v10_finished_idx;
ALTER INDEX {s}.skiplock_jobs_reclaimed_idx RENAME TO skiplock_jobs_v10_reclaimed_idx;
-- The claim indexes hold live rows only: rebuilt on the live partition.
DROP INDEX {s}.skiplock_jobs_pending_idx;
DROP INDEX {s}.skiplock_jobs_queue_pending_idx;
DROP INDEX {s}.skiplock_jobs_lease_idx;
-- Ids keep counting from the identity's last value: one sequence serves every partition.
CREATE SEQUENCE {s}.skiplock_job_ids AS bigint;
SELECT setval('{s}.skiplock_job_ids', last_value, is_called) FROM {s}.skiplock_jobs_id_seq;
ALTER TABLE {s}.skiplock_jobs_v10 ALTER COLUMN id DROP IDENTITY;
-- A final row without a finish time (an import of one) is stamped, so every history row has
-- the partition key; live rows move to their own partition below.
UPDATE {s}.skiplock_jobs_v10 SET finished_at = coalesce(attempted_at, created_at)
WHERE state IN ('succeeded', 'cancelled', 'dead') AND finished_at IS NULL;

CREATE TABLE {s}.skiplock_jobs
    (LIKE {s}.skiplock_jobs_v10 INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
    PARTITION BY LIST (state);
ALTER TABLE {s}.skiplock_jobs ALTER COLUMN id SET DEFAULT nextval('{s}.skiplock_job_ids');
ALTER SEQUENCE {s}.skiplock_job_ids OWNED BY {s}.skiplock_jobs.id;

-- The hot rows: vacuumed as soon as 2,000 rows changed, at full speed (a small table).
CREATE TABLE {s}.skiplock_jobs_live PARTITION OF {s}.skiplock_jobs
    (PRIMARY KEY (id)) FOR VALUES IN ('pending', 'running')
    WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 2000,
          autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 2000,
          autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 2000,
          autovacuum_vacuum_cost_delay = 0);
"""
    + _LIVE_INDEXES
    + r"""
CREATE TABLE {s}.skiplock_jobs_dead PARTITION OF {s}.skiplock_jobs
    (PRIMARY KEY (id)) FOR VALUES IN ('dead');
CREATE INDEX skiplock_jobs_dead_finished_idx ON {s}.skiplock_jobs_dead (finished_at);
CREATE INDEX skiplock_jobs_dead_reclaimed_idx ON {s}.skiplock_jobs_dead (reclaimed_at)
    WHERE reclaimed_at IS NOT NULL;

CREATE TABLE {s}.skiplock_jobs_done PARTITION OF {s}.skiplock_jobs
    FOR VALUES IN ('succeeded', 'cancelled') PARTITION BY RANGE (finished_at);
CREATE TABLE {s}.skiplock_jobs_done_default PARTITION OF {s}.skiplock_jobs_done DEFAULT;
CREATE INDEX skiplock_jobs_done_default_id_idx ON {s}.skiplock_jobs_done_default (id);
CREATE INDEX skiplock_jobs_done_default_finished_idx
    ON {s}.skiplock_jobs_done_default (finished_at);
CREATE INDEX skiplock_jobs_done_default_reclaimed_idx
    ON {s}.skiplock_jobs_done_default (reclaimed_at) WHERE reclaimed_at IS NOT NULL;

INSERT INTO {s}.skiplock_jobs_live SELECT * FROM {s}.skiplock_jobs_v10
WHERE state IN ('pending', 'running');
INSERT INTO {s}.skiplock_jobs_dead SELECT * FROM {s}.skiplock_jobs_v10 WHERE state = 'dead';

-- Keys: the live holders and the succeeded jobs that keep theirs (read through the old unique
-- index), before that index goes.
CREATE TABLE {s}.skiplock_keys (
    unique_key text NOT NULL,
    job_id     bigint NOT NULL,
    CONSTRAINT skiplock_jobs_unique_idx PRIMARY KEY (unique_key)
);
CREATE INDEX skiplock_keys_job_idx ON {s}.skiplock_keys (job_id);
INSERT INTO {s}.skiplock_keys (unique_key, job_id)
SELECT unique_key, id FROM {s}.skiplock_jobs_v10
WHERE unique_key IS NOT NULL
  AND (state IN ('pending', 'running') OR (state = 'succeeded' AND unique_succeeded));

DELETE FROM {s}.skiplock_jobs_v10 WHERE state IN ('pending', 'running', 'dead');
DROP INDEX {s}.skiplock_jobs_v10_unique_idx;

-- The old table becomes the history partition of everything it holds (finished before the
-- day after its last finish, UTC); its rows are not rewritten: the attach reads them once to
-- check their bounds. Empty (a new database), it goes: the upkeep makes the days.
DO $$
DECLARE
    upto date := (SELECT (max(finished_at) AT TIME ZONE 'UTC')::date + 1
                  FROM {s}.skiplock_jobs_v10);
BEGIN
    IF upto IS NULL THEN
        DROP TABLE {s}.skiplock_jobs_v10;
        RETURN;
    END IF;
    EXECUTE format('ALTER TABLE %s.skiplock_jobs_v10 RENAME TO %I', '{s}',
                   'skiplock_jobs_done_to_' || to_char(upto, 'YYYYMMDD'));
    EXECUTE format('ALTER TABLE %s.skiplock_jobs_done ATTACH PARTITION %s.%I '
                   'FOR VALUES FROM (MINVALUE) TO (%L)', '{s}', '{s}',
                   'skiplock_jobs_done_to_' || to_char(upto, 'YYYYMMDD'), upto || ' 00:00+00');
END
$$;

-- Unique keys: taken when a keyed job enters the live partition (enqueue, retry, requeue) or
-- a succeeded job that keeps its key enters history; released when either leaves. The
-- enqueue takes its keys first (JOB_INSERT_MANY), so its insert finds them held already.
CREATE FUNCTION {s}.skiplock_key_take() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM {s}.skiplock_keys WHERE unique_key = NEW.unique_key AND job_id = NEW.id;
    IF NOT FOUND THEN
        INSERT INTO {s}.skiplock_keys (unique_key, job_id) VALUES (NEW.unique_key, NEW.id);
    END IF;
    RETURN NULL;
END
$$;
CREATE FUNCTION {s}.skiplock_key_release() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM {s}.skiplock_keys WHERE unique_key = OLD.unique_key AND job_id = OLD.id;
    RETURN NULL;
END
$$;
CREATE TRIGGER skiplock_live_key_take AFTER INSERT ON {s}.skiplock_jobs_live
    FOR EACH ROW WHEN (NEW.unique_key IS NOT NULL) EXECUTE FUNCTION {s}.skiplock_key_take();
CREATE TRIGGER skiplock_live_key_release AFTER DELETE ON {s}.skiplock_jobs_live
    FOR EACH ROW WHEN (OLD.unique_key IS NOT NULL) EXECUTE FUNCTION {s}.skiplock_key_release();
CREATE TRIGGER skiplock_done_key_take AFTER INSERT ON {s}.skiplock_jobs_done
    FOR EACH ROW WHEN (NEW.unique_key IS NOT NULL AND NEW.state = 'succeeded'
                       AND NEW.unique_succeeded)
    EXECUTE FUNCTION {s}.skiplock_key_take();
CREATE TRIGGER skiplock_done_key_release AFTER DELETE ON {s}.skiplock_jobs_done
    FOR EACH ROW WHEN (OLD.unique_key IS NOT NULL AND OLD.state = 'succeeded'
                       AND OLD.unique_succeeded)
    EXECUTE FUNCTION {s}.skiplock_key_release();
"""
)


SEGMENT_S = 1
"""How long each ring segment of migration 12 took the new jobs (seconds): history."""
SEGMENTS = 3
"""Migration 12's ring: the segment writing, the one before, the next (history: migration 27
replaced the ring by generations, postgres_rotation.py)."""
LONG_SEGMENT = 3
"""The segment for live jobs that outlive their generation: delayed, retrying, long-running.
Vacuumed, never detached; a job moves here at most once."""

_RING_NOW = (
    f"(floor(extract(epoch FROM statement_timestamp()) / {SEGMENT_S})::bigint"
    f" % {SEGMENTS})::smallint"
)
"""Migration 12's default for ``segment``: the ring segment of the clock's second."""

GEN_FIRST = 16
"""The first number a generation of the live partition takes (0-2 were migration 12's ring,
3 is the long segment, 4 the keyed one)."""
GEN_LAST = 32767
"""The last (``segment`` is a smallint); the numbers are reused in a cycle, each once its old
tables are gone."""

POINTER = "skiplock_live_segment"
"""The sequence whose last value is the generation new jobs go to: moved by the rotation
(``setval``) once the generation's tables are committed; never advanced by ``nextval``."""

SEGMENT_NOW = f"pg_sequence_last_value('{{s}}.{POINTER}'::regclass)::smallint"
"""The generation a job written now goes to: the job table's default for ``segment``, and what
skiplock's own enqueue writes. A sequence, not a row: read without MVCC, so a reader holding the
horizon leaves no chain of dead versions for every enqueue to walk."""

LEAF_SETTINGS = """WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 2000,
          autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 2000,
          autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 2000,
          autovacuum_vacuum_cost_delay = 0)"""
_LEAF_SETTINGS = LEAF_SETTINGS


def leaf_indexes(s: str, t: str) -> list[str]:
    """Segment table ``t``'s claim, lease and reclaim indexes, named after it: made before the
    table is attached, the live partition's own indexes take these as theirs."""
    return [
        f"CREATE INDEX {t}_pending_idx ON {s}.{t} (priority DESC, run_at, id)"
        " WHERE state = 'pending'",
        f"CREATE INDEX {t}_queue_pending_idx ON {s}.{t} (queue, priority DESC, run_at, id)"
        " WHERE state = 'pending'",
        f"CREATE INDEX {t}_lease_idx ON {s}.{t} (lease_expires_at) WHERE state = 'running'",
        f"CREATE INDEX {t}_reclaimed_idx ON {s}.{t} (reclaimed_at) WHERE reclaimed_at IS NOT NULL",
    ]


def segment_name(segment: int) -> str:
    """The table of live generation ``segment`` (its rows)."""
    return f"skiplock_jobs_live_s{segment}"


def wrapper_name(segment: int) -> str:
    """The partitioned table generation ``segment``'s table is attached under."""
    return f"skiplock_jobs_live_s{segment}_p"


def generation_sql(s: str, segment: int) -> list[str]:
    """Generation ``segment``'s wrapper and table, made apart from the job table (a CREATE ...
    PARTITION OF the live partition would take its ACCESS EXCLUSIVE lock), then attached: the
    live partition's checks and triggers reach them at the attach, and its indexes adopt the
    table's own, made first under the names every segment's have (``leaf_indexes``)."""
    w, t = f"{s}.{wrapper_name(segment)}", f"{s}.{segment_name(segment)}"
    return [
        f"CREATE TABLE {w} (LIKE {s}.skiplock_jobs_live INCLUDING CONSTRAINTS)"
        " PARTITION BY LIST (segment)",
        f"CREATE TABLE {t} PARTITION OF {w} (PRIMARY KEY (id))"
        f" FOR VALUES IN ({segment}) {LEAF_SETTINGS}",
        *leaf_indexes(s, segment_name(segment)),
        f"ALTER TABLE {s}.skiplock_jobs_live ATTACH PARTITION {w} FOR VALUES IN ({segment})",
    ]


def _segment_leaves() -> str:
    """Each segment's table and its claim, lease and reclaim indexes, named after it (the
    parent's indexes made after them take these as theirs)."""
    leaves = [(f"s{n}", n) for n in range(SEGMENTS)] + [("long", LONG_SEGMENT)]
    out = []
    for name, value in leaves:
        t = f"skiplock_jobs_live_{name}"
        out.append(
            f"CREATE TABLE {{s}}.{t} PARTITION OF {{s}}.skiplock_jobs_live\n"
            f"    (PRIMARY KEY (id)) FOR VALUES IN ({value})\n    {LEAF_SETTINGS};\n"
            + "".join(f"{i};\n" for i in leaf_indexes("{s}", t))
        )
    return "\n".join(out)


MIGRATION_LIVE_SEGMENTS = (
    r"""
-- The live partition in segments (postgres_storage_sql.py, docs/design.md "Storage"): new jobs
-- go to the ring segment of the current second, and a segment is truncated once its jobs are
-- gone, so the dead versions a held MVCC horizon keeps are dropped with it instead of piling up
-- in the claim indexes. Existing live jobs go to the long segment. Adding the column rewrites
-- no row (a constant default), and only the live rows are copied.
LOCK TABLE {s}.skiplock_jobs IN ACCESS EXCLUSIVE MODE;
ALTER TABLE {s}.skiplock_jobs ADD COLUMN segment smallint NOT NULL DEFAULT """
    + str(LONG_SEGMENT)
    + r""";
ALTER TABLE {s}.skiplock_jobs ALTER COLUMN segment SET DEFAULT """
    + _RING_NOW
    + r""";
ALTER TABLE {s}.skiplock_jobs DETACH PARTITION {s}.skiplock_jobs_live;
ALTER TABLE {s}.skiplock_jobs_live RENAME TO skiplock_jobs_live_v11;
DROP TRIGGER skiplock_live_key_take ON {s}.skiplock_jobs_live_v11;
DROP TRIGGER skiplock_live_key_release ON {s}.skiplock_jobs_live_v11;
DROP INDEX {s}.skiplock_jobs_pending_idx;
DROP INDEX {s}.skiplock_jobs_queue_pending_idx;
DROP INDEX {s}.skiplock_jobs_lease_idx;
DROP INDEX {s}.skiplock_jobs_live_reclaimed_idx;
ALTER TABLE {s}.skiplock_jobs_live_v11
    RENAME CONSTRAINT skiplock_jobs_live_pkey TO skiplock_jobs_live_v11_pkey;

CREATE TABLE {s}.skiplock_jobs_live PARTITION OF {s}.skiplock_jobs
    FOR VALUES IN ('pending', 'running') PARTITION BY LIST (segment);
"""
    + _segment_leaves()
    + r"""
"""
    + _LIVE_INDEXES
    + r"""CREATE TRIGGER skiplock_live_key_take AFTER INSERT ON {s}.skiplock_jobs_live
    FOR EACH ROW WHEN (NEW.unique_key IS NOT NULL) EXECUTE FUNCTION {s}.skiplock_key_take();
CREATE TRIGGER skiplock_live_key_release AFTER DELETE ON {s}.skiplock_jobs_live
    FOR EACH ROW WHEN (OLD.unique_key IS NOT NULL) EXECUTE FUNCTION {s}.skiplock_key_release();

INSERT INTO {s}.skiplock_jobs_live SELECT * FROM {s}.skiplock_jobs_live_v11;
DROP TABLE {s}.skiplock_jobs_live_v11;
"""
)


KEYED = 4
"""The keyed segment (postgres_keys_sql.KEYED_SEGMENT, which imports this module)."""

MIGRATION_LIVE_GENERATIONS = (
    r"""
-- The live partition's segments become generations (postgres_rotation.py, docs/design.md
-- "Storage: segments no reader can hold"): each under a partitioned table of its own, so an old
-- one leaves with DETACH PARTITION ... CONCURRENTLY, which no reader blocks, where the ring's
-- truncate waited for every reader's lock. New jobs go to the generation a sequence names.
-- The ring's live jobs move to the long segment (a few seconds' worth) and its tables go.
LOCK TABLE {s}.skiplock_jobs IN ACCESS EXCLUSIVE MODE;
CREATE SEQUENCE {s}."""
    + POINTER
    + f""" AS smallint MINVALUE {GEN_FIRST} MAXVALUE {GEN_LAST};
SELECT setval('{{s}}.{POINTER}', {GEN_FIRST}, true);
"""
    + "".join(f"{statement};\n" for statement in generation_sql("{s}", GEN_FIRST))
    + "-- and the next, made ahead (postgres_rotation._advance)\n"
    + "".join(f"{statement};\n" for statement in generation_sql("{s}", GEN_FIRST + 1))
    + "ALTER TABLE {s}.skiplock_jobs ALTER COLUMN segment SET DEFAULT "
    + SEGMENT_NOW
    + f""";
-- A row that comes back to the live jobs from another partition (a resume, a release, a
-- person's retry, your own UPDATE) carries the segment it had when it left, whose generation
-- may be long gone: it goes to the newest one (a keyed job to the keyed segment, as before).
CREATE FUNCTION {{s}}.skiplock_segment_back() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.segment := {SEGMENT_NOW};
    RETURN NEW;
END
$$;
CREATE TRIGGER skiplock_segment_back BEFORE UPDATE ON {{s}}.skiplock_jobs_waiting FOR EACH ROW
    WHEN (NEW.state IN ('pending', 'running') AND NEW.segment <> {KEYED})
    EXECUTE FUNCTION {{s}}.skiplock_segment_back();
CREATE TRIGGER skiplock_segment_back BEFORE UPDATE ON {{s}}.skiplock_jobs_dead FOR EACH ROW
    WHEN (NEW.state IN ('pending', 'running') AND NEW.segment <> {KEYED})
    EXECUTE FUNCTION {{s}}.skiplock_segment_back();
CREATE TRIGGER skiplock_segment_back BEFORE UPDATE ON {{s}}.skiplock_jobs_done FOR EACH ROW
    WHEN (NEW.state IN ('pending', 'running') AND NEW.segment <> {KEYED})
    EXECUTE FUNCTION {{s}}.skiplock_segment_back();
UPDATE {{s}}.skiplock_jobs_live SET segment = {LONG_SEGMENT} WHERE segment IN (0, 1, 2);
DROP TABLE {{s}}.skiplock_jobs_live_s0, {{s}}.skiplock_jobs_live_s1, {{s}}.skiplock_jobs_live_s2;
"""
)
