-- migration: id counters

-- Every table whose ids skiplock hands out keeps its AUTOINCREMENT counter row from now on
-- (a first insert makes it, and a rollback of that insert would take it away again), so a
-- raise of the counter (ID_FLOOR_RAISE) always finds its row. No semicolon in a comment:
-- migrate splits on them.
INSERT INTO sqlite_sequence (name, seq)
SELECT 'skiplock_jobs_live', coalesce(max(id), 0) FROM skiplock_jobs_live
WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'skiplock_jobs_live');
INSERT INTO sqlite_sequence (name, seq)
SELECT 'skiplock_batches', coalesce(max(id), 0) FROM skiplock_batches
WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'skiplock_batches')
