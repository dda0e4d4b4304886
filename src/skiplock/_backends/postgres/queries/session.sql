-- name: SESSION_CHECK
SELECT 1

-- name: SORT_OFF_IN_TRANSACTION
SET LOCAL enable_sort = off; SET LOCAL jit = off

-- name: SEQSCAN_OFF_IN_TRANSACTION
SET LOCAL enable_seqscan = off; SET LOCAL jit = off
