-- name: AUDIT_RECORD
-- One person action for the audit trail, at the database's time.
INSERT INTO {s}.skiplock_audit (at, who, what, target, detail)
VALUES (coalesce($5::timestamptz, now()), $1, $2, $3, $4)

-- name: AUDIT_LIST
-- The audit trail, newest first, a page before id $2 (NULL: from the newest).
SELECT id, at, who, what, target, detail FROM {s}.skiplock_audit
WHERE $2::bigint IS NULL OR id < $2
ORDER BY id DESC LIMIT $1

-- name: AUDIT_PRUNE
-- Delete the entries older than $1 seconds among the oldest $3 (by id, which follows time):
-- one bounded batch that reads only those rows, however long the trail.
DELETE FROM {s}.skiplock_audit WHERE id IN (
    SELECT id FROM (SELECT id, at FROM {s}.skiplock_audit ORDER BY id LIMIT $3) oldest
    WHERE at < coalesce($2::timestamptz, now()) - make_interval(secs => $1)
)

-- name: AUDIT_PRUNE_PREVIEW
-- How many entries are older than $1 seconds (what pruning the audit trail would delete).
SELECT count(*) FROM {s}.skiplock_audit
WHERE at < coalesce($2::timestamptz, now()) - make_interval(secs => $1)
