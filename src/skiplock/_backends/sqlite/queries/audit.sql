-- name: AUDIT_RECORD
-- One person action for the audit trail.
INSERT INTO skiplock_audit (at, who, what, target, detail)
VALUES (:now, :who, :what, :target, :detail)

-- name: AUDIT_LIST
-- The audit trail, newest first, a page before :before (NULL: from the newest).
SELECT id, at, who, what, target, detail FROM skiplock_audit
WHERE :before IS NULL OR id < :before
ORDER BY id DESC LIMIT :limit

-- name: AUDIT_PRUNE
-- Delete the entries from before :before among the oldest :batch (by id, which follows
-- time): one bounded batch that reads only those rows, however long the trail.
DELETE FROM skiplock_audit WHERE id IN (
    SELECT id FROM (SELECT id, at FROM skiplock_audit ORDER BY id LIMIT :batch)
    WHERE at < :before
)

-- name: AUDIT_PRUNE_PREVIEW
-- How many entries are from before :before (what pruning the audit trail would delete).
SELECT count(*) FROM skiplock_audit WHERE at < :before
