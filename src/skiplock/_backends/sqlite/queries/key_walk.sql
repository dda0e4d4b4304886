-- name: NEXT_PAIR
-- The first (queue, key) pair with a pending keyed job of lane :lane after (:queue, :key),
-- any queue.
SELECT queue, concurrency_key FROM skiplock_jobs_live
WHERE lane = :lane AND state = 'pending' AND concurrency_key IS NOT NULL
  AND (queue, concurrency_key) > (:queue, :key)
ORDER BY queue, concurrency_key LIMIT 1

-- name: NEXT_KEY_IN_QUEUE
-- The first key with a pending job of lane :lane in :queue after :key.
SELECT min(concurrency_key) FROM skiplock_jobs_live
WHERE lane = :lane AND state = 'pending' AND concurrency_key IS NOT NULL AND queue = :queue
  AND concurrency_key > :key

-- name: PICK
-- Of the visited pairs (:pairs, JSON [[queue, key, place], ...]), each key's ready jobs
-- within its room (its limit, as its first pending job carries it, less its running jobs),
-- each with its turn (its key's pass, lifted to at least one turn below the highest of the
-- visited keys, plus its rank's share: TURN_UNITS / key_weight a job; a fair=False key's
-- jobs in the current turn), and whether the claim takes it: by priority, then turn, then
-- age, :limit of them. An ordered key's candidate is its head alone (its live job of the
-- lowest id) if it is pending, due, and behind no dead job that blocks the key and no job
-- parked on a signal. :limited: a limited queue's own claim (otherwise limited queues are
-- left to it). The rule is PostgreSQL's (postgres/keys.py); every read of lane :lane.
WITH keys AS (
    SELECT json_extract(value, '$[0]') AS q, json_extract(value, '$[1]') AS k,
           json_extract(value, '$[2]') AS pos
    FROM json_each(:pairs)
), visited AS (
    SELECT keys.q, keys.k, keys.pos, f.key_limit AS lim, coalesce(f.key_weight, 1) AS wt,
           f.key_order AS ordered,
           CASE WHEN f.key_limit IS NULL THEN 0
                ELSE (SELECT count(*) FROM skiplock_jobs_live r
                      WHERE r.lane = :lane AND r.state = 'running' AND r.concurrency_key = keys.k) END AS running,
           (SELECT t.pass FROM skiplock_key_turns t WHERE t.concurrency_key = keys.k) AS pass
    FROM keys JOIN skiplock_jobs_live f ON f.id = (
        SELECT j.id FROM skiplock_jobs_live j
        WHERE j.lane = :lane AND j.state = 'pending' AND j.concurrency_key IS NOT NULL
          AND j.queue = keys.q AND j.concurrency_key = keys.k
        ORDER BY j.priority DESC, j.run_at, j.id LIMIT 1)
    WHERE keys.q NOT IN (SELECT name FROM skiplock_queues
                         WHERE paused OR (NOT :limited AND (max_running IS NOT NULL
                                                           OR rate_per_s IS NOT NULL)))
), lifted AS (
    SELECT v.q, v.k, v.pos, v.lim, v.ordered, v.running,
           max(coalesce(v.pass, 0), m.low) AS pass,
           CASE WHEN v.wt = 0 THEN 0 ELSE 720720 / v.wt END AS stride
    FROM visited v,
         (SELECT max(0, (coalesce(max(pass), 0) / 720720 - 1) * 720720) AS low FROM visited) m
), picked AS (
    SELECT j.id, j.priority, j.run_at, c.q, c.k, c.pos, c.lim, c.running, c.pass, c.stride
    FROM lifted c JOIN skiplock_jobs_live j ON c.ordered IS NULL AND j.id IN (
        SELECT id FROM skiplock_jobs_live
        WHERE lane = :lane AND state = 'pending' AND concurrency_key IS NOT NULL
          AND queue = c.q AND concurrency_key = c.k AND run_at <= :now
          AND task NOT IN (SELECT task FROM skiplock_task_pauses
                           WHERE until IS NULL OR until > :now)
        ORDER BY priority DESC, run_at, id
        LIMIT :limit)
    UNION ALL
    SELECT h.id, h.priority, h.run_at, c.q, c.k, c.pos, c.lim, c.running, c.pass, c.stride
    FROM lifted c JOIN skiplock_jobs_live h ON c.ordered IS NOT NULL AND h.id = (
        SELECT id FROM skiplock_jobs_live
        WHERE lane = :lane AND state IN ('pending', 'running') AND concurrency_key IS NOT NULL
          AND concurrency_key = c.k
        ORDER BY id LIMIT 1)
    WHERE h.state = 'pending' AND h.queue = c.q AND h.run_at <= :now
      AND h.task NOT IN (SELECT task FROM skiplock_task_pauses
                         WHERE until IS NULL OR until > :now)
      AND NOT EXISTS (SELECT 1 FROM skiplock_jobs_live d
        WHERE d.lane = :lane AND d.state = 'dead' AND d.key_order = 'block' AND d.concurrency_key = c.k
          AND d.id < h.id)
      AND NOT EXISTS (SELECT 1 FROM skiplock_jobs_live p JOIN skiplock_waits pw ON pw.job_id = p.id
        WHERE p.lane = :lane AND p.state = 'waiting' AND p.key_order IS NOT NULL AND p.concurrency_key = c.k
          AND p.id < h.id AND pw.signal IS NOT NULL)
), cand AS (
    SELECT *, row_number() OVER w AS rank, count(*) OVER (PARTITION BY k) AS ready
    FROM picked
    WINDOW w AS (PARTITION BY k ORDER BY priority DESC, run_at, id)
), roomy AS (
    SELECT c.*, CASE WHEN c.stride = 0 THEN now_turn.t
                     ELSE (c.pass + (c.rank - 1) * c.stride) / 720720 END AS turn
    FROM cand c, (SELECT coalesce(min(pass / 720720), 0) AS t FROM cand
                  WHERE stride > 0 AND rank = 1 AND (lim IS NULL OR running < lim)) now_turn
    WHERE c.lim IS NULL OR c.rank <= c.lim - c.running
)
SELECT id, k, pos, rank, ready, lim, running, pass, stride, turn,
       row_number() OVER (ORDER BY priority DESC, turn, run_at, id) <= :limit AS taken
FROM roomy ORDER BY priority DESC, turn, run_at, id

-- name: TURNS_ADVANCE
-- A key's pass once the claim took its jobs (:pass), or the stored one plus :step if that
-- is further (a claim in another process moved it since it was read: never on SQLite, whose
-- claim holds the write lock, but the rule is PostgreSQL's).
INSERT INTO skiplock_key_turns (concurrency_key, pass) VALUES (:key, :pass)
ON CONFLICT (concurrency_key) DO UPDATE
SET pass = max(skiplock_key_turns.pass + :step, excluded.pass)

-- name: KEY_TURNS_SLICE_END
SELECT max(concurrency_key), count(*) FROM (
    SELECT concurrency_key FROM skiplock_key_turns WHERE concurrency_key > :after
    ORDER BY concurrency_key LIMIT :most)
