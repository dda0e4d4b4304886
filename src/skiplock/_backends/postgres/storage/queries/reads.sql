-- name: EXPORT
SELECT coalesce($1::timestamptz, now()) AS now, pg_export_snapshot() AS snapshot
