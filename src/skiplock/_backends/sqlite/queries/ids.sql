-- name: ID_FLOOR_RAISE
-- Raise the table's AUTOINCREMENT counter to its ledger mark (ids handed out inside a
-- transaction that rolled back), inside the inserting transaction, ahead of its inserts.
UPDATE sqlite_sequence SET seq = skiplock_id_floor(:name)
WHERE name = :name AND seq < skiplock_id_floor(:name)

-- name: PROBE
SELECT skiplock_id_floor('skiplock_jobs_live')

-- name: ID_COUNTER
SELECT seq FROM sqlite_sequence WHERE name = :name
